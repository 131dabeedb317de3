//! The combined campaign (crates/scenario/src/combined.rs): one budget across random
//! seeds, swarm seeds and search plans, the same for any `--jobs`, each failure a run
//! that replays as it says, a time budget honoured as a prefix.

mod common;

use reconsim::families::builtin;
use reconsim::scenario::combined::{self, Arm, Config, Report};
use reconsim::scenario::runner::run_generated;
use reconsim::scenario::search::search;
use reconsim::scenario::{Scenario, library};

fn load(name: &str) -> Scenario {
    library::load(name, &builtin())
        .expect("a shipped scenario")
        .1
}

fn campaign(s: &Scenario, config: &Config) -> Report {
    combined::run(s, config, &mut |_, _, _| {}, &|_, _| {})
}

#[test]
fn the_campaign_is_the_same_for_any_jobs() {
    let s = load("kcp-upgrade-counts-deleting-3");
    let mut reports = Vec::new();
    for jobs in [1, 2, 5] {
        reports.push(campaign(&s, &Config::new(80, jobs)));
    }
    let key = |r: &Report| {
        (
            r.runs,
            r.rounds,
            r.trace_hash,
            r.signatures,
            r.failure_count,
            serde_json::to_string(&r.failures).unwrap(),
            serde_json::to_string(&r.arms).unwrap(),
        )
    };
    assert_eq!(key(&reports[0]), key(&reports[1]));
    assert_eq!(key(&reports[0]), key(&reports[2]));
    let r = &reports[0];
    assert_eq!(r.runs, 80);
    // Every arm ran, and the search arm found the narrow race random seeds rarely show.
    for arm in Arm::ALL {
        assert!(r.arm(arm).runs > 0, "{arm:?}");
    }
    assert!(r.arm(Arm::Search).failures > 0, "{:?}", r.arms);
    // One finding per invariant; every failure listed.
    assert_eq!(r.failures.len() as u64, r.failure_count);
    assert_eq!(
        r.failures.iter().filter(|f| f.finding).count() as u64,
        r.findings
    );
}

#[test]
fn every_failure_replays_as_its_arm_says() {
    let s = load("kcp-upgrade-counts-deleting-3");
    let config = Config::new(96, 2);
    let r = campaign(&s, &config);
    let mut seen = [false; 3];
    for f in &r.failures {
        let t = &f.trial;
        let hash = match (t.arm, t.plan) {
            (Arm::Seeds, _) => run_generated(&s, t.seed, false).0.trace_hash_hex(),
            (Arm::Swarm, _) => run_generated(&s, t.seed, true).0.trace_hash_hex(),
            (Arm::Search, None) => continue,
            (Arm::Search, Some(k)) => {
                // The search the replay line names (`search --seeds R..R+1 --max-plans
                // 48 --no-pairs --stop-on-first`) runs this plan as plan k, and fails
                // first at the campaign's first failing plan of that reference.
                let search_config = reconsim::scenario::search::SearchConfig {
                    seed: t.seed,
                    jobs: 2,
                    ..config.search()
                };
                let hashes = std::sync::Mutex::new(Vec::new());
                let report = search(&s, &search_config, &|_, i, _, o, _| {
                    hashes.lock().unwrap().push((i, o.trace_hash_hex()))
                });
                let first_of_seed = r
                    .failures
                    .iter()
                    .find(|g| g.trial.arm == Arm::Search && g.trial.seed == t.seed)
                    .unwrap();
                if std::ptr::eq(first_of_seed, f) {
                    assert_eq!(report.first_failure(), Some((t.seed, Some(k))), "{f:?}");
                }
                let hashes = hashes.into_inner().unwrap();
                hashes.iter().find(|(i, _)| *i == k).unwrap().1.clone()
            }
        };
        assert_eq!(hash, f.trace_hash, "{f:?}");
        seen[t.arm as usize] = true;
    }
    assert!(seen[0] && seen[2], "{:?}", r.failures);
}

#[test]
fn stop_on_first_ends_at_the_campaigns_first_failure() {
    let s = load("kcp-upgrade-machine-fix-only-1");
    let all = campaign(&s, &Config::new(64, 2));
    let first = all.first_failure().expect("the race is found").clone();
    let stopped = campaign(
        &s,
        &Config {
            stop_on_first: true,
            ..Config::new(64, 2)
        },
    );
    assert_eq!(stopped.runs, first.index + 1);
    assert_eq!(stopped.failures.len(), 1);
    assert_eq!(
        serde_json::to_string(&stopped.failures[0]).unwrap(),
        serde_json::to_string(&first).unwrap()
    );
}

#[test]
fn a_time_budget_makes_a_prefix_of_the_campaign() {
    let s = load("kcp-upgrade-counts-deleting-3");
    let cut = campaign(
        &s,
        &Config {
            time_budget: Some(std::time::Duration::from_millis(30)),
            ..Config::new(100_000, 2)
        },
    );
    assert!(cut.out_of_time);
    assert!(cut.runs < 100_000);
    let whole = campaign(&s, &Config::new(cut.runs, 2));
    assert_eq!(whole.trace_hash, cut.trace_hash, "the same runs, in order");
    assert!(!whole.out_of_time);
}

#[test]
fn the_split_is_the_stated_one_without_adaptation() {
    let s = load("machineapi-leader-election-idempotent");
    let r = campaign(
        &s,
        &Config {
            adaptive: false,
            ..Config::new(128, 2)
        },
    );
    let runs: Vec<u64> = Arm::ALL.iter().map(|a| r.arm(*a).runs).collect();
    assert_eq!(runs, [64, 32, 32]);
    // Without adaptation no signature is kept.
    assert_eq!(r.signatures, 0);
}

#[test]
fn oracle_findings_are_reported_as_such_and_replay_from_their_files() {
    use reconsim::scenario::failure::{FailureFile, Judge};
    use reconsim::scenario::search::{DIFFERENTIAL, DIVERGENCE};
    // Sieve's: the v0.3.4 KCP's health-check re-list race on a clean scenario, a
    // group plan that creates (and deletes) one Machine more than its reference run.
    let s = load("kcp-upgrade-waits-for-deletion-1");
    let config = Config {
        differential: true,
        stop_on_first: true,
        ..Config::new(200, 2)
    };
    let r = campaign(&s, &config);
    let f = r.first_failure().expect("the re-list race").clone();
    assert_eq!(
        (f.invariant.as_str(), f.trial.arm),
        (DIFFERENTIAL, Arm::Search),
        "{f:?}"
    );
    // Without the oracles the same runs hold every invariant.
    let plain = campaign(&s, &Config::new(f.index + 1, 2));
    assert!(plain.failures.is_empty(), "{:?}", plain.failures);
    let again = combined::rerun(&s, &config, &f.trial).unwrap();
    assert_eq!(again.trace_hash_hex(), f.trace_hash);

    // Kamera's: kcp-init-watch-latency's fault-free runs initialize twice on some seeds
    // and not on others; with an invariant that never fails there, only the divergence
    // of reference runs tells them apart. Reference runs only: no plans.
    let mut s = load("kcp-init-watch-latency");
    s.invariants = vec!["etcd_leader_candidate_has_node_ref".into()];
    let config = Config {
        differential: true,
        stop_on_first: true,
        split: combined::Split {
            seeds: 0,
            swarm: 0,
            search: 1,
        },
        plans_per_reference: 0,
        ..Config::new(40, 2)
    };
    let mut saved = None;
    let r = combined::run(
        &s,
        &config,
        &mut |f, outcome, plan| {
            let mut file = FailureFile::new(&s, plan, outcome).unwrap();
            file.diverges_from = f.diverges_from;
            saved = Some(file);
        },
        &|_, _| {},
    );
    let f = r.first_failure().expect("two schedules end apart").clone();
    assert_eq!(f.invariant, DIVERGENCE, "{f:?}");
    assert_eq!(f.diverges_from, Some(0));
    assert!(f.trial.seed > 0 && f.trial.plan.is_none(), "{f:?}");
    let file = saved.unwrap();
    assert_eq!(file.judge(), Judge::Divergence { from: 0 });
    let dir = common::scratch("combined-divergence");
    let path = dir.join("divergence.json");
    file.save(&path).unwrap();
    let loaded = FailureFile::load(&path, &builtin()).unwrap();
    let replay = loaded.replay(reconsim::sim::TraceMode::Hash);
    assert!(replay.reproduced, "{:?}", replay.invariant);
    // A divergence names its other seed and has no faults; nothing else names one.
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tampered = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut d = doc.clone();
        edit(&mut d);
        FailureFile::parse("t.json", &d.to_string(), &builtin()).unwrap_err()
    };
    let e = tampered(&|d| {
        d.as_object_mut().unwrap().remove("diverges_from");
    });
    assert_eq!(e.path, ".diverges_from", "{e}");
    let e = tampered(&|d| d["invariant"] = "etcd_leader_candidate_has_node_ref".into());
    assert_eq!(e.path, ".diverges_from", "{e}");
    let e = tampered(
        &|d| d["plan"] = serde_json::json!([{"at_ms": 5, "duration_ms": 5, "fault": {"kind": "pause", "process": "kcp-controller"}}]),
    );
    assert!(e.path == ".plan" && e.message.contains("fault-free"), "{e}");
}

#[test]
fn the_signature_the_kernel_folds_in_is_the_one_of_its_decision_points() {
    use reconsim::scenario::build::Keep;
    use reconsim::scenario::runner::run_world_keeping;
    let keep = Keep {
        decisions: true,
        signature: true,
    };
    for name in [
        "kcp-upgrade-counts-deleting-3",
        "machineapi-lease-expiry-pause",
        "mco-gc-in-use",
    ] {
        let s = load(name);
        for seed in 0..3 {
            let plan = reconsim::scenario::faults::generate(&s, seed);
            let (_, mut world) =
                run_world_keeping(&s, seed, plan, reconsim::sim::TraceMode::Hash, keep);
            let from_decisions: Vec<u64> =
                reconsim::sim::signature::of_decisions(world.sim.decisions())
                    .into_iter()
                    .collect();
            assert!(!from_decisions.is_empty());
            assert_eq!(world.sim.signature(), from_decisions, "{name} seed {seed}");
        }
    }
}
