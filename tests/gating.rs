//! Checkers run only when what they read changed (`Check::reads`, `Check::due`; issue
//! 33). Skipping never changes a verdict: one test per built-in checker runs every
//! shipped scenario that checks it, with that checker alone, over a range of seeds with
//! gating on and off, and finds the same outcome (violation, time, message, events,
//! trace hash). The `at_most_replicas` checker is held to the same in the examples'
//! tests (tests/example_podset.rs, tests/example_configset.rs).

mod common;

use common::gating_agrees;
use reconsim::families::builtin;
use reconsim::scenario::{Scenario, library};

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
/// the failing runs found.
fn agrees(invariant: &str, seeds: u64) -> usize {
    scenarios_checking(invariant)
        .iter()
        .map(|s| gating_agrees(s, 0..seeds))
        .sum()
}

#[test]
fn no_duplicate_machines_gated_gives_the_same_verdicts() {
    assert!(agrees("no_duplicate_machines", 12) > 0);
}

#[test]
fn no_leaked_instances_gated_gives_the_same_verdicts() {
    assert!(agrees("no_leaked_instances", 12) > 0);
}

#[test]
fn kcp_no_create_while_deleting_gated_gives_the_same_verdicts() {
    assert!(agrees("kcp_no_create_while_deleting", 8) > 0);
}

#[test]
fn kcp_max_surge_gated_gives_the_same_verdicts() {
    agrees("kcp_max_surge", 8);
}

#[test]
fn kcp_no_needless_create_gated_gives_the_same_verdicts() {
    assert!(agrees("kcp_no_needless_create", 8) > 0);
}

#[test]
fn etcd_removal_keeps_two_nodes_gated_gives_the_same_verdicts() {
    agrees("etcd_removal_keeps_two_nodes", 8);
}

#[test]
fn etcd_quorum_gated_gives_the_same_verdicts() {
    agrees("etcd_quorum", 8);
}

#[test]
fn etcd_keeps_joining_members_gated_gives_the_same_verdicts() {
    agrees("etcd_keeps_joining_members", 8);
}

#[test]
fn etcd_leader_candidate_has_node_ref_gated_gives_the_same_verdicts() {
    agrees("etcd_leader_candidate_has_node_ref", 8);
}

#[test]
fn no_missing_referenced_config_gated_gives_the_same_verdicts() {
    assert!(agrees("no_missing_referenced_config", 6) > 0);
}
