//! The newcomer's path (issue 17): a copied binary works alone, `check` is what a CI
//! job calls, and the documented Kubernetes Job runs as written.

mod common;

use common::{Alone, block, root};
use serde_json::Value;
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_copied_binary_lists_and_runs_the_shipped_scenarios_anywhere() {
    let a = Alone::new("copy");
    let out = a.reconsim(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shipped = std::fs::read_dir(root().join("scenarios")).unwrap().count();
    assert_eq!(
        rows.as_array().unwrap().len(),
        shipped,
        "every shipped scenario"
    );
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r["builtin"] == true)
    );
    let out = a.reconsim(&["list"]);
    let text = stdout(&out);
    assert!(text.starts_with("NAME "), "a table: {text}");
    assert!(text.contains("machineapi-no-leader-election"));
    let out = a.reconsim(&["run", "machineapi-no-leader-election", "--seed", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    // The built-in scenario is the file: the same run through the source tree's file.
    let json =
        |args: &[&str]| -> Value { serde_json::from_slice(&a.reconsim(args).stdout).unwrap() };
    let file = root().join("scenarios/machineapi-no-leader-election.json");
    assert_eq!(
        json(&["run", "machineapi-no-leader-election", "--json"])["trace_hash"],
        json(&["run", file.to_str().unwrap(), "--json"])["trace_hash"]
    );
}

#[test]
fn check_holds_each_scenario_to_its_expectation() {
    let a = Alone::new("check");
    let out = a.reconsim(&[
        "check",
        "machineapi-no-leader-election",
        "mco-gc-in-use-and-in-flight",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ok   machineapi-no-leader-election  expect violation: caught"),
        "{text}"
    );
    assert!(text.contains("2 of 2 scenarios hold"), "{text}");
    // A buggy variant written down as clean: its expectation breaks, exit 1, and the
    // failure is saved with the line that replays it.
    let mut wrong: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/machineapi-lease-expiry-pause.json"))
            .unwrap(),
    )
    .unwrap();
    wrong["expect"] = "clean".into();
    std::fs::write(a.work().join("wrong.json"), wrong.to_string()).unwrap();
    let out = a.reconsim(&["check", "wrong.json", "--failures-dir", "f", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["holds"], false);
    let row = &doc["scenarios"][0];
    assert_eq!(row["first_failure_seed"], 5);
    let file = row["file"].as_str().unwrap();
    assert_eq!(a.reconsim(&["replay", file]).status.code(), Some(0));
    // A typo in any argument fails before anything runs.
    let out = a.reconsim(&["check", "machineapi-leader-election", "no-such-scenario"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
}

#[test]
fn the_documented_kubernetes_job_runs_as_written() {
    let doc = std::fs::read_to_string(root().join("docs/campaigns.md")).unwrap();
    let yaml = block(&doc, "## A Kubernetes Indexed Job", "yaml");
    // The container's script: the lines under `args: - |`, up to volumeMounts.
    let from = yaml.iter().position(|l| l.trim() == "- |").unwrap() + 1;
    let to = yaml
        .iter()
        .position(|l| l.trim() == "volumeMounts:")
        .unwrap();
    let indent = yaml[from].len() - yaml[from].trim_start().len();
    let script: String = yaml[from..to]
        .iter()
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or("")))
        .collect();
    // Its environment, from the spec; SEEDS smaller, to run in a test.
    let var = |name: &str| -> String {
        let line = yaml
            .iter()
            .find(|l| l.contains(&format!("{{name: {name}, value: ")))
            .unwrap_or_else(|| panic!("env {name} in the Job"));
        line.split('"').nth(1).unwrap().to_string()
    };
    assert_eq!(var("SEEDS"), "0..1000000");
    let shards = var("SHARDS");
    assert!(
        yaml.iter()
            .any(|l| l.trim() == format!("completions: {shards}          # N shards"))
    );
    let a = Alone::new("job");
    for index in 0..shards.parse::<u64>().unwrap() {
        let out = a.sh(
            &script,
            &[
                ("JOB_COMPLETION_INDEX", &index.to_string()),
                ("SEEDS", "0..48"),
                ("SHARDS", &shards),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "shard {index}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let merge = block(&doc, "When every index has succeeded", "sh");
    assert_eq!(merge.len(), 1);
    let out = a.sh(merge[0], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value =
        serde_json::from_str(&std::fs::read_to_string(a.work().join("merged.json")).unwrap())
            .unwrap();
    assert_eq!(merged["runs"], 48);
    assert_eq!(merged["complete"], true);
    assert_eq!(merged["merged"], shards.parse::<u64>().unwrap());
    // A missing shard is refused.
    std::fs::remove_file(a.work().join("shard-3.json")).unwrap();
    let out = a.sh(merge[0], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn variants_extend_a_scenario_and_set_one_field() {
    let a = Alone::new("variants");
    let w = a.work();
    std::fs::write(
        w.join("slow.json"),
        r#"{"extends": "machineapi-leader-election", "name": "ml-slow", "net": {"latency_ms": [10, 80]}}"#,
    )
    .unwrap();
    std::fs::write(
        w.join("slow-nle.json"),
        r#"{"extends": "slow.json", "name": "ml-slow-nle", "expect": "violation", "controllers": {"machine_api": {"variant": "no-leader-election"}}}"#,
    )
    .unwrap();
    // The variant's own fields over its base's, validated as a whole.
    let out = a.reconsim(&["check", "slow-nle.json", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["scenarios"][0]["scenario"], "ml-slow-nle");
    // --set gives the same run as the file that says it.
    let json =
        |args: &[&str]| -> Value { serde_json::from_slice(&a.reconsim(args).stdout).unwrap() };
    let by_file = json(&["run", "slow.json", "--json"]);
    let by_set = json(&[
        "run",
        "machineapi-leader-election",
        "--set",
        "net.latency_ms=[10,80]",
        "--json",
    ]);
    assert_eq!(by_file["trace_hash"], by_set["trace_hash"]);
    // The replay line a run prints repeats its --set, and runs as printed.
    let out = a.reconsim(&[
        "run",
        "machineapi-leader-election",
        "--set",
        "controllers.machine_api.variant=no-leader-election",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let line = text
        .lines()
        .last()
        .unwrap()
        .trim_start()
        .strip_prefix("replay: ")
        .unwrap();
    let out = a.sh(line, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("VIOLATION of no_duplicate_machines"));
    // Errors name the field.
    let out = a.reconsim(&["run", "machineapi-leader-election", "--set", "net.bogus=1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at .net.bogus: unknown field"));
    std::fs::write(w.join("anon.json"), r#"{"extends": "slow.json"}"#).unwrap();
    let out = a.reconsim(&["run", "anon.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("anon.json: at .name: a name of its own")
    );
}

/// The README's commands, as printed, with `reconsim` on PATH as its install step puts
/// it there: each exits 0 or 1 (1 is a found violation), in order, in an empty directory.
#[test]
fn the_readme_commands_run_as_printed() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let a = Alone::new("readme");
    let mut ran = 0;
    for after in ["To have `reconsim` on your PATH", "Then:"] {
        let lines = block(&readme, after, "sh");
        for line in lines {
            if line.starts_with('#') || line.trim().is_empty() || line.starts_with("cargo ") {
                continue;
            }
            let out = a.sh(line, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(out.status.code(), Some(0 | 1)) && !err.contains("error"),
                "`{line}` exited {:?}: {err}",
                out.status.code()
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "{ran} commands");
    // What they wrote went where they said: failures/ and out/, which .gitignore covers.
    for dir in ["failures", "out"] {
        assert!(a.work().join(dir).is_dir(), "{dir}/");
    }
    let ignore = std::fs::read_to_string(root().join(".gitignore")).unwrap();
    for dir in ["/failures", "/out"] {
        assert!(ignore.lines().any(|l| l == dir), ".gitignore lacks {dir}");
    }
}
