//! Integration tests of the etcd model of the workload cluster (crates/families/capi/src/etcd.rs).
//!
//! A small world by hand: an API server and the cloud on one host, the etcd model next to
//! them, a scripted cloud client that launches control-plane instances. Delays are pinned
//! (boot 5 s, join 20 s after running, terminate 10 s) so times can be written down.

use reconsim_capi::etcd::{Etcd, EtcdConfig, EtcdEvent, ROLE_TAG};
use reconsim_cloud::{Cloud, CloudClient, CloudConfig, CloudOp, CloudStep};
use reconsim_sim::{FaultPlan, ProcId, Sim, SimConfig, SimTime};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::object::{Node, Resource};
use reconsim_world::{Endpoints, Proc};
use std::collections::BTreeMap;

fn launch(at_ms: u64, name: &str) -> CloudStep {
    CloudStep {
        at_ms,
        op: CloudOp::RunInstances {
            tags: BTreeMap::from([
                ("Name".to_string(), name.to_string()),
                (ROLE_TAG.0.to_string(), ROLE_TAG.1.to_string()),
            ]),
            client_token: None,
        },
    }
}

fn terminate(at_ms: u64, id: &str) -> CloudStep {
    CloudStep {
        at_ms,
        op: CloudOp::TerminateInstances {
            ids: vec![id.to_string()],
        },
    }
}

struct World {
    sim: Sim<Proc>,
    apiserver: ProcId,
    etcd: ProcId,
}

impl World {
    fn new(seed: u64, steps: Vec<CloudStep>) -> Self {
        let mut sim = Sim::new(SimConfig::new(seed), FaultPlan::new(Vec::new()));
        let cp = sim.add_host("api");
        let user = sim.add_host("user");
        let apiserver = sim.spawn(
            cp,
            "apiserver",
            Proc::new(ApiServer::new(Default::default())),
        );
        let endpoints = Endpoints { apiserver };
        let config = CloudConfig {
            boot_ms_min: 5_000,
            boot_ms_max: 5_000,
            describe_lag_ms_min: 100,
            describe_lag_ms_max: 100,
            join_ms_min: 20_000,
            join_ms_max: 20_000,
            terminate_ms: 10_000,
            ..CloudConfig::default()
        };
        let cloud = sim.spawn(
            cp,
            "cloud",
            Proc::new(Cloud::new(config, endpoints, Images::default())),
        );
        let etcd = sim.spawn(
            cp,
            "etcd",
            Proc::new(Etcd::new(EtcdConfig::default(), endpoints, cloud)),
        );
        sim.spawn(user, "client", Proc::new(CloudClient::new(cloud, steps)));
        World {
            sim,
            apiserver,
            etcd,
        }
    }

    fn etcd(&self) -> &Etcd {
        let p = self.sim.actor(self.etcd);
        p.component::<Etcd>()
            .unwrap_or_else(|| panic!("not etcd: {p:?}"))
    }

    fn nodes(&self) -> usize {
        self.api().list(Node::KIND).count()
    }

    fn control_plane_nodes(&self) -> usize {
        self.api()
            .list(Node::KIND)
            .filter(|n| reconsim_capi::kinds::is_control_plane_node(n))
            .count()
    }

    fn api(&self) -> &ApiServer {
        let p = self.sim.actor(self.apiserver);
        p.component::<ApiServer>()
            .unwrap_or_else(|| panic!("not the API server: {p:?}"))
    }
}

#[test]
fn a_member_joins_before_its_node_registers() {
    // Static pods first: the member exists while the Node does not, for the join delay.
    let mut w = World::new(1, vec![launch(0, "m0")]);
    w.sim.run_until(SimTime::from_secs(4));
    assert_eq!(w.etcd().members().count(), 0, "still booting: no member");
    w.sim.run_until(SimTime::from_secs(8));
    let names: Vec<&str> = w.etcd().members().map(|m| m.name.as_str()).collect();
    assert_eq!(names, vec!["ip-10-0-0-1"], "member named after its node");
    assert_eq!(w.nodes(), 0, "the Node registers 20 s after boot");
    assert_eq!(
        w.etcd().cluster_status().count(),
        0,
        "update-status comes after kubeadm's etcd wait"
    );
    assert_eq!(
        w.etcd().leader(),
        Some("ip-10-0-0-1"),
        "the first member leads"
    );
    // The etcd wait (2-10 s) is over: the endpoint is in, but the Node is not there to
    // label yet.
    w.sim.run_until(SimTime::from_secs(20));
    assert_eq!(w.etcd().cluster_status().count(), 1);
    assert_eq!(w.nodes(), 0);
    w.sim.run_until(SimTime::from_secs(30));
    assert_eq!(w.nodes(), 1, "the Node registered");
    assert_eq!(
        w.control_plane_nodes(),
        1,
        "mark-control-plane labelled it once it registered"
    );
}

#[test]
fn a_terminated_member_goes_down_and_quorum_loss_is_recorded() {
    // Two members; terminating one leaves 1 of 2 up: no quorum.
    let mut w = World::new(
        2,
        vec![
            launch(0, "m0"),
            launch(0, "m1"),
            terminate(15_000, "i-00000000000000002"),
        ],
    );
    w.sim.run_until(SimTime::from_secs(10));
    assert_eq!(w.etcd().members().count(), 2);
    assert!(w.etcd().has_quorum());
    assert_eq!(w.etcd().quorum_lost(), None);
    w.sim.run_until(SimTime::from_secs(20));
    assert!(!w.etcd().has_quorum(), "1 of 2 members up");
    let lost = w.etcd().quorum_lost().expect("recorded");
    assert!(
        lost >= SimTime::from_secs(15) && lost <= SimTime::from_secs(17),
        "{lost}"
    );
    assert!(
        w.etcd()
            .log()
            .iter()
            .any(|(_, e)| matches!(e, EtcdEvent::QuorumLost { up: 1, members: 2 })),
        "{:?}",
        w.etcd().log()
    );
}

#[test]
fn a_member_that_lost_quorum_blocks_new_joins() {
    // After quorum is lost a third instance cannot add its member (MemberAdd needs
    // consensus).
    let mut w = World::new(
        3,
        vec![
            launch(0, "m0"),
            launch(0, "m1"),
            terminate(15_000, "i-00000000000000002"),
            launch(30_000, "m2"),
        ],
    );
    w.sim.run_until(SimTime::from_secs(60));
    assert_eq!(w.etcd().members().count(), 2, "{:?}", w.etcd().log());
}
