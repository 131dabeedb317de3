//! Property fuzzing: for every expect-clean scenario, every invariant and convergence
//! hold for any fault plan within its profile (and, for machine-api, any perturbation of
//! its parameters); for an expect-violation scenario, the property fails and proptest's
//! shrunk plan still fails on replay.
//!
//! Cases per property: `PROPTEST_CASES` (CI default: 24, which keeps .ci/run well under
//! its time limit; a wide run: `PROPTEST_CASES=2000 cargo test --release --test
//! properties`). A failing case prints the `reconsim replay` command of a failure file
//! it saved; proptest keeps failing inputs in proptest-regressions/.

use proptest::strategy::{Just, Strategy};
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use reconsim::families::builtin;
use reconsim::families::machineapi::MachineApiSpec;
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::format::LeaseSpec;
use reconsim::scenario::strategies::{Case, case, perturbed};
use reconsim::scenario::{Expect, Scenario, library};
use reconsim::sim::TraceMode;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

fn config() -> Config {
    Config {
        cases: cases(),
        // Failing inputs are kept here (relative to the package root, where cargo runs
        // tests) and tried first on every later run; commit the file.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/properties.txt",
        ))),
        ..Config::default()
    }
}

/// A runner with proptest's deterministic generator: the same cases on every machine
/// and every run, as everything else in reconsim.
fn runner(config: Config) -> TestRunner {
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

fn clean_scenarios() -> Vec<Scenario> {
    library::files()
        .unwrap()
        .iter()
        .map(|p| Scenario::load(p, &builtin()).unwrap())
        .filter(|s| s.expect == Expect::Clean)
        .collect()
}

/// The property: the case runs clean; otherwise the message says how to replay it.
fn holds(c: &Case) -> Result<(), TestCaseError> {
    let outcome = c.run();
    match &outcome.violation {
        None => Ok(()),
        Some(_) => Err(TestCaseError::fail(c.failure(&outcome).unwrap_or_else(
            || "a violation (the failure file could not be saved)".into(),
        ))),
    }
}

#[test]
fn clean_scenarios_hold_for_any_plan_in_their_profile() {
    let scenarios = clean_scenarios();
    assert!(!scenarios.is_empty());
    // Every scenario gets its cases, so one failure does not hide another.
    let mut failed = Vec::new();
    for s in scenarios {
        let mut runner = runner(config());
        if let Err(e) = runner.run(&case(&s), |c| holds(&c)) {
            failed.push(format!("{}: {e}", s.name));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// `scenario` with its parameters moved: the cloud's DescribeInstances lag (the
/// library's [`perturbed`]), then the family's own: MachineSet scale targets (1 to 3
/// replicas) and, with leader election, lease timings that keep client-go's rule
/// (lease > renew > 1.2 x retry).
fn machine_api_perturbed(scenario: &Scenario) -> impl Strategy<Value = Scenario> + use<> {
    perturbed(scenario)
        .prop_flat_map(|s| (Just(s), 1u32..=3, 60_000u64..=180_000, 2u64..=10))
        .prop_map(|(mut s, replicas, lease_ms, retry_div)| {
            for a in &mut s.workload {
                if a.action.name == "scale_machine_set" {
                    a.action.params["replicas"] = replicas.into();
                }
            }
            if let Some(ma) = s.controllers.get_mut::<MachineApiSpec>()
                && ma.lease.is_some()
            {
                let renew = lease_ms * 11 / 12;
                ma.lease = Some(LeaseSpec {
                    lease_duration_ms: lease_ms,
                    renew_deadline_ms: renew,
                    retry_period_ms: renew / 2 / retry_div.max(1),
                    fence_ms: 0,
                });
            }
            s
        })
        .prop_filter("perturbed scenarios validate", |s| s.validate().is_ok())
}

#[test]
fn machine_api_with_leader_election_holds_under_perturbed_parameters() {
    // Leader election and the client token: 4.6 alone launches twice from a cache behind
    // its own patch (docs/seeds/machine-api.md).
    let (_, s) = library::load("machineapi-leader-election-idempotent", &builtin()).unwrap();
    let strategy = machine_api_perturbed(&s).prop_flat_map(|p| case(&p));
    let mut runner = runner(config());
    if let Err(e) = runner.run(&strategy, |c| holds(&c)) {
        panic!("{e}");
    }
}

#[test]
fn the_buggy_variant_fails_and_the_shrunk_plan_replays() {
    let (_, s) = library::load("machineapi-no-leader-election", &builtin()).unwrap();
    let mut runner = runner(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case(&s), |c| holds(&c));
    let Err(TestError::Fail(reason, shrunk)) = result else {
        panic!("the property held for the buggy variant: {result:?}");
    };
    assert!(
        reason.message().contains("replay: reconsim replay "),
        "{reason}"
    );
    // The shrunk plan is no larger than any plan the profile draws for this violation,
    // and it still fails the same way on replay.
    let outcome = shrunk.run();
    let failure = FailureFile::new(&shrunk.scenario, &shrunk.plan, &outcome).expect("still fails");
    assert!(failure.replay(TraceMode::Hash).reproduced);
    assert!(
        shrunk.plan.len() <= 2,
        "proptest shrank to {} faults: {:?}",
        shrunk.plan.len(),
        shrunk.plan
    );
}
