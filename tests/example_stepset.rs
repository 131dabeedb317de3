//! The StepSet example (examples/stepset): a real kube-rs controller whose bug no fault
//! finds and a user's operation does (issue 32, docs/operations.md):
//! - the buggy variant's scenario is caught by the combined campaign within its budget,
//!   by the convergence check (Acto's consistency oracle), at a run whose plan has a
//!   generated operation; the same scenario without its operation generator holds over
//!   2,000 seeds;
//! - the fixed variant holds under the combined campaign;
//! - the CLI shrinks a failure to its operations and explains it;
//! - every seed runs twice to one trace hash.

mod common;
#[path = "../examples/stepset/controller.rs"]
mod controller;
#[path = "../examples/stepset/harness.rs"]
mod harness;

use common::{example_binary, jobs, root, twice_each};
use reconsim::scenario::combined::{self, Config};
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::format::FaultKind;
use reconsim::scenario::runner::{CONVERGENCE, run};
use reconsim::scenario::{Expect, Families, Scenario};
use reconsim::sim::Fault;
use reconsim::world::WorldFault;
use std::path::PathBuf;
use std::process::Command;

fn path(name: &str) -> PathBuf {
    common::example_scenario("stepset", name)
}

fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &families()).expect("the example's scenario loads")
}

fn has_operation(faults: &[reconsim::sim::TimedFault<WorldFault>]) -> bool {
    faults.iter().any(|f| {
        matches!(
            f.fault,
            Fault::Inject {
                fault: WorldFault::Operation(_),
                ..
            }
        )
    })
}

#[test]
fn the_combined_campaign_catches_the_operation_order_bug_by_its_consistency_oracle() {
    let s = scenario("stepset-buggy");
    assert_eq!(s.expect, Expect::Violation);
    let config = Config {
        stop_on_first: true,
        ..Config::new(s.seeds, jobs())
    };
    let report = combined::run(&s, &config, &mut |_, _, _| {}, &|_, _| {});
    let first = report.failures.first().expect("caught within the budget");
    assert_eq!(first.invariant, CONVERGENCE, "{first:?}");
    // Every failing random seed of the budget has a generated operation in its plan.
    let failing = twice_each(&s, 0..s.seeds);
    assert!(!failing.is_empty());
    for seed in failing {
        let plan = reconsim::scenario::faults::generate(&s, seed);
        assert!(
            has_operation(&plan.faults),
            "seed {seed} failed without one"
        );
    }
}

#[test]
fn no_fault_finds_the_bug_without_the_generated_operations() {
    let mut s = scenario("stepset-buggy");
    let before = s.faults.len();
    s.faults
        .retain(|g| !matches!(g.fault, FaultKind::Operation { .. }));
    assert_eq!(s.faults.len(), before - 1, "one operation generator");
    let failing = twice_each(&s, 0..2000);
    assert!(failing.is_empty(), "faults alone found it: {failing:?}");
}

#[test]
fn the_fixed_controller_holds_under_the_combined_campaign() {
    let held = reconsim::testing::holds(path("stepset-fixed"), &families(), "cargo test")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(held.runs >= 1000);
    // And its random seeds, each run twice.
    let s = scenario("stepset-fixed");
    assert_eq!(twice_each(&s, 0..300), Vec::<u64>::new());
}

#[test]
fn the_two_variants_differ_only_in_the_generation_they_report() {
    let (buggy, fixed) = (scenario("stepset-buggy"), scenario("stepset-fixed"));
    let strip = |s: &Scenario| {
        let mut v = serde_json::to_value(s).unwrap();
        let o = v.as_object_mut().unwrap();
        for f in ["name", "description", "expect", "seeds"] {
            o.remove(f);
        }
        v["controllers"]["custom"][0]["params"]["variant"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&buggy), strip(&fixed));
}

#[test]
fn every_seed_runs_twice_to_the_same_trace_hash_and_a_failure_file_replays() {
    for name in ["stepset-buggy", "stepset-fixed"] {
        let s = scenario(name);
        for seed in 0..20 {
            let (a, plan) = run(&s, seed);
            let (b, _) = run(&s, seed);
            assert_eq!(a.trace_hash, b.trace_hash, "{name} seed {seed}");
            if a.violation.is_some() {
                let failure = FailureFile::new(&s, &plan, &a).expect("a violation");
                let text = serde_json::to_string(&failure).unwrap();
                let back = FailureFile::parse("x.json", &text, &families()).unwrap();
                assert_eq!(back.plan, plan);
            }
        }
    }
}

#[test]
fn the_cli_shrinks_a_failure_to_its_operation_and_explains_it() {
    let bin = example_binary("stepset");
    let dir = common::scratch("stepset-cli");
    let failures = dir.join("failures");
    let out = Command::new(&bin)
        .args(["fuzz", path("stepset-buggy").to_str().unwrap()])
        .args(["--seeds", "0..200", "--failures-dir"])
        .arg(&failures)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let mut saved: Vec<PathBuf> = std::fs::read_dir(&failures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    saved.sort();
    let small = dir.join("small.json");
    let out = Command::new(&bin)
        .arg("shrink")
        .arg(&saved[0])
        .arg("-o")
        .arg(&small)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let shrunk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&small).unwrap()).unwrap();
    let faults = shrunk["plan"].as_array().unwrap();
    assert!(!faults.is_empty());
    assert!(
        faults
            .iter()
            .all(|f| f["fault"]["fault"]["kind"] == "operation"),
        "shrunk to operations only: {faults:?}"
    );
    assert_eq!(shrunk["invariant"], CONVERGENCE);
    let out = Command::new(&bin)
        .arg("explain")
        .arg(&small)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("the user's operation: "), "{text}");
    assert!(text.contains("what led to it (web)"), "{text}");
    assert!(text.contains("StepSet web has"), "{text}");
    let _ = std::fs::remove_dir_all(root().join(&dir));
}

#[test]
fn the_controller_file_has_no_reconsim_import() {
    let text = std::fs::read_to_string(root().join("examples/stepset/controller.rs")).unwrap();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        assert!(
            !line.contains("reconsim::") && !line.contains("reconsim_"),
            "controller.rs names reconsim: {line}"
        );
    }
}

#[test]
fn each_desired_state_is_judged_not_only_the_last() {
    use reconsim::scenario::runner::quiet_points;
    use reconsim::sim::{SimTime, TimedFault};
    use reconsim::world::fault::{Operation, OperationAction};
    let s = scenario("stepset-buggy");
    // One operation at 100 s, lasting 1 s: the changes are the workload's (60, 240 and
    // 300 s) and its start and end. Only its end is followed by 120 s (within_ms) of
    // nothing; 300 s is the final deadline's.
    let op = Operation {
        object: "StepSet default/web".into(),
        action: OperationAction::Set {
            field: "spec.replicas".into(),
            value: "3".into(),
            back_to: None,
        },
    };
    let plan = reconsim::scenario::format::Plan::new(vec![TimedFault::at(
        100_000,
        Some(1_000),
        Fault::Inject {
            process: "user".into(),
            fault: WorldFault::Operation(op),
        },
    )]);
    assert_eq!(
        quiet_points(&s, &plan),
        vec![(SimTime(101_000), SimTime(221_000))]
    );
    // Without an operation, convergence is judged once, as before.
    assert!(quiet_points(&s, &reconsim::scenario::format::Plan::default()).is_empty());
    // Seed 240: the StepSet is stuck at 5 ConfigMaps 120 s after the plan's last change,
    // judged there, before the workload's next scale (240 s) changes what is desired.
    let (outcome, plan) = run(&s, 240);
    let v = outcome.violation.expect("caught");
    assert_eq!(v.invariant, CONVERGENCE);
    assert_eq!(v.time, SimTime(223_584));
    assert!(
        v.message
            .contains("after 103.584s, the plan's last change before it, with no fault in force"),
        "{}",
        v.message
    );
    assert!(has_operation(&plan.faults));
}

#[test]
fn an_operation_generators_errors_name_its_field() {
    let text = std::fs::read_to_string(path("stepset-buggy")).unwrap();
    let base: serde_json::Value = serde_json::from_str(&text).unwrap();
    let error = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut doc = base.clone();
        edit(&mut doc);
        let e = Scenario::parse("x.json", &doc.to_string(), &families()).unwrap_err();
        (e.path, e.message)
    };
    let op = "/faults/3/fault/operation";
    let (path, message) =
        error(&|d| d.pointer_mut(op).unwrap()["objects"] = serde_json::json!(["nope"]));
    assert_eq!(path, ".faults[3].fault.operation.objects[0]", "{message}");
    let (path, message) =
        error(&|d| d.pointer_mut(op).unwrap()["operations"] = serde_json::json!(["sideways"]));
    assert_eq!(
        path, ".faults[3].fault.operation.operations[0]",
        "{message}"
    );
    // A ConfigMap has no schema: `set` has nothing to draw on it.
    let (path, message) = error(&|d| {
        d["controllers"]["custom"][0]["objects"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}));
        let g = d.pointer_mut(op).unwrap();
        g["objects"] = serde_json::json!(["plain"]);
        g["operations"] = serde_json::json!(["set"]);
    });
    assert_eq!(path, ".faults[3].fault.operation.operations", "{message}");
    let (path, message) = error(&|d| d.pointer_mut(op).unwrap()["controller"] = "nobody".into());
    assert_eq!(path, ".faults[3].fault.operation.controller", "{message}");
}
