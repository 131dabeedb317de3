//! Differential oracles (crates/scenario/src/oracle.rs, docs/oracle.md): with every
//! invariant and the convergence bound switched off, comparing a run with its reference
//! run finds the shipped bugs, and says nothing of their fixes:
//! - machineapi-no-leader-election (its launches idempotent, so that its fault-free run
//!   is a right reference): every perturbed run ends unlike its fault-free reference
//!   (extra Machines made and removed; on most seeds extra live instances);
//! - podset-buggy, in a world without watch latency (with it the bug needs no fault and
//!   the reference has it too): the oracle flags exactly the seeds `podset_max_pods`
//!   flags, by the state-update summary (one Pod more created and deleted), since the
//!   PodSet ends right;
//! - machineapi-leader-election-idempotent and podset-fixed end as their references do
//!   under 50 of their own fault plans, although the raw names differ (the masks do
//!   work);
//! - divergence: without faults, mco-gc-in-use ends differently from seed to seed (its
//!   GC deletes a config in use, depending on timing), its fix does not.

#[path = "../examples/podset/controller.rs"]
#[allow(dead_code)]
mod controller;
#[path = "../examples/podset/harness.rs"]
#[allow(dead_code)]
mod harness;

use reconsim::scenario::oracle::{self, Comparison, Diff};
use reconsim::scenario::{Families, Plan, Scenario, faults, library, run, run_world};
use reconsim::sim::TraceMode;
use reconsim_world::object::{Lease, Resource};
use std::path::Path;

/// The builtin families and the PodSet example's.
fn families() -> Families {
    reconsim::families::builtin().with(harness::extensions())
}

/// A shipped scenario, or one of the PodSet example's.
fn load(name: &str) -> Scenario {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/podset/scenarios")
        .join(format!("{name}.json"));
    if example.exists() {
        return Scenario::load(&example, &families()).expect("the example's scenario loads");
    }
    library::load(name, &families())
        .expect("a shipped scenario")
        .1
}

/// `name` with no invariant and no convergence bound: only an oracle can find anything.
fn oracle_only(name: &str) -> Scenario {
    let mut s = load(name);
    s.invariants.clear();
    s.convergence = None;
    s
}

/// [`oracle_only`] with RunInstances idempotent (the Machine's uid as client token): the
/// stale-cache launch a watch latency gives one machine-api controller without faults
/// (docs/seeds/machine-api.md) is closed, so a fault-free run is a right reference and
/// what differs is the faults' doing.
fn oracle_only_idempotent(name: &str) -> Scenario {
    let mut s = oracle_only(name);
    s.controllers
        .get_mut::<reconsim::families::machineapi::MachineApiSpec>()
        .expect("a machine-api scenario")
        .idempotent_create = true;
    s
}

/// [`oracle_only`] in a world whose watch events leave with their writes
/// (`apiserver.watch_delay_ms` [0, 0]): where a bug needs a fault to show, as the
/// differential oracle's reference run needs (docs/oracle.md).
fn oracle_only_without_latency(name: &str) -> Scenario {
    let mut s = oracle_only(name);
    s.apiserver.watch_delay_ms = Some(reconsim::scenario::format::Range { lo: 0, hi: 0 });
    s
}

/// The perturbed run of `seed` (its generated fault plan) against its reference.
fn perturbed(s: &Scenario, seed: u64) -> Comparison {
    oracle::differential(s, seed, faults::generate(s, seed))
}

/// Whether some difference is about `what` (a prefix: `updates Pod`, `cloud live`).
fn mentions(diff: &Diff, what: &str) -> bool {
    diff.differences.iter().any(|d| d.what.starts_with(what))
}

#[test]
fn the_oracle_alone_catches_duplicate_machines_without_leader_election() {
    let s = oracle_only_idempotent("machineapi-no-leader-election");
    const SEEDS: u64 = 50;
    let (mut differ, mut extra_instances) = (0u64, 0u64);
    for seed in 0..SEEDS {
        let c = perturbed(&s, seed);
        assert!(c.reference.violation.is_none() && c.other.violation.is_none());
        assert_eq!(c.other_state.time_ms, s.duration_ms, "ran to the end");
        // Without faults one replica of each controller runs: the reference is right.
        let reference = c.reference_state.cloud.as_ref().expect("a cloud");
        assert_eq!(reference.live, 2, "seed {seed}: 2 instances for replicas 2");
        differ += u64::from(!c.diff.is_empty());
        let live = c.other_state.cloud.as_ref().map_or(0, |c| c.live);
        if live > reference.live {
            extra_instances += 1;
            assert!(mentions(&c.diff, "cloud live instances"), "{}", c.diff);
            assert!(mentions(&c.diff, "cloud instance"), "{}", c.diff);
        }
    }
    eprintln!(
        "machineapi-no-leader-election, oracle only: {differ} of {} seeds end unlike their \
         reference, {extra_instances} with extra live instances",
        SEEDS
    );
    assert_eq!(differ, SEEDS, "every perturbed run shows the bug");
    assert!(extra_instances * 2 > SEEDS, "most end with extra instances");

    // Seed 1, as docs/oracle.md shows it: two instances more, tagged for Machines.
    let c = perturbed(&s, 1);
    eprintln!("seed 1:\n{}", c.diff);
    let extra = c
        .diff
        .differences
        .iter()
        .find(|d| d.what == "cloud instance" && d.left.is_none())
        .expect("an instance the reference does not have");
    let tags = &extra.right.as_ref().unwrap()["tags"];
    assert_eq!(tags["Name"], "worker-us-west-2b-*", "{extra}");

    // The fixed variant's fault-free run is as good a reference: the same end.
    let fixed = oracle_only_idempotent("machineapi-leader-election");
    let c = oracle::compare(
        oracle::run(&fixed, 1, Plan::default()),
        oracle::run(&s, 1, faults::generate(&s, 1)),
    );
    assert!(mentions(&c.diff, "cloud live instances"), "{}", c.diff);
}

#[test]
fn the_oracle_alone_catches_the_buggy_podsets_extra_pod() {
    // With the default watch latency the buggy PodSet makes its extra Pod without any
    // fault, in the reference run too, where a differential oracle cannot see it.
    let mut checked = load("podset-buggy");
    checked.apiserver.watch_delay_ms = Some(reconsim::scenario::format::Range { lo: 0, hi: 0 });
    let s = oracle_only_without_latency("podset-buggy");
    const SEEDS: u64 = 200;
    let mut caught = Vec::new();
    let mut by_invariant = Vec::new();
    for seed in 0..SEEDS {
        let c = perturbed(&s, seed);
        if !c.diff.is_empty() {
            caught.push(seed);
            // The PodSet ends with the right Pods: only the summary shows the extra one,
            // one more created (and later deleted) than in the reference.
            assert!(
                c.diff
                    .differences
                    .iter()
                    .all(|d| d.what.starts_with("updates ")),
                "seed {seed}: {}",
                c.diff
            );
            let d = &c.diff.differences[0];
            assert_eq!(d.what, "updates Pod default/web-*", "{d}");
            let (l, r) = (d.left.as_ref().unwrap(), d.right.as_ref().unwrap());
            assert_eq!(r["created"], l["created"].as_u64().unwrap() + 1, "{d}");
        }
        if run(&checked, seed).0.violation.is_some() {
            by_invariant.push(seed);
        }
    }
    eprintln!(
        "podset-buggy: the oracle alone flags {} of {} seeds (first {:?}); podset_max_pods \
         flags {}",
        caught.len(),
        SEEDS,
        caught.first(),
        by_invariant.len()
    );
    assert!(!caught.is_empty(), "the oracle catches the buggy PodSet");
    assert_eq!(caught, by_invariant, "the same seeds as the invariant");
}

#[test]
fn fixed_scenarios_end_as_their_reference_runs_do() {
    for name in ["machineapi-leader-election-idempotent", "podset-fixed"] {
        let s = oracle_only(name);
        let mut raw_differ = 0;
        for seed in 0..50u64 {
            let plan = faults::generate(&s, seed);
            assert!(!plan.is_empty(), "{name} seed {seed}: some fault");
            let c = oracle::differential(&s, seed, plan.clone());
            assert!(c.diff.is_empty(), "{name} seed {seed}:\n{}", c.diff);
            assert_eq!(c.other_state.time_ms, s.duration_ms, "ran to the end");
            // Not vacuous: unmasked, the objects differ from the reference's.
            raw_differ += usize::from(raw(&s, seed, Plan::default()) != raw(&s, seed, plan));
        }
        eprintln!("{name}: 50 of 50 seeds end as their reference; unmasked, {raw_differ} differ");
        assert!(raw_differ > 0, "{name}: the masks had nothing to mask");
    }
}

/// The API server's objects at the end of a run as they are, in JSON (Leases left
/// out: they always differ).
fn raw(s: &Scenario, seed: u64, plan: Plan) -> String {
    let (_, world) = run_world(s, seed, plan, TraceMode::Hash);
    let view = reconsim::scenario::runner::view(&world);
    let objects: Vec<_> = view
        .api
        .objects()
        .filter(|o| o.kind() != Lease::KIND)
        .collect();
    serde_json::to_string(&objects).unwrap()
}

#[test]
fn divergence_flags_a_gc_that_deletes_a_config_in_use_and_not_its_fix() {
    let count = |name: &str| {
        let s = oracle_only(name);
        (1..20u64)
            .filter(|&seed| !oracle::divergence(&s, 0, seed).diff.is_empty())
            .count()
    };
    let (buggy, fixed) = (count("mco-gc-in-use"), count("mco-gc-in-use-and-in-flight"));
    eprintln!(
        "divergence from seed 0, no faults, seeds 1..20: mco-gc-in-use {buggy} of 19, \
         mco-gc-in-use-and-in-flight {fixed}"
    );
    assert!(buggy > 0, "the buggy GC ends differently from seed to seed");
    assert_eq!(fixed, 0, "the fix ends the same whatever the seed");
    // The duplicate controllers need faults (a second replica): without, no divergence.
    let s = oracle_only_idempotent("machineapi-no-leader-election");
    assert!(oracle::divergence(&s, 0, 1).diff.is_empty());
}

#[test]
fn an_end_state_is_the_same_for_the_same_run() {
    let s = oracle_only("machineapi-no-leader-election");
    let plan = faults::generate(&s, 3);
    let (a, b) = (
        oracle::run(&s, 3, plan.clone()).1,
        oracle::run(&s, 3, plan).1,
    );
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert!(a.diff(&b).is_empty());
}

/// The table of docs/oracle.md: every shipped scenario and the PodSet example's, seeds
/// 0..200, the oracles alone against the scenario's own invariants. Minutes long:
/// `cargo test --release --test all oracle::survey -- --ignored --nocapture`.
#[test]
#[ignore]
fn survey() {
    const SEEDS: u64 = 200;
    let mut names: Vec<String> = library::files()
        .expect("the scenarios directory")
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    names.extend(
        [
            "podset-buggy",
            "podset-fixed",
            "podset-deposed-leader",
            "podset-deposed-leader-fenced",
        ]
        .map(String::from),
    );
    println!("| scenario | expect | invariants | differential | both | divergence |");
    println!("|---|---|---|---|---|---|");
    for name in names {
        let checked = load(&name);
        let s = oracle_only(&name);
        let (mut invariant, mut differential, mut both, mut divergence) = (0, 0, 0, 0);
        for seed in 0..SEEDS {
            let caught = run(&checked, seed).0.violation.is_some();
            let flagged = !perturbed(&s, seed).diff.is_empty();
            invariant += u32::from(caught);
            differential += u32::from(flagged);
            both += u32::from(caught && flagged);
            if seed > 0 {
                divergence += u32::from(!oracle::divergence(&s, 0, seed).diff.is_empty());
            }
        }
        println!(
            "| {name} | {:?} | {invariant} | {differential} | {both} | {divergence} of {} |",
            checked.expect,
            SEEDS - 1
        );
    }
}
