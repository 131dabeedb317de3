//! The ConfigSet example (examples/configset): a real kube-rs controller program,
//! unmodified (kube-runtime's own `Controller`), fuzzed by reconsim (issues 15 and 27,
//! docs/guide/real-kube-rs-code.md):
//! - the library: a fuzz campaign catches the buggy variant within its seed budget and
//!   the fixed one holds over its whole budget of 1,000 seeds;
//! - determinism, checked as madsim does: every seed run twice gives one trace hash, and
//!   a campaign's failures are the same on one thread and on two;
//! - the CLI: the example binary fuzzes, saves, replays, shrinks and explains its
//!   failures.

mod common;
#[path = "../examples/configset/controller.rs"]
mod controller;
#[path = "../examples/configset/harness.rs"]
mod harness;
#[path = "../examples/configset/reconcile_only.rs"]
mod reconcile_only;

use common::{campaign, jobs, root, twice_each};
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::fuzz::Report;
use reconsim::scenario::runner::run;
use reconsim::scenario::{Expect, Families, Scenario};
use reconsim::sim::TraceMode;
use std::path::PathBuf;
use std::process::{Command, Output};

fn path(name: &str) -> PathBuf {
    common::example_scenario("configset", name)
}

fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &families()).expect("the example's scenario loads")
}

#[test]
fn a_fuzz_campaign_catches_the_kube_rs_controller_that_lists_from_the_watch_cache() {
    let s = scenario("configset-buggy");
    assert_eq!(s.expect, Expect::Violation);
    let report = campaign(&s, s.seeds, jobs(), false);
    let first = report
        .failures
        .first()
        .expect("a violation within the budget");
    assert_eq!(first.invariant, harness::MAX_CONFIGMAPS);
    // The figures docs/guide/real-kube-rs-code.md shows. (118 until the kernel stopped
    // making a std `RandomState` per run: std counts a thread's hash keys up per map, so
    // kube-runtime's maps on the run's thread now get other keys, and some interleavings
    // of concurrent reconciles follow other orders.)
    assert_eq!(report.first_failure_seed, Some(0));
    assert_eq!(report.failures.len(), 119);
}

#[test]
fn the_reconcile_only_path_catches_the_same_race_in_the_same_reconcile() {
    // The same controller.rs functions under reconsim's manager instead of kube-runtime's
    // Controller: this race needs one reconcile after another, so both paths find it.
    let families = reconsim::families::builtin().with(reconcile_only::extensions());
    let s = Scenario::load(&path("configset-buggy"), &families).expect("loads");
    let report = campaign(&s, s.seeds, jobs(), false);
    assert!(!report.failures.is_empty());
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.invariant == harness::MAX_CONFIGMAPS)
    );
    let fixed = Scenario::load(&path("configset-fixed"), &families).expect("loads");
    assert!(campaign(&fixed, 200, jobs(), true).failures.is_empty());
}

#[test]
fn the_guide_quotes_the_example_verbatim() {
    // Every "From `FILE`:" in the guide is followed by a blank line and a fenced block
    // that must be a verbatim part of FILE.
    let guide = std::fs::read_to_string(root().join("docs/guide/real-kube-rs-code.md")).unwrap();
    let mut lines = guide.lines();
    let mut checked = 0;
    while let Some(line) = lines.next() {
        let Some(file) = line
            .strip_prefix("From `")
            .and_then(|l| l.strip_suffix("`:"))
        else {
            continue;
        };
        assert_eq!(lines.next(), Some(""), "a blank line after {line}");
        assert!(
            lines.next().is_some_and(|l| l.starts_with("```")),
            "a code block after {line}"
        );
        let code: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            text.contains(&code.join("\n")),
            "the guide's excerpt of {file} is no longer in it:\n{}",
            code.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} excerpts found");
}

#[test]
fn the_controller_file_has_no_reconsim_import() {
    // No `use reconsim...`, no `reconsim::`/`reconsim_kube::` path: only kube-rs, k8s-openapi
    // and the crates a kube-rs user has anyway.
    let text = std::fs::read_to_string(root().join("examples/configset/controller.rs")).unwrap();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        assert!(
            !line.contains("reconsim::")
                && !line.contains("reconsim_")
                && !line.contains("use reconsim"),
            "controller.rs names reconsim: {line}"
        );
    }
}

#[test]
fn the_kube_rs_controller_with_a_consistent_list_holds_over_1000_seeds_each_run_twice() {
    let s = scenario("configset-fixed");
    assert_eq!(s.expect, Expect::Clean);
    assert!(s.seeds >= 1000);
    let failing = twice_each(&s, 0..s.seeds);
    assert!(
        failing.is_empty(),
        "failing: {failing:?}\n  replay: cargo run --release --example configset -- run {} --seed {}",
        path("configset-fixed").display(),
        failing[0]
    );
}

#[test]
fn trusting_its_own_status_is_caught_by_the_real_servers_watch_latency_alone() {
    // Issue 29: a bug only a real-server behaviour exposes. The scenario has no fault;
    // each watch event waits 1-50 ms in its type's watch cache (semantics 3.19), so the
    // status patch's response can come before its own event.
    let s = scenario("configset-trusts-status");
    assert_eq!(s.expect, Expect::Violation);
    assert!(s.faults.is_empty(), "no fault: the watch latency alone");
    let report = campaign(&s, s.seeds, jobs(), false);
    let first = report.failures.first().expect("caught within the budget");
    assert_eq!(first.invariant, harness::MAX_CONFIGMAPS);
    assert_eq!(report.first_failure_seed, Some(0));
    // Events that leave with their writes (the world before per-type watch caches):
    // the status event always comes before the response, and the same seeds hold.
    let mut prompt = s.clone();
    prompt.apiserver.watch_delay_ms = Some(reconsim::scenario::format::Range { lo: 0, hi: 0 });
    let failing = twice_each(&prompt, 0..s.seeds);
    assert!(
        failing.is_empty(),
        "failing without the latency: {failing:?}"
    );
    // The fix is the list: the consistent variant under the same latency holds.
    let mut fixed = scenario("configset-fixed");
    fixed.apiserver = s.apiserver;
    let failing = twice_each(&fixed, 0..fixed.seeds);
    assert!(
        failing.is_empty(),
        "the consistent list failed: {failing:?}"
    );
}

#[test]
fn the_buggy_budget_run_twice_fails_the_same_seeds_as_the_campaign() {
    let s = scenario("configset-buggy");
    let failing = twice_each(&s, 0..s.seeds);
    let report = campaign(&s, s.seeds, jobs(), false);
    let campaign: Vec<u64> = report.failures.iter().map(|f| f.seed).collect();
    assert_eq!(failing, campaign);
}

#[test]
fn the_two_variants_differ_only_in_the_list() {
    let (buggy, fixed) = (scenario("configset-buggy"), scenario("configset-fixed"));
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
fn every_seed_of_real_kube_rs_code_runs_twice_to_the_same_trace_hash() {
    // The self-check of real code (a std HashMap's order, a select! branch, a clock
    // would part two runs): each seed twice, in full trace mode and in hash mode.
    for name in ["configset-buggy", "configset-fixed"] {
        let s = scenario(name);
        for seed in 0..20 {
            let (a, plan) = run(&s, seed);
            let (b, _) = run(&s, seed);
            assert_eq!(a.trace_hash, b.trace_hash, "{name} seed {seed}");
            assert_eq!(a.violation, b.violation, "{name} seed {seed}");
            if a.violation.is_some() {
                let failure = FailureFile::new(&s, &plan, &a).expect("a violation");
                let replay = failure.replay(TraceMode::Full);
                assert!(replay.reproduced, "{name} seed {seed}: {replay:?}");
            }
        }
    }
}

#[test]
fn a_campaign_finds_the_same_failures_on_one_thread_and_on_two() {
    let s = scenario("configset-buggy");
    let one = campaign(&s, 60, 1, false);
    let two = campaign(&s, 60, 2, false);
    let seeds = |r: &Report| {
        r.failures
            .iter()
            .map(|f| (f.seed, f.invariant.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(seeds(&one), seeds(&two));
    assert_eq!(one.events, two.events);
    assert!(!one.failures.is_empty());
}

// ----- the CLI: the example binary -------------------------------------------------------

fn binary() -> PathBuf {
    common::example_binary("configset")
}

fn cli(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .output()
        .expect("the example binary runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_example_binary_fuzzes_replays_shrinks_and_explains_its_failures() {
    let dir = common::scratch("configset");
    let buggy = path("configset-buggy");
    let out = cli(&[
        "fuzz",
        buggy.to_str().unwrap(),
        "--seeds",
        "0..20",
        "--failures-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let fuzzed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = fuzzed["first_failure_seed"]
        .as_u64()
        .expect("a failing seed in 0..20");
    let file = dir.join(format!("configset-buggy-seed-{first}.json"));
    let file = file.to_str().unwrap();

    let out = cli(&["replay", file, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(replay["reproduced"], true);
    assert_eq!(replay["invariant"], harness::MAX_CONFIGMAPS);

    let small = dir.join("small.json");
    let out = cli(&["shrink", file, "-o", small.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    if first == 0 {
        // The guide's figures.
        assert!(
            text(&out).contains("2 -> 0 faults in 2 runs"),
            "{}",
            text(&out)
        );
    }
    let out = cli(&["replay", small.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(replay["reproduced"], true);

    let out = cli(&["explain", small.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let explained = text(&out);
    // The story is the kube-rs client's own requests: the list from the watch cache,
    // then the create on top of it.
    assert!(explained.contains("resourceVersion=0"), "{explained}");
    assert!(
        explained.contains("POST /api/v1/namespaces/default/configmaps: web-*")
            || explained.contains("POST /api/v1/namespaces/default/configmaps: db-*"),
        "{explained}"
    );
}

#[test]
fn the_timeline_shows_the_garbage_collectors_deletions() {
    // The db ConfigSet is deleted at 420 s; once kube-runtime's finalizer helper lets it
    // go, the API server's garbage collector deletes its ConfigMaps. No request makes
    // those deletions, so the timeline shows them as the server's own.
    let scenario = path("configset-fixed");
    let out = cli(&[
        "run",
        scenario.to_str().unwrap(),
        "--seed",
        "0",
        "--timeline",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = text(&out);
    assert!(
        shown.contains("api server: garbage collector: deleting ConfigMap default/db-"),
        "{shown}"
    );
}

#[test]
fn the_fixed_controller_holds_under_generated_operations_too() {
    // Issue 32: configset-fixed with an `operation` generator (set, rollback, two
    // clients, delete, re-create, label on both ConfigSets). Its invariant judges a new
    // ConfigMap against the most the ConfigSet has asked for: a generated scale-down can
    // land while a create decided on the larger count is in flight (seed 0: two clients
    // set db to 6 and to 0; the reconcile for 6 creates the 6th after 0 landed).
    let text = std::fs::read_to_string(path("configset-fixed")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["faults"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "count": [1, 3], "at_ms": [30000, 330000], "duration_ms": [1000, 30000],
            "fault": {"operation": {"controller": "configset-controller"}}
        }));
    let s = Scenario::parse("configset-ops.json", &doc.to_string(), &families()).unwrap();
    let report = campaign(&s, 1000, jobs(), false);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // Seed 0 draws the two clients' edits of db.
    let plan = reconsim::scenario::faults::generate(&s, 0);
    assert!(plan.faults.iter().any(|f| {
        matches!(
            &f.fault,
            reconsim::sim::Fault::Inject {
                fault: reconsim::world::WorldFault::Operation(op),
                ..
            } if op.to_string() == "two clients set spec.replicas of ConfigSet default/db at once, to 0 and to 6"
        )
    }));
}

/// `at_most_replicas` over a real kube-rs controller's objects gives the same verdicts,
/// times and hashes gated as when asked after every step (tests/gating.rs).
#[test]
fn at_most_replicas_gated_gives_the_same_verdicts() {
    let failing: usize = [
        "configset-buggy",
        "configset-fixed",
        "configset-trusts-status",
    ]
    .iter()
    .map(|name| common::gating_agrees(&scenario(name), 0..12, harness::MAX_CONFIGMAPS))
    .sum();
    assert!(failing > 0);
}
