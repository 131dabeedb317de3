//! Checkers run only when what they read changed (`Check::reads`, `Check::due`; issue
//! 33). Skipping never changes a verdict: one test per built-in checker runs it alone,
//! with gating on and off, over a range of runs holding violations of its own, and finds
//! the same outcome (violation, time, message, events, trace hash). Where some shipped
//! scenario's seeds violate the checker, the range is seeds of every shipped scenario
//! that checks it; for the four that no shipped seed violates, it is search plans of a
//! shipped scenario or a shipped scenario with one workload action or fault added (each
//! test says why its checker fires there). The `at_most_replicas` checker is held to the
//! same in the examples' tests (tests/example_podset.rs, tests/example_configset.rs).

mod common;

use common::{gating_agrees, gating_agrees_plans, search_plans};
use reconsim::families::builtin;
use reconsim::scenario::{Scenario, library};
use serde_json::{Value, json};

/// Every shipped scenario that checks `invariant`, with that one checker only.
fn scenarios_checking(invariant: &str) -> Vec<Scenario> {
    let mut found = Vec::new();
    for path in library::files().expect("scenarios/ lists") {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (_, mut s): (_, Scenario) =
            library::load(&name, &builtin()).expect("a shipped scenario loads");
        if s.invariants.iter().any(|i| i == invariant) {
            s.invariants = vec![invariant.to_string()];
            found.push(s);
        }
    }
    assert!(!found.is_empty(), "no shipped scenario checks {invariant}");
    found
}

/// The same verdicts gated and not over `seeds` of every scenario checking `invariant`;
/// the runs `invariant` itself failed.
fn agrees(invariant: &str, seeds: u64) -> usize {
    scenarios_checking(invariant)
        .iter()
        .map(|s| gating_agrees(s, 0..seeds, invariant))
        .sum()
}

/// Shipped scenario `name` with `invariant` its only checker, after `edit` changed its
/// document.
fn shipped_edited(name: &str, invariant: &str, edit: impl FnOnce(&mut Value)) -> Scenario {
    let path = library::resolve(name);
    let text = std::fs::read_to_string(&path).expect("a shipped scenario reads");
    let mut doc: Value = serde_json::from_str(&text).expect("a shipped scenario is JSON");
    edit(&mut doc);
    doc["invariants"] = json!([invariant]);
    Scenario::parse(&path.display().to_string(), &doc.to_string(), &builtin())
        .expect("the edited scenario loads")
}

/// A stalled watch stream of the KCP controller (a slow consumer, docs/semantics.md
/// 4.7): its events arrive 5-30 s late, longer than a new Machine's instance takes to
/// boot (5-15 s), for 60-240 s from a time in `at_ms`.
fn kcp_watch_stall(doc: &mut Value, at_ms: [u64; 2]) {
    doc["faults"].as_array_mut().unwrap().push(json!({
        "count": [1, 1], "at_ms": at_ms, "duration_ms": [60000, 240000],
        "fault": {"watch_stall": {"processes": ["kcp-controller"], "lag_ms": [5000, 30000]}}
    }));
}

// Each range holds runs that the checker itself fails: its violation is the verdict
// gating could get wrong.

#[test]
fn no_duplicate_machines_gated_gives_the_same_verdicts() {
    assert!(agrees("no_duplicate_machines", 12) > 0);
}

#[test]
fn no_leaked_instances_gated_gives_the_same_verdicts() {
    assert!(agrees("no_leaked_instances", 12) > 0);
}

#[test]
fn kcp_max_surge_gated_gives_the_same_verdicts() {
    assert!(agrees("kcp_max_surge", 8) > 0);
}

#[test]
fn kcp_no_needless_create_gated_gives_the_same_verdicts() {
    assert!(agrees("kcp_no_needless_create", 8) > 0);
}

#[test]
fn etcd_leader_candidate_has_node_ref_gated_gives_the_same_verdicts() {
    // Seed 10 of kcp-upgrade-stale-leader-candidate and kcp-upgrade-counts-deleting-1.
    assert!(agrees("etcd_leader_candidate_has_node_ref", 11) > 0);
}

#[test]
fn no_missing_referenced_config_gated_gives_the_same_verdicts() {
    assert!(agrees("no_missing_referenced_config", 6) > 0);
}

/// The checker keeps what it read (each kind's names until the kind is written again,
/// the booting machines' names, that it found nothing) and skips a check that would see
/// the same. One that forgets all of it before every check judges every step alike.
#[test]
fn no_missing_referenced_config_keeps_nothing_that_changes_a_verdict() {
    use reconsim::families::mco::invariants::NoMissingReferencedConfig;
    use reconsim::scenario::faults::generate;
    use reconsim::scenario::runner::run_observed;
    use reconsim::sim::TraceMode;
    let (mut checks, mut found) = (0, 0);
    for s in scenarios_checking("no_missing_referenced_config") {
        for seed in 0..4 {
            let mut kept = NoMissingReferencedConfig::default();
            let mut forgetful = NoMissingReferencedConfig::default();
            run_observed(&s, seed, generate(&s, seed), TraceMode::Hash, |v| {
                let verdict = kept.check(v);
                forgetful.forget();
                assert_eq!(verdict, forgetful.check(v), "{} seed {seed}", s.name);
                checks += 1;
                found += usize::from(verdict.is_some());
            });
        }
    }
    assert!(
        checks > 10_000 && found > 0,
        "{checks} checks, {found} violations"
    );
}

#[test]
fn kcp_no_create_while_deleting_gated_gives_the_same_verdicts() {
    // v0.3.3's one-replica upgrade, scaled to 2 replicas at 200 s, while its scale down
    // may be deleting the old Machine (its instance takes 10-90 s to terminate): v0.3.3's
    // reconcileHealth does not wait for a deletion (PR #2958 added the wait), and the
    // deleting Machine's Node is still listed, so scale up creates at once. Seeds 0, 2, 4.
    let invariant = "kcp_no_create_while_deleting";
    let s = shipped_edited("kcp-upgrade-counts-deleting-1", invariant, |doc| {
        doc["workload"].as_array_mut().unwrap().push(json!(
            {"at_ms": 200000, "action": {"scale_kcp": {"replicas": 2}}}
        ));
    });
    assert!(gating_agrees(&s, 0..12, invariant) > 0);
}

#[test]
fn etcd_removal_keeps_two_nodes_gated_gives_the_same_verdicts() {
    // v0.3.4's one-replica upgrade with the KCP's watch stalled: it does not see the
    // Machines it creates and keeps creating (no expectations); once their instances run,
    // etcd has more members than control-plane Nodes, and ReconcileEtcdMembers removes
    // the members without a Node while the old Machine's Node is the only one. Seeds 19,
    // 26, 39.
    let invariant = "etcd_removal_keeps_two_nodes";
    let s = shipped_edited("kcp-upgrade-waits-for-deletion-1", invariant, |doc| {
        kcp_watch_stall(doc, [100000, 500000]);
    });
    assert!(gating_agrees(&s, 0..40, invariant) > 0);
}

#[test]
fn etcd_quorum_gated_gives_the_same_verdicts() {
    // v0.3.4 initializing twice (kcp-init-watch-latency: two Machines, two etcd members).
    // Plan #199 (one fault) resyncs the KCP right after the Machine controller writes the
    // old Machine's NodeRef: the scale down picks that Machine from a snapshot taken
    // before the NodeRef reached the cache, so it skips ForwardEtcdLeadership and the
    // member removal and deletes the Machine; its instance terminates and 1 of 2 members
    // is up. Plan #3 (every straddle at once) too.
    let invariant = "etcd_quorum";
    let s = shipped_edited("kcp-init-watch-latency", invariant, |_| {});
    let plans = search_plans(&s, 0, 200);
    assert!(gating_agrees_plans(&s, 0, &plans, invariant) > 0);
}

#[test]
fn etcd_keeps_joining_members_gated_gives_the_same_verdicts() {
    // v0.3.4's three-replica upgrade with the KCP's watch stalled: as in
    // etcd_removal_keeps_two_nodes's test, ReconcileEtcdMembers removes the member of a
    // Machine whose Node has not registered (docs/seeds/kcp.md: "a joining machine
    // invisible to the KCP's cache (lag longer than a boot) would expose it"); with three
    // Nodes the removal keeps two. Seeds 1, 4, 6, 9, 10.
    let invariant = "etcd_keeps_joining_members";
    let s = shipped_edited("kcp-upgrade-waits-for-deletion-3", invariant, |doc| {
        kcp_watch_stall(doc, [250000, 600000]);
    });
    assert!(gating_agrees(&s, 0..12, invariant) > 0);
}
