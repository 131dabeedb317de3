//! Fuzz campaigns: run a scenario over a range of seeds, on several threads, with results
//! that do not depend on the number of threads.
//!
//! Threads claim seeds in increasing order and results are counted in seed order
//! ([`crate::jobs`]), so the report (sorted by seed) is the same for `--jobs 1` and
//! `--jobs 8`. Seeds are computed, never collected, and an outcome is dropped once
//! counted: a campaign's memory is flat in its length ([`fuzz_streamed`] does not even
//! keep the failures' summaries). With `stop_on_first`, the campaign ends at the smallest failing seed of
//! the range: seeds above it that some thread already ran are dropped from the report,
//! and every seed below it has run, so the report is still independent of `--jobs`.
//! A shard `I/N` runs the seeds `s` of the range with `s % N == I`.
//!
//! A wall-clock budget ([`fuzz_for`]) stops threads from claiming more seeds once it is
//! spent; every claimed seed finishes, so the seeds run are always a prefix of the
//! campaign's seeds, reported in [`Report::seeds_run`] so a later campaign can go on
//! from there. The clock is read between runs, never inside one.

use crate::format::{Plan, Scenario};
use crate::jobs::run_streamed;
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
    /// The seeds `start..end` of `shard`, on one thread, without stopping or swarm: a
    /// campaign as far as its seeds go (what `merge` checks results against).
    pub fn of_seeds(start: u64, end: u64, shard: Option<(u64, u64)>) -> Campaign {
        Campaign {
            start,
            end,
            jobs: 1,
            shard,
            stop_on_first: false,
            swarm: false,
        }
    }

    /// The first seed of the range in the shard, if any.
    fn first(&self) -> Option<u64> {
        let first = match self.shard {
            None => self.start,
            // In u128: `i + n` overflows u64 for a shard count near u64::MAX.
            Some((i, n)) => {
                let offset =
                    (u128::from(i) + u128::from(n) - u128::from(self.start % n)) % u128::from(n);
                self.start.checked_add(offset as u64)?
            }
        };
        (first < self.end).then_some(first)
    }

    fn step(&self) -> u64 {
        self.shard.map_or(1, |(_, n)| n)
    }

    /// How many seeds the campaign runs (computed, never collected: a range may be
    /// `0..u64::MAX`).
    pub fn len(&self) -> u64 {
        self.first()
            .map_or(0, |first| (self.end - 1 - first) / self.step() + 1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The campaign's `k`-th seed (from 0), for `k < len()`.
    pub fn seed(&self, k: u64) -> u64 {
        assert!(k < self.len(), "seed {k} of a campaign of {}", self.len());
        self.first().expect("a non-empty campaign") + k * self.step()
    }
}

/// Which failures a result lists: the first in seed order while their JSON stays within
/// a byte budget ([`crate::limits::RESULT_LISTED_BYTES_MAX`]); the rest are counted, so
/// a campaign with a million failing seeds writes a result `merge` reads back.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    budget_bytes: u64,
    listed_bytes: u64,
    /// Failures listed.
    pub listed: u64,
    /// Failures counted but not listed (`failures_unlisted`).
    pub unlisted: u64,
}

impl Listing {
    /// A listing within `budget_bytes` of JSON (each item with its separator).
    pub fn new(budget_bytes: u64) -> Listing {
        Listing {
            budget_bytes,
            listed_bytes: 0,
            listed: 0,
            unlisted: 0,
        }
    }

    /// Whether the next failure, `item_bytes` of JSON, is listed; once one is not,
    /// none after it is (the list stays a prefix in seed order).
    pub fn admit(&mut self, item_bytes: usize) -> bool {
        let bytes = item_bytes as u64 + 1;
        if self.unlisted == 0 && self.listed_bytes + bytes <= self.budget_bytes {
            self.listed_bytes += bytes;
            self.listed += 1;
            true
        } else {
            self.unlisted += 1;
            false
        }
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
    /// Every failure, by seed, from [`fuzz`] and [`fuzz_for`]; [`fuzz_streamed`] hands
    /// them to its caller instead and leaves this empty.
    pub failures: Vec<FailureSummary>,
    pub failure_count: u64,
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
    let mut failures = Vec::new();
    let mut report = fuzz_streamed(
        scenario,
        campaign,
        budget,
        on_failure,
        on_progress,
        &mut |f| failures.push(f.clone()),
    );
    report.failures = failures;
    report
}

/// [`fuzz_for`] in constant memory: each failure's summary goes to `on_summary` in seed
/// order (what the report would list) and is not kept, nor is any outcome once counted.
pub fn fuzz_streamed(
    scenario: &Scenario,
    campaign: Campaign,
    budget: Option<std::time::Duration>,
    on_failure: &(dyn Fn(&Outcome, &Plan) + Sync),
    on_progress: &(dyn Fn(u64, u64) + Sync),
    on_summary: &mut (dyn FnMut(&FailureSummary) + Send),
) -> Report {
    let deadline = budget.and_then(|b| std::time::Instant::now().checked_add(b));
    let done = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let claim = || deadline.is_none_or(|d| std::time::Instant::now() < d);
    let task = |k: u64| {
        let (outcome, plan) = run_generated(scenario, campaign.seed(k), campaign.swarm);
        let fails = outcome.violation.is_some();
        if fails {
            failed.fetch_add(1, Ordering::SeqCst);
            on_failure(&outcome, &plan);
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        on_progress(n, failed.load(Ordering::SeqCst));
        (outcome, fails)
    };
    let mut report = Report::default();
    let mut sink = |k: u64, o: Outcome| {
        report.runs += 1;
        report.seeds_run = k + 1;
        report.events += o.events;
        report.sim_ms += o.sim_ms;
        if let Some(v) = &o.violation {
            report.failure_count += 1;
            report.first_failure_seed.get_or_insert(o.seed);
            on_summary(&FailureSummary {
                seed: o.seed,
                invariant: v.invariant.clone(),
                time_ms: v.time.as_ms(),
            });
        }
    };
    run_streamed(
        campaign.len(),
        campaign.jobs,
        campaign.stop_on_first,
        &claim,
        &task,
        &mut sink,
    );
    report
}

#[cfg(test)]
mod tests {
    use super::Campaign;

    fn campaign(start: u64, end: u64, shard: Option<(u64, u64)>) -> Campaign {
        Campaign::of_seeds(start, end, shard)
    }

    #[test]
    fn seeds_are_computed_as_a_filter_would_collect_them() {
        for (start, end) in [(0, 45), (7, 8), (3, 100), (10, 11)] {
            for shard in [None, Some((0, 1)), Some((1, 3)), Some((2, 3)), Some((4, 7))] {
                let c = campaign(start, end, shard);
                let want: Vec<u64> = (start..end)
                    .filter(|s| shard.is_none_or(|(i, n)| s % n == i))
                    .collect();
                let got: Vec<u64> = (0..c.len()).map(|k| c.seed(k)).collect();
                assert_eq!(got, want, "{start}..{end} {shard:?}");
            }
        }
    }

    #[test]
    fn extreme_ranges_and_shards_do_not_overflow() {
        let c = campaign(0, u64::MAX, None);
        assert_eq!(c.len(), u64::MAX);
        assert_eq!(c.seed(u64::MAX - 1), u64::MAX - 1);
        let c = campaign(0, u64::MAX, Some((u64::MAX - 2, u64::MAX - 1)));
        assert_eq!(c.len(), 1);
        assert_eq!(c.seed(0), u64::MAX - 2);
        let c = campaign(u64::MAX - 1, u64::MAX, Some((3, 5)));
        assert!(c.is_empty());
    }
}

#[cfg(test)]
mod listing_tests {
    use super::Listing;

    #[test]
    fn a_listing_is_a_prefix_within_its_budget_and_counts_the_rest() {
        // Items of 9 bytes take 10 with their separator: three fit in 30.
        let mut l = Listing::new(30);
        let admitted: Vec<bool> = [9, 9, 9, 9, 1].iter().map(|b| l.admit(*b)).collect();
        // Once one is left out, none after it is listed, however small.
        assert_eq!(admitted, [true, true, true, false, false]);
        assert_eq!((l.listed, l.unlisted), (3, 2));
    }
}
