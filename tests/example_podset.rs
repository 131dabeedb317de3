//! The PodSet example (examples/podset, docs/guide/writing-a-reconciler.md), run the
//! three ways users run reconsim, so the guide never rots:
//! - the library: a fuzz campaign catches the buggy variant within its seed budget and
//!   the fixed one holds over its whole budget;
//! - proptest: the property fails for the buggy variant and its shrunk case replays
//!   (through the library and through the example's binary); it holds for the fixed one;
//! - the CLI: the example binary (`cargo run --example podset`) fuzzes, prints the
//!   replay line, replays its own failure files; scenarios naming controllers or
//!   invariants nobody registered are rejected with exit code 2 and the known names.
//!
//! Cases per property: `PROPTEST_CASES` (default 24, as tests/properties.rs).

mod common;
#[path = "../examples/podset/controller.rs"]
mod controller;
#[path = "../examples/podset/harness.rs"]
mod harness;

use common::{campaign, jobs, root};
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use reconsim::scenario::extension::CustomSection;
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::strategies::{Case, case};
use reconsim::scenario::{Expect, Families, Scenario};
use reconsim::sim::TraceMode;
use std::path::PathBuf;
use std::process::{Command, Output};

fn path(name: &str) -> PathBuf {
    common::example_scenario("podset", name)
}

/// The example binary's registry: the builtin families and the PodSet controller's.
fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &families()).expect("the example's scenario loads")
}

/// A path in this process's scratch directory (target/tmp/podset-<pid>).
fn tmp(name: &str) -> PathBuf {
    common::scratch("podset").join(name)
}

// ----- the library: fuzz campaigns --------------------------------------------------------

#[test]
fn a_fuzz_campaign_catches_the_buggy_podset_within_its_budget() {
    let s = scenario("podset-buggy");
    assert_eq!(s.expect, Expect::Violation);
    let report = campaign(&s, s.seeds, jobs(), true);
    let first = report
        .failures
        .first()
        .expect("a violation within the budget");
    assert_eq!(first.invariant, harness::MAX_PODS);
}

#[test]
fn the_fixed_podset_holds_over_its_whole_budget() {
    let s = scenario("podset-fixed");
    assert_eq!(s.expect, Expect::Clean);
    let report = campaign(&s, s.seeds, jobs(), false);
    assert_eq!(report.runs, s.seeds);
    assert!(
        report.failures.is_empty(),
        "failing: {:?}\n  replay: cargo run --release --example podset -- run {} --seed {}",
        report.failures,
        path("podset-fixed").display(),
        report.failures[0].seed
    );
}

#[test]
fn a_deposed_leaders_late_create_lands_and_a_fence_keeps_the_new_leader_out() {
    // The held create of a leader that lost its lease lands after the new leader acted
    // (within TCP's bounds), expectations or not; a fence as long as those bounds holds.
    let deposed = scenario("podset-deposed-leader");
    assert_eq!(deposed.expect, Expect::Violation);
    let report = campaign(&deposed, deposed.seeds, jobs(), true);
    let first = report
        .failures
        .first()
        .expect("a violation within the budget");
    assert_eq!(first.invariant, harness::MAX_PODS);
    let fenced = scenario("podset-deposed-leader-fenced");
    assert_eq!(fenced.expect, Expect::Clean);
    let report = campaign(&fenced, fenced.seeds, jobs(), false);
    assert_eq!(report.runs, fenced.seeds);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

#[test]
fn the_two_variants_differ_only_in_the_controller() {
    // The fixed scenario is the buggy one with variant `expectations`: the same world,
    // workload and fault profile, so the fix is what makes it clean.
    let (buggy, fixed) = (scenario("podset-buggy"), scenario("podset-fixed"));
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
    assert_eq!(
        fixed.controllers.get::<CustomSection>().unwrap().entries[0].params["variant"],
        "expectations"
    );
}

// ----- proptest ---------------------------------------------------------------------------

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// proptest's deterministic generator: the same cases on every machine and every run.
fn runner(config: Config) -> TestRunner {
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// The property: the case runs clean; otherwise the message names a failure file and
/// the command that replays it with the binary that registers the PodSet controller.
fn holds(c: &Case) -> Result<(), TestCaseError> {
    let outcome = c.run();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reconsim-proptest");
    match c.failure_in(&dir, &outcome, "cargo run --release --example podset --") {
        None if outcome.violation.is_none() => Ok(()),
        None => Err(TestCaseError::fail(
            "a violation (its failure file could not be saved)",
        )),
        Some(message) => Err(TestCaseError::fail(message)),
    }
}

#[test]
fn proptest_finds_the_bug_and_its_shrunk_case_replays() {
    let s = scenario("podset-buggy");
    let mut runner = runner(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case(&s), |c| holds(&c));
    let Err(TestError::Fail(reason, shrunk)) = result else {
        panic!("the property held for the buggy PodSet: {result:?}");
    };
    assert!(
        reason
            .message()
            .contains("replay: cargo run --release --example podset -- replay "),
        "{reason}"
    );
    // The shrunk case still fails the same way, through the library and through the
    // example's binary (the failure file embeds the scenario, params included).
    let outcome = shrunk.run();
    let failure = FailureFile::new(&shrunk.scenario, &shrunk.plan, &outcome).expect("still fails");
    assert_eq!(failure.invariant, harness::MAX_PODS);
    assert!(failure.replay(TraceMode::Hash).reproduced);
    let file = tmp("shrunk.json");
    failure.save(&file).unwrap();
    let out = podset_cli(&["replay", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["reproduced"], true);
    assert_eq!(doc["trace_hash"], failure.trace_hash.as_str());
    // The profile draws one to three partitions and maybe a crash. proptest shrinks the
    // case it found; `reconsim shrink` takes the rest to faults that are each needed.
    // Under the default watch latency none is: the second reconcile reads a store that
    // has not yet seen the first one's create on its own.
    let (small, report) = reconsim::scenario::shrink::shrink(&failure, 200);
    assert!(report.faults_after <= shrunk.plan.len(), "{report:?}");
    assert!(small.replay(TraceMode::Hash).reproduced);
    assert!(small.plan.faults.is_empty(), "{:?}", small.plan);
    // Where every watch event leaves with its write (the world before 0.7.0), the bug
    // needs a dropping partition, and each fault shrink keeps is needed.
    let mut prompt_world = s.clone();
    prompt_world.apiserver.watch_delay_ms =
        Some(reconsim::scenario::format::Range { lo: 0, hi: 0 });
    let result = runner.run(&case(&prompt_world), |c| holds(&c));
    let Err(TestError::Fail(_, shrunk)) = result else {
        panic!("the property held for the buggy PodSet without latency: {result:?}");
    };
    let outcome = shrunk.run();
    let prompt = FailureFile::new(&shrunk.scenario, &shrunk.plan, &outcome).expect("still fails");
    let (small, _) = reconsim::scenario::shrink::shrink(&prompt, 200);
    assert!(small.replay(TraceMode::Hash).reproduced);
    assert!(
        small
            .plan
            .faults
            .iter()
            .any(|f| matches!(f.fault, reconsim::sim::Fault::Partition { .. })),
        "{:?}",
        small.plan
    );
    for i in 0..small.plan.faults.len() {
        let mut fewer = small.clone();
        fewer.plan.faults.remove(i);
        assert!(
            fewer.replay(TraceMode::Hash).outcome.violation.is_none(),
            "fault {i} is not needed: {:?}",
            small.plan
        );
    }
}

#[test]
fn the_fixed_podset_holds_the_property() {
    let s = scenario("podset-fixed");
    let mut runner = runner(Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/example_podset.txt",
        ))),
        ..Config::default()
    });
    if let Err(e) = runner.run(&case(&s), |c| holds(&c)) {
        panic!("{e}");
    }
}

// ----- the example's binary ---------------------------------------------------------------

fn podset_binary() -> PathBuf {
    common::example_binary("podset")
}

fn podset_cli(args: &[&str]) -> Output {
    Command::new(podset_binary())
        .args(args)
        .output()
        .expect("the example binary runs")
}

fn reconsim_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reconsim"))
        .args(args)
        .output()
        .expect("the reconsim binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_example_binary_fuzzes_and_replays_its_own_failures() {
    let buggy = path("podset-buggy");
    let buggy = buggy.to_str().unwrap();
    // The guide's command: exit 1, the failing seeds, the replay line.
    let out = podset_cli(&["fuzz", buggy, "--seeds", "0..20", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("podset_max_pods"), "{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("  replay: ") && last.contains("podset run "),
        "{text}"
    );
    let first: u64 = last
        .rsplit_once(" --seed ")
        .and_then(|(_, s)| s.parse().ok())
        .unwrap_or_else(|| panic!("a seed in the replay line: {text}"));
    assert!(
        text.contains(&format!("  seed {first}: podset_max_pods")),
        "{text}"
    );

    // With failure files: each replays through the example binary, to the same hash.
    let dir = tmp("failures");
    let out = podset_cli(&[
        "fuzz",
        buggy,
        "--seeds",
        &format!("{first}..{}", first + 1),
        "--failures-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let fuzzed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fuzzed["first_failure_seed"], first);
    let file = dir.join(format!("podset-buggy-seed-{first}.json"));
    let out = podset_cli(&["replay", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(replay["reproduced"], true);
    assert_eq!(replay["invariant"], "podset_max_pods");
    let out = podset_cli(&["explain", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("podset-controller reconcile #"));

    // The builtin binary knows no PodSet: exit 2, naming the field and how to run it.
    let out = reconsim_cli(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("at .scenario.controllers.custom:")
            && err.contains(
                "a family this binary registers (machine_api, mco, kcp, go), not `custom`"
            ),
        "{err}"
    );

    // The fixed variant is clean through the binary too.
    let fixed = path("podset-fixed");
    let out = podset_cli(&["fuzz", fixed.to_str().unwrap(), "--seeds", "0..20"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn unregistered_names_are_rejected_with_exit_2_and_the_known_names() {
    let text = std::fs::read_to_string(path("podset-buggy")).unwrap();
    let bad = tmp("unknown-controller.json");
    std::fs::write(
        &bad,
        text.replace(
            "\"name\": \"podset-controller\"",
            "\"name\": \"replicaset\"",
        ),
    )
    .unwrap();
    let out = podset_cli(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("podset: error: ")
            && err.contains(bad.to_str().unwrap())
            && err.contains("at .controllers.custom[0].name")
            && err.contains("known: podset-controller")
            && err.contains("not `replicaset`"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    let bad = tmp("unknown-invariant.json");
    std::fs::write(
        &bad,
        text.replace("[\"podset_max_pods\"]", "[\"podset_max_pod\"]"),
    )
    .unwrap();
    let out = podset_cli(&["fuzz", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("at .invariants[0]")
            && err.contains("no_duplicate_machines")
            && err.contains(", podset_max_pods)")
            && err.contains("not `podset_max_pod`"),
        "{err}"
    );

    let bad = tmp("bad-params.json");
    std::fs::write(
        &bad,
        text.replace("\"no-expectations\"", "\"no-expectation\""),
    )
    .unwrap();
    let out = podset_cli(&["run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("at .controllers.custom[0].params.variant")
            && err.contains("unknown variant `no-expectation`"),
        "{err}"
    );

    // The builtin binary rejects the example's scenario the same way.
    let out = reconsim_cli(&["run", path("podset-buggy").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("reconsim: error: ")
            && stderr(&out).contains("at .controllers.custom:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_custom_action_is_checked_against_the_entry() {
    let text = std::fs::read_to_string(path("podset-buggy")).unwrap();
    let err = Scenario::parse(
        "x.json",
        &text.replacen("\"podset\": \"web\"", "\"podset\": \"api\"", 1),
        &families(),
    )
    .unwrap_err();
    assert_eq!(err.path, ".workload[0].action.custom.params.podset");
    assert!(err.message.contains("not `api`"), "{err}");
    let err = Scenario::parse(
        "x.json",
        &text.replacen(
            "\"controller\": \"podset-controller\", \"params\"",
            "\"controller\": \"podset\", \"params\"",
            1,
        ),
        &families(),
    )
    .unwrap_err();
    assert_eq!(err.path, ".workload[0].action.custom.controller");
}

#[test]
fn the_guide_quotes_the_example_verbatim() {
    // Every "From `FILE`:" in the guide is followed by a blank line and a fenced block
    // that must be a verbatim part of FILE.
    let guide = std::fs::read_to_string(root().join("docs/guide/writing-a-reconciler.md")).unwrap();
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
    assert!(checked >= 10, "only {checked} excerpts found");
}

// ----- unit tests of the steps, without a world ------------------------------------------

/// Drive one reconcile of `key` to its end, answering every create as the API server
/// would; returns how many Pods it created and how it ended.
fn reconcile_once(
    c: &mut dyn reconsim::world::manager::Reconciler,
    cache: &reconsim::world::informer::Cache,
    key: &reconsim::world::ObjectKey,
    now_ms: u64,
) -> (u32, reconsim::world::manager::Step) {
    use reconsim::world::api::{ApiOk, ApiOp};
    use reconsim::world::manager::{Call, ReconcileCtx, Reply, Step};
    let mut rng = reconsim::sim::Streams::new(1).stream("unit");
    let mut reply = None;
    let mut created = 0;
    for _ in 0..20 {
        let mut ctx = ReconcileCtx::new(
            key,
            cache,
            reply.take(),
            reconsim::sim::SimTime::from_ms(now_ms),
            &mut rng,
            "unit",
        );
        match c.reconcile(&mut ctx) {
            Step::Call(Call::Api(ApiOp::Create(pod))) => {
                created += 1;
                reply = Some(Reply::Api(Ok(ApiOk::Object(std::sync::Arc::new(*pod)))));
            }
            Step::Call(Call::Api(_)) => {
                reply = Some(Reply::Api(Ok(ApiOk::Deleted)));
            }
            end => return (created, end),
        }
    }
    panic!("a reconcile of at most 20 steps");
}

#[test]
fn the_bug_in_miniature_a_second_reconcile_on_the_same_cache() {
    // A PodSet of 2 and a cache that has not seen any of its Pods yet: the first
    // reconcile creates 2. A second reconcile on the same (stale) cache creates 2 more
    // without expectations, and waits with them.
    use reconsim::family::params::NamespacedName;
    use reconsim::world::informer::Cache;
    let web = harness::podset_object(&harness::PodSetParams {
        name: NamespacedName::new("default", "web"),
        replicas: 2,
    });
    let key = web.key();
    let cache = Cache::from_objects([web]);
    for (variant, again) in [
        (controller::Variant::NoExpectations, 2),
        (controller::Variant::Expectations, 0),
    ] {
        let mut c = controller::controller(variant);
        let (first, _) = reconcile_once(&mut *c, &cache, &key, 1_000);
        assert_eq!(first, 2, "{variant:?}");
        let (second, end) = reconcile_once(&mut *c, &cache, &key, 1_010);
        assert_eq!(second, again, "{variant:?} ended with {end:?}");
    }
}

/// `at_most_replicas` (its `reads`: the owner and child kinds) gives the same verdicts,
/// times and hashes gated as when asked after every step (tests/gating.rs).
#[test]
fn at_most_replicas_gated_gives_the_same_verdicts() {
    let mut failing = 0;
    for name in [
        "podset-buggy",
        "podset-fixed",
        "podset-deposed-leader",
        "podset-deposed-leader-fenced",
    ] {
        failing += common::gating_agrees(&scenario(name), 0..40, harness::MAX_PODS);
    }
    assert!(failing > 0);
}
