//! Coverage guidance: keep the plans whose runs reach a new abstract signature and try
//! their mutations first (Mallory, CCS'23), in rounds read in plan order.

use super::{Candidate, SearchConfig, SearchReport, SeedReport, full_plan, judged, record};
use crate::format::{Plan, Scenario};
use crate::jobs::run_ordered;
use crate::runner::{Outcome, run_world_recording};
use reconsim_sim::{DecisionPoint, TraceMode};
use std::collections::BTreeSet;

/// A run's abstract signature ([`reconsim_sim::signature`]): for each process, the pairs
/// (its previous step, this step), each step as its process's role and the first two
/// words of its message: which controller did what kind of thing after what.
pub fn signature(decisions: &[DecisionPoint]) -> BTreeSet<u64> {
    reconsim_sim::signature::of_decisions(decisions)
}

/// Pairs tried with each plan that reached new coverage.
const COVERAGE_PAIRS: usize = 8;
/// Plans run per round: a round's results are read in plan order, so the search is the
/// same for any `--jobs`.
const COVERAGE_ROUND: usize = 16;

/// The mutations of a plan: each anchored fault one event earlier and one later, then
/// the plan with each of the first singles added.
fn mutations(c: &Candidate, singles: &[Candidate]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (k, f) in c.faults.faults.iter().enumerate() {
        let Some(a) = &f.on else { continue };
        for nth in [a.nth.saturating_sub(1), a.nth + 1] {
            if nth == 0 || nth == a.nth {
                continue;
            }
            let mut faults = c.faults.faults.clone();
            faults[k].on.as_mut().expect("anchored").nth = nth;
            out.push(Candidate {
                kinds: c.kinds.clone(),
                description: format!("{} [#{} -> #{nth}]", c.description, a.nth),
                faults: Plan::new(faults),
                // The same faults, one event over: as far beyond the envelope as its own.
                beyond_envelope: c.beyond_envelope.clone(),
            });
        }
    }
    for s in singles.iter().take(COVERAGE_PAIRS) {
        if s.faults == c.faults {
            continue;
        }
        out.push(c.and(s));
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub(super) fn coverage_search(
    scenario: &Scenario,
    config: &SearchConfig,
    seed: u64,
    base: &Plan,
    singles: &[Candidate],
    reference_state: Option<&crate::oracle::EndState>,
    reference_signature: &BTreeSet<u64>,
    on_failure: &(dyn Fn(u64, usize, &Candidate, &Outcome, &Plan) + Sync),
    report: &mut SearchReport,
    one: &mut SeedReport,
) {
    let mut covered = reference_signature.clone();
    // Singles in their order, and mutations of the plans that reached new coverage
    // (newest first), taken in turn: half the budget explores around what was new.
    let mut queue: std::collections::VecDeque<Candidate> = singles.iter().cloned().collect();
    let mut mutants: std::collections::VecDeque<Candidate> = Default::default();
    let mut tried: BTreeSet<String> = BTreeSet::new();
    let mut index = 0usize;
    let mut turn = false;
    while index < config.max_plans && !(queue.is_empty() && mutants.is_empty()) {
        let mut round = Vec::new();
        while round.len() < COVERAGE_ROUND && index + round.len() < config.max_plans {
            turn = !turn;
            let mutant = turn && !mutants.is_empty() || queue.is_empty();
            let next = if mutant {
                mutants.pop_front()
            } else {
                queue.pop_front()
            };
            let Some(c) = next else { break };
            let key = serde_json::to_string(&c.faults).expect("plans serialize");
            if tried.insert(key) {
                round.push((c, mutant));
            }
        }
        let task = |i: usize| {
            let plan = full_plan(base, &round[i].0);
            let (outcome, world) =
                run_world_recording(scenario, seed, plan.clone(), TraceMode::Hash, true);
            let sig = signature(world.sim.decisions());
            drop(world);
            let outcome = judged(scenario, seed, &plan, outcome, reference_state);
            let fails = outcome.violation.is_some();
            if fails {
                on_failure(seed, index + i, &round[i].0, &outcome, &plan);
            }
            ((outcome, sig), fails)
        };
        let results = run_ordered(
            round.len(),
            config.jobs,
            config.stop_on_first,
            &|| true,
            &task,
        );
        let mut front = Vec::new();
        for (i, (o, sig)) in results {
            one.mutations += usize::from(round[i].1);
            if record(report, one, index + i, &round[i].0, &o) && config.stop_on_first {
                return;
            }
            if sig.iter().any(|e| !covered.contains(e)) {
                covered.extend(sig);
                front.extend(mutations(&round[i].0, singles));
            }
        }
        index += round.len();
        for c in front.into_iter().rev() {
            mutants.push_front(c);
        }
    }
    // The budget ran out with plans still queued: each one not tried yet, once.
    for c in queue.iter().chain(&mutants) {
        if tried.insert(serde_json::to_string(&c.faults).expect("plans serialize")) {
            one.left_out += 1;
        }
    }
}
