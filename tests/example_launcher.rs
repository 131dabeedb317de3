//! The launcher example (examples/launcher): a kube-rs controller that launches cloud
//! instances through the simulated cloud (the program's handle, `reconsim_kube::Handle`)
//! and keeps a failpoint (`reconsim_failpoint::fail_point!`) between launch and record
//! (issue 28; docs/guide/real-kube-rs-code.md):
//! - two replicas that look an instance up before launching both launch: caught;
//! - one replica that crashes at the failpoint looks again while DescribeInstances
//!   lags, and launches again: caught, and the failpoint's hit is in the trace;
//! - launching with the VM's uid as client token holds over 1,000 seeds, every seed run
//!   twice, the failpoint's crash included.

mod common;
#[path = "../examples/launcher/harness.rs"]
mod harness;
#[path = "../examples/launcher/launcher.rs"]
mod launcher;

use common::{campaign, jobs, root, twice_each};
use reconsim::scenario::faults::generate;
use reconsim::scenario::runner::run_world;
use reconsim::scenario::{Expect, Families, Scenario};
use reconsim::sim::{RecordKind, TraceMode};
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    common::example_scenario("launcher", name)
}

fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &families()).expect("the example's scenario loads")
}

#[test]
fn two_replicas_that_look_before_launching_launch_twice() {
    let s = scenario("launcher-look-up-first");
    assert_eq!(s.expect, Expect::Violation);
    let report = campaign(&s, s.seeds, jobs(), false);
    let first = report
        .failures
        .first()
        .expect("a violation within the budget");
    assert_eq!(first.invariant, harness::ONE_INSTANCE);
    assert_eq!(report.first_failure_seed, Some(0));
    let (outcome, _) = run_world(&s, 0, generate(&s, 0), TraceMode::Hash);
    let message = outcome.violation.expect("seed 0 fails again").message;
    assert!(message.contains("has 2 instances"), "{message}");
}

/// One replica (launcher-0), its failpoint's first hit armed to crash; the variant's
/// `launch` as given.
fn one_replica_crashing_at_the_failpoint(launch: &str) -> Scenario {
    let text = std::fs::read_to_string(path("launcher-look-up-first")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = &mut doc["controllers"]["custom"][0];
    entry["nodes"] = serde_json::json!(["master-0"]);
    entry["params"]["launch"] = launch.into();
    doc["faults"] = serde_json::json!([{
        "count": [1, 1], "at_ms": [0, 0], "duration_ms": [240000, 240000],
        "fault": {"failpoint": {"processes": ["launcher-0"], "name": "after-launch",
                                "hit": [1, 1], "action": "crash", "for_ms": [10, 2000]}}
    }]);
    Scenario::parse("one-replica.json", &doc.to_string(), &families()).unwrap()
}

#[test]
fn a_crash_between_launch_and_record_launches_again_unless_the_launch_has_a_token() {
    let buggy = one_replica_crashing_at_the_failpoint("look-up-first");
    let (outcome, world) = run_world(&buggy, 0, generate(&buggy, 0), TraceMode::Full);
    let notes: Vec<&str> = world
        .sim
        .trace()
        .records()
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Note { text, .. } if text.starts_with("failpoint") => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("failpoint after-launch hit #1: crash"),
        "{notes:?}"
    );
    let report = campaign(&buggy, 100, jobs(), false);
    assert!(
        !report.failures.is_empty(),
        "a restart within the describe lag launches again: {outcome:?}"
    );
    let fixed = one_replica_crashing_at_the_failpoint("client-token");
    let report = campaign(&fixed, 200, jobs(), false);
    assert!(report.failures.is_empty(), "{:?}", report.failures.first());
}

#[test]
fn a_client_token_holds_over_1000_seeds_each_run_twice() {
    let s = scenario("launcher-client-token");
    assert_eq!(s.expect, Expect::Clean);
    assert!(s.seeds >= 1000);
    let failing = twice_each(&s, 0..s.seeds);
    assert!(
        failing.is_empty(),
        "failing: {failing:?}\n  replay: cargo run --release --example launcher -- run {} --seed {}",
        path("launcher-client-token").display(),
        failing.first().copied().unwrap_or_default()
    );
}

#[test]
fn the_controller_file_names_reconsim_only_through_its_failpoint() {
    let text = std::fs::read_to_string(root().join("examples/launcher/launcher.rs")).unwrap();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        // The CRD's group, `example.reconsim.dev`, is a name, not an import.
        let imports = line.contains("reconsim::") || line.contains("reconsim_");
        assert!(
            !imports || line.contains("reconsim_failpoint::fail_point!"),
            "launcher.rs names reconsim: {line}"
        );
    }
}

#[test]
fn the_guides_launcher_section_runs_as_printed() {
    let guide = std::fs::read_to_string(root().join("docs/guide/real-kube-rs-code.md")).unwrap();
    let start = guide
        .find("## 7. A controller that launches VMs")
        .expect("section 7");
    let end = start + guide[start..].find("\n## ").expect("a section after it");
    let blocks: Vec<&str> = guide[start..end].split("```").skip(1).step_by(2).collect();
    let dir = common::scratch("launcher-guide");
    let prefix = "cargo run --release --example launcher -- ";
    let mut commands = 0;
    for pair in blocks.chunks(2) {
        let [command, expected] = pair else {
            panic!("a command block without its output: {pair:?}")
        };
        let command = command.trim();
        let args = command
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("`{command}` runs the example"));
        // Scenario paths are the workspace's; what a command writes goes to a temporary
        // directory of its own.
        let args: Vec<String> = args
            .split(' ')
            .map(|a| match a.starts_with("examples/") {
                true => root().join(a).display().to_string(),
                false => a.to_string(),
            })
            .collect();
        let out = std::process::Command::new(common::example_binary("launcher"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "`{command}`: {stderr}"
        );
        let expected: Vec<&str> = expected.lines().filter(|l| !l.is_empty()).collect();
        if let Err(line) = common::check_output(&expected, &stdout, &stderr) {
            panic!("`{command}` does not print\n{line}\nit prints:\n{stdout}{stderr}");
        }
        commands += 1;
    }
    assert_eq!(commands, 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_type_in_an_entry_is_reported_at_its_path() {
    let text = std::fs::read_to_string(path("launcher-look-up-first")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["controllers"]["custom"][0]["nodes"][1] = 5.into();
    let err = Scenario::parse("bad.json", &doc.to_string(), &families())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "at .controllers.custom[0].nodes[1]: invalid type: integer `5`, expected a string"
        ),
        "{err}"
    );
}

/// `reconsim::testing`, as a user's `#[test]` calls it (docs/guide/real-kube-rs-code.md,
/// "In your own crate"): both scenarios meet their expectation, and the bug held to a
/// clean expectation fails with a command that shows the same violation.
#[test]
fn reconsim_testing_holds_both_scenarios_and_names_the_command_that_shows_a_break() {
    use reconsim::testing::{Broken, assert_holds, holds};
    let runner = "cargo run --release --example launcher --";
    let caught = assert_holds(path("launcher-look-up-first"), &families(), runner);
    assert_eq!(caught.caught_at_seed, Some(0));
    let held = assert_holds(path("launcher-client-token"), &families(), runner);
    assert_eq!((held.caught_at_seed, held.runs), (None, 1000));

    let dir = common::scratch("launcher-testing");
    let text = std::fs::read_to_string(path("launcher-look-up-first")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["expect"] = "clean".into();
    let broken_path = dir.join("launcher-look-up-first.json");
    std::fs::write(&broken_path, doc.to_string()).unwrap();
    let broken = holds(&broken_path, &families(), runner).unwrap_err();
    let Broken::Violated {
        seed,
        ref invariant,
        ref rerun,
        ..
    } = broken
    else {
        panic!("a violation, not {broken}")
    };
    assert_eq!((seed, invariant.as_str()), (0, harness::ONE_INSTANCE));
    let message = broken.to_string();
    assert!(
        message.contains("expects clean, but seed 0 violates launcher_one_instance_per_vm")
            && message.contains("\n  run it again: cargo run --release --example launcher -- run "),
        "{message}"
    );
    // The command runs as printed (the example binary for `cargo run ... --`).
    let args = rerun
        .strip_prefix(&format!("{runner} "))
        .expect("the runner first");
    let out = std::process::Command::new(common::example_binary("launcher"))
        .args(args.split(' '))
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(harness::ONE_INSTANCE),
        "`{rerun}` shows the violation:\n{stdout}"
    );
    println!("{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `launcher_one_instance_per_vm` (its `reads`: the cloud) gives the same verdicts,
/// times and hashes gated as when asked after every step (tests/gating.rs).
#[test]
fn one_instance_per_vm_gated_gives_the_same_verdicts() {
    let mut failing = 0;
    for name in ["launcher-look-up-first", "launcher-client-token"] {
        failing += common::gating_agrees(&scenario(name), 0..12, harness::ONE_INSTANCE);
    }
    assert!(failing > 0);
}
