//! `reconsim shrink`: a smaller plan that still fails the same way, and replays.

use reconsim::families::builtin;
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::shrink::shrink;
use reconsim::scenario::{library, runner};
use reconsim::sim::TraceMode;

fn failure(name: &str, seed: u64) -> FailureFile {
    let (_, scenario) = library::load(name, &builtin()).unwrap();
    let (outcome, plan) = runner::run(&scenario, seed);
    FailureFile::new(&scenario, &plan, &outcome).expect("the seed fails")
}

#[test]
fn shrinking_drops_unneeded_faults_and_the_result_replays() {
    let f = failure("machineapi-no-leader-election", 1);
    assert!(f.plan.len() > 1, "seed 1 draws several faults");
    let (smaller, report) = shrink(&f, 500);
    assert_eq!(report.faults_before, f.plan.len());
    assert!(report.faults_after < report.faults_before, "{report:?}");
    assert_eq!(smaller.plan.len(), report.faults_after);
    assert_eq!(smaller.invariant, f.invariant);
    let replay = smaller.replay(TraceMode::Hash);
    assert!(replay.reproduced, "{replay:?}");
    // Only the kubelet stop is needed: without it there are no duplicate controllers.
    assert_eq!(report.faults_after, 1);
    let fault = serde_json::to_string(&smaller.plan.faults[0].fault).unwrap();
    assert!(fault.contains("kubelet_stop"), "{fault}");
    // And it is shorter than drawn, yet still long enough to matter.
    assert!(
        smaller.plan.faults[0].duration_ms
            <= f.plan
                .faults
                .iter()
                .find(|t| {
                    serde_json::to_string(&t.fault)
                        .unwrap()
                        .contains("kubelet_stop")
                })
                .unwrap()
                .duration_ms
    );
}

#[test]
fn the_run_budget_bounds_shrinking() {
    let f = failure("machineapi-no-leader-election", 1);
    let (smaller, report) = shrink(&f, 1);
    assert_eq!(report.runs, 1);
    assert!(report.budget_exhausted);
    // Whatever it reached still fails the same way.
    assert!(smaller.replay(TraceMode::Hash).reproduced);
}
