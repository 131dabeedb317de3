//! The CLI's contract (DESIGN.md section 8): JSON shapes, exit codes, failure files,
//! replay, and results that do not depend on `--jobs`.

mod common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

use common::{json, reconsim};

/// A path in this process's scratch directory (target/tmp/cli-<pid>).
fn tmp(name: &str) -> PathBuf {
    common::scratch("cli").join(name)
}

#[test]
fn list_json_has_the_contract_fields() {
    let out = reconsim(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let doc = json(&out);
    let rows = doc.as_array().expect("an array");
    assert!(rows.len() >= 4);
    for r in rows {
        for f in ["name", "path", "expect", "description"] {
            assert!(r.get(f).is_some(), "list row lacks {f}: {r}");
        }
    }
}

/// `list` shows every description whole, wrapped under its scenario's name for a
/// terminal of 100 columns: no sentence loses its end.
#[test]
fn list_shows_every_description_whole_within_100_columns() {
    let rows = json(&reconsim(&["list", "--json"]));
    let out = reconsim(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("NAME "), "a table: {text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100 || !line.trim().contains(' '),
            "wider than 100 columns: {line}"
        );
    }
    for r in rows.as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        let description = r["description"].as_str().unwrap();
        // The indented lines under the name's row, joined again.
        let shown: Vec<&str> = text
            .lines()
            .skip_while(|l| l.starts_with(' ') || l.split_whitespace().next() != Some(name))
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .map(str::trim)
            .collect();
        assert_eq!(
            shown.join(" "),
            description.split_whitespace().collect::<Vec<_>>().join(" "),
            "{name}'s description, whole"
        );
    }
}

#[test]
fn run_json_shape_and_exit_codes() {
    let out = reconsim(&[
        "run",
        "machineapi-no-leader-election",
        "--seed",
        "0",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "a violation exits 1");
    let doc = json(&out);
    for f in [
        "scenario",
        "seed",
        "outcome",
        "invariant",
        "time_ms",
        "events",
        "sim_ms",
        "wall_ms",
        "trace_hash",
    ] {
        assert!(doc.get(f).is_some(), "run --json lacks {f}: {doc}");
    }
    assert_eq!(doc["outcome"], "violation");
    assert_eq!(doc["invariant"], "no_duplicate_machines");

    let out = reconsim(&["run", "machineapi-leader-election", "--seed", "0", "--json"]);
    assert_eq!(out.status.code(), Some(0), "clean exits 0");
    let doc = json(&out);
    assert_eq!(doc["outcome"], "clean");
    assert!(doc["invariant"].is_null() && doc["time_ms"].is_null());
}

#[test]
fn the_same_seed_gives_the_same_trace_hash() {
    let hash = |seed: &str| {
        json(&reconsim(&[
            "run",
            "machineapi-leader-election",
            "--seed",
            seed,
            "--json",
        ]))["trace_hash"]
            .clone()
    };
    assert_eq!(hash("3"), hash("3"));
    assert_ne!(hash("3"), hash("4"));
}

#[test]
fn a_saved_failure_replays_to_the_same_hash() {
    let file = tmp("failure.json");
    let out = reconsim(&[
        "run",
        "machineapi-lease-expiry-pause",
        "--seed",
        "5",
        "--save-failure",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let run = json(&out);
    let human = reconsim(&["replay", file.to_str().unwrap()]);
    assert_eq!(human.status.code(), Some(0));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.trim_end().ends_with(&format!(
            "replay: {} replay {}",
            env!("CARGO_BIN_EXE_reconsim"),
            file.display()
        )),
        "replay lines start the binary as it was started: {text}"
    );
    let out = reconsim(&["replay", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let replay = json(&out);
    assert_eq!(replay["reproduced"], true);
    assert_eq!(replay["trace_hash"], run["trace_hash"]);
    assert_eq!(replay["invariant"], run["invariant"]);

    // A tampered hash is not a reproduction: exit 1.
    let mut f: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    f["trace_hash"] = Value::String("0000000000000000".into());
    let bad = tmp("tampered.json");
    std::fs::write(&bad, f.to_string()).unwrap();
    let out = reconsim(&["replay", bad.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["reproduced"], false);
    // Its message says that only the hash differs: the same invariant, the same time
    // (what a file of a version that hashed messages differently replays to).
    let out = reconsim(&["replay", bad.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("the same invariant fails at the same time"),
        "{text}"
    );
    f["time_ms"] = Value::from(f["time_ms"].as_u64().unwrap() + 1);
    std::fs::write(&bad, f.to_string()).unwrap();
    let out = reconsim(&["replay", bad.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("the same invariant fails, in a different history"),
        "{text}"
    );
}

#[test]
fn fuzz_results_do_not_depend_on_jobs() {
    let run = |jobs: &str, extra: &[&str]| {
        let mut args = vec![
            "fuzz",
            "machineapi-lease-expiry-pause",
            "--seeds",
            "0..60",
            "--jobs",
            jobs,
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = reconsim(&args);
        let mut doc = json(&out);
        for f in [
            "scenario",
            "runs",
            "failures",
            "first_failure_seed",
            "events",
            "sim_ms",
            "wall_ms",
        ] {
            assert!(doc.get(f).is_some(), "fuzz --json lacks {f}: {doc}");
        }
        doc.as_object_mut().unwrap().remove("wall_ms");
        doc.as_object_mut().unwrap().remove("jobs");
        (out.status.code(), doc)
    };
    let (c1, one) = run("1", &[]);
    let (c2, two) = run("2", &[]);
    assert_eq!(one, two);
    assert_eq!(c1, Some(1));
    assert_eq!(c1, c2);
    let (_, one) = run("1", &["--stop-on-first"]);
    let (_, two) = run("2", &["--stop-on-first"]);
    assert_eq!(one, two);
    assert_eq!(one["failures"].as_array().unwrap().len(), 1);
}

#[test]
fn shards_cover_the_range_exactly() {
    let runs = |shard: &str| {
        json(&reconsim(&[
            "fuzz",
            "machineapi-no-leader-election",
            "--seeds",
            "0..30",
            "--shard",
            shard,
            "--json",
        ]))["runs"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(runs("0/3") + runs("1/3") + runs("2/3"), 30);
}

#[test]
fn fuzz_saves_a_failure_file_per_failing_seed() {
    let dir = tmp("failures");
    let out = reconsim(&[
        "fuzz",
        "machineapi-no-leader-election",
        "--seeds",
        "0..3",
        "--failures-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.trim_end().lines().last().unwrap();
    let start = format!("  replay: {} replay ", env!("CARGO_BIN_EXE_reconsim"));
    assert!(last.starts_with(&start), "{text}");
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert!(files >= 1);
}

#[test]
fn bad_input_is_a_one_line_error_with_exit_2() {
    let bad = tmp("bad-scenario.json");
    let text = std::fs::read_to_string(reconsim::scenario::library::resolve(
        "machineapi-leader-election",
    ))
    .unwrap()
    .replacen("\"duration_ms\"", "\"duration_msx\"", 1);
    std::fs::write(&bad, text).unwrap();
    let out = reconsim(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("duration_msx"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    let text = std::fs::read_to_string(reconsim::scenario::library::resolve(
        "machineapi-leader-election",
    ))
    .unwrap()
    .replacen("\"replicas\": 2", "\"replicas\": -2", 1);
    std::fs::write(&bad, text).unwrap();
    let out = reconsim(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".workload[0].action.scale_machine_set.replicas"),
        "{err}"
    );

    for args in [
        vec!["fuzz", "machineapi-leader-election", "--seeds", "5..1"],
        vec!["fuzz", "machineapi-leader-election", "--shard", "3/3"],
        vec!["fuzz", "machineapi-leader-election", "--jobs", "0"],
        vec!["run", "no-such-scenario"],
        vec!["replay", "/no/such/file.json"],
        vec!["frobnicate"],
    ] {
        let out = reconsim(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    let strip = |mut doc: Value| {
        for f in [
            "wall_ms",
            "jobs",
            "shard",
            "seeds_run",
            "merged",
            "complete",
            "unrun_from",
        ] {
            doc.as_object_mut().unwrap().remove(f);
        }
        doc
    };
    let whole = strip(json(&reconsim(&[
        "fuzz",
        "machineapi-lease-expiry-pause",
        "--seeds",
        "0..45",
        "--json",
    ])));
    let mut files = Vec::new();
    for i in 0..3 {
        let out = reconsim(&[
            "fuzz",
            "machineapi-lease-expiry-pause",
            "--seeds",
            "0..45",
            "--shard",
            &format!("{i}/3"),
            "--json",
        ]);
        let file = tmp(&format!("shard-{i}.json"));
        std::fs::write(&file, &out.stdout).unwrap();
        files.push(file.to_str().unwrap().to_string());
    }
    let mut args = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    let out = reconsim(&args);
    assert_eq!(out.status.code(), Some(1), "the merged result has failures");
    assert_eq!(strip(json(&out)), whole);

    // Results of different scenarios do not merge.
    let other = tmp("other.json");
    std::fs::write(
        &other,
        reconsim(&[
            "fuzz",
            "machineapi-no-leader-election",
            "--seeds",
            "0..2",
            "--json",
        ])
        .stdout,
    )
    .unwrap();
    let out = reconsim(&["merge", &files[0], other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".scenario"));
}

/// Shards of one name that ran different scenarios (one with a `--set`), or with
/// another reconsim version, are not one campaign: merge refuses them, naming the field.
#[test]
fn merge_refuses_shards_of_different_resolved_scenarios_or_versions() {
    let shard = |i: u32, set: &[&str]| {
        let s = format!("{i}/2");
        let mut args = vec![
            "fuzz",
            "machineapi-lease-expiry-pause",
            "--seeds",
            "0..6",
            "--shard",
            &s,
            "--json",
        ];
        args.extend_from_slice(set);
        json(&reconsim(&args))
    };
    let write = |name: &str, doc: &Value| {
        let file = tmp(name);
        std::fs::write(&file, doc.to_string()).unwrap();
        file.to_str().unwrap().to_string()
    };
    let (a, b) = (shard(0, &[]), shard(1, &[]));
    assert_eq!(a["scenario_fingerprint"], b["scenario_fingerprint"]);
    assert_eq!(a["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    let (fa, fb) = (write("fp-a.json", &a), write("fp-b.json", &b));
    let out = reconsim(&["merge", &fa, &fb]);
    assert_eq!(out.status.code(), Some(1), "one campaign merges");
    assert_eq!(
        json(&out)["scenario_fingerprint"],
        a["scenario_fingerprint"]
    );

    let set = shard(1, &["--set", "net.latency_ms=[1,30]"]);
    assert_eq!(set["scenario"], a["scenario"], "the same name");
    assert_ne!(set["scenario_fingerprint"], a["scenario_fingerprint"]);
    let out = reconsim(&["merge", &fa, &write("fp-set.json", &set)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at .scenario_fingerprint") && err.contains("another scenario"),
        "{err}"
    );

    let mut old = b.clone();
    old["version"] = Value::from("0.5.0");
    let out = reconsim(&["merge", &fa, &write("fp-old.json", &old)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at .version"));
}

#[test]
fn a_time_budget_runs_a_prefix_of_the_seeds() {
    let out = reconsim(&[
        "fuzz",
        "machineapi-leader-election",
        "--seeds",
        "0..100000",
        "--time-budget",
        "300ms",
        "--json",
    ]);
    let doc = json(&out);
    let (runs, seeds_run) = (
        doc["runs"].as_u64().unwrap(),
        doc["seeds_run"].as_u64().unwrap(),
    );
    assert!(runs > 0 && runs < 100_000, "{doc}");
    assert_eq!(runs, seeds_run, "the seeds run are a prefix: {doc}");
    let out = reconsim(&[
        "fuzz",
        "machineapi-leader-election",
        "--time-budget",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn search_json_shape_exit_codes_and_a_failure_file_that_replays_and_explains() {
    let dir = tmp("search-failures");
    let out = reconsim(&[
        "search",
        "machineapi-lease-expiry-pause",
        "--stop-on-first",
        "--max-plans",
        "50",
        "--jobs",
        "2",
        "--failures-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "a failing plan exits 1");
    let doc = json(&out);
    for f in [
        "scenario",
        "seeds",
        "references",
        "failures",
        "first_failure",
        "runs",
        "runs_to_first_failure",
        "events",
        "sim_ms",
        "wall_ms",
        "jobs",
    ] {
        assert!(doc.get(f).is_some(), "search --json lacks {f}: {doc}");
    }
    let r = &doc["references"][0];
    for f in [
        "seed",
        "outcome",
        "decisions",
        "generated",
        "pruned",
        "groups",
        "singles",
        "pairs",
        "runs",
        "first_failure_plan",
        "trace_hash",
    ] {
        assert!(r.get(f).is_some(), "a reference lacks {f}: {r}");
    }
    assert_eq!(r["outcome"], "clean");
    let failure = &doc["failures"][0];
    assert_eq!(failure["invariant"], "no_duplicate_machines");
    let file = failure["file"].as_str().expect("saved");
    let replay = reconsim(&["replay", file, "--json"]);
    assert_eq!(replay.status.code(), Some(0));
    assert_eq!(json(&replay)["reproduced"], true);
    // Its timeline: the anchored fault, the frozen leader's launch, then the verdict.
    let timeline = reconsim(&["replay", file, "--timeline"]);
    assert_eq!(timeline.status.code(), Some(0));
    let text = String::from_utf8_lossy(&timeline.stdout);
    assert!(text.contains("fault starts"), "{text}");
    assert!(text.contains("RunInstances"), "{text}");
    assert!(text.contains("reproduced:"), "{text}");
    let explain = reconsim(&["explain", file]);
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(
        text.contains("before call of machine-controller-0"),
        "{text}"
    );

    // A clean scenario's short search exits 0 and says so (its group plans find the
    // health-recheck race by the differential oracle only, tests/search.rs).
    let clean = reconsim(&[
        "search",
        "kcp-upgrade-waits-for-deletion-1",
        "--max-plans",
        "5",
        "--no-pairs",
    ]);
    assert_eq!(clean.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&clean.stdout).contains("no failure in 6 runs"));

    // Exhaustive: the depth reached and the repeated interleavings, in the same shape.
    let deep = reconsim(&[
        "search",
        "kcp-upgrade-waits-for-deletion-1",
        "--exhaustive",
        "1",
        "--max-plans",
        "10",
        "--json",
    ]);
    assert_eq!(deep.status.code(), Some(0));
    let r = &json(&deep)["references"][0];
    assert_eq!(r["depth"], 1);
    assert_eq!(r["runs"], 10);
    assert!(r["repeats"].is_u64(), "{r}");
    let listed = reconsim(&[
        "search",
        "kcp-upgrade-waits-for-deletion-1",
        "--exhaustive",
        "1",
        "--list-plans",
    ]);
    assert_eq!(
        listed.status.code(),
        Some(2),
        "its tree grows from its runs"
    );
    let zero = reconsim(&[
        "search",
        "kcp-upgrade-waits-for-deletion-1",
        "--exhaustive",
        "0",
    ]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--exhaustive"));

    // Bad input: exit 2, one line naming the argument.
    let bad = reconsim(&["search", "machineapi-lease-expiry-pause", "--seeds", "5..2"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--seeds"));
}

/// A cap that cuts a search says so, in words and in `--json` (`left_out`): never a
/// silent truncation.
#[test]
fn search_reports_what_max_plans_leaves_out() {
    let scenario = "kcp-upgrade-waits-for-deletion-1";
    // Exhaustive, depth 1: every swap of the reference run is generated, 10 run.
    let deep = reconsim(&[
        "search",
        scenario,
        "--exhaustive",
        "1",
        "--max-plans",
        "10",
        "--json",
    ]);
    assert_eq!(deep.status.code(), Some(0));
    let doc = json(&deep);
    let r = &doc["references"][0];
    let generated = r["generated"].as_u64().unwrap();
    assert!(generated > 10, "{r}");
    assert_eq!(r["left_out"].as_u64(), Some(generated - 10), "{r}");
    assert_eq!(r["swaps_over_cap"], 0, "{r}");
    assert_eq!(doc["left_out"].as_u64(), Some(generated - 10), "{doc}");
    assert_eq!(doc["max_plans"], 10, "{doc}");
    let text = reconsim(&["search", scenario, "--exhaustive", "1", "--max-plans", "10"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "--max-plans 10 cut the tree: {} swaps generated but not run",
            generated - 10
        )),
        "{text}"
    );

    // Plans: the singles past the cap, and the cap that lists them all.
    let cut = reconsim(&[
        "search",
        scenario,
        "--max-plans",
        "5",
        "--no-pairs",
        "--json",
    ]);
    let left_out = json(&cut)["references"][0]["left_out"].as_u64().unwrap();
    assert!(left_out > 0, "{}", String::from_utf8_lossy(&cut.stdout));
    let text = reconsim(&["search", scenario, "--max-plans", "5", "--no-pairs"]);
    let text = String::from_utf8_lossy(&text.stdout);
    let all = 5 + left_out;
    assert!(
        text.contains(&format!(
            "--max-plans 5 left out {left_out} plans (the last singles in run order); --max-plans {all} runs every single"
        )),
        "{text}"
    );
    let listed = reconsim(&["search", scenario, "--max-plans", "5", "--list-plans"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().filter(|l| l.starts_with('#')).count(), 5);
    assert!(
        listed.contains(&format!("(--max-plans 5 left out {left_out} more")),
        "{listed}"
    );
    let every = reconsim(&[
        "search",
        scenario,
        "--max-plans",
        &all.to_string(),
        "--no-pairs",
        "--list-plans",
    ]);
    let every = String::from_utf8_lossy(&every.stdout);
    assert_eq!(
        every.lines().filter(|l| l.starts_with('#')).count() as u64,
        all,
        "nothing left out: {every}"
    );
    assert!(!every.contains("--max-plans"), "{every}");

    // A tree that fits its cap says nothing of one.
    let whole = reconsim(&[
        "search",
        scenario,
        "--exhaustive",
        "1",
        "--max-plans",
        "1000",
    ]);
    let whole = String::from_utf8_lossy(&whole.stdout);
    assert!(
        whole.contains(&format!("{generated} ran")) && !whole.contains("--max-plans"),
        "{whole}"
    );
}

/// `--list-plans` speaks in the timeline's words, and a message cut short ends with
/// whole values and `…`: no Rust type names, no value cut in the middle.
#[test]
fn list_plans_lines_are_words() {
    let out = reconsim(&[
        "search",
        "machineapi-leader-election",
        "--list-plans",
        "--no-pairs",
        "--max-plans",
        "100000",
        // Sieve's kinds as Sieve makes them (a lost answer needs a dropping partition
        // of the controller's host, which this scenario does not declare).
        "--beyond-envelope",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().count() > 100, "{text}");
    for line in text.lines() {
        for debug in [
            "{ ",
            "Some(",
            "KubeletStop",
            "CloudDescribeLag",
            "NodeJoinDelay",
            "Resync on",
            "\"",
        ] {
            assert!(!line.contains(debug), "{debug:?} in {line}");
        }
    }
    // The timeline's own words for the scenario's faults and Sieve's.
    for words in [
        "stop the kubelet of master-0",
        "resync every cache of machine-controller-0",
        "lose the answer after",
        "call RunInstances tags={Name: worker-us-west-2b-",
    ] {
        assert!(text.contains(words), "no {words:?} in {text}");
    }
}

/// RUST_LOG's lines written to a pipe or a file carry no colour codes (`2> log.txt`
/// reads as text); a terminal still gets them.
#[test]
fn logs_to_a_pipe_have_no_escape_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
        .args([
            "fuzz",
            "machineapi-no-leader-election",
            "--seeds",
            "0..2",
            "--json",
        ])
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fuzz campaign starts"), "logged: {err}");
    assert!(
        !err.contains("\x1b["),
        "escape codes in a piped log: {err:?}"
    );
    json(&out);
}

#[test]
fn fuzz_swarm_is_reported_and_finds_a_violation() {
    let out = reconsim(&[
        "fuzz",
        "machineapi-lease-expiry-pause",
        "--seeds",
        "0..100",
        "--swarm",
        "--stop-on-first",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    assert_eq!(doc["swarm"], true);
    assert!(doc["first_failure_seed"].is_u64());
}

#[test]
fn a_swarm_campaigns_replay_line_runs_the_seed_with_its_swarm_plan() {
    // Seed 272 fails only with the generators its swarm mask keeps: the line fuzz prints
    // without --failures-dir must say --swarm, and run must draw the same plan.
    let out = reconsim(&[
        "fuzz",
        "kcp-upgrade-counts-deleting-3",
        "--swarm",
        "--seeds",
        "272..273",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("a replay line: {text}"));
    assert!(
        line.ends_with("run kcp-upgrade-counts-deleting-3 --seed 272 --swarm"),
        "{line}"
    );
    let args: Vec<&str> = line.split(' ').skip(1).collect();
    let again = reconsim(&args);
    assert_eq!(again.status.code(), Some(1), "{line}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("VIOLATION of kcp_no_needless_create"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    // Without its swarm plan the same seed holds: the flag is what replays it.
    let plain = reconsim(&["run", "kcp-upgrade-counts-deleting-3", "--seed", "272"]);
    assert_eq!(plain.status.code(), Some(0));
}

#[test]
fn a_file_that_cannot_be_read_is_named_without_a_field_and_list_skips_a_foreign_file() {
    let missing = tmp("no-such-scenario.json");
    let out = reconsim(&["run", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains(&format!("{}: cannot read: ", missing.display())),
        "{err}"
    );
    assert!(
        !err.contains("at .:"),
        "no field of a file never read: {err}"
    );
    // A directory of scenarios with one foreign file: the others are listed, the
    // foreign one is named on stderr, and the exit code says something did not load.
    let dir = tmp("scenarios-with-a-stranger");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        "scenarios/mco-gc-in-use.json",
        dir.join("mco-gc-in-use.json"),
    )
    .unwrap();
    std::fs::write(dir.join("stranger.json"), "{}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
        .args(["list"])
        .env("RECONSIM_SCENARIOS", &dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listed.contains("mco-gc-in-use"), "{listed}");
    assert!(listed.contains("1 more that does not load"), "{listed}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("stranger.json"), "{err}");
}

/// A clean scenario's declared fault envelope bounds what search does (issue 31): its
/// watch events are at most about 5 s late, so the 30 s `delay_event` that made its
/// MachineSet controller create one Machine too many is left out by default, and with
/// `--beyond-envelope` the finding says what it goes beyond, in the report, its JSON,
/// its failure file, `shrink`'s output and `explain`.
#[test]
fn search_keeps_to_the_scenarios_fault_envelope_unless_asked_and_says_so() {
    let name = "machineapi-idempotent-watch-lag";
    let within = reconsim(&["search", name, "--stop-on-first", "--jobs", "2"]);
    assert_eq!(within.status.code(), Some(0), "clean within its envelope");
    let text = String::from_utf8_lossy(&within.stdout);
    assert!(
        text.contains(
            "plans beyond the scenario's fault envelope left out (--beyond-envelope runs them)"
        ),
        "{text}"
    );
    let dir = tmp("envelope-failures");
    let _ = std::fs::remove_dir_all(&dir);
    let beyond = reconsim(&[
        "search",
        name,
        "--stop-on-first",
        "--jobs",
        "2",
        "--beyond-envelope",
        "--failures-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(beyond.status.code(), Some(1));
    let doc = json(&beyond);
    assert_eq!(doc["beyond_envelope"], true);
    let f = &doc["failures"][0];
    let why = f["beyond_envelope"][0].as_str().unwrap().to_string();
    assert!(
        why.starts_with("delay a watch event to machineset-controller-0 by 30.000s"),
        "{why}"
    );
    let file = f["file"].as_str().unwrap().to_string();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved["beyond_envelope"][0], why.as_str());
    let explained = reconsim(&["explain", &file]);
    let story = String::from_utf8_lossy(&explained.stdout);
    let faults = story.lines().find(|l| l.starts_with("faults: ")).unwrap();
    assert!(
        faults.contains(&format!("[BEYOND THE SCENARIO'S FAULT ENVELOPE: {why}]")),
        "{faults}"
    );
    let small = dir.join("small.json");
    let shrunk = reconsim(&["shrink", &file, "-o", small.to_str().unwrap()]);
    assert_eq!(
        shrunk.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shrunk.stderr)
    );
    let small: Value = serde_json::from_str(&std::fs::read_to_string(&small).unwrap()).unwrap();
    assert_eq!(small["beyond_envelope"][0], why.as_str());
    // A file found within the envelope carries no such field.
    let within_file = reconsim(&[
        "search",
        "machineapi-lease-expiry-pause",
        "--stop-on-first",
        "--failures-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let doc = json(&within_file);
    let file = doc["failures"][0]["file"].as_str().unwrap();
    assert_eq!(doc["failures"][0]["beyond_envelope"], serde_json::json!([]));
    assert!(
        !std::fs::read_to_string(file)
            .unwrap()
            .contains("beyond_envelope")
    );
}

/// What `fuzz --json` may write, `merge` reads back (issue 31): a result lists failures
/// within RESULT_LISTED_BYTES_MAX and counts the rest in `failures_unlisted`, so the
/// largest result a campaign can write (its list at the budget) fits in what merge
/// reads; and the merged list is the
/// smallest failing seeds of all, what is past a shard's cut counted, not lost.
#[test]
fn merge_reads_back_the_largest_result_fuzz_writes_and_counts_what_is_unlisted() {
    use reconsim::scenario::limits::{FILE_BYTES_MAX, RESULT_LISTED_BYTES_MAX};
    let real = json(&reconsim(&[
        "fuzz",
        "machineapi-no-leader-election",
        "--seeds",
        "0..2",
        "--json",
    ]));
    assert_eq!(real["failures_unlisted"], 0);
    let result =
        |seeds: &str, shard: Option<&str>, failures: Vec<Value>, unlisted: u64, run: u64| {
            let mut doc = real.clone();
            doc["seeds"] = seeds.into();
            doc["shard"] = shard.map_or(Value::Null, Value::from);
            doc["runs"] = run.into();
            doc["seeds_run"] = run.into();
            doc["failures"] = Value::Array(failures);
            doc["failures_unlisted"] = unlisted.into();
            doc
        };
    let item = |seed: u64| serde_json::json!({"seed": seed, "invariant": "no_duplicate_machines", "time_ms": 604_800_000u64});
    // The largest list: items of the widest seeds until the budget is full.
    let start = 10_000_000_000_000_000_000u64;
    let width = item(start).to_string().len() as u64 + 1;
    let n = RESULT_LISTED_BYTES_MAX / width;
    let failures: Vec<Value> = (0..n).map(|i| item(start + i)).collect();
    let runs = n + 1_000_000;
    let big = result(
        &format!("{start}..{}", start + runs),
        None,
        failures,
        1_000_000,
        runs,
    );
    let text = big.to_string();
    assert!((text.len() as u64) < FILE_BYTES_MAX, "{}", text.len());
    let file = tmp("largest-result.json");
    std::fs::write(&file, &text).unwrap();
    let out = reconsim(&["merge", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged = json(&out);
    assert_eq!(merged["failures"].as_array().unwrap().len() as u64, n);
    assert_eq!(merged["failures_unlisted"], 1_000_000);

    // Shard 0/2 listed 0, 2, 4 and counted 5 more (all past 4); shard 1/2 listed all six.
    let a = result("0..24", Some("0/2"), vec![item(0), item(2), item(4)], 5, 12);
    let b = result(
        "0..24",
        Some("1/2"),
        [1, 3, 5, 7, 9, 11].into_iter().map(item).collect(),
        0,
        12,
    );
    let (fa, fb) = (tmp("cut-a.json"), tmp("cut-b.json"));
    std::fs::write(&fa, a.to_string()).unwrap();
    std::fs::write(&fb, b.to_string()).unwrap();
    let merged = json(&reconsim(&[
        "merge",
        fa.to_str().unwrap(),
        fb.to_str().unwrap(),
    ]));
    let seeds: Vec<u64> = merged["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["seed"].as_u64().unwrap())
        .collect();
    // Past 4, shard 0's unlisted seeds (6, 8, ...) may come before 5: they are counted.
    assert_eq!(seeds, [0, 1, 2, 3, 4]);
    assert_eq!(merged["failures_unlisted"], 3 + 5 + 6 - 5);
    assert_eq!(merged["first_failure_seed"], 0);

    // A count larger than the seeds that ran could hold is refused.
    let liar = result("0..24", Some("0/2"), vec![item(0)], 12, 12);
    std::fs::write(&fa, liar.to_string()).unwrap();
    let out = reconsim(&["merge", fa.to_str().unwrap(), fb.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at .failures_unlisted"));
}
