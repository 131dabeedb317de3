//! The cloud node lifecycle controller with the cloud's reused names
//! (docs/semantics.md 6.7, 6.8).
//!
//! Each test builds a cluster by hand: the API server, the cloud, kube-controller-
//! manager's node lifecycle controller (it marks a silent Node's Ready Unknown after the
//! 40 s grace period) and the cloud's (it deletes a not-Ready Node whose instance is
//! gone, by providerID), with a one-address subnet so that the next launch after a
//! termination gets the terminated instance's name.

use reconsim_cloud::{
    Cloud, CloudClient, CloudConfig, CloudOp, CloudStep, InstanceState, node_lifecycle, provider_id,
};
use reconsim_sim::{Fault, FaultPlan, ProcId, ProcState, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::lifecycle::NodeLifecycle;
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::{ConditionStatus, Node, ObjectKey, Resource, Uid};
use reconsim_world::{Endpoints, Proc, WorldFault};
use std::collections::BTreeMap;

const NAME: &str = "ip-10-0-0-1";

struct World {
    sim: Sim<Proc>,
    cloud: ProcId,
}

/// Boot `boot_s`, join 2 s after running, shutting-down 30 s, one address.
fn world(steps: Vec<CloudStep>, boot_s: u64, faults: Vec<TimedFault<WorldFault>>) -> World {
    let config = CloudConfig {
        boot_ms_min: boot_s * 1000,
        boot_ms_max: boot_s * 1000,
        describe_lag_ms_min: 1_000,
        describe_lag_ms_max: 1_000,
        join_ms_min: 2_000,
        join_ms_max: 2_000,
        terminate_ms: 30_000,
        subnet_size: 1,
        ..CloudConfig::default()
    };
    let mut sim = Sim::new(SimConfig::new(1), FaultPlan::new(faults));
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
    sim.spawn(
        cp,
        reconsim_world::lifecycle::NAME,
        Proc::new(NodeLifecycle::new(Default::default(), endpoints)),
    );
    let config = ManagerConfig {
        identity: node_lifecycle::NAME.to_string(),
        ..Default::default()
    };
    sim.spawn(
        cp,
        node_lifecycle::NAME,
        Proc::new(Manager::new(
            config,
            endpoints,
            vec![node_lifecycle::controller(cloud)],
        )),
    );
    sim.spawn(user, "client", Proc::new(CloudClient::new(cloud, steps)));
    World { sim, cloud }
}

impl World {
    fn run_until_secs(&mut self, s: u64) {
        self.sim.run_until(SimTime::from_secs(s));
    }

    fn cloud(&self) -> &Cloud {
        self.sim.actor(self.cloud).component::<Cloud>().unwrap()
    }

    /// The Node `NAME`: its uid, providerID and Ready status.
    fn node(&self) -> Option<(Uid, Option<String>, ConditionStatus)> {
        let api = self.sim.actor(ProcId(0)).component::<ApiServer>().unwrap();
        let o = api.get(&ObjectKey::new(Node::KIND, "", NAME))?;
        let n = o.typed::<Node>()?;
        Some((o.meta.uid, n.spec.provider_id.clone(), n.status.ready))
    }
}

fn id(n: u64) -> String {
    format!("i-{n:017x}")
}

fn pid(n: u64) -> Option<String> {
    Some(provider_id("us-east-1a", &id(n)))
}

fn launch(at_s: u64) -> CloudStep {
    CloudStep {
        at_ms: at_s * 1000,
        op: CloudOp::RunInstances {
            tags: BTreeMap::new(),
            client_token: None,
        },
    }
}

fn inject(at_s: u64, for_s: u64, process: &str, fault: WorldFault) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms: at_s * 1000,
        duration_ms: Some(for_s * 1000),
        fault: Fault::Inject {
            process: process.to_string(),
            fault,
        },
        on: None,
    }
}

/// An outside actor terminates the first instance at 40 s.
fn terminate_first() -> TimedFault<WorldFault> {
    inject(
        40,
        1,
        "cloud",
        WorldFault::TerminateInstance {
            launch: Some(1),
            tag: None,
        },
    )
}

#[test]
fn the_node_of_an_instance_terminated_from_outside_is_deleted_once_not_ready() {
    // #1 joins at ~8 s; terminated at 40 s (its kubelet stops); its Node's Ready goes
    // Unknown at ~80 s, but #1 shuts down until ~70 s (shutting-down still exists for
    // the AWS provider), then terminated: the Node goes at the next check.
    let mut w = world(vec![launch(1)], 5, vec![terminate_first()]);
    w.run_until_secs(79);
    let (_, provider, ready) = w.node().expect("still there");
    assert_eq!(provider, pid(1));
    assert_eq!(ready, ConditionStatus::True, "within the grace period");
    w.run_until_secs(100);
    assert!(w.node().is_none(), "deleted: its instance is terminated");
}

#[test]
fn a_new_instance_under_a_reused_name_registers_a_fresh_node_after_the_old_one_went() {
    // The old Node is deleted by ~90 s; #2, launched at 100 s with #1's address, joins
    // at ~107 s and creates a new Node under the same name, with its own providerID,
    // which the controller leaves alone.
    let mut w = world(vec![launch(1), launch(100)], 5, vec![terminate_first()]);
    w.run_until_secs(20);
    let (old_uid, _, _) = w.node().expect("#1's Node");
    w.run_until_secs(200);
    assert_eq!(w.cloud().instance(&id(2)).unwrap().node_name(), NAME);
    let (uid, provider, ready) = w.node().expect("#2's Node");
    assert_ne!(uid, old_uid);
    assert_eq!(provider, pid(2));
    assert_eq!(ready, ConditionStatus::True);
}

#[test]
fn a_node_adopted_under_a_reused_name_is_deleted_when_it_next_goes_not_ready() {
    // #1 is terminated at 40 s and gone at ~70 s, before its Node's grace period ends
    // (~80 s). #2, launched at 71 s with #1's address, boots in 1 s and joins at ~74 s:
    // its kubelet's create finds #1's Node and takes it as its own (the real kubelet's
    // tryRegisterWithAPIServer), Ready again, but with #1's providerID. The cloud's
    // controller skips a Ready Node; when #2's kubelet stops (100 s to 300 s) the Node
    // goes NotReady, the controller asks the cloud about #1, and deletes the Node of a
    // running machine (the collision behind aws/karpenter-provider-aws#2734).
    let stop = inject(
        100,
        200,
        &format!("kubelet/{NAME}"),
        WorldFault::KubeletStop,
    );
    let mut w = world(
        vec![launch(1), launch(71)],
        1,
        vec![terminate_first(), stop],
    );
    w.run_until_secs(20);
    let (old_uid, _, _) = w.node().expect("#1's Node");
    w.run_until_secs(95);
    let kubelet = w.cloud().kubelet(&id(2)).expect("#2 joined");
    assert_eq!(w.sim.proc_state(kubelet), ProcState::Running);
    let (uid, provider, ready) = w.node().expect("adopted");
    assert_eq!(uid, old_uid, "the same Node object");
    assert_eq!(provider, pid(1), "still naming the terminated instance");
    assert_eq!(ready, ConditionStatus::True);
    w.run_until_secs(200);
    assert_eq!(
        w.cloud().instance(&id(2)).unwrap().state,
        InstanceState::Running
    );
    assert!(w.node().is_none(), "deleted though its machine runs");
}
