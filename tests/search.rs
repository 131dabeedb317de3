//! Search (docs/search.md): a reference run's decision points, each perturbed by a fault
//! anchored to it. What must hold:
//! - it finds the seed incidents' windows that random seeds need luck for, and every
//!   failure it finds is an ordinary failure file that replays, shrinks and explains;
//! - its report is the same for any number of jobs;
//! - every clean scenario stays clean over its whole single-perturbation plan set, by
//!   its invariants and by the differential oracle, but for one documented race of the
//!   modelled controller, which the fix closes, and the ambiguous create: a connection
//!   reset that fails a create which took effect (docs/semantics.md 4.12), after which a
//!   controller that keeps no expectation of it counts again;
//! - group plans (every race-directed perturbation at once) find the narrow KCP races
//!   within a few runs, and in two clean scenarios of v0.3.4 the documented
//!   health-recheck race, which no invariant of theirs checks;
//! - with the invariants off, the differential oracle alone catches the machine-api and
//!   PodSet bugs;
//! - swarm mode switches generators off without moving the others' faults.

#[path = "../examples/podset/controller.rs"]
#[allow(dead_code)]
mod controller;
#[path = "../examples/podset/harness.rs"]
#[allow(dead_code)]
mod harness;

use reconsim::families::builtin;
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::search::{SearchConfig, SearchReport, search};
use reconsim::scenario::{Expect, Families, Scenario, explain, faults, library, shrink};
use reconsim::sim::{Fault, TraceMode};
use std::sync::Mutex;

fn jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn shipped(name: &str) -> Scenario {
    library::load(name, &builtin()).unwrap().1
}

/// Search `scenario`, keeping the failure file of each failing plan.
fn run(scenario: &Scenario, config: &SearchConfig) -> (SearchReport, Vec<FailureFile>) {
    let (report, keyed) = run_keyed(scenario, config);
    (report, keyed.into_iter().map(|(_, f)| f).collect())
}

/// [`run`], each file with its plan's (seed, place in the run order), by time.
type Keyed = Vec<((u64, usize), FailureFile)>;
fn run_keyed(scenario: &Scenario, config: &SearchConfig) -> (SearchReport, Keyed) {
    let files = Mutex::new(Vec::new());
    let report = search(scenario, config, &|seed, i, c, outcome, plan| {
        let f = c
            .failure_file(scenario, plan, outcome)
            .expect("a violation");
        files.lock().unwrap().push(((seed, i), f));
    });
    let mut files = files.into_inner().unwrap();
    files.sort_by_key(|(key, f)| (f.time_ms, *key));
    (report, files)
}

/// Single perturbations only: no pairs, no group plans.
fn singles(max_plans: usize) -> SearchConfig {
    SearchConfig {
        max_plans,
        jobs: jobs(),
        pairs: false,
        groups: false,
        ..Default::default()
    }
}

#[test]
fn search_finds_the_frozen_leaders_second_instance_and_its_file_replays_shrinks_and_explains() {
    // machineapi-lease-expiry-pause: random seeds fail on 47 of 500. Search places the
    // scenario's own VM freeze just before the leader's RunInstances call.
    let s = shipped("machineapi-lease-expiry-pause");
    let config = SearchConfig {
        stop_on_first: true,
        ..singles(50)
    };
    let (report, files) = run(&s, &config);
    assert!(report.seeds[0].reference.violation.is_none());
    let first = report.seeds[0]
        .first_failure_plan
        .expect("found within 50 plans");
    assert!(first < 20, "first failing plan #{first}");
    assert_eq!(report.runs_to_first_failure, Some(first + 2));
    let f = &report.failures[0];
    assert_eq!(f.invariant, "no_duplicate_machines");
    assert!(
        f.description.contains("freeze host master-0"),
        "{}",
        f.description
    );

    let file = &files[0];
    assert!(
        file.plan.faults.iter().all(|f| f.on.is_some()),
        "anchored faults"
    );
    let replay = file.replay(TraceMode::Hash);
    assert!(replay.reproduced, "{:?}", replay.invariant);
    // Through JSON and back, as a file on disk would.
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("search-{}.json", std::process::id()));
    file.save(&path).unwrap();
    let loaded = FailureFile::load(&path, &builtin()).unwrap();
    assert!(loaded.replay(TraceMode::Hash).reproduced);
    let (small, shrunk) = shrink::shrink(&loaded, 200);
    assert_eq!(shrunk.faults_after, 1);
    assert!(small.replay(TraceMode::Hash).reproduced);
    let text = explain::explain(&small).expect("a violation").faults;
    assert!(
        text.contains("before call of machine-controller-0"),
        "{text}"
    );
    std::fs::remove_file(&path).ok();
}

#[test]
fn search_reports_the_same_whatever_the_jobs() {
    let s = shipped("kcp-upgrade-stale-leader-candidate");
    let one = SearchConfig {
        jobs: 1,
        ..singles(100)
    };
    let two = SearchConfig {
        jobs: 3,
        ..one.clone()
    };
    let (a, _) = run(&s, &one);
    let (b, _) = run(&s, &two);
    assert!(!a.failures.is_empty());
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::to_value(&b).unwrap()
    );
    // With stop_on_first the report stops at the same first plan.
    let (c, _) = run(
        &s,
        &SearchConfig {
            stop_on_first: true,
            ..two
        },
    );
    assert_eq!(c.failures.len(), 1);
    assert_eq!(c.seeds[0].first_failure_plan, a.seeds[0].first_failure_plan);
}

#[test]
fn search_finds_the_stale_cache_race_of_the_fixed_machine_api_and_the_idempotent_create_closes_it()
{
    // The leader-election fix alone still launches a second instance when a reconcile
    // reads a cache without the instance's id while the cloud's DescribeInstances
    // cannot see the new instance yet (tests/machineapi.rs keeps a fixture of it from
    // before the default watch latency; with it, 42 of the scenario's 200 seeds fail).
    // Seed 0 holds; search finds the race from it with single perturbations: a broken
    // watch or a lost answer of the Machine controller's, or a stale read or late
    // event that lines its reconcile up with a cache behind its own patch.
    let s = shipped("machineapi-leader-election");
    let config = SearchConfig {
        differential: true,
        ..singles(5000)
    };
    let (report, files) = run_keyed(&s, &config);
    assert!(!report.failures.is_empty());
    let mut launches = Vec::new();
    for f in &report.failures {
        assert_eq!(f.invariant, "no_duplicate_machines");
        let file = file_of(&files, f);
        // The MachineSet's ambiguous create is another race, of another controller,
        // which no client token closes (every_clean_scenario_holds_... has it).
        if ambiguous_create(file, &f.description) {
            assert!(f.description.contains("machineset-controller-0"));
            continue;
        }
        if late_own_create(f) {
            continue;
        }
        // Every other finding is this race: one Machine, two instances launched by the
        // Machine controller.
        assert!(
            file.message.contains("has 2 non-terminated instances"),
            "an unexpected failure of the fixed scenario: {}: {}",
            f.description,
            file.message
        );
        launches.push(file);
    }
    // The client token (idempotent RunInstances) is the fix: every one of those plans
    // holds with it.
    assert!(!launches.is_empty());
    for file in launches {
        let mut fixed = file.clone();
        fixed
            .scenario
            .controllers
            .get_mut::<reconsim::families::machineapi::MachineApiSpec>()
            .unwrap()
            .idempotent_create = true;
        assert!(fixed.replay(TraceMode::Hash).outcome.violation.is_none());
    }
}

/// Every failure a clean scenario shows over its single-perturbation plans, by its
/// invariants or by the differential oracle, but the known races of the modelled code;
/// and how many ambiguous creates there were. Within the scenario's fault envelope
/// (`beyond` false) a late own create is a failure like any other (it needs a 30 s
/// watch delay).
fn clean_failures(s: &Scenario, beyond: bool) -> (Vec<String>, usize) {
    let config = SearchConfig {
        differential: true,
        beyond_envelope: beyond,
        ..singles(100_000)
    };
    let (report, files) = run_keyed(s, &config);
    assert!(report.seeds[0].reference.violation.is_none(), "{}", s.name);
    assert_eq!(files.len(), report.failures.len());
    let mut other = Vec::new();
    let mut ambiguous = 0;
    for f in &report.failures {
        let file = file_of(&files, f);
        assert_eq!(f.beyond_envelope, file.beyond_envelope, "{}", f.description);
        if !beyond {
            assert!(f.beyond_envelope.is_empty(), "{}", f.description);
        }
        if ambiguous_create(file, &f.description) {
            ambiguous += 1;
        } else if (beyond && late_own_create(f)) || health_recheck(file) {
            // Known races of the modelled code (the two functions below say which).
        } else {
            other.push(format!(
                "{}: plan #{} {} -> {}",
                s.name, f.plan, f.description, f.invariant
            ));
        }
    }
    (other, ambiguous)
}

/// The MachineSet controller waits up to 10 s for its cache to show each Machine it
/// created and keeps no expectations (docs/seeds/machine-api.md): a watch event of its
/// own create delayed 30 s (search's `delay_event`, past the scenario's own envelope,
/// issue 31) outlives the wait, and its next reconcile counts one Machine too few and
/// creates another. The real controller's weakness, not the simulator's.
fn late_own_create(f: &reconsim::scenario::search::SearchFailure) -> bool {
    f.invariant == "no_duplicate_machines"
        && f.description.starts_with("delay_event:")
        && f.description.contains("to machineset-controller-0")
        && f.description.contains("Added Machine")
}

/// The v0.3.4 KCP's health-check re-list race (kcp-upgrade-health-recheck-race, which
/// PR #2958 does not fix): a differential finding whose plan, with `kcp_max_surge`
/// checked, exceeds the max surge (one Machine too many, created and deleted).
fn health_recheck(file: &FailureFile) -> bool {
    if file.invariant != reconsim::scenario::search::DIFFERENTIAL
        || !file.scenario.name.starts_with("kcp-")
    {
        return false;
    }
    let mut surge = file.scenario.clone();
    surge.invariants.push("kcp_max_surge".into());
    let (outcome, _) = reconsim::scenario::runner::run_world(
        &surge,
        file.seed,
        file.plan.clone(),
        TraceMode::Hash,
    );
    outcome
        .violation
        .is_some_and(|v| v.invariant == "kcp_max_surge")
}

/// The failure file of a search's failure.
fn file_of<'a>(files: &'a Keyed, f: &reconsim::scenario::search::SearchFailure) -> &'a FailureFile {
    files
        .iter()
        .find(|(key, _)| *key == (f.seed, f.plan))
        .map(|(_, file)| file)
        .expect("each failure has its file")
}

/// The ambiguous create (docs/semantics.md 4.12): the plan resets the controller's
/// connection (a lost watch event or answer), a create of its that took effect fails
/// with it ("timed out": the reconcile cannot tell), and the controller, which keeps no
/// expectation of what failed (Kubernetes' ReplicaSet does not either), creates one
/// too many. Told by the plan, the violation's message and the explanation, which must
/// show that failed create.
fn ambiguous_create(file: &FailureFile, description: &str) -> bool {
    let reset = description.starts_with("drop_event:") || description.starts_with("lose_answer:");
    let too_many = file.message.contains("was created")
        || (file.invariant == "podset_max_pods" && file.message.contains("active Pods"));
    if !(reset && too_many) {
        return false;
    }
    let story = explain::explain(file).expect("it replays").lines;
    story.iter().any(|line| {
        line.contains("ends in error")
            && line.contains("timed out")
            && line.to_lowercase().contains("creat")
    })
}

#[test]
fn every_clean_scenario_holds_over_its_single_perturbations_within_its_envelope() {
    // What a user's `search` runs: no ambiguous create, no late own create (both need
    // faults these scenarios do not declare: a lost answer of a host no partition
    // drops, a watch event 30 s late where 5 s is the most), and no failure but the
    // v0.3.4 KCP's health-check re-list race, a real race within the envelope (a
    // declared node-join delay; `health_recheck` tells it by the surge it exceeds).
    let mut failures = Vec::new();
    for path in library::files().unwrap() {
        let s = Scenario::load(&path, &builtin()).unwrap();
        if s.expect != Expect::Clean {
            continue;
        }
        let (other, ambiguous) = clean_failures(&s, false);
        assert_eq!(ambiguous, 0);
        failures.extend(other);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_clean_scenario_holds_over_its_single_perturbations() {
    // Beyond the envelope (Sieve's fixed values), the known races of the modelled
    // controllers show, and nothing else.
    let mut failures = Vec::new();
    let mut ambiguous = Vec::new();
    for path in library::files().unwrap() {
        let s = Scenario::load(&path, &builtin()).unwrap();
        if s.expect != Expect::Clean {
            continue;
        }
        let (other, n) = clean_failures(&s, true);
        failures.extend(other);
        if n > 0 {
            ambiguous.push(s.name.clone());
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The MachineSet and KCP controllers keep nothing of a create that failed, and
    // count an ambiguous create twice; the MCO's render controller names its configs
    // by their content, so a second create is AlreadyExists, and never does.
    assert!(
        !ambiguous.is_empty() && ambiguous.iter().all(|n| !n.starts_with("mco-")),
        "{ambiguous:?}"
    );
}

fn podset_families() -> Families {
    builtin().with(harness::extensions())
}

fn podset(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/podset/scenarios")
        .join(format!("{name}.json"));
    Scenario::load(&path, &podset_families()).unwrap()
}

#[test]
fn the_podset_example_is_caught_by_search_and_its_fixes_hold_over_every_single_plan() {
    for fixed in ["podset-fixed", "podset-deposed-leader-fenced"] {
        // Expectations do not survive a create that failed (controller.rs): the
        // ambiguous create may still count twice, in Kubernetes as here: within the
        // envelope too, since podset-fixed declares a partition that drops messages of
        // master-0, where its controller runs, and a lost answer is one.
        for beyond in [false, true] {
            let (failures, _) = clean_failures(&podset(fixed), beyond);
            assert!(failures.is_empty(), "{failures:#?}");
        }
    }
    // podset-deposed-leader's envelope is its own two faults: a 1 s pause at 0 and a
    // holding partition of master-0 starting in a 20 ms window at 60 s (its random
    // seeds draw both, and fail). Search's singles within it do not find it in 50
    // plans; beyond it they do, pausing the leader past its lease.
    for (buggy, beyond) in [("podset-buggy", false), ("podset-deposed-leader", true)] {
        let config = SearchConfig {
            stop_on_first: true,
            beyond_envelope: beyond,
            ..singles(50)
        };
        let (report, _) = run(&podset(buggy), &config);
        assert!(
            report.runs_to_first_failure.is_some_and(|r| r <= 20),
            "{buggy}: {:?}",
            report.runs_to_first_failure
        );
        // Under the default watch latency podset-buggy's fault-free reference run fails
        // already (the first run): its violation is the reference's.
        let first = report.failures.first().map_or_else(
            || {
                report.seeds[0]
                    .reference
                    .violation
                    .as_ref()
                    .map(|v| v.invariant.as_str())
            },
            |f| Some(f.invariant.as_str()),
        );
        assert_eq!(first, Some(harness::MAX_PODS), "{buggy}");
    }
}

#[test]
fn search_plans_are_causal_and_anchored_in_the_scenarios_windows() {
    let s = shipped("kcp-upgrade-counts-deleting-3");
    let (_, world) = reconsim::scenario::runner::run_world_recording(
        &s,
        0,
        Default::default(),
        TraceMode::Hash,
        true,
    );
    let decisions = world.sim.decisions();
    let config = SearchConfig::default();
    let (plans, [generated, pruned, groups, singles, _]) =
        reconsim::scenario::search::plans(&s, &world, &config);
    assert!(
        pruned > 0 && generated >= pruned + singles && groups > 0,
        "{generated} {pruned} {groups} {singles}"
    );
    let decision = |anchor: &reconsim::sim::Anchor| {
        decisions
            .iter()
            .find(|d| d.process == anchor.process && d.event == anchor.event && d.nth == anchor.nth)
            .expect("every anchor is a decision of the reference run")
    };
    // Group plans are the singles of their kinds, at once.
    for p in &plans[..groups] {
        assert!(p.faults.faults.len() > 1, "{}", p.description);
        for f in &p.faults.faults {
            decision(f.on.as_ref().expect("anchored"));
        }
    }
    for p in &plans[groups..groups + singles] {
        let f = &p.faults.faults[0];
        let anchor = f.on.as_ref().expect("anchored");
        let d = decision(anchor);
        match p.kinds[0].as_str() {
            // A controller's read, paused right after it.
            "stale_read" => {
                assert_eq!(anchor.event, reconsim::sim::EventClass::Read);
                assert!(matches!(&f.fault, Fault::Pause { process } if *process == d.process));
            }
            // A write, its writer paused just before it.
            "late_write" => {
                assert_eq!(anchor.event, reconsim::sim::EventClass::Write);
                assert_eq!(anchor.position, reconsim::sim::Position::Before);
            }
            // A controller that reads or watches what was written resyncs after it.
            "interleave" | "straddle" => {
                let Fault::Inject { process, .. } = &f.fault else {
                    panic!("{}", p.description)
                };
                assert!(decisions.iter().any(|x| x.process == *process
                    && x.subject == d.subject
                    && matches!(
                        x.event,
                        reconsim::sim::EventClass::Read | reconsim::sim::EventClass::WatchEvent
                    )));
            }
            _ => {}
        }
        if p.kinds[0].starts_with("scenario:") {
            // The scenario's generators strike within their own windows.
            let gi: usize = p.kinds[0]["scenario:".len()..].parse().unwrap();
            let w = s.faults[gi].at_ms;
            assert!(w.lo <= d.time_ms && d.time_ms <= w.hi, "{}", p.description);
        }
        if p.kinds[0] == "crash_after" {
            // Causality: the reconcile went on from that step's answer.
            let i = decisions.iter().position(|x| std::ptr::eq(x, d)).unwrap();
            assert!(decisions.iter().any(|x| x.after_answer_of == Some(i)));
        }
        if let Fault::DelayMessage { .. } = f.fault {
            assert_eq!(anchor.event, reconsim::sim::EventClass::WatchEvent);
        }
    }
}

#[test]
fn swarm_mode_keeps_each_generators_faults_and_switches_some_off() {
    let s = shipped("kcp-upgrade-counts-deleting-3");
    let mut some_off = false;
    for seed in 0..50 {
        let mask = faults::swarm_mask(&s, seed);
        assert_eq!(mask, faults::swarm_mask(&s, seed), "deterministic");
        assert!(mask.contains(&true));
        some_off |= mask.contains(&false);
        let full = faults::generate(&s, seed);
        let swarm = faults::generate_swarm(&s, seed);
        // Each fault of the swarm plan is one the full plan has.
        for f in &swarm.faults {
            assert!(full.faults.contains(f));
        }
        assert!(swarm.faults.len() <= full.faults.len());
    }
    assert!(some_off);
}

#[test]
fn search_arms_a_scenarios_failpoints_hit_by_hit() {
    // The 4.5 Machine controller crashed at its failpoint between RunInstances and the
    // write of the instance's id: without a client token, a second instance.
    let text = std::fs::read_to_string("scenarios/machineapi-leader-election.json").unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["controllers"]["machine_api"]["variant"] = "no-leader-election".into();
    doc["controllers"]["machine_api"]["idempotent_create"] = false.into();
    doc["faults"] = serde_json::json!([{
        "count": [1, 1], "at_ms": [60000, 60000], "duration_ms": [1140000, 1140000],
        "fault": {"failpoint": {"processes": ["machine-controller-0"],
                                "name": "after-run-instances", "hit": [1, 2],
                                "action": "crash", "for_ms": [10, 500]}}
    }]);
    let s = Scenario::parse("failpoint.json", &doc.to_string(), &builtin()).unwrap();
    let (_, world) = reconsim::scenario::runner::run_world_recording(
        &s,
        0,
        Default::default(),
        TraceMode::Hash,
        true,
    );
    let (plans, _) = reconsim::scenario::search::plans(&s, &world, &SearchConfig::default());
    let failpoint_plans: Vec<_> = plans.iter().filter(|p| p.kinds == ["scenario:0"]).collect();
    assert_eq!(failpoint_plans.len(), 2, "one plan per hit");
    assert!(failpoint_plans[0].description.contains("from 60000 ms"));
    let (report, _) = run(&s, &singles(10));
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.description.starts_with("scenario:0")
                && f.invariant == "no_duplicate_machines"),
        "{:#?}",
        report.failures
    );
}

#[test]
fn with_faults_each_reference_is_its_seeds_fuzz_run() {
    let s = shipped("machineapi-lease-expiry-pause");
    let config = SearchConfig {
        seed: 3,
        seeds: 3,
        max_plans: 1,
        pairs: false,
        base: reconsim::scenario::search::Base::Generated,
        ..Default::default()
    };
    let (report, _) = run(&s, &config);
    for r in &report.seeds {
        let (outcome, _) = reconsim::scenario::run(&s, r.seed);
        assert_eq!(
            r.reference.trace_hash, outcome.trace_hash,
            "seed {}",
            r.seed
        );
    }
    // Seed 5 is the first whose own plan fails: its reference run is that failure.
    assert_eq!(report.first_failure(), Some((5, None)));
    assert_eq!(report.runs_to_first_failure, Some(5));
}

#[test]
fn with_invariants_off_the_differential_oracle_alone_catches_the_machine_api_and_podset_bugs() {
    let blind = |mut s: Scenario| {
        s.invariants.clear();
        s.convergence = None;
        s
    };
    let config = SearchConfig {
        stop_on_first: true,
        differential: true,
        ..singles(50)
    };
    let cases = [
        blind(shipped("machineapi-no-leader-election")),
        blind(podset("podset-buggy")),
    ];
    for s in &cases {
        // Blind, the invariants see nothing.
        let (plain, _) = run(
            s,
            &SearchConfig {
                differential: false,
                stop_on_first: false,
                ..config.clone()
            },
        );
        assert!(plain.failures.is_empty(), "{}", s.name);
        let (report, files) = run(s, &config);
        let f = report
            .failures
            .first()
            .unwrap_or_else(|| panic!("{}: found", s.name));
        assert_eq!(f.invariant, reconsim::scenario::search::DIFFERENTIAL);
        let file = &files[0];
        assert!(
            file.message.contains("ends differently"),
            "{}",
            file.message
        );
        let replay = file.replay(TraceMode::Hash);
        assert!(replay.reproduced, "{}: {:?}", s.name, replay.invariant);
        let (small, _) = shrink::shrink(file, 100);
        assert!(small.replay(TraceMode::Hash).reproduced);
        assert_eq!(small.invariant, reconsim::scenario::search::DIFFERENTIAL);
    }
}

#[test]
fn coverage_guided_search_is_the_same_for_any_jobs_and_finds_the_frozen_leader() {
    let s = shipped("machineapi-lease-expiry-pause");
    let config = SearchConfig {
        coverage: true,
        max_plans: 60,
        jobs: 1,
        ..Default::default()
    };
    let (a, _) = run(&s, &config);
    let (b, _) = run(
        &s,
        &SearchConfig {
            jobs: 3,
            ..config.clone()
        },
    );
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::to_value(&b).unwrap()
    );
    assert_eq!(a.seeds[0].runs, 60, "the budget, mutations included");
    let first = a.seeds[0].first_failure_plan.expect("found");
    assert!(first < 20, "#{first}");
    // About half the runs are mutations of plans that reached new coverage.
    assert!(a.seeds[0].mutations >= 20, "{}", a.seeds[0].mutations);
    let (_, world) = reconsim::scenario::runner::run_world_recording(
        &s,
        0,
        Default::default(),
        TraceMode::Hash,
        true,
    );
    let sig = reconsim::scenario::search::signature(world.sim.decisions());
    assert!(sig.len() > 10, "{}", sig.len());
    assert_eq!(
        sig,
        reconsim::scenario::search::signature(world.sim.decisions())
    );
}

#[test]
fn group_plans_find_the_narrow_kcp_races_within_a_few_runs_of_every_seed() {
    // Random seeds fail about one in 56 (counts-deleting-3), one in 125
    // (health-recheck-race) and one in 31 (stale-leader-candidate) under the default
    // watch latency (9, 4 and 16 of 500; docs/seeds/kcp.md). Within the scenarios' fault
    // envelope (the default), the group plans find the first two from every seed within
    // 8 runs (before the envelope, health-recheck-race from seeds 0 and 2 took 457 and
    // 319); stale-leader-candidate's from seed 0. From seeds 1-3 its group plans hold
    // only race pauses of at most the declared 5 s, which miss it, and the scenario's
    // own faults find it in 17-53 runs; `--beyond-envelope` groups, with their longer
    // pauses, within 8.
    for (name, seeds, beyond, runs_max) in [
        ("kcp-upgrade-counts-deleting-3", &[0, 1, 2, 3][..], false, 8),
        (
            "kcp-upgrade-health-recheck-race",
            &[0, 1, 2, 3][..],
            false,
            8,
        ),
        ("kcp-upgrade-stale-leader-candidate", &[0][..], false, 8),
        (
            "kcp-upgrade-stale-leader-candidate",
            &[1, 2, 3][..],
            false,
            60,
        ),
        (
            "kcp-upgrade-stale-leader-candidate",
            &[1, 2, 3][..],
            true,
            8,
        ),
    ] {
        let s = shipped(name);
        for &seed in seeds {
            let config = SearchConfig {
                seed,
                max_plans: 100,
                stop_on_first: true,
                jobs: jobs(),
                beyond_envelope: beyond,
                ..Default::default()
            };
            let (report, files) = run(&s, &config);
            let runs = report.runs_to_first_failure;
            assert!(
                runs.is_some_and(|r| r <= runs_max),
                "{name} seed {seed} beyond {beyond}: {runs:?}"
            );
            // What was found within the envelope says nothing of going beyond it.
            if let (false, Some(f)) = (beyond, report.failures.first()) {
                assert!(f.beyond_envelope.is_empty(), "{name} seed {seed}");
                assert!(files[0].beyond_envelope.is_empty(), "{name} seed {seed}");
            }
            // Its file shrinks to the few faults that matter, and the shrunk file is
            // what replays.
            let (small, shrunk) = shrink::shrink(&files[0], 300);
            assert_eq!(small.plan.len(), shrunk.faults_after, "{name} seed {seed}");
            assert!(
                small.replay(TraceMode::Hash).reproduced,
                "{name} seed {seed}"
            );
        }
    }
}

#[test]
fn group_plans_find_the_health_recheck_race_of_v0_3_4_where_no_invariant_checks_it() {
    // kcp-upgrade-health-recheck-race documents the race: ClusterStatus counts the
    // control-plane Nodes before a joining Node's, reconcileHealth re-reads after the
    // Machine's NodeRef landed and passes, and one Machine too many is created. These
    // two clean scenarios run the same v0.3.4 code and check what PR #2958 fixed, not
    // the max surge: their singles hold (every_clean_scenario_holds_over_its_single_
    // perturbations), but a group plan lines a stale read up with the NodeRef, and the
    // differential oracle sees the extra Machine. With kcp_max_surge on, the same
    // shrunk plan violates it: the same race, not a defect of the simulator. In
    // waits-for-deletion-1 a single finds it within the scenario's fault envelope, a
    // node's join delayed after the new Machine's patch (plan #145 of seed 0): a real
    // race of v0.3.4 in the world the scenario declares. In scale-races-upgrade the
    // group plans find it at plan #0 with `--beyond-envelope` (their race pauses past
    // the declared 5 s); within the envelope no plan of seed 0's 500 does.
    for (name, max_plans, group, beyond) in [
        ("kcp-upgrade-waits-for-deletion-1", 200, false, false),
        ("kcp-upgrade-scale-races-upgrade", 8, true, true),
    ] {
        let s = shipped(name);
        let config = SearchConfig {
            max_plans,
            stop_on_first: true,
            differential: true,
            jobs: jobs(),
            pairs: false,
            beyond_envelope: beyond,
            ..Default::default()
        };
        let (report, files) = run(&s, &config);
        let first = report
            .failures
            .first()
            .unwrap_or_else(|| panic!("{name}: nothing in {max_plans} plans"));
        assert_eq!(first.invariant, reconsim::scenario::search::DIFFERENTIAL);
        assert_eq!(
            first.description.contains("at once"),
            group,
            "{name}: {}",
            first.description
        );
        let (small, shrunk) = shrink::shrink(&files[0], 300);
        assert_eq!(small.plan.len(), shrunk.faults_after);
        assert!(small.plan.len() <= 3, "{name}: {:?}", small.plan);
        assert!(
            small.message.contains("Machine"),
            "{name}: {}",
            small.message
        );
        let mut surge = small.scenario.clone();
        surge.invariants.push("kcp_max_surge".into());
        let (outcome, _) = reconsim::scenario::runner::run_world(
            &surge,
            small.seed,
            small.plan.clone(),
            TraceMode::Hash,
        );
        let v = outcome.violation.expect("the max surge is exceeded");
        assert_eq!(v.invariant, "kcp_max_surge", "{name}");
        // explain tells a differential finding as replay judges it (it once said "NOT
        // reproduced", judging by the invariants alone), with the objects the masked
        // names stand for: the Machines.
        let told = reconsim::scenario::explain::explain(&small)
            .unwrap_or_else(|r| panic!("{name}: explained as replayed: {:?}", r.invariant));
        assert!(
            told.objects.iter().any(|o| o.starts_with("controlplane-")),
            "{name}: {:?}",
            told.objects
        );
        assert!(
            told.lines.iter().any(|l| l.contains("create Machine")),
            "{name}"
        );
    }
}

#[test]
fn exhaustive_search_covers_a_clean_scenarios_whole_depth_two_tree_the_same_for_any_jobs() {
    // Every ordering of two close requests, then of two more in each swapped run: the
    // whole tree of kcp-upgrade-waits-for-deletion-1's reference run is 682 runs, and
    // every one holds by its invariants and by the differential oracle (a false alarm
    // of the simulator under reordering would show here).
    // Swaps as Sieve-style windows make them (twice the longest latency): within the
    // scenario's envelope its 2 s slow link lets requests up to 2 s apart swap, a tree
    // of more than 5,000 runs.
    let s = shipped("kcp-upgrade-waits-for-deletion-1");
    let config = SearchConfig {
        exhaustive: Some(2),
        max_plans: 5_000,
        differential: true,
        beyond_envelope: true,
        ..singles(5_000)
    };
    let (report, _) = run(&s, &config);
    let one = &report.seeds[0];
    assert!(report.failures.is_empty(), "{:#?}", report.failures);
    assert_eq!(one.depth, 2);
    // The whole tree ran (no budget cut it), and runs that repeated an interleaving
    // already seen were not explored again.
    assert_eq!(one.runs, one.generated);
    assert!(one.runs > 100 && one.repeats > 0, "{one:?}");
    // The same tree, the same order, whatever the jobs.
    let small = |jobs| SearchConfig {
        jobs,
        max_plans: 80,
        ..config.clone()
    };
    let (a, _) = run(&s, &small(1));
    let (b, _) = run(&s, &small(2));
    let key = |r: &SearchReport| {
        let s = &r.seeds[0];
        (r.runs, s.generated, s.repeats, s.depth, r.events)
    };
    assert_eq!(key(&a), key(&b));
    assert_eq!(a.seeds[0].runs, 80);
}
