//! The combined campaign (what `check` runs) against random seeds alone, side by side in
//! one run: for every shipped violation scenario (and the PodSet example's), the runs
//! each needs until its first failure.
//!
//! - random: seeds 0, 1, 2, ... in order until one fails (at most `RANDOM_RUNS_MAX`),
//!   as `check --campaign seeds` runs them; and its hit rate over `RATE_SEEDS` seeds
//!   (failing seeds / seeds), whose inverse is the runs a random campaign needs on
//!   average;
//! - combined: the runs to the first failure of `check`'s campaign from seed 0, and
//!   their mean over `STARTS` starting seeds (each arm from seed `1000 k`: other
//!   random and swarm seeds, other reference runs), and whether it failed within the
//!   scenario's budget (its `seeds` field, what `check` spends).
//!
//! `cargo bench --bench combined` prints a markdown table (docs/PERFORMANCE.md). Runs
//! are counted exactly (they are deterministic); wall times are measured in the same
//! process, one thread, so their ratio holds on a noisy machine.

#[path = "../../../examples/podset/controller.rs"]
#[allow(dead_code)]
mod controller;
#[path = "../../../examples/podset/harness.rs"]
#[allow(dead_code)]
mod harness;

use reconsim::families::builtin;
use reconsim::scenario::combined::{self, Config};
use reconsim::scenario::fuzz::{Campaign, fuzz};
use reconsim::scenario::{Expect, Families, Scenario, library, run};
use std::time::Instant;

const RANDOM_RUNS_MAX: u64 = 40_000;
const RATE_SEEDS: u64 = 2_000;
const STARTS: u64 = 10;

fn main() {
    let families = builtin().with(harness::extensions());
    let mut scenarios: Vec<Scenario> = Vec::new();
    for path in library::files().expect("scenarios/") {
        scenarios.push(Scenario::load(&path, &families).expect("a shipped scenario"));
    }
    let podset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/podset/scenarios");
    for name in ["podset-buggy", "podset-deposed-leader"] {
        let path = podset.join(format!("{name}.json"));
        scenarios.push(Scenario::load(&path, &families).expect("an example scenario"));
    }
    println!(
        "| scenario | budget | random: hit rate ({RATE_SEEDS} seeds) | random: runs to first failure | combined | random / combined | wall ms random / combined | combined's first failure | combined: mean runs ({STARTS} starts) | expected random / mean combined | combined within budget |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for s in scenarios.iter().filter(|s| s.expect == Expect::Violation) {
        row(s, &families);
    }
}

fn row(s: &Scenario, _families: &Families) {
    // Random seeds from 0, one thread, timed.
    let t = Instant::now();
    let mut random_runs = None;
    for seed in 0..RANDOM_RUNS_MAX {
        if run(s, seed).0.violation.is_some() {
            random_runs = Some(seed + 1);
            break;
        }
    }
    let random_ms = t.elapsed().as_millis();
    // The hit rate, on two threads (not timed).
    let rate = fuzz(
        s,
        Campaign {
            jobs: 2,
            ..Campaign::of_seeds(0, RATE_SEEDS, None)
        },
        &|_, _| {},
        &|_, _| {},
    );
    let hit = rate.failure_count as f64 / RATE_SEEDS as f64;
    // The combined campaign from seed 0, one thread, timed.
    let first = |start: u64, budget: u64, jobs: usize| {
        let config = Config {
            first_seed: start,
            stop_on_first: true,
            ..Config::new(budget, jobs)
        };
        combined::run(s, &config, &mut |_, _, _| {}, &|_, _| {})
    };
    let t = Instant::now();
    let c = first(0, RANDOM_RUNS_MAX, 1);
    let combined_ms = t.elapsed().as_millis();
    let combined_runs = c.first_failure().map(|f| f.index + 1);
    let how = c
        .first_failure()
        .map(|f| f.trial.label())
        .unwrap_or_else(|| "-".into());
    let mut total = 0u64;
    let mut found = 0u64;
    for k in 0..STARTS {
        let r = first(1000 * k, RANDOM_RUNS_MAX, 2);
        if let Some(f) = r.first_failure() {
            total += f.index + 1;
            found += 1;
        }
    }
    let mean = (found > 0).then(|| total as f64 / found as f64);
    let expected = (rate.failure_count > 0).then(|| RATE_SEEDS as f64 / rate.failure_count as f64);
    let fmt_opt = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
    println!(
        "| {} | {} | {:.1} % | {} | {} | {} | {random_ms} / {combined_ms} | {how} | {} | {} | {} |",
        s.name,
        s.seeds,
        hit * 100.0,
        fmt_opt(random_runs),
        fmt_opt(combined_runs),
        match (random_runs, combined_runs) {
            (Some(r), Some(c)) => format!("{:.1}x", r as f64 / c as f64),
            _ => "-".into(),
        },
        match mean {
            Some(m) if found < STARTS =>
                format!("{m:.1} ({} of {STARTS} starts found none)", STARTS - found),
            Some(m) => format!("{m:.1}"),
            None => "none".into(),
        },
        match (expected, mean) {
            (Some(e), Some(m)) => format!("{:.1}x", e / m),
            _ => "-".into(),
        },
        match combined_runs {
            Some(r) if r <= s.seeds => "yes".to_string(),
            Some(r) => format!("NO ({r} runs)"),
            None => "NO".into(),
        },
    );
}
