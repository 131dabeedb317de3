//! Fuzz campaigns: run a scenario over a range of seeds, on several threads, with results
//! that do not depend on the number of threads.
//!
//! Threads claim seeds in increasing order and every result is kept by seed
//! ([`crate::jobs`]), so the report (sorted by seed) is the same for `--jobs 1` and
//! `--jobs 8`. With `stop_on_first`, the campaign ends at the smallest failing seed of
//! the range: seeds above it that some thread already ran are dropped from the report,
//! and every seed below it has run, so the report is still independent of `--jobs`.
//! A shard `I/N` runs the seeds `s` of the range with `s % N == I`.
//!
//! A wall-clock budget ([`fuzz_for`]) stops threads from claiming more seeds once it is
//! spent; every claimed seed finishes, so the seeds run are always a prefix of the
//! campaign's seeds, reported in [`Report::seeds_run`] so a later campaign can go on
//! from there. The clock is read between runs, never inside one.

use crate::format::{Plan, Scenario};
use crate::jobs::run_ordered;
use crate::runner::{Outcome, run_generated};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Campaign {
    /// Seeds `start..end`.
    pub start: u64,
    pub end: u64,
    pub jobs: usize,
    /// `(index, count)`: run only seeds with `seed % count == index`.
    pub shard: Option<(u64, u64)>,
    pub stop_on_first: bool,
    /// Each seed switches on a random subset of the fault generators (swarm mode).
    pub swarm: bool,
}

impl Campaign {
    /// The seeds of this campaign, in order.
    pub fn seeds(&self) -> Vec<u64> {
        (self.start..self.end)
            .filter(|s| self.shard.is_none_or(|(i, n)| s % n == i))
            .collect()
    }
}

/// One failing seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureSummary {
    pub seed: u64,
    pub invariant: String,
    pub time_ms: u64,
}

/// The report of a campaign (the `fuzz --json` contract's data).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub runs: u64,
    /// How many of the campaign's seeds (in order) ran: all of them unless a time
    /// budget or `stop_on_first` ended the campaign early.
    pub seeds_run: u64,
    pub failures: Vec<FailureSummary>,
    pub first_failure_seed: Option<u64>,
    pub events: u64,
    pub sim_ms: u64,
}

/// Run a campaign. `on_failure` sees each failing run (with its plan) as it is found, on
/// the thread that found it, so a caller can save it at once; `on_progress` sees the
/// number of finished runs and failures.
pub fn fuzz(
    scenario: &Scenario,
    campaign: Campaign,
    on_failure: &(dyn Fn(&Outcome, &Plan) + Sync),
    on_progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    fuzz_for(scenario, campaign, None, on_failure, on_progress)
}

/// [`fuzz`], claiming no new seed once `budget` of wall time has passed.
pub fn fuzz_for(
    scenario: &Scenario,
    campaign: Campaign,
    budget: Option<std::time::Duration>,
    on_failure: &(dyn Fn(&Outcome, &Plan) + Sync),
    on_progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    let deadline = budget.map(|b| std::time::Instant::now() + b);
    let seeds = campaign.seeds();
    let done = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let claim = || deadline.is_none_or(|d| std::time::Instant::now() < d);
    let task = |i: usize| {
        let (outcome, plan) = run_generated(scenario, seeds[i], campaign.swarm);
        let fails = outcome.violation.is_some();
        if fails {
            failed.fetch_add(1, Ordering::SeqCst);
            on_failure(&outcome, &plan);
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        on_progress(n, failed.load(Ordering::SeqCst));
        (outcome, fails)
    };
    let results = run_ordered(
        seeds.len(),
        campaign.jobs,
        campaign.stop_on_first,
        &claim,
        &task,
    );
    let mut report = Report::default();
    for (i, o) in results {
        report.runs += 1;
        report.seeds_run = report.seeds_run.max(i as u64 + 1);
        report.events += o.events;
        report.sim_ms += o.sim_ms;
        if let Some(v) = &o.violation {
            report.first_failure_seed.get_or_insert(o.seed);
            report.failures.push(FailureSummary {
                seed: o.seed,
                invariant: v.invariant.clone(),
                time_ms: v.time.as_ms(),
            });
        }
    }
    report
}
