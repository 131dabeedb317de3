//! Integration tests of the simulated cloud (docs/semantics.md section 6).
//!
//! Each test builds a small world by hand: an API server (the kubelets the cloud spawns
//! talk to it), the cloud on a control-plane host and a scripted [`CloudClient`] on a user
//! host. Most tests pin every delay (min = max) so that expected times can be written
//! down; the network adds 1-5 ms per message, so checks keep a margin of a second, or
//! compare with the instance's own launch time.

use reconsim_cloud::{
    Cloud, CloudClient, CloudConfig, CloudError, CloudOp, CloudResponse, CloudStep, InstanceState,
    JoinPolicy, ZONE_LABEL,
};
use reconsim_sim::{Fault, FaultPlan, ProcId, ProcState, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::{Images, Kubelet};
use reconsim_world::{Endpoints, Proc, WorldFault};
use std::collections::BTreeMap;

// ----- harness ----------------------------------------------------------------------------

/// Pinned delays: boot 5 s, visibility lag 10 s, join 20 s after running, shutting-down 30 s.
fn fixed() -> CloudConfig {
    CloudConfig {
        boot_ms_min: 5_000,
        boot_ms_max: 5_000,
        describe_lag_ms_min: 10_000,
        describe_lag_ms_max: 10_000,
        join_ms_min: 20_000,
        join_ms_max: 20_000,
        terminate_ms: 30_000,
        ..CloudConfig::default()
    }
}

struct World {
    sim: Sim<Proc>,
    cloud: ProcId,
    client: ProcId,
}

impl World {
    fn new(seed: u64, config: CloudConfig, steps: Vec<CloudStep>) -> Self {
        World::with_faults(seed, config, steps, Vec::new())
    }

    fn with_faults(
        seed: u64,
        config: CloudConfig,
        steps: Vec<CloudStep>,
        faults: Vec<TimedFault<WorldFault>>,
    ) -> Self {
        let mut sim = Sim::new(SimConfig::new(seed), FaultPlan::new(faults));
        let cp = sim.add_host("control-plane");
        let user = sim.add_host("user");
        let apiserver = sim.spawn(
            cp,
            "apiserver",
            Proc::new(ApiServer::new(Default::default())),
        );
        let endpoints = Endpoints { apiserver };
        let cloud = sim.spawn(
            cp,
            "cloud",
            Proc::new(Cloud::new(config, endpoints, Images::default())),
        );
        let client = sim.spawn(user, "client", Proc::new(CloudClient::new(cloud, steps)));
        World { sim, cloud, client }
    }

    fn run_until_secs(&mut self, s: u64) {
        self.sim.run_until(SimTime::from_secs(s));
    }

    fn cloud(&self) -> &Cloud {
        let p = self.sim.actor(self.cloud);
        p.component::<Cloud>()
            .unwrap_or_else(|| panic!("not the cloud: {p:?}"))
    }

    fn client(&self) -> &CloudClient {
        let p = self.sim.actor(self.client);
        p.component::<CloudClient>()
            .unwrap_or_else(|| panic!("not the client: {p:?}"))
    }

    fn result(&self, step: usize) -> &reconsim_cloud::CloudResult {
        match self.client().response(step) {
            Some(CloudResponse { result, .. }) => result,
            None => panic!("step {step} got no answer"),
        }
    }

    /// The ids step `step` got back.
    fn ids(&self, step: usize) -> Vec<String> {
        self.client()
            .instances(step)
            .iter()
            .map(|i| i.id.clone())
            .collect()
    }

    /// The states step `step` got back.
    fn states(&self, step: usize) -> Vec<InstanceState> {
        self.client()
            .instances(step)
            .iter()
            .map(|i| i.state)
            .collect()
    }

    fn kubelet_of(&self, node: &str) -> Option<ProcId> {
        self.sim.proc_by_name(&format!("kubelet/{node}"))
    }
}

/// The id of the `n`th launched instance.
fn id(n: u64) -> String {
    format!("i-{n:017x}")
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn run(at_s: u64, t: &[(&str, &str)], token: Option<&str>) -> CloudStep {
    CloudStep {
        at_ms: at_s * 1000,
        op: CloudOp::RunInstances {
            tags: tags(t),
            client_token: token.map(str::to_string),
        },
    }
}

fn describe_ids(at_s: u64, ids: &[String]) -> CloudStep {
    CloudStep {
        at_ms: at_s * 1000,
        op: CloudOp::DescribeInstances {
            ids: ids.to_vec(),
            tag_filters: BTreeMap::new(),
            states: Vec::new(),
        },
    }
}

fn describe_tags(at_s: u64, t: &[(&str, &str)], states: &[InstanceState]) -> CloudStep {
    CloudStep {
        at_ms: at_s * 1000,
        op: CloudOp::DescribeInstances {
            ids: Vec::new(),
            tag_filters: tags(t),
            states: states.to_vec(),
        },
    }
}

fn terminate(at_s: u64, ids: &[String]) -> CloudStep {
    CloudStep {
        at_ms: at_s * 1000,
        op: CloudOp::TerminateInstances { ids: ids.to_vec() },
    }
}

fn inject(at_ms: u64, duration_ms: u64, fault: WorldFault) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms,
        duration_ms: Some(duration_ms),
        fault: Fault::Inject {
            process: "cloud".to_string(),
            fault,
        },
        on: None,
    }
}

// ----- RunInstances and client tokens (6.1) ------------------------------------------------

#[test]
fn token_retry_returns_the_original_instance_even_after_termination() {
    let a = &[("machine", "m-1")];
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, a, Some("tok-1")),
            run(2, a, Some("tok-1")),
            terminate(20, &[id(1)]),
            // Long after termination (tokens live >= 24 h): still the same instance.
            run(100, a, Some("tok-1")),
        ],
    );
    w.run_until_secs(200);
    assert_eq!(w.ids(0), vec![id(1)]);
    assert_eq!(w.ids(1), vec![id(1)]);
    assert_eq!(w.ids(3), vec![id(1)]);
    assert_eq!(w.states(3), vec![InstanceState::Terminated]);
    assert_eq!(w.cloud().launched(), 1);
    assert_eq!(w.cloud().instances().count(), 1);
}

#[test]
fn same_token_with_other_tags_is_a_parameter_mismatch() {
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, &[("machine", "m-1")], Some("tok")),
            run(2, &[("machine", "m-2")], Some("tok")),
        ],
    );
    w.run_until_secs(10);
    assert_eq!(w.ids(0), vec![id(1)]);
    assert_eq!(w.result(1), &Err(CloudError::IdempotentParameterMismatch));
    assert_eq!(w.cloud().launched(), 1);
}

#[test]
fn without_a_token_every_call_launches_a_new_instance() {
    let a = &[("machine", "m-1")];
    let mut w = World::new(1, fixed(), vec![run(1, a, None), run(2, a, None)]);
    w.run_until_secs(10);
    assert_eq!(w.ids(0), vec![id(1)]);
    assert_eq!(w.ids(1), vec![id(2)]);
    assert_eq!(w.cloud().instances().count(), 2);
    // Different tokens are different requests too.
    let mut w = World::new(1, fixed(), vec![run(1, a, Some("x")), run(2, a, Some("y"))]);
    w.run_until_secs(10);
    assert_eq!(w.cloud().launched(), 2);
}

#[test]
fn a_token_is_forgotten_after_its_ttl_and_then_launches_anew() {
    let config = CloudConfig {
        terminated_visible_ms: 10_000,
        client_token_ttl_ms: 100_000,
        ..fixed()
    };
    let a = &[("machine", "m-1")];
    let mut w = World::new(
        1,
        config,
        vec![
            run(1, a, Some("tok")),
            terminate(12, &[id(1)]),
            // Terminated at ~42 s, vanished at ~52 s, forgotten at ~152 s.
            run(60, a, Some("tok")),
            run(160, a, Some("tok")),
        ],
    );
    w.run_until_secs(200);
    assert_eq!(
        w.ids(2),
        vec![id(1)],
        "a vanished instance's token still answers"
    );
    assert_eq!(
        w.ids(3),
        vec![id(2)],
        "an expired token launches a new instance"
    );
    assert!(w.cloud().record(&id(1)).is_none(), "forgotten");
}

#[test]
fn launches_beyond_max_instances_fail() {
    let config = CloudConfig {
        max_instances: 1,
        ..fixed()
    };
    let mut w = World::new(1, config, vec![run(1, &[], None), run(2, &[], None)]);
    w.run_until_secs(10);
    assert_eq!(w.ids(0), vec![id(1)]);
    assert_eq!(w.result(1), &Err(CloudError::InstanceLimitExceeded));
}

// ----- DescribeInstances: eventual consistency and filters (6.3) --------------------------

#[test]
fn describe_by_id_is_not_found_until_the_lag_passes() {
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, &[], None),
            describe_ids(5, &[id(1)]),
            describe_ids(12, &[id(1)]),
            // One unknown id fails the whole call.
            describe_ids(13, &[id(1), id(9)]),
        ],
    );
    w.run_until_secs(6);
    // The instance exists (ground truth) though the API does not show it.
    assert!(w.cloud().instance(&id(1)).is_some());
    w.run_until_secs(20);
    assert_eq!(w.result(1), &Err(CloudError::InstanceNotFound(id(1))));
    assert_eq!(w.ids(2), vec![id(1)]);
    assert_eq!(w.result(3), &Err(CloudError::InstanceNotFound(id(9))));
}

#[test]
fn describe_by_tag_misses_new_instances_until_the_lag_passes() {
    let a = &[("cluster", "c1")];
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, a, None),
            describe_tags(5, a, &[]),
            describe_tags(12, a, &[]),
            // Asked again, nothing changed: the same answers (the cloud answers a
            // repeated DescribeInstances by tags from its last one while it holds).
            describe_tags(6, a, &[]),
            describe_tags(13, a, &[]),
        ],
    );
    w.run_until_secs(20);
    assert_eq!(w.ids(1), Vec::<String>::new());
    assert_eq!(w.ids(2), vec![id(1)]);
    assert_eq!(w.ids(3), Vec::<String>::new());
    assert_eq!(w.ids(4), vec![id(1)]);
}

#[test]
fn tag_filter_needs_every_pair_and_state_filter_applies() {
    let config = CloudConfig {
        describe_lag_ms_min: 0,
        describe_lag_ms_max: 0,
        ..fixed()
    };
    let mut w = World::new(
        1,
        config,
        vec![
            run(1, &[("a", "1"), ("b", "2")], None),
            run(1, &[("a", "1")], None),
            run(1, &[("a", "2"), ("b", "2")], None),
            describe_tags(3, &[("a", "1"), ("b", "2")], &[]),
            describe_tags(3, &[("a", "1")], &[]),
            describe_tags(3, &[("a", "1")], &[InstanceState::Running]),
            describe_tags(10, &[("a", "1")], &[InstanceState::Running]),
            describe_tags(10, &[], &[]),
        ],
    );
    w.run_until_secs(20);
    let mut ids: Vec<String> = w
        .ids(0)
        .into_iter()
        .chain(w.ids(1))
        .chain(w.ids(2))
        .collect();
    let first = ids.remove(0);
    assert_eq!(w.ids(3), vec![first.clone()]);
    let mut both = vec![first, ids.remove(0)];
    both.sort();
    assert_eq!(w.ids(4), both);
    assert_eq!(w.ids(5), Vec::<String>::new(), "all still pending at 3 s");
    assert_eq!(w.ids(6), both);
    assert_eq!(
        w.ids(7),
        vec![id(1), id(2), id(3)],
        "no filter: all, in id order"
    );
}

// ----- lifecycle (6.4, 6.5) ------------------------------------------------------------------

#[test]
fn an_instance_boots_from_pending_to_running() {
    let config = CloudConfig {
        describe_lag_ms_min: 0,
        describe_lag_ms_max: 0,
        ..fixed()
    };
    let mut w = World::new(
        1,
        config,
        vec![
            run(1, &[], None),
            describe_ids(3, &[id(1)]),
            describe_ids(7, &[id(1)]),
        ],
    );
    w.run_until_secs(3);
    assert_eq!(
        w.cloud().instance(&id(1)).unwrap().state,
        InstanceState::Pending
    );
    w.run_until_secs(10);
    assert_eq!(w.states(0), vec![InstanceState::Pending]);
    assert_eq!(w.states(1), vec![InstanceState::Pending]);
    assert_eq!(w.states(2), vec![InstanceState::Running]);
    assert_eq!(w.cloud().count(InstanceState::Running), 1);
}

#[test]
fn terminate_goes_through_shutting_down_and_stays_visible_about_an_hour() {
    let a = &[("m", "1")];
    // Terminate at 12 s -> terminated at ~42 s -> vanishes at ~3642 s.
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, a, None),
            terminate(12, &[id(1)]),
            describe_ids(20, &[id(1)]),
            describe_ids(50, &[id(1)]),
            terminate(60, &[id(1)]),
            describe_tags(3600, a, &[]),
            describe_ids(3650, &[id(1)]),
            describe_tags(3650, a, &[]),
        ],
    );
    w.run_until_secs(4000);
    assert_eq!(w.states(1), vec![InstanceState::ShuttingDown]);
    assert_eq!(w.states(2), vec![InstanceState::ShuttingDown]);
    assert_eq!(w.states(3), vec![InstanceState::Terminated]);
    assert_eq!(w.states(4), vec![InstanceState::Terminated], "idempotent");
    assert_eq!(
        w.states(5),
        vec![InstanceState::Terminated],
        "visible for ~1 h"
    );
    assert_eq!(w.result(6), &Err(CloudError::InstanceNotFound(id(1))));
    assert_eq!(w.ids(7), Vec::<String>::new());
    assert!(w.cloud().instance(&id(1)).is_none());
    assert_eq!(w.cloud().live_count(), 0);
}

#[test]
fn terminate_before_the_lag_passes_is_not_found_and_changes_nothing() {
    let mut w = World::new(1, fixed(), vec![run(1, &[], None), terminate(3, &[id(1)])]);
    w.run_until_secs(10);
    assert_eq!(w.result(1), &Err(CloudError::InstanceNotFound(id(1))));
    assert_eq!(
        w.cloud().instance(&id(1)).unwrap().state,
        InstanceState::Running
    );
}

// ----- node join ---------------------------------------------------------------------------

#[test]
fn join_spawns_a_kubelet_on_a_new_host_after_the_join_delay() {
    let mut w = World::new(1, fixed(), vec![run(1, &[("m", "1")], None)]);
    // Launch ~1 s, running ~6 s, joins ~26 s.
    w.run_until_secs(25);
    let node = w.cloud().instance(&id(1)).unwrap().node_name().to_string();
    assert_eq!(node, "ip-10-0-0-1");
    assert!(w.kubelet_of(&node).is_none());
    assert!(w.sim.host_by_name(&node).is_none());
    w.run_until_secs(27);
    let kubelet = w.kubelet_of(&node).expect("kubelet spawned");
    let host = w.sim.host_by_name(&node).expect("host added");
    assert_eq!(w.sim.proc_host(kubelet), host);
    assert_eq!(w.cloud().kubelet(&id(1)), Some(kubelet));
    let inst = w.cloud().instance(&id(1)).unwrap();
    let record = w.cloud().record(&id(1)).unwrap();
    assert_eq!(record.joined_at, Some(inst.launch_time.plus_ms(25_000)));
    let k = w
        .sim
        .actor(kubelet)
        .component::<Kubelet>()
        .expect("a kubelet");
    assert_eq!(k.config.node_name, node);
    assert_eq!(
        k.config.provider_id.as_deref(),
        Some(format!("aws:///us-east-1a/{}", id(1)).as_str())
    );
    assert_eq!(
        k.config.labels.get(ZONE_LABEL).map(String::as_str),
        Some("us-east-1a")
    );
}

#[test]
fn only_instances_the_join_policy_allows_join() {
    let config = CloudConfig {
        join: JoinPolicy::IfTagged("join".to_string()),
        ..fixed()
    };
    let mut w = World::new(
        1,
        config,
        vec![
            run(1, &[("join", "yes")], None),
            run(1, &[("m", "2")], None),
        ],
    );
    w.run_until_secs(100);
    let joined: Vec<bool> = [id(1), id(2)]
        .iter()
        .map(|i| w.cloud().kubelet(i).is_some())
        .collect();
    // Launch order of two requests at the same instant is up to the network.
    let tagged = w.ids(0)[0].clone();
    assert!(w.cloud().kubelet(&tagged).is_some());
    assert_eq!(joined.iter().filter(|j| **j).count(), 1);

    let config = CloudConfig {
        join: JoinPolicy::Never,
        ..fixed()
    };
    let mut w = World::new(1, config, vec![run(1, &[("join", "yes")], None)]);
    w.run_until_secs(100);
    assert!(w.cloud().kubelet(&id(1)).is_none());
    assert!(w.kubelet_of("ip-10-0-0-1").is_none());
}

#[test]
fn tags_with_the_label_prefix_become_node_labels() {
    let config = CloudConfig {
        node_label_tag_prefix: Some("label/".to_string()),
        ..fixed()
    };
    let mut w = World::new(
        1,
        config,
        vec![run(1, &[("label/role", "worker"), ("other", "x")], None)],
    );
    w.run_until_secs(30);
    let kubelet = w.cloud().kubelet(&id(1)).expect("joined");
    let k = w
        .sim
        .actor(kubelet)
        .component::<Kubelet>()
        .expect("a kubelet");
    assert_eq!(
        k.config.labels.get("role").map(String::as_str),
        Some("worker")
    );
    assert!(!k.config.labels.contains_key("other"));
}

#[test]
fn terminate_stops_the_nodes_kubelet() {
    let mut w = World::new(1, fixed(), vec![run(1, &[], None), terminate(40, &[id(1)])]);
    w.run_until_secs(39);
    let kubelet = w.cloud().kubelet(&id(1)).expect("joined");
    assert_eq!(w.sim.proc_state(kubelet), ProcState::Running);
    w.run_until_secs(41);
    assert_eq!(w.sim.proc_state(kubelet), ProcState::Stopped);
}

#[test]
fn terminate_shuts_the_machine_down_with_every_process_on_it() {
    // A process of a pod on the node (here an idle component) ends with its machine:
    // nothing runs on a shut-down instance (semantics 6.2).
    let mut w = World::new(1, fixed(), vec![run(1, &[], None), terminate(40, &[id(1)])]);
    w.run_until_secs(39);
    let kubelet = w.cloud().kubelet(&id(1)).expect("joined");
    let host = w.sim.proc_host(kubelet);
    let app = w
        .sim
        .spawn(host, "app", Proc::new(CloudClient::new(w.cloud, vec![])));
    w.run_until_secs(39);
    assert_eq!(w.sim.proc_state(app), ProcState::Running);
    w.run_until_secs(41);
    assert_eq!(w.sim.proc_state(kubelet), ProcState::Stopped);
    assert_eq!(w.sim.proc_state(app), ProcState::Stopped);
}

#[test]
fn an_instance_terminated_before_it_joins_never_joins() {
    let mut w = World::new(1, fixed(), vec![run(1, &[], None), terminate(12, &[id(1)])]);
    w.run_until_secs(200);
    assert!(w.cloud().kubelet(&id(1)).is_none());
    assert!(w.kubelet_of("ip-10-0-0-1").is_none());
}

// ----- world faults ---------------------------------------------------------------------------

#[test]
fn describe_lag_fault_hides_instances_launched_while_active() {
    let a = &[("c", "1")];
    let mut w = World::with_faults(
        1,
        fixed(),
        vec![
            run(1, a, Some("early")), // lag 10 s + 20 s -> visible ~31 s
            run(6, a, Some("late")),  // fault reverted at 5 s -> visible ~16 s
            describe_tags(20, a, &[]),
            describe_tags(32, a, &[]),
        ],
        vec![inject(
            0,
            5_000,
            WorldFault::CloudDescribeLag { lag_ms: 20_000 },
        )],
    );
    w.run_until_secs(40);
    assert_eq!(w.ids(2), vec![id(2)]);
    assert_eq!(w.ids(3), vec![id(1), id(2)]);
    let r = w.cloud().record(&id(1)).unwrap();
    assert_eq!(r.visible_at, r.instance.launch_time.plus_ms(30_000));
}

#[test]
fn join_delay_fault_delays_nodes_whose_countdown_starts_while_active() {
    let mut w = World::with_faults(
        1,
        fixed(),
        vec![
            run(1, &[], Some("a")), // running ~6 s, fault active: joins ~66 s
            run(5, &[], Some("b")), // running ~10 s, fault over: joins ~30 s
        ],
        vec![inject(
            0,
            8_000,
            WorldFault::NodeJoinDelay { extra_ms: 40_000 },
        )],
    );
    w.run_until_secs(50);
    assert!(w.cloud().kubelet(&id(1)).is_none(), "delayed by the fault");
    assert!(w.cloud().kubelet(&id(2)).is_some());
    w.run_until_secs(100);
    let r = w.cloud().record(&id(1)).unwrap();
    assert_eq!(r.joined_at, Some(r.instance.launch_time.plus_ms(65_000)));
    let r = w.cloud().record(&id(2)).unwrap();
    assert_eq!(r.joined_at, Some(r.instance.launch_time.plus_ms(25_000)));
}

#[test]
fn a_cloud_crash_keeps_instances_and_rearms_transitions() {
    let mut w = World::with_faults(
        1,
        fixed(),
        vec![run(1, &[], None)],
        vec![TimedFault {
            at_ms: 2_000,
            duration_ms: Some(2_000),
            fault: Fault::Crash {
                process: "cloud".to_string(),
            },
            on: None,
        }],
    );
    w.run_until_secs(3);
    assert_eq!(w.sim.proc_state(w.cloud), ProcState::Crashed);
    w.run_until_secs(7);
    assert_eq!(
        w.cloud().instance(&id(1)).unwrap().state,
        InstanceState::Running
    );
    w.run_until_secs(30);
    let r = w.cloud().record(&id(1)).unwrap();
    assert_eq!(r.joined_at, Some(r.instance.launch_time.plus_ms(25_000)));
}

// ----- determinism ------------------------------------------------------------------------------

/// Everything a run decided: each answer with its time, and each instance's timeline.
fn history(seed: u64) -> (Vec<String>, Vec<String>) {
    let a = &[("c", "1")];
    let mut w = World::new(
        seed,
        CloudConfig::default(),
        vec![
            run(1, a, Some("t1")),
            run(1, a, None),
            run(2, a, Some("t1")),
            describe_tags(4, a, &[]),
            describe_tags(8, a, &[]),
            terminate(40, &[id(2)]),
        ],
    );
    w.run_until_secs(400);
    let answers = w
        .client()
        .responses
        .iter()
        .map(|(step, t, r)| format!("{step} {t} {r:?}"))
        .collect();
    let timelines = [id(1), id(2)]
        .iter()
        .map(|i| format!("{:?}", w.cloud().record(i)))
        .collect();
    (answers, timelines)
}

#[test]
fn same_seed_same_ids_and_times_other_seed_other_times() {
    let (answers, timelines) = history(7);
    assert_eq!((answers.clone(), timelines.clone()), history(7));
    assert_eq!(answers.len(), 6);
    // Another seed draws other delays; ids stay a launch counter.
    let (_, other) = history(8);
    assert_ne!(timelines, other);
    assert!(other[0].contains(&id(1)) && other[1].contains(&id(2)));
}

#[test]
fn a_terminate_range_varies_the_shutting_down_time_per_instance() {
    let a = &[("m", "1")];
    let config = CloudConfig {
        terminate_ms: 10_000,
        terminate_ms_max: Some(60_000),
        ..fixed()
    };
    // Eight instances terminated at 20 s; where each is 25 s later, and 61 s later.
    let mut steps: Vec<CloudStep> = (0..8).map(|_| run(1, a, None)).collect();
    let ids: Vec<String> = (1..=8).map(id).collect();
    steps.push(terminate(20, &ids));
    steps.push(describe_ids(45, &ids));
    steps.push(describe_ids(81, &ids));
    let mut w = World::new(3, config, steps);
    w.run_until_secs(100);
    let early = w.states(9);
    assert!(
        early.contains(&InstanceState::Terminated),
        "some finish within 25 s: {early:?}"
    );
    assert!(
        early.contains(&InstanceState::ShuttingDown),
        "some take longer: {early:?}"
    );
    assert!(
        w.states(10).iter().all(|s| *s == InstanceState::Terminated),
        "all within 60 s"
    );
}

// ----- private addresses: a bounded subnet, reused after termination (6.8) ------------------

fn subnet(size: u32) -> CloudConfig {
    CloudConfig {
        subnet_size: size,
        ..fixed()
    }
}

/// The Node names steps `steps` launched, in order.
fn names(w: &World, steps: &[usize]) -> Vec<String> {
    steps
        .iter()
        .map(|s| w.client().instances(*s)[0].private_dns_name.clone())
        .collect()
}

#[test]
fn a_terminated_instances_address_is_reused_in_a_small_subnet() {
    // Two addresses. #1 is terminated at 20 s (terminated at ~50 s): the launch at
    // 60 s wraps around to the first free address, #1's; the one at 70 s finds none.
    let mut w = World::new(
        1,
        subnet(2),
        vec![
            run(1, &[], None),
            run(2, &[], None),
            terminate(20, &[id(1)]),
            run(60, &[], None),
            run(70, &[], None),
        ],
    );
    w.run_until_secs(100);
    assert_eq!(
        names(&w, &[0, 1, 3]),
        ["ip-10-0-0-1", "ip-10-0-0-2", "ip-10-0-0-1"]
    );
    assert_eq!(w.ids(3), vec![id(3)], "a new instance, an old name");
    assert_eq!(
        w.result(4),
        &Err(CloudError::InsufficientFreeAddressesInSubnet)
    );
    assert_eq!(w.cloud().addresses_in_use(), 2);
    // The terminated holder is still described (about an hour); the name's instance is
    // the new one.
    assert_eq!(
        w.cloud().instance(&id(1)).unwrap().state,
        InstanceState::Terminated
    );
    assert_eq!(
        w.cloud()
            .instance_by_node("ip-10-0-0-1")
            .map(|i| i.id.clone()),
        Some(id(3))
    );
}

#[test]
fn an_address_is_held_until_terminated_not_shutting_down() {
    // One address: while #1 shuts down (20 s to ~50 s) its address is still held.
    let mut w = World::new(
        1,
        subnet(1),
        vec![
            run(1, &[], None),
            terminate(20, &[id(1)]),
            run(30, &[], None),
            run(60, &[], None),
        ],
    );
    w.run_until_secs(100);
    assert_eq!(
        w.result(2),
        &Err(CloudError::InsufficientFreeAddressesInSubnet)
    );
    assert_eq!(names(&w, &[0, 3]), ["ip-10-0-0-1", "ip-10-0-0-1"]);
    // A refused launch launches nothing and draws nothing: the next is #2.
    assert_eq!(w.ids(3), vec![id(2)]);
}

#[test]
fn the_default_subnet_never_reuses_a_name() {
    let mut w = World::new(
        1,
        fixed(),
        vec![
            run(1, &[], None),
            terminate(20, &[id(1)]),
            run(60, &[], None),
        ],
    );
    w.run_until_secs(100);
    assert_eq!(names(&w, &[0, 2]), ["ip-10-0-0-1", "ip-10-0-0-2"]);
}

#[test]
fn reuse_keeps_the_three_draws_per_launch() {
    // The same launches in a small and in the default subnet: same ids, same boot
    // times; only the names differ.
    let steps = || {
        vec![
            run(1, &[], None),
            terminate(20, &[id(1)]),
            run(60, &[], None),
        ]
    };
    let config = |size| CloudConfig {
        boot_ms_min: 1_000,
        boot_ms_max: 9_000,
        subnet_size: size,
        ..fixed()
    };
    let mut small = World::new(7, config(1), steps());
    let mut large = World::new(7, config(reconsim_cloud::SUBNET_SIZE_MAX), steps());
    small.run_until_secs(100);
    large.run_until_secs(100);
    for w in [&small, &large] {
        assert_eq!(w.ids(2), vec![id(2)]);
    }
    let next = |w: &World| w.cloud().record(&id(2)).unwrap().next_at;
    assert_eq!(next(&small), next(&large));
    assert_ne!(names(&small, &[2]), names(&large, &[2]));
}

#[test]
fn a_new_instance_under_a_reused_name_adopts_the_old_node() {
    // One address. #1 joins (~26 s) as ip-10-0-0-1, is terminated at 40 s (its machine
    // shuts down; terminated ~70 s); nobody deletes its Node (no node lifecycle
    // controller here). #2, launched at 80 s, gets the same name, joins at ~105 s, and
    // its kubelet's create gets AlreadyExists: as the real kubelet's
    // tryRegisterWithAPIServer, it takes the existing Node as its own, whose
    // providerID still names #1, and sets it Ready.
    let mut w = World::new(
        1,
        subnet(1),
        vec![
            run(1, &[], None),
            terminate(40, &[id(1)]),
            run(80, &[], None),
        ],
    );
    w.run_until_secs(60);
    let old_kubelet = w.cloud().kubelet(&id(1)).expect("joined");
    assert_eq!(w.sim.proc_state(old_kubelet), ProcState::Stopped);
    let key = reconsim_world::object::ObjectKey::new(
        <reconsim_world::object::Node as reconsim_world::object::Resource>::KIND,
        "",
        "ip-10-0-0-1",
    );
    let uid = |w: &World| {
        let api = w.sim.actor(ProcId(0)).component::<ApiServer>().unwrap();
        api.get(&key).expect("the Node").meta.uid
    };
    let first = uid(&w);
    w.run_until_secs(140);
    let new_kubelet = w.cloud().kubelet(&id(2)).expect("joined");
    assert_ne!(new_kubelet, old_kubelet);
    assert_eq!(w.sim.proc_host(new_kubelet), w.sim.proc_host(old_kubelet));
    assert_eq!(w.sim.proc_state(new_kubelet), ProcState::Running);
    let api = w.sim.actor(ProcId(0)).component::<ApiServer>().unwrap();
    let node = api.get(&key).expect("the Node");
    assert_eq!(node.meta.uid, first, "the old Node, not a new one");
    let n = node.typed::<reconsim_world::object::Node>().unwrap();
    assert_eq!(
        n.spec.provider_id.as_deref(),
        Some(reconsim_cloud::provider_id("us-east-1a", &id(1)).as_str()),
        "the kubelet does not rewrite providerID"
    );
    let k = w.sim.actor(new_kubelet).component::<Kubelet>().unwrap();
    assert!(k.heartbeats() > 0);
}

// ----- termination by an outside actor (the TerminateInstance fault) -------------------------

fn outsider(at_s: u64, launch: Option<u64>, tag: Option<&str>) -> TimedFault<WorldFault> {
    inject(
        at_s * 1000,
        1_000,
        WorldFault::TerminateInstance {
            launch,
            tag: tag.map(str::to_string),
        },
    )
}

#[test]
fn an_outside_termination_takes_the_nth_launched_instance_down() {
    let mut w = World::with_faults(
        1,
        fixed(),
        vec![run(1, &[], None), run(2, &[], None)],
        vec![outsider(40, Some(2), None)],
    );
    w.run_until_secs(39);
    let kubelet = w.cloud().kubelet(&id(2)).expect("joined");
    w.run_until_secs(41);
    let state = |n| w.cloud().instance(&id(n)).unwrap().state;
    assert_eq!(state(1), InstanceState::Running);
    assert_eq!(state(2), InstanceState::ShuttingDown);
    assert_eq!(w.sim.proc_state(kubelet), ProcState::Stopped);
    w.run_until_secs(80);
    assert_eq!(
        w.cloud().instance(&id(2)).unwrap().state,
        InstanceState::Terminated
    );
    assert_eq!(w.cloud().addresses_in_use(), 1);
}

#[test]
fn an_outside_termination_by_tag_takes_the_oldest_live_carrier() {
    let mut w = World::with_faults(
        1,
        fixed(),
        vec![
            run(1, &[("pool", "a")], None),
            run(2, &[("pool", "b")], None),
            run(3, &[("pool", "b")], None),
        ],
        vec![
            outsider(30, None, Some("pool=b")),
            outsider(40, None, Some("pool=b")),
            outsider(50, None, Some("pool=b")),
            outsider(60, Some(1), Some("pool=b")),
            outsider(70, None, Some("zone")),
        ],
    );
    w.run_until_secs(100);
    let state = |n| w.cloud().instance(&id(n)).unwrap().state;
    // #2 first, then #3; the third finds none; #1 is not tagged pool=b; no instance has
    // a `zone` tag.
    assert_eq!(state(1), InstanceState::Running);
    assert_eq!(state(2), InstanceState::Terminated);
    assert_eq!(state(3), InstanceState::Terminated);
}
