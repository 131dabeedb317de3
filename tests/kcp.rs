//! Seed incident 2 (Cluster API KubeadmControlPlane, PR #2958): beyond "an invariant
//! fails", the variants reproduce the shapes the report describes.

use reconsim::check::View;
use reconsim::check::kcp::etcd;
use reconsim::scenario::build::World;
use reconsim::scenario::runner::run_world;
use reconsim::scenario::{faults, library};
use reconsim::sim::TraceMode;
use reconsim::world::Proc;
use reconsim::world::capi::{is_workload_node, machine_version, node_ref};
use reconsim::world::object::Kind;

fn run(name: &str, seed: u64) -> (reconsim::scenario::runner::Outcome, World) {
    let (_, scenario) = library::load(name).unwrap();
    let plan = faults::generate(&scenario, seed);
    run_world(&scenario, seed, plan, TraceMode::Hash)
}

fn view(world: &World) -> View<'_> {
    let (Proc::ApiServer(api), Proc::Cloud(cloud)) = (
        world.sim.actor(world.apiserver),
        world.sim.actor(world.cloud),
    ) else {
        unreachable!()
    };
    View {
        now: world.sim.now(),
        api,
        cloud,
        sim: &world.sim,
    }
}

#[test]
fn v0_3_3_refuses_the_old_node_deletion_and_leaves_it_behind() {
    // errLastControlPlaneNode: with the old machine deleting, one active control-plane
    // machine is left, so the Machine controller keeps the old Node.
    let (outcome, world) = run("kcp-upgrade-counts-deleting-1", 0);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "convergence", "{v:?}");
    assert!(v.message.contains("left behind"), "{}", v.message);
    let view = view(&world);
    let machines: Vec<_> = view.api.list(Kind::Machine).collect();
    assert_eq!(machines.len(), 1, "the upgrade itself finished");
    assert_eq!(machine_version(machines[0]), Some("v1.17.4"));
    let nodes = view
        .api
        .list(Kind::Node)
        .filter(|n| is_workload_node(n))
        .count();
    assert_eq!(nodes, 2, "the old Node stayed");
}

#[test]
fn v0_3_4_upgrades_one_replica_cleanly_and_etcd_follows() {
    let (outcome, world) = run("kcp-upgrade-waits-for-deletion-1", 0);
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    let view = view(&world);
    let machines: Vec<_> = view.api.list(Kind::Machine).collect();
    assert_eq!(machines.len(), 1);
    assert_eq!(machine_version(machines[0]), Some("v1.17.4"));
    let node = node_ref(machines[0]).expect("a NodeRef");
    let etcd = etcd(&view).expect("the world runs etcd");
    let members: Vec<&str> = etcd.members().map(|m| m.name.as_str()).collect();
    assert_eq!(
        members,
        vec![node],
        "etcd holds exactly the new machine's member"
    );
    assert_eq!(etcd.leader(), Some(node), "leadership was forwarded");
    assert_eq!(etcd.cluster_status().collect::<Vec<_>>(), vec![node]);
}

#[test]
fn v0_3_4_reaches_three_replicas_at_the_new_version() {
    let (outcome, world) = run("kcp-upgrade-waits-for-deletion-3", 0);
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    let view = view(&world);
    let machines: Vec<_> = view.api.list(Kind::Machine).collect();
    assert_eq!(machines.len(), 3);
    assert!(
        machines
            .iter()
            .all(|m| machine_version(m) == Some("v1.17.4"))
    );
    assert_eq!(etcd(&view).unwrap().members().count(), 3);
}

#[test]
fn a_stale_newest_machine_is_handed_to_forward_etcd_leadership_in_v0_3_4() {
    // The race the fix does not close: the first seed of the budget that shows it.
    let (outcome, _) = run("kcp-upgrade-stale-leader-candidate", 10);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "etcd_leader_candidate_has_node_ref", "{v:?}");
}

#[test]
fn a_run_is_a_function_of_its_seed() {
    let (a, _) = run("kcp-upgrade-counts-deleting-3", 80);
    let (b, _) = run("kcp-upgrade-counts-deleting-3", 80);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.violation, b.violation);
}
