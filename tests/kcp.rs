//! Seed incident 2 (Cluster API KubeadmControlPlane, PR #2958): beyond "an invariant
//! fails", the variants reproduce the shapes the report describes.

use reconsim::check::View;
use reconsim::families::builtin;
use reconsim::families::capi::etcd::Etcd;
use reconsim::families::capi::kinds::Machine;
use reconsim::families::capi::kinds::{
    is_control_plane_node, is_workload_node, machine_version, node_ref,
};
use reconsim::families::capi::{KcpSpec, KcpVariant};
use reconsim::scenario::build::World;
use reconsim::scenario::runner::run_world;
use reconsim::scenario::{faults, library};
use reconsim::sim::TraceMode;
use reconsim_world::object::{Node, Resource};

fn run(name: &str, seed: u64) -> (reconsim::scenario::runner::Outcome, World) {
    let (_, scenario) = library::load(name, &builtin()).unwrap();
    let plan = faults::generate(&scenario, seed);
    run_world(&scenario, seed, plan, TraceMode::Hash)
}

fn view(world: &World) -> View<'_> {
    reconsim::scenario::runner::view(world)
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
    let machines: Vec<_> = view.api.list(Machine::KIND).collect();
    assert_eq!(machines.len(), 1, "the upgrade itself finished");
    assert_eq!(machine_version(machines[0]), Some("v1.17.4"));
    let nodes = view
        .api
        .list(Node::KIND)
        .filter(|n| is_workload_node(n))
        .count();
    assert_eq!(nodes, 2, "the old Node stayed");
}

#[test]
fn v0_3_4_upgrades_one_replica_cleanly_and_etcd_follows() {
    let (outcome, world) = run("kcp-upgrade-waits-for-deletion-1", 0);
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    let view = view(&world);
    let machines: Vec<_> = view.api.list(Machine::KIND).collect();
    assert_eq!(machines.len(), 1);
    assert_eq!(machine_version(machines[0]), Some("v1.17.4"));
    let node = node_ref(machines[0]).expect("a NodeRef");
    let etcd = view
        .find::<Etcd>()
        .map(|(_, e)| e)
        .expect("the world runs etcd");
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
    let machines: Vec<_> = view.api.list(Machine::KIND).collect();
    assert_eq!(machines.len(), 3);
    assert!(
        machines
            .iter()
            .all(|m| machine_version(m) == Some("v1.17.4"))
    );
    assert_eq!(
        view.find::<Etcd>()
            .map(|(_, e)| e)
            .unwrap()
            .members()
            .count(),
        3
    );
}

#[test]
fn a_stale_newest_machine_is_handed_to_forward_etcd_leadership_in_v0_3_4() {
    // The race the fix does not close: the first seed of the budget that shows it.
    let (outcome, _) = run("kcp-upgrade-stale-leader-candidate", 10);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "etcd_leader_candidate_has_node_ref", "{v:?}");
}

#[test]
fn v0_3_3_scales_up_again_on_a_deleting_machine_after_its_node_went() {
    // The report's second issue (3 replicas: "one additional machine and then deleting
    // it"): a reconcile counted the deleting machine as needing an upgrade, listed the
    // Nodes after its Node was deleted (3 <= 3: scale up), and its health check re-read
    // the cache after the Machine was gone, so it passed and created a fourth Machine.
    let (outcome, _) = run("kcp-upgrade-counts-deleting-3", 31);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "kcp_no_needless_create", "{v:?}");
    assert!(
        v.message
            .contains("already had 3 non-deleting Machines at v1.17.4"),
        "{}",
        v.message
    );
}

#[test]
fn v0_3_4_waits_for_the_deletion_in_the_same_history() {
    // The same scenario and seed with the fix: the reconcile sees the deleting machine
    // in its snapshot at the end of reconcileHealth and requeues instead.
    let (_, mut scenario) = library::load("kcp-upgrade-counts-deleting-3", &builtin()).unwrap();
    let fixed = library::load("kcp-upgrade-waits-for-deletion-3", &builtin())
        .unwrap()
        .1;
    *scenario.controllers.get_mut::<KcpSpec>().unwrap() =
        fixed.controllers.get::<KcpSpec>().unwrap().clone();
    let plan = faults::generate(&scenario, 31);
    let (outcome, world) = run_world(&scenario, 31, plan, TraceMode::Hash);
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert_eq!(view(&world).api.list(Machine::KIND).count(), 3);
}

/// `name` at `seed` with its KubeadmControlPlane section's variant replaced: the same
/// fault plan (it depends on the scenario's fault profile and the seed only).
fn run_as(
    name: &str,
    variant: KcpVariant,
    seed: u64,
) -> (reconsim::scenario::runner::Outcome, World) {
    let (_, mut scenario) = library::load(name, &builtin()).unwrap();
    scenario.controllers.get_mut::<KcpSpec>().unwrap().variant = variant;
    let plan = faults::generate(&scenario, seed);
    run_world(&scenario, seed, plan, TraceMode::Hash)
}

#[test]
fn the_machine_controller_half_alone_creates_the_reports_second_machine_at_one_replica() {
    // PR #2958's first symptom fixed, its second exposed: the Machine controller deletes
    // the old machine's Node, so ClusterStatus counts 1 Node while MachinesNeedingUpgrade
    // still holds the deleting machine; scale up does not wait for the deletion, and its
    // health check re-reads the cache after the old Machine is gone: a second Machine
    // at the new version ("a second machine with the new version to come up").
    let (outcome, world) = run("kcp-upgrade-machine-fix-only-1", 54);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "kcp_no_needless_create", "{v:?}");
    assert!(
        v.message
            .contains("already had 1 non-deleting Machines at v1.17.4 (replicas 1)"),
        "{}",
        v.message
    );
    let machines: Vec<_> = view(&world).api.list(Machine::KIND).collect();
    assert_eq!(machines.len(), 2, "the new machine and the extra one");
    assert!(
        machines
            .iter()
            .all(|m| machine_version(m) == Some("v1.17.4"))
    );
}

#[test]
fn both_halves_upgrade_one_replica_cleanly_in_the_same_history() {
    // The same scenario, seed and fault plan with v0.3.4: reconcileHealth sees the
    // deleting machine in its snapshot and requeues, so no second Machine.
    let (outcome, world) = run_as("kcp-upgrade-machine-fix-only-1", KcpVariant::V0_3_4, 54);
    assert!(outcome.violation.is_none(), "{:?}", outcome.violation);
    assert_eq!(view(&world).api.list(Machine::KIND).count(), 1);
}

#[test]
fn the_kcp_half_alone_creates_no_extra_machine_but_keeps_the_old_node() {
    // The same history with only the KCP half: no needless create (the invariant is
    // checked), but errLastControlPlaneNode keeps the old Node, so it never converges.
    let (outcome, world) = run_as(
        "kcp-upgrade-machine-fix-only-1",
        KcpVariant::V0_3_3KcpFix,
        54,
    );
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "convergence", "{v:?}");
    assert!(v.message.contains("left behind"), "{}", v.message);
    let view = view(&world);
    assert_eq!(view.api.list(Machine::KIND).count(), 1);
    let nodes = view
        .api
        .list(Node::KIND)
        .filter(|n| is_workload_node(n))
        .count();
    assert_eq!(nodes, 2, "the old Node stayed");
}

#[test]
fn every_joined_node_has_its_member_first_and_then_the_control_plane_label() {
    // The join order: the static etcd pod adds the member before the kubelet registers
    // the Node; kubeadm's mark-control-plane labels the Node at the end of the join.
    let (_, world) = run("kcp-upgrade-waits-for-deletion-3", 0);
    let view = view(&world);
    let etcd = view.find::<Etcd>().map(|(_, e)| e).unwrap();
    let nodes: Vec<_> = view
        .api
        .list(Node::KIND)
        .filter(|n| is_workload_node(n))
        .collect();
    assert_eq!(nodes.len(), 3);
    for n in nodes {
        assert!(is_control_plane_node(n), "{} is labelled", n.meta.name);
        let member = etcd.members().find(|m| m.name == n.meta.name).unwrap();
        assert!(
            member.added_at < n.meta.creation_timestamp,
            "member of {} added at {} before the Node at {}",
            n.meta.name,
            member.added_at,
            n.meta.creation_timestamp
        );
    }
}

#[test]
fn v0_3_4_still_scales_up_twice_when_a_node_is_labelled_between_two_lists() {
    // benmoss on PR #2958: ClusterStatus counted 3 control-plane Nodes (the joining one
    // not yet labelled), reconcileHealth then listed 4 and re-read 4 Machines with
    // NodeRefs, so scale up created a fifth Machine. Nothing was deleting: the fix does
    // not apply.
    let (outcome, _) = run("kcp-upgrade-health-recheck-race", 67);
    let v = outcome.violation.expect("a violation");
    assert_eq!(v.invariant, "kcp_max_surge", "{v:?}");
    assert!(v.message.contains("makes 5 non-deleting"), "{}", v.message);
}

#[test]
fn a_run_is_a_function_of_its_seed() {
    let (a, _) = run("kcp-upgrade-counts-deleting-3", 80);
    let (b, _) = run("kcp-upgrade-counts-deleting-3", 80);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.violation, b.violation);
}

/// `name` with `sets` applied, as `--set` applies them.
fn with_sets(name: &str, sets: &[&str]) -> reconsim::scenario::Scenario {
    let path = library::dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let sets: Vec<_> = sets
        .iter()
        .map(|s| reconsim::scenario::variants::parse_set(s).unwrap())
        .collect();
    let resolve = |n: &str, from: Option<&std::path::Path>| library::base_in_dir(n, from);
    reconsim::scenario::Scenario::parse_with(name, &text, Some(&path), &builtin(), &resolve, &sets)
        .unwrap()
}

/// Seeds of `0..end` whose run violates an invariant, with the invariants met.
fn failing(s: &reconsim::scenario::Scenario, end: u64) -> (Vec<u64>, Vec<String>) {
    let mut seeds = Vec::new();
    let mut invariants = Vec::new();
    for seed in 0..end {
        let plan = faults::generate(s, seed);
        let (outcome, _) = run_world(s, seed, plan, TraceMode::Hash);
        if let Some(v) = outcome.violation {
            seeds.push(seed);
            if !invariants.contains(&v.invariant) {
                invariants.push(v.invariant);
            }
        }
    }
    (seeds, invariants)
}

#[test]
fn a_realistic_watch_latency_finds_the_init_race_that_cluster_api_pr_3002_fixed() {
    // docs/semantics.md 3.19: with each watch event 1-20 ms behind its write (every
    // world's default), v0.3.4's reconcile requeued 5 ms after the first create reads a
    // cache without it and initializes again; PR #3002 (v0.3.6) reads the Machines
    // uncached first.
    let name = "kcp-init-watch-latency";
    let (seeds, invariants) = failing(&with_sets(name, &[]), 40);
    assert!(seeds.len() >= 10, "caught in {seeds:?}");
    assert_eq!(invariants, ["kcp_no_needless_create"]);
    let fixed = with_sets(name, &["controllers.kcp.init_uncached=true"]);
    let (seeds, _) = failing(&fixed, 200);
    assert!(seeds.is_empty(), "PR #3002's read holds: {seeds:?}");
    // Where every event leaves with its write the race cannot happen: a world without
    // the latency hid it.
    let (seeds, _) = failing(&with_sets(name, &["apiserver.watch_delay_ms=[0,0]"]), 200);
    assert!(seeds.is_empty(), "{seeds:?}");
}
