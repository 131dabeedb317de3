//! machine-config-operator components (incident 3): rendered names, merging, the Machine
//! Config Server and its hand-out records, the booting machine and its daemon's 5-minute
//! rule, and ownerReference removal orphaning a rendered config at the API server.

use reconsim_mco::model::MachineConfigPool;
use reconsim_mco::model::{
    ANNOTATION_CURRENT, ANNOTATION_DESIRED, ANNOTATION_SERVED_TO_PREFIX, ANNOTATION_STATE,
    DAEMON_CONFIG_TIMEOUT_MS, MachineConfig, MachineConfigServer, MachineConfigSpec, MachineTiming,
    McoMachine, Phase, STATE_DEGRADED, STATE_DONE, ServerMode, merge, pool_object, rendered_name,
    rendered_object, source_object,
};
use reconsim_sim::{Fault, FaultPlan, ProcId, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::NODE_LEASE_NAMESPACE;
use reconsim_world::lifecycle::NodeLifecycle;
use reconsim_world::object::{Body, ConditionStatus, Lease, TAINT_UNREACHABLE};
use reconsim_world::object::{Node, Resource};
use reconsim_world::object::{Object, ObjectKey};
use reconsim_world::script::{Script, Step};
use reconsim_world::{Endpoints, Proc, WorldFault};
use std::collections::BTreeMap;
use std::sync::Arc;

fn content(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn rendered_names_are_a_pure_function_of_content() {
    let a = content(&[("osImageURL", "quay.io/x@sha256:1"), ("ssh", "key")]);
    let b = content(&[("ssh", "key"), ("osImageURL", "quay.io/x@sha256:1")]);
    assert_eq!(rendered_name("worker", &a), rendered_name("worker", &b));
    assert_ne!(
        rendered_name("worker", &a),
        rendered_name("master", &a),
        "the pool is part of the name"
    );
    let without = content(&[("ssh", "key")]);
    assert_ne!(
        rendered_name("worker", &a),
        rendered_name("worker", &without),
        "leaving osImageURL out (the bootstrap bug) changes the name"
    );
    // Pinned, and checked by hand against the documented steps (FNV-1a words: the map's
    // length, then per entry the key's and the value's bytes as StableHasher::write
    // folds them, each followed by std's 0xff str terminator): a change of the
    // algorithm renames every config of every saved failure file.
    assert_eq!(
        rendered_name("worker", &without),
        "rendered-worker-b0782c75c20b7be1"
    );
}

#[test]
fn merge_applies_configs_in_name_order() {
    let base = MachineConfig {
        content: content(&[("kubelet.conf", "template"), ("unit", "v1")]),
    };
    let kubelet = MachineConfig {
        content: content(&[("kubelet.conf", "tuned")]),
    };
    // Given in any order, 01-* overrides 00-*.
    let merged = merge(vec![("01-worker-kubelet", &kubelet), ("00-worker", &base)]);
    assert_eq!(
        merged,
        content(&[("kubelet.conf", "tuned"), ("unit", "v1")])
    );
}

// ----- a small world: API server, a config server, machines -----------------------------

struct World {
    sim: Sim<Proc>,
    api: ProcId,
}

fn world(seeded: Vec<Object>, steps: Vec<Step>) -> (World, Endpoints, reconsim_sim::HostId) {
    world_with_plan(seeded, steps, FaultPlan::new(vec![]))
}

fn world_with_plan(
    seeded: Vec<Object>,
    steps: Vec<Step>,
    plan: FaultPlan<WorldFault>,
) -> (World, Endpoints, reconsim_sim::HostId) {
    let mut sim = Sim::new(SimConfig::new(3), plan);
    let api_host = sim.add_host("api");
    let infra = sim.add_host("infra");
    let mut server = ApiServer::new(Default::default());
    for o in seeded {
        server.seed_object(o);
    }
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    let endpoints = Endpoints { apiserver: api };
    sim.spawn(infra, "user", Proc::new(Script::new(api, steps)));
    (World { sim, api }, endpoints, infra)
}

fn store(w: &World) -> &ApiServer {
    let Some(a) = w.sim.actor(w.api).component::<ApiServer>() else {
        unreachable!()
    };
    a
}

fn machine(w: &World, p: ProcId) -> &McoMachine {
    w.sim.actor(p).component::<McoMachine>().expect("a machine")
}

fn node_annotation(w: &World, node: &str, key: &str) -> Option<String> {
    store(w)
        .get(&ObjectKey::new(Node::KIND, "", node))
        .and_then(|n| n.meta.annotations.get(key).cloned())
}

fn quick_timing() -> MachineTiming {
    MachineTiming {
        boot_at_ms: (1_000, 1_000),
        reboot_ms: (1_000, 1_000),
        join_ms: (1_000, 1_000),
        daemon_start_ms: (1_000, 1_000),
        update_ms: (5_000, 5_000),
    }
}

/// A pool `worker` whose status targets a rendered config that exists.
fn worker_pool_with_target() -> (Object, Object) {
    let mut pool = pool_object("worker");
    // Seeded objects get uids 1.. in order: the pool is 1.
    pool.meta.uid = reconsim_world::object::Uid(1);
    let rendered = rendered_object(&pool, content(&[("unit", "v1")]));
    pool.typed_mut::<MachineConfigPool>()
        .unwrap()
        .status
        .configuration = Some(rendered.meta.name.clone());
    (pool, rendered)
}

#[test]
fn a_machine_boots_joins_and_its_daemon_loads_the_served_config() {
    let (pool, rendered) = worker_pool_with_target();
    let name = rendered.meta.name.clone();
    let (mut w, endpoints, infra) = world(vec![pool, rendered], vec![]);
    let mcs = w.sim.spawn(
        infra,
        "machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Cluster {
                record_hand_outs: false,
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("worker-0");
    let m = w.sim.spawn(
        host,
        "worker-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "worker-0".into(),
                pool: "worker".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    // Served, not yet registered: the config is the booting machine's only reference.
    w.sim.run_until(SimTime::from_secs(2));
    assert_eq!(machine(&w, m).booting_config(), Some(name.as_str()));
    assert!(
        store(&w)
            .get(&ObjectKey::new(Node::KIND, "", "worker-0"))
            .is_none()
    );
    w.sim.run_until(SimTime::from_secs(30));
    let mm = machine(&w, m);
    assert_eq!(mm.phase(), &Phase::Running);
    assert_eq!(mm.booting_config(), None, "annotated: no longer booting");
    assert_eq!(
        node_annotation(&w, "worker-0", ANNOTATION_CURRENT),
        Some(name.clone())
    );
    assert_eq!(
        node_annotation(&w, "worker-0", ANNOTATION_DESIRED),
        Some(name)
    );
    assert_eq!(
        node_annotation(&w, "worker-0", ANNOTATION_STATE).as_deref(),
        Some(STATE_DONE)
    );
}

#[test]
fn the_server_records_a_hand_out_before_answering() {
    let (pool, rendered) = worker_pool_with_target();
    let name = rendered.meta.name.clone();
    let (mut w, endpoints, infra) = world(vec![pool, rendered], vec![]);
    let mcs = w.sim.spawn(
        infra,
        "machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Cluster {
                record_hand_outs: true,
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("worker-0");
    let m = w.sim.spawn(
        host,
        "worker-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "worker-0".into(),
                pool: "worker".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    w.sim.run_until(SimTime::from_secs(2));
    assert_eq!(machine(&w, m).served(), Some(name.as_str()));
    let pool = store(&w)
        .get(&ObjectKey::new(MachineConfigPool::KIND, "", "worker"))
        .unwrap();
    assert_eq!(
        pool.meta
            .annotations
            .get(&format!("{ANNOTATION_SERVED_TO_PREFIX}worker-0")),
        Some(&name),
        "the record is on the pool by the time the machine has its config"
    );
}

#[test]
fn the_cluster_server_reads_the_pool_live_not_from_a_lagging_watch() {
    // The 2019 clusterServer.GetConfig Gets the pool and then the config from the API
    // server on each request (pkg/server/cluster_server.go @5ea28209; semantics.md
    // 8.1). With the API server's watch cache 60 s behind, a server reading an
    // informer cache would still see the old target when the machine asks; a live Get
    // is a consistent read and sees the new one.
    let (pool, old) = worker_pool_with_target();
    let new = rendered_object(&pool, content(&[("unit", "v2")]));
    let mut moved = pool.typed::<MachineConfigPool>().unwrap().clone();
    moved.status.configuration = Some(new.meta.name.clone());
    let new_name = new.meta.name.clone();
    let plan = FaultPlan::new(vec![TimedFault {
        at_ms: 0,
        duration_ms: Some(120_000),
        fault: Fault::Inject {
            process: "apiserver".into(),
            fault: WorldFault::WatchLag {
                lag_ms: 60_000,
                of_kind: None,
            },
        },
        on: None,
    }]);
    let steps = vec![Step {
        at_ms: 500,
        op: ApiOp::Patch {
            key: pool.key(),
            ops: vec![PatchOp::Status(Body::new(moved))],
            resource_version: None,
        },
    }];
    let (mut w, endpoints, infra) = world_with_plan(vec![pool, old, new], steps, plan);
    let mcs = w.sim.spawn(
        infra,
        "machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Cluster {
                record_hand_outs: false,
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("worker-0");
    let m = w.sim.spawn(
        host,
        "worker-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "worker-0".into(),
                pool: "worker".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    w.sim.run_until(SimTime::from_secs(2));
    assert_eq!(machine(&w, m).served(), Some(new_name.as_str()));
    let server = w.sim.actor(mcs).component::<MachineConfigServer>().unwrap();
    assert_eq!(
        server.api_requests, 2,
        "one request: a Get of the pool, then of the config"
    );
}

#[test]
fn a_registered_machine_heartbeats_and_its_node_never_goes_unknown() {
    // The node lifecycle controller marks a Node Unknown 40 s after its last Lease
    // renew (semantics.md 5.2-5.3). The machine's kubelet renews its node Lease every
    // 10 s from registration on, and does nothing more: one write per 10 s.
    let (pool, rendered) = worker_pool_with_target();
    let (mut w, endpoints, infra) = world(vec![pool, rendered], vec![]);
    w.sim.spawn(
        infra,
        "node-lifecycle",
        Proc::new(NodeLifecycle::new(Default::default(), endpoints)),
    );
    let mcs = w.sim.spawn(
        infra,
        "machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Cluster {
                record_hand_outs: false,
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("worker-0");
    let m = w.sim.spawn(
        host,
        "worker-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "worker-0".into(),
                pool: "worker".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    let node_key = ObjectKey::new(Node::KIND, "", "worker-0");
    // Registered at about 3 s; check every 5 s for 10 minutes.
    for t in (5..=600).step_by(5) {
        w.sim.run_until(SimTime::from_secs(t));
        let node = store(&w).get(&node_key).expect("registered");
        let n = node.typed::<Node>().unwrap();
        assert_eq!(n.status.ready, ConditionStatus::True, "at {t} s");
        assert!(
            !n.spec.taints.iter().any(|x| x.key == TAINT_UNREACHABLE),
            "at {t} s: {:?}",
            n.spec.taints
        );
    }
    let lease = store(&w)
        .get(&ObjectKey::new(
            Lease::KIND,
            NODE_LEASE_NAMESPACE,
            "worker-0",
        ))
        .expect("the node Lease");
    let l = lease.typed::<Lease>().unwrap();
    assert_eq!(l.holder_identity.as_deref(), Some("worker-0"));
    assert_eq!(l.lease_duration_seconds, 40);
    assert!(l.renew_time.unwrap() >= SimTime::from_secs(589), "{l:?}");
    let node_uid = store(&w).get(&node_key).unwrap().meta.uid;
    assert_eq!(lease.meta.owner_references[0].uid, node_uid);
    // About (600 - 3) / 10.2 renews: one per 10 s (+ up to 0.4 s of jitter), no more.
    let beats = machine(&w, m).heartbeats;
    assert!((57..=61).contains(&beats), "{beats} Lease writes");
}

#[test]
fn the_server_refuses_a_target_it_cannot_find_and_the_machine_retries() {
    // The pool names a config that does not exist: nothing is served, Ignition retries.
    let mut pool = pool_object("worker");
    pool.typed_mut::<MachineConfigPool>()
        .unwrap()
        .status
        .configuration = Some("rendered-worker-missing".into());
    let (mut w, endpoints, infra) = world(vec![pool], vec![]);
    let mcs = w.sim.spawn(
        infra,
        "machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Cluster {
                record_hand_outs: false,
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("worker-0");
    let m = w.sim.spawn(
        host,
        "worker-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "worker-0".into(),
                pool: "worker".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    w.sim.run_until(SimTime::from_secs(60));
    assert_eq!(machine(&w, m).phase(), &Phase::Fetching);
    assert_eq!(machine(&w, m).served(), None);
}

#[test]
fn the_daemon_waits_five_minutes_for_a_missing_config_then_degrades() {
    // The bootstrap server hands out a name nobody creates (the bootstrap bug).
    let (mut w, endpoints, _) = world(vec![pool_object("master")], vec![]);
    let bs = w.sim.add_host("bootstrap");
    let mcs = w.sim.spawn(
        bs,
        "bootstrap-machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Bootstrap {
                configs: BTreeMap::from([("master".into(), "rendered-master-never".into())]),
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("master-0");
    let m = w.sim.spawn(
        host,
        "master-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "master-0".into(),
                pool: "master".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    // Annotated at about 4 s; the daemon then polls every 10 s.
    w.sim
        .run_until(SimTime::from_ms(4_500 + DAEMON_CONFIG_TIMEOUT_MS - 15_000));
    assert!(
        matches!(machine(&w, m).phase(), Phase::Checking { .. }),
        "still polling before 5 min: {:?}",
        machine(&w, m).phase()
    );
    w.sim
        .run_until(SimTime::from_ms(4_500 + DAEMON_CONFIG_TIMEOUT_MS + 15_000));
    assert!(machine(&w, m).is_degraded(), "{:?}", machine(&w, m).phase());
    assert_eq!(
        node_annotation(&w, "master-0", ANNOTATION_STATE).as_deref(),
        Some(STATE_DEGRADED)
    );
}

#[test]
fn the_daemon_picks_up_a_config_created_within_five_minutes() {
    // The fixed bootstrap: the name exists in the cluster once the render controller
    // (here: a script) creates it, two minutes in.
    let pool = pool_object("master");
    let late = source_object("rendered-master-late", "master", content(&[("a", "b")]));
    let (mut w, endpoints, _) = world(
        vec![pool],
        vec![Step {
            at_ms: 120_000,
            op: ApiOp::Create(Box::new(late)),
        }],
    );
    let bs = w.sim.add_host("bootstrap");
    let mcs = w.sim.spawn(
        bs,
        "bootstrap-machine-config-server",
        Proc::new(MachineConfigServer::new(
            ServerMode::Bootstrap {
                configs: BTreeMap::from([("master".into(), "rendered-master-late".into())]),
            },
            endpoints,
        )),
    );
    let host = w.sim.add_host("master-0");
    let m = w.sim.spawn(
        host,
        "master-0",
        Proc::new(McoMachine::new(
            MachineConfigSpec {
                name: "master-0".into(),
                pool: "master".into(),
                server: mcs,
                timing: quick_timing(),
            },
            endpoints,
        )),
    );
    w.sim.run_until(SimTime::from_secs(600));
    assert_eq!(machine(&w, m).phase(), &Phase::Running);
}

#[test]
fn removing_the_owner_reference_orphans_a_rendered_config() {
    // The 2019 GC patched the pool's ownerReference away; the API server's collector
    // must then never delete the config, even once the pool itself is deleted, while a
    // config still owned by the pool is collected with it.
    let mut pool = pool_object("worker");
    pool.meta.uid = reconsim_world::object::Uid(1);
    let orphaned = rendered_object(&pool, content(&[("v", "1")]));
    let owned = rendered_object(&pool, content(&[("v", "2")]));
    let (orphaned_key, owned_key) = (orphaned.key(), owned.key());
    let pool_key = pool.key();
    let (mut w, _, _) = world(
        vec![pool, orphaned, owned],
        vec![
            Step {
                at_ms: 1_000,
                op: ApiOp::Patch {
                    key: orphaned_key.clone(),
                    ops: vec![PatchOp::RemoveOwnerReference(reconsim_world::object::Uid(
                        1,
                    ))],
                    resource_version: None,
                },
            },
            Step {
                at_ms: 5_000,
                op: ApiOp::Delete {
                    key: pool_key.clone(),
                    uid: None,
                    grace_period_seconds: None,
                    options: Default::default(),
                },
            },
        ],
    );
    w.sim.run_until(SimTime::from_secs(4));
    let o: &Arc<Object> = store(&w)
        .get(&orphaned_key)
        .expect("orphaning deletes nothing");
    assert!(o.meta.owner_references.is_empty());
    w.sim.run_until(SimTime::from_secs(60));
    assert!(store(&w).get(&pool_key).is_none());
    assert!(
        store(&w).get(&orphaned_key).is_some(),
        "an orphan outlives its former owner"
    );
    assert!(
        store(&w).get(&owned_key).is_none(),
        "a config still owned by the deleted pool is collected"
    );
}
