//! Shrinking a failure: the smallest fault plan that still violates the same invariant.
//!
//! Every candidate re-runs the same scenario with the same seed. Faults carry their own
//! durations and draw from no stream, and each process draws from its own stream, so
//! removing a fault changes only the history that fault caused. Two passes:
//! 1. delta debugging (Zeller's ddmin) over the list of faults: try halves, then
//!    complements, at finer and finer granularity;
//! 2. simplification of each remaining fault: the shortest duration that still fails
//!    (a binary search to 1/256 of the drawn one), then fewer hosts on either side of a
//!    partition or slow link.
//!
//! The run budget bounds the work; the result is a normal failure file.

use crate::failure::FailureFile;
use crate::format::Plan;
use reconsim_sim::{Fault, TimedFault, TraceMode};
use reconsim_world::WorldFault;
use serde::Serialize;

/// What shrinking did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShrinkReport {
    pub faults_before: usize,
    pub faults_after: usize,
    /// Simulation runs it took.
    pub runs: u64,
    /// Whether it stopped because the run budget ran out.
    pub budget_exhausted: bool,
}

struct Shrinker<'a> {
    failure: &'a FailureFile,
    runs: u64,
    max_runs: u64,
}

impl Shrinker<'_> {
    /// Does `faults` still violate the same invariant?
    fn fails(&mut self, faults: &[TimedFault<WorldFault>]) -> bool {
        if self.runs >= self.max_runs {
            return false;
        }
        self.runs += 1;
        let plan = Plan::new(faults.to_vec());
        let outcome = crate::failure::rerun(
            &self.failure.scenario,
            self.failure.seed,
            &plan,
            self.failure.judge(),
            TraceMode::Hash,
        );
        outcome
            .violation
            .as_ref()
            .is_some_and(|v| v.invariant == self.failure.invariant)
    }

    fn ddmin(&mut self, mut faults: Vec<TimedFault<WorldFault>>) -> Vec<TimedFault<WorldFault>> {
        let mut n = 2usize;
        while faults.len() >= 2 {
            let chunk = faults.len().div_ceil(n);
            let chunks: Vec<Vec<TimedFault<WorldFault>>> =
                faults.chunks(chunk).map(|c| c.to_vec()).collect();
            let mut reduced = false;
            for (i, c) in chunks.iter().enumerate() {
                if self.fails(c) {
                    faults = c.clone();
                    n = 2;
                    reduced = true;
                    break;
                }
                let complement: Vec<_> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, c)| c.iter().cloned())
                    .collect();
                if chunks.len() > 2 && self.fails(&complement) {
                    faults = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
            if !reduced {
                if n >= faults.len() {
                    break;
                }
                n = (n * 2).min(faults.len());
            }
        }
        // A single fault may be unnecessary too.
        if faults.len() == 1 && self.fails(&[]) {
            faults.clear();
        }
        faults
    }

    fn simplify(&mut self, mut faults: Vec<TimedFault<WorldFault>>) -> Vec<TimedFault<WorldFault>> {
        for i in 0..faults.len() {
            // Shorter: binary search for the shortest duration that still fails
            // (at most ~20 runs a fault).
            if let Some(d) = faults[i].duration_ms {
                let (mut lo, mut hi) = (0u64, d);
                while hi - lo > (d / 256).max(1) {
                    let mid = lo + (hi - lo) / 2;
                    let mut candidate = faults.clone();
                    candidate[i].duration_ms = Some(mid);
                    if self.fails(&candidate) {
                        hi = mid;
                        faults = candidate;
                    } else {
                        lo = mid;
                    }
                }
            }
            // Fewer targets: drop hosts one at a time.
            for side in 0..2 {
                let mut j = 0;
                loop {
                    let mut candidate = faults.clone();
                    let hosts = match &mut candidate[i].fault {
                        Fault::Partition {
                            hosts_a, hosts_b, ..
                        }
                        | Fault::SlowLink {
                            hosts_a, hosts_b, ..
                        } => {
                            if side == 0 {
                                hosts_a
                            } else {
                                hosts_b
                            }
                        }
                        _ => break,
                    };
                    if j >= hosts.len() || hosts.len() <= 1 {
                        break;
                    }
                    hosts.remove(j);
                    if self.fails(&candidate) {
                        faults = candidate;
                    } else {
                        j += 1;
                    }
                }
            }
        }
        faults
    }
}

/// Shrink `failure` within `max_runs` simulation runs.
pub fn shrink(failure: &FailureFile, max_runs: u64) -> (FailureFile, ShrinkReport) {
    let mut s = Shrinker {
        failure,
        runs: 0,
        max_runs,
    };
    let before = failure.plan.faults.clone();
    let after = s.ddmin(before.clone());
    let after = s.simplify(after);
    let exhausted = s.runs >= max_runs;
    let mut report = ShrinkReport {
        faults_before: before.len(),
        faults_after: after.len(),
        runs: s.runs,
        budget_exhausted: exhausted,
    };
    let plan = Plan::new(after);
    // Re-run the result once so the file's hash, time and message are exactly its own,
    // judged as the failure was (a differential failure against its reference).
    let outcome = crate::failure::rerun(
        &failure.scenario,
        failure.seed,
        &plan,
        failure.judge(),
        TraceMode::Hash,
    );
    let shrunk = FailureFile::new(&failure.scenario, &plan, &outcome)
        .filter(|f| f.invariant == failure.invariant)
        .map(|mut f| {
            // A divergence is judged against the same other seed.
            f.diverges_from = failure.diverges_from;
            // A failure found beyond the scenario's fault envelope stays labelled with
            // what its smaller plan still goes beyond (a shorter fault may be within).
            if !failure.beyond_envelope.is_empty() {
                let (_, world) = crate::runner::run_world(
                    &failure.scenario,
                    failure.seed,
                    plan.clone(),
                    TraceMode::Hash,
                );
                f.beyond_envelope = crate::envelope::Envelope::of_world(&failure.scenario, &world)
                    .beyond_plan(&plan);
            }
            f
        });
    match shrunk {
        Some(shrunk) => (shrunk, report),
        // Only a run that does not replay as its candidates did could get here; the
        // input is then the answer, and the report says so.
        None => {
            report.faults_after = report.faults_before;
            (failure.clone(), report)
        }
    }
}
