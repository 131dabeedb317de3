//! The allocator example (examples/allocator): a leader-elected kube-rs program, two
//! replicas, each running kube-lease-manager from crates.io against the simulated Lease
//! API (issue 27, docs/guide/real-kube-rs-code.md):
//! - a deposed leader's round runs on and hands out the block its successor hands out
//!   too: caught by a fuzz campaign, its failures the same on one thread and on two;
//! - reserving the block first with the resourceVersion read holds over 1,000 seeds,
//!   every seed run twice by the determinism self-check.

#[path = "../examples/allocator/allocator.rs"]
mod allocator;
mod common;
#[path = "../examples/allocator/harness.rs"]
mod harness;

use common::{campaign, jobs, root, twice_each};
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::faults::generate;
use reconsim::scenario::fuzz::Report;
use reconsim::scenario::runner::run_world;
use reconsim::scenario::{Expect, Families, Scenario};
use reconsim::sim::TraceMode;
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    common::example_scenario("allocator", name)
}

fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &families()).expect("the example's scenario loads")
}

#[test]
fn a_deposed_leaders_late_round_hands_out_a_block_twice() {
    let s = scenario("allocator-blind");
    assert_eq!(s.expect, Expect::Violation);
    let report = campaign(&s, s.seeds, jobs(), false);
    let first = report
        .failures
        .first()
        .expect("a violation within the budget");
    assert_eq!(first.invariant, harness::GRANTS_DISJOINT);
    // The figures docs/guide/real-kube-rs-code.md shows.
    assert_eq!(report.first_failure_seed, Some(0));
    assert_eq!(report.failures.len(), 119);
    // Each is a split brain: the two grants of one block have two holders.
    for f in report.failures.iter().take(20) {
        let (outcome, _) = run_world(&s, f.seed, generate(&s, f.seed), TraceMode::Hash);
        let message = outcome.violation.expect("it fails again").message;
        assert!(
            message.contains("by allocator-0") && message.contains("by allocator-1"),
            "seed {}: {message}",
            f.seed
        );
    }
    // And the same on one thread.
    let one = campaign(&s, 60, 1, false);
    let two = campaign(&s, 60, 2, false);
    let seeds = |r: &Report| r.failures.iter().map(|f| f.seed).collect::<Vec<_>>();
    assert_eq!(seeds(&one), seeds(&two));
}

#[test]
fn explain_names_both_creators_of_the_block() {
    // The grants are created by generateName: explain finds the answered create by the
    // write it made, and the one still unanswered at the violation by its prefix.
    let s = scenario("allocator-blind");
    let plan = generate(&s, 2);
    let (outcome, _) = run_world(&s, 2, plan.clone(), TraceMode::Hash);
    let failure = FailureFile::new(&s, &plan, &outcome).expect("seed 2 fails");
    let e = reconsim::scenario::explain::explain(&failure).expect("it reproduces");
    let text = e.lines.join("\n");
    assert!(text.contains("fault starts: pause allocator-1"), "{text}");
    assert!(
        text.contains("allocator-0@master-0 -> create ConfigMap grant-* => ok"),
        "{text}"
    );
    assert!(
        text.contains("allocator-1@master-1 -> create ConfigMap grant-* => no answer by"),
        "{text}"
    );
    // The answered create says the name the server gave: one of the violation's grants.
    let named = text
        .lines()
        .find_map(|l| l.split_once("create ConfigMap grant-* => ok, rv "))
        .and_then(|(_, rest)| rest.split_once(", named "))
        .and_then(|(_, rest)| rest.split_once(' '))
        .map(|(name, _)| name)
        .unwrap_or_else(|| panic!("no generated name:\n{text}"));
    assert!(
        e.objects.iter().any(|o| o == &format!("ConfigMap {named}")),
        "{named} is not among {:?}",
        e.objects
    );
    // The partition silences master-0, where allocator-0 runs: its last heartbeat
    // before the node lifecycle controller found it silent is on the chain.
    let beat = text
        .lines()
        .position(|l| {
            l.contains("stored Lease kube-node-lease/master-0")
                && l.ends_with("(the node's last heartbeat before it was found silent)")
        })
        .unwrap_or_else(|| panic!("no heartbeat:\n{text}"));
    let silent = text
        .lines()
        .position(|l| l.contains("lifecycle: node master-0 stopped posting status"))
        .unwrap_or_else(|| panic!("no silence:\n{text}"));
    assert!(beat < silent, "{text}");
    // Leader election on the chain: allocator-1's last renewal before it paused, then
    // allocator-0 taking the Lease; the deposed allocator-1 hands out IDs on its thaw.
    let at = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{text}"))
    };
    let last_renewal = at(
        "allocator-1@master-1 renews Lease default/allocator-leader (holder allocator-1): its last renewal before allocator-0@master-0 changes the holder",
    );
    let paused = at("fault starts: pause allocator-1");
    let taken =
        at("allocator-0@master-0 takes Lease default/allocator-leader (holder allocator-0)");
    let late = at("allocator-1@master-1 -> create ConfigMap grant-*");
    assert!(
        last_renewal < paused && paused < taken && taken < late,
        "{text}"
    );
}

#[test]
fn reserving_the_block_first_holds_over_1000_seeds_each_run_twice() {
    let s = scenario("allocator-reserved");
    assert_eq!(s.expect, Expect::Clean);
    assert!(s.seeds >= 1000);
    let failing = twice_each(&s, 0..s.seeds);
    assert!(
        failing.is_empty(),
        "failing: {failing:?}\n  replay: cargo run --release --example allocator -- run {} --seed {}",
        path("allocator-reserved").display(),
        failing[0]
    );
}

#[test]
fn the_program_file_has_no_reconsim_import() {
    let text = std::fs::read_to_string(root().join("examples/allocator/allocator.rs")).unwrap();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        assert!(
            !line.contains("reconsim"),
            "allocator.rs names reconsim: {line}"
        );
    }
}

/// `allocator_grants_disjoint` (its `reads`: ConfigMaps) gives the same verdicts, times
/// and hashes gated as when asked after every step (tests/gating.rs).
#[test]
fn grants_disjoint_gated_gives_the_same_verdicts() {
    let mut failing = 0;
    for name in ["allocator-blind", "allocator-reserved"] {
        failing += common::gating_agrees(&scenario(name), 0..12, harness::GRANTS_DISJOINT);
    }
    assert!(failing > 0);
}
