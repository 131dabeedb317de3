//! Search against random seeds, side by side in one run: for every shipped violation
//! scenario (and the PodSet example's), the runs each needs until its first failure.
//!
//! - random: seeds 0, 1, 2, ... in order, one run each, until one fails (at most
//!   `RANDOM_RUNS_MAX`), as `fuzz --stop-on-first --jobs 1` would;
//! - search: reference seeds 0, 1, ... with at most `PLANS` plans each, single
//!   perturbations then pairs, reference runs counted, as `search --stop-on-first
//!   --max-plans 50 --seeds 0..10 --jobs 1` would: fault-free references (Sieve's), and
//!   references that carry their seed's own faults (`--with-faults`).
//!
//! A first failing seed is one draw of chance (a lucky seed 9 of a race that fails one
//! seed in 100), so beside it, the expected cost of each way:
//! - random: `RATE_SEEDS` seeds run (on two threads; not timed), and the runs a
//!   campaign needs on average to see a failure, seeds / failing seeds (the mean of
//!   a geometric draw);
//! - search: the mean, over starting seeds 0..`STARTS`, of the runs to the first
//!   failure of `search --seeds S..S+10` (each start a different reference run).
//!
//! Plus the race search found in a fixed scenario (machineapi-leader-election's stale
//! cache, tests/search.rs), whose random figure is the seed of its fixture.
//!
//! `cargo bench --bench search` prints a markdown table (docs/PERFORMANCE.md). Runs are
//! counted exactly (they are deterministic); wall times are measured in the same
//! process, one thread, so their ratio holds on a noisy machine.

#[path = "../../../examples/podset/controller.rs"]
#[allow(dead_code)]
mod controller;
#[path = "../../../examples/podset/harness.rs"]
#[allow(dead_code)]
mod harness;

use reconsim::families::builtin;
use reconsim::scenario::search::{Base, SearchConfig, search};
use reconsim::scenario::{Expect, Families, Scenario, library, run};
use std::time::Instant;

const PLANS: usize = 50;
const SEEDS: u64 = 10;
const RANDOM_RUNS_MAX: u64 = 40_000;
const RATE_SEEDS: u64 = 2_000;
const STARTS: u64 = 10;

struct Row {
    name: String,
    random_runs: Option<u64>,
    /// `None`: not run here (the stale-cache row's figure is its fixture's seed).
    random_ms: Option<u128>,
    search_runs: Option<usize>,
    search_ms: u128,
    how: String,
    with_faults_runs: Option<usize>,
    with_faults_how: String,
    /// Seeds run / failing seeds over `RATE_SEEDS` (`None`: not measured).
    random_expected: Option<f64>,
    /// Mean runs to the first failure over the starts that found one, and how many
    /// starts found none.
    search_mean: Option<(f64, usize)>,
}

/// Failing seeds among `0..RATE_SEEDS`, on two threads.
fn failing_seeds(s: &Scenario) -> u64 {
    let failing = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..2 {
            let failing = &failing;
            scope.spawn(move || {
                for seed in (t..RATE_SEEDS).step_by(2) {
                    if run(s, seed).0.violation.is_some() {
                        failing.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    failing.into_inner()
}

fn search_mean(s: &Scenario) -> Option<(f64, usize)> {
    let mut found = Vec::new();
    for start in 0..STARTS {
        if let (Some(runs), _, _) = searched_from(s, Base::None, start) {
            found.push(runs as f64);
        }
    }
    let missed = STARTS as usize - found.len();
    (!found.is_empty()).then(|| (found.iter().sum::<f64>() / found.len() as f64, missed))
}

fn random(s: &Scenario, budget: u64) -> (Option<u64>, u128) {
    let start = Instant::now();
    for seed in 0..budget {
        if run(s, seed).0.violation.is_some() {
            return (Some(seed + 1), start.elapsed().as_millis());
        }
    }
    (None, start.elapsed().as_millis())
}

fn searched(s: &Scenario, base: Base) -> (Option<usize>, u128, String) {
    searched_from(s, base, 0)
}

fn searched_from(s: &Scenario, base: Base, seed: u64) -> (Option<usize>, u128, String) {
    let config = SearchConfig {
        base,
        seed,
        seeds: SEEDS,
        max_plans: PLANS,
        jobs: 1,
        pairs: true,
        groups: true,
        stop_on_first: true,
        differential: false,
        coverage: false,
        exhaustive: None,
        // What a user's search does: within the scenario's fault envelope.
        beyond_envelope: false,
    };
    let start = Instant::now();
    let report = search(s, &config, &|_, _, _, _, _| {});
    let ms = start.elapsed().as_millis();
    let how = match report.first_failure() {
        Some((seed, None)) => format!("seed {seed}'s reference run"),
        Some((seed, Some(p))) => {
            let kind = report
                .failures
                .iter()
                .find(|f| f.seed == seed && f.plan == p)
                .map(|f| f.description.split(':').next().unwrap_or("").to_string())
                .unwrap_or_default();
            format!("seed {seed} plan #{p} ({kind})")
        }
        None => format!("none in {} runs", report.runs),
    };
    (report.runs_to_first_failure, ms, how)
}

fn row(name: &str, s: &Scenario, random_budget: u64) -> Row {
    let (random_runs, random_ms) = random(s, random_budget);
    let (search_runs, search_ms, how) = searched(s, Base::None);
    let (with_faults_runs, _, with_faults_how) = searched(s, Base::Generated);
    let failing = failing_seeds(s);
    Row {
        name: name.to_string(),
        random_runs,
        random_ms: Some(random_ms),
        search_runs,
        search_ms,
        how,
        with_faults_runs,
        with_faults_how,
        random_expected: (failing > 0).then(|| RATE_SEEDS as f64 / failing as f64),
        search_mean: search_mean(s),
    }
}

fn main() {
    let families = builtin();
    let mut rows = Vec::new();
    for path in library::files().expect("the shipped scenarios") {
        let s = Scenario::load(&path, &families).expect("a shipped scenario loads");
        if s.expect == Expect::Violation {
            rows.push(row(&s.name, &s, RANDOM_RUNS_MAX));
        }
    }
    let with_podset: Families = builtin().with(harness::extensions());
    for name in ["podset-buggy", "podset-deposed-leader"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/podset/scenarios")
            .join(format!("{name}.json"));
        let s = Scenario::load(&path, &with_podset).expect("the example's scenario loads");
        rows.push(row(name, &s, RANDOM_RUNS_MAX));
    }
    // The race in a fixed scenario: random seeds find it first at seed 28692
    // (tests/failures/machineapi-leader-election-stale-cache.json); not re-run here.
    let (_, s) = library::load("machineapi-leader-election", &families).expect("shipped");
    let (search_runs, search_ms, how) = searched(&s, Base::None);
    let (with_faults_runs, _, with_faults_how) = searched(&s, Base::Generated);
    rows.push(Row {
        name: "machineapi-leader-election (stale-cache race)".into(),
        random_runs: Some(28_693),
        random_ms: None,
        search_runs,
        search_ms,
        how,
        with_faults_runs,
        with_faults_how,
        random_expected: None,
        search_mean: search_mean(&s),
    });
    println!(
        "| scenario | random: runs to first failure | search | random / search | wall ms random / search | search's first failure | search --with-faults | its first failure | random: expected runs ({RATE_SEEDS} seeds) | search: mean runs ({STARTS} starts) | expected / mean |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let ratio = match (r.random_runs, r.search_runs) {
            (Some(a), Some(b)) => format!("{:.1}x", a as f64 / b as f64),
            _ => "-".into(),
        };
        let fmt = |v: Option<String>| v.unwrap_or_else(|| "not found".into());
        let expected = r.random_expected.map_or_else(
            || {
                if r.random_ms.is_some() {
                    format!("none in {RATE_SEEDS}")
                } else {
                    "-".into()
                }
            },
            |e| format!("{e:.1}"),
        );
        let mean = r.search_mean.map_or("none".to_string(), |(m, missed)| {
            if missed > 0 {
                format!("{m:.1} ({missed} found none)")
            } else {
                format!("{m:.1}")
            }
        });
        let fair = match (r.random_expected, r.search_mean) {
            (Some(e), Some((m, _))) => format!("{:.1}x", e / m),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {ratio} | {} / {} | {} | {} | {} | {expected} | {mean} | {fair} |",
            r.name,
            fmt(r.random_runs.map(|v| v.to_string())),
            fmt(r.search_runs.map(|v| v.to_string())),
            r.random_ms.map_or("-".to_string(), |ms| ms.to_string()),
            r.search_ms,
            r.how,
            fmt(r.with_faults_runs.map(|v| v.to_string())),
            r.with_faults_how
        );
    }
}
