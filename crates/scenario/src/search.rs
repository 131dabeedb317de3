//! Search: a reference run, then one targeted perturbation per decision point of it.
//!
//! Random seeds find wide windows; a window of milliseconds needs its fault placed at
//! an event, not a time. Search does what Sieve (OSDI'22) does on a kind cluster, at
//! the cost of a simulated run:
//! 1. A reference run per seed, with no faults (or a given plan, or the seed's own
//!    generated one: [`Base`]), records its decision points
//!    ([`reconsim_sim::DecisionPoint`]): every write, read, call, renewal and watch
//!    event of every process.
//! 2. Each decision point yields plans that perturb it alone, with a fault anchored to
//!    it ([`reconsim_sim::Anchor`]): Sieve's perturbations of a controller (crash right
//!    after a write or call, lose its answer, pause before a renewal, delay a watch
//!    event, break a watch), a controller's resync landing right after someone else's
//!    write, the scenario's own fault generators placed at the steps of what they
//!    target, within their windows, and the race-directed kinds, which reorder two
//!    steps the run took close together (a read and the write that makes it stale, a
//!    change and another controller's reconcile).
//! 3. Pruning. Causality, as Sieve prunes: a crash right after a step is kept only if
//!    the reconcile went on from that step's answer (else nothing of it was in flight);
//!    a delayed or dropped watch event only if its receiver sent something while it
//!    would have been missing. Repeats: a plan whose kind, fault, message, previous
//!    message of the same process, latest message of any other process, and whether
//!    the reconcile went on from it are an earlier plan's is the same plan again.
//! 4. Order: group plans first (every race-directed perturbation at once, then each
//!    race-directed kind's: group testing); then kinds take turns, the scenario's own
//!    generators and the race-directed ones leading; within a kind, the scenario's fault windows first, then faults
//!    between a check and its act, the narrowest races, the rarest messages (a message
//!    the run sends once is a step of a state change, one it sends hundreds of times a
//!    heartbeat), spread over the run.
//! 5. Plans run across jobs, each an ordinary run whose failure is an ordinary failure
//!    file; the report is the same for any `--jobs`. Then pairs, within the budget.
//!    With [`SearchConfig::differential`], a plan that ends unlike its reference fails
//!    too (crates/scenario/src/oracle.rs); with [`SearchConfig::coverage`], the plans
//!    that reach new abstract signatures are mutated first; with
//!    [`SearchConfig::exhaustive`], the bounded tree of request orderings replaces the
//!    plans.
//!
//! Here: the configuration, the reports and the run loop. `plans`: generation, pruning
//! and order. `coverage`: signatures and mutations. `exhaustive`: swaps and the
//! breadth-first tree.

mod coverage;
mod exhaustive;
mod plans;

pub use coverage::signature;
pub use exhaustive::SWAPS_PER_RUN_MAX;
pub use exhaustive::interleaving;
pub use plans::{PlanCounts, plans, plans_and_left_out, plans_counted};

use crate::format::{Plan, Scenario};
use crate::jobs::run_ordered;
use crate::runner::{Outcome, run_world, run_world_recording};
use reconsim_sim::TraceMode;
use serde::Serialize;

/// What to search.
#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// The first reference seed; a plan runs with its reference's seed (its faults draw
    /// nothing, so it is that run until its perturbation).
    pub seed: u64,
    /// How many reference seeds, from `seed`: a window that a seed's timings close,
    /// another's may open.
    pub seeds: u64,
    /// At most this many plans per reference seed (singles, then pairs).
    pub max_plans: usize,
    pub jobs: usize,
    /// After the singles, run pairs of them within the budget.
    pub pairs: bool,
    /// Before the singles, group plans (group testing): every race-directed
    /// perturbation at once, then each race-directed kind's at once. Most
    /// perturbations are harmless, so one run tries dozens; shrink then finds the ones
    /// that matter.
    pub groups: bool,
    /// Stop at the first failing plan (in plan order, whatever `jobs` is).
    pub stop_on_first: bool,
    /// The faults of every plan besides its perturbation (the reference run's too).
    pub base: Base,
    /// Coverage guidance (Mallory-style): run the singles in rounds, keep a plan whose
    /// run reaches a new abstract signature (which process role made which kind of step
    /// after which), and try its mutations (its anchors one event earlier or later, and
    /// it paired with the first singles) before the rest; no blind pairs.
    pub coverage: bool,
    /// Bounded exhaustive search instead of Sieve's plans: every ordering of requests
    /// that could have arrived either way round, up to this many swaps deep, breadth
    /// first, a run that repeats an interleaving already seen not explored again
    /// (search/exhaustive.rs).
    pub exhaustive: Option<usize>,
    /// Also judge each plan by Sieve's differential oracle (crates/scenario/src/oracle.rs):
    /// a plan whose run holds every invariant but ends differently from its reference
    /// run (masked end state, objects created and deleted) fails as [`DIFFERENTIAL`].
    pub differential: bool,
    /// Also run the plans beyond the scenario's declared fault envelope
    /// ([`crate::envelope`]), with Sieve's own magnitudes (a 30 s watch delay, a 10 s
    /// restart, a pause of twice the lease); each such plan and its failures say what
    /// they go beyond. Off: perturbations are held to the envelope and the others left
    /// out (counted in [`SeedReport::beyond_envelope`]).
    pub beyond_envelope: bool,
}

/// The invariant name of a plan the differential oracle flagged.
pub const DIFFERENTIAL: &str = "differential";
/// The invariant name of a fault-free run that ends unlike another seed's fault-free
/// run (Kamera's divergence oracle, [`crate::oracle::divergence`]).
pub const DIVERGENCE: &str = "divergence";

/// What a reference run (and every plan made from it) carries besides the perturbation.
#[derive(Clone, Debug, Default)]
pub enum Base {
    /// No faults: Sieve's fault-free reference (the default).
    #[default]
    None,
    /// The same plan for every seed.
    Plan(Plan),
    /// Each seed's own generated plan: the reference is the fuzz run of that seed, and
    /// each plan adds one anchored fault to the scenario's faults as drawn.
    Generated,
}

impl Base {
    /// The base plan of reference seed `seed`.
    pub fn plan(&self, scenario: &Scenario, seed: u64) -> Plan {
        match self {
            Base::Plan(p) => p.clone(),
            Base::None => Plan::default(),
            Base::Generated => crate::faults::generate(scenario, seed),
        }
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            seed: 0,
            seeds: 1,
            max_plans: 500,
            jobs: 1,
            pairs: true,
            groups: true,
            stop_on_first: false,
            base: Base::None,
            differential: false,
            coverage: false,
            exhaustive: None,
            beyond_envelope: false,
        }
    }
}

/// How long a perturbation lasts when nothing in the scenario says.
pub const CRASH_RESTART_MS: u64 = 10_000;
/// A watch event's delay: longer than a reconcile, shorter than a resync.
pub const EVENT_DELAY_MS: u64 = 30_000;
/// A pause with no lease to outlast.
pub const PAUSE_MS_DEFAULT: u64 = 60_000;
/// How far ahead `stale_read` looks for the write that makes a read stale: a reconcile
/// that waits longer than this on one answer is a fault of its own.
pub const STALE_READ_WINDOW_MS: u64 = 30_000;
/// Pairs are taken among the first this many singles.
pub const PAIR_POOL: usize = 40;

/// One plan: its perturbations, in words and as faults.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    /// `stale_read`, `interleave`, `crash_after`, `lose_answer`, `pause_before`,
    /// `delay_event`, `drop_event`, `resync_after`, or `scenario:<i>` for the scenario's
    /// fault generator `i`.
    pub kinds: Vec<String>,
    pub description: String,
    /// The perturbations' faults (without the base plan's).
    pub faults: Plan,
    /// What its faults go beyond of the scenario's fault envelope, in words (empty:
    /// within it; only `--beyond-envelope` runs plans that are not).
    pub beyond_envelope: Vec<String>,
}

impl Candidate {
    /// The failure file of this plan's failing run (`plan` its full plan, base
    /// included), labelled with what the plan goes beyond of the scenario's fault
    /// envelope, as `search --failures-dir` saves it.
    pub fn failure_file(
        &self,
        scenario: &Scenario,
        plan: &Plan,
        outcome: &Outcome,
    ) -> Option<crate::failure::FailureFile> {
        let mut f = crate::failure::FailureFile::new(scenario, plan, outcome)?;
        f.beyond_envelope = self.beyond_envelope.clone();
        Some(f)
    }

    /// Both plans' faults at once.
    pub fn and(&self, other: &Candidate) -> Candidate {
        let mut faults = self.faults.faults.clone();
        faults.extend(other.faults.faults.iter().cloned());
        Candidate {
            kinds: self.kinds.iter().chain(&other.kinds).cloned().collect(),
            description: format!("{} + {}", self.description, other.description),
            faults: Plan::new(faults),
            beyond_envelope: self
                .beyond_envelope
                .iter()
                .chain(&other.beyond_envelope)
                .cloned()
                .collect(),
        }
    }
}

/// One failing plan.
#[derive(Clone, Debug, Serialize)]
pub struct SearchFailure {
    /// Its reference run's seed.
    pub seed: u64,
    /// Its place in its seed's run order, from 0.
    pub plan: usize,
    pub description: String,
    pub invariant: String,
    pub time_ms: u64,
    /// What its plan goes beyond of the scenario's fault envelope (empty: within it).
    pub beyond_envelope: Vec<String>,
}

/// One reference run and the plans made from it.
#[derive(Clone, Debug, Serialize)]
pub struct SeedReport {
    pub seed: u64,
    /// The reference run's outcome: a violation there is found without search.
    pub reference: Outcome,
    /// Decision points the reference run recorded.
    pub decisions: usize,
    /// Single-perturbation plans generated, pruned (causality and repeats) and queued.
    pub generated: usize,
    pub pruned: usize,
    /// Group plans queued before the singles ([`SearchConfig::groups`]).
    pub groups: usize,
    pub singles: usize,
    /// Pair plans queued within the budget.
    pub pairs: usize,
    /// Plans that ran.
    pub runs: usize,
    /// Of those, mutations of plans that reached new coverage ([`SearchConfig::coverage`]).
    pub mutations: usize,
    /// Exhaustive search ([`SearchConfig::exhaustive`]): the deepest level run, and the
    /// runs that repeated an interleaving already seen (their swaps not explored).
    pub depth: usize,
    pub repeats: usize,
    pub first_failure_plan: Option<usize>,
    /// Plans made and queued but not run because [`SearchConfig::max_plans`] was
    /// reached: singles (and group plans) past it; with coverage, the queued singles and
    /// mutations; exhaustive, the swaps generated but not run (whose own swaps were
    /// never generated). Pairs fill what is left of the budget and are not counted.
    pub left_out: usize,
    /// Exhaustive search: swaps not generated because a run had more than
    /// [`SWAPS_PER_RUN_MAX`] (its earliest are kept), summed over the runs explored.
    pub swaps_over_cap: usize,
    /// Singles generated beyond the scenario's fault envelope: left out, or run with
    /// [`SearchConfig::beyond_envelope`].
    pub beyond_envelope: usize,
}

/// What a search did (the `search --json` contract's data).
#[derive(Clone, Debug, Serialize)]
pub struct SearchReport {
    /// Every reference seed searched, in order.
    pub seeds: Vec<SeedReport>,
    pub failures: Vec<SearchFailure>,
    /// Runs until the first failure, reference runs included: what a search costs to
    /// find the bug (compare a fuzz campaign's first failing seed + 1).
    pub runs_to_first_failure: Option<usize>,
    /// Runs in all, reference runs included.
    pub runs: usize,
    pub events: u64,
    pub sim_ms: u64,
}

impl SearchReport {
    /// The first failure in (seed, plan) order: the reference run's own (plan `None`)
    /// or a plan's.
    pub fn first_failure(&self) -> Option<(u64, Option<usize>)> {
        for s in &self.seeds {
            if s.reference.violation.is_some() {
                return Some((s.seed, None));
            }
            if let Some(p) = s.first_failure_plan {
                return Some((s.seed, Some(p)));
            }
        }
        None
    }
}

/// A plan of the search with the base plan's faults first (indices of the
/// perturbation's faults follow them).
pub fn full_plan(base: &Plan, c: &Candidate) -> Plan {
    let mut faults = base.faults.clone();
    faults.extend(c.faults.faults.iter().cloned());
    Plan::new(faults)
}

/// Run a search over the reference seeds `config.seed..config.seed + config.seeds`.
/// `on_failure` sees each failing plan as it is found (on the thread that ran it), with
/// its seed, index, candidate, outcome and full plan, so a caller can save it at once.
pub fn search(
    scenario: &Scenario,
    config: &SearchConfig,
    on_failure: &(dyn Fn(u64, usize, &Candidate, &Outcome, &Plan) + Sync),
) -> SearchReport {
    let mut report = SearchReport {
        seeds: Vec::new(),
        failures: Vec::new(),
        runs_to_first_failure: None,
        runs: 0,
        events: 0,
        sim_ms: 0,
    };
    for seed in config.seed..config.seed.saturating_add(config.seeds.max(1)) {
        let before = report.runs;
        let one = search_seed(scenario, config, seed, on_failure, &mut report);
        if report.runs_to_first_failure.is_none() {
            if one.reference.violation.is_some() {
                report.runs_to_first_failure = Some(before + 1);
            } else if let Some(p) = one.first_failure_plan {
                report.runs_to_first_failure = Some(before + p + 2);
            }
        }
        report.seeds.push(one);
        if config.stop_on_first && report.runs_to_first_failure.is_some() {
            break;
        }
    }
    report
}

/// A plan's run, judged by the scenario's invariants and then against its reference's
/// end state: a difference is a [`DIFFERENTIAL`] violation at the run's end. A plan
/// with a user operation is judged by the invariants alone
/// ([`crate::operations::in_plan`]).
pub fn judge_differential(
    scenario: &Scenario,
    seed: u64,
    plan: &Plan,
    reference: &crate::oracle::EndState,
) -> Outcome {
    let (outcome, state) = crate::oracle::run(scenario, seed, plan.clone());
    against_reference(plan, outcome, &state, reference)
}

/// `outcome` of `plan`, judged against its reference's end state (Sieve's oracle), unless
/// the plan holds a user operation: what is desired changed, so only the invariants judge
/// it ([`crate::operations::in_plan`]).
pub fn against_reference(
    plan: &Plan,
    outcome: Outcome,
    state: &crate::oracle::EndState,
    reference: &crate::oracle::EndState,
) -> Outcome {
    if crate::operations::in_plan(plan) {
        return outcome;
    }
    differ(outcome, state, reference, DIFFERENTIAL, "its reference run")
}

/// `outcome`, a violation of `invariant` at its end if it held every invariant but its
/// end `state` differs from `reference`'s (`what` names the reference in the message).
pub fn differ(
    mut outcome: Outcome,
    state: &crate::oracle::EndState,
    reference: &crate::oracle::EndState,
    invariant: &str,
    what: &str,
) -> Outcome {
    if outcome.violation.is_none() {
        let diff = reference.diff(state);
        if !diff.is_empty() {
            outcome.violation = Some(reconsim_check::Violation {
                invariant: invariant.into(),
                time: reconsim_sim::SimTime(outcome.sim_ms),
                message: format!(
                    "ends differently from {what} ({} differences): {}",
                    diff.total(),
                    diff.to_string().trim_end().replace('\n', "; ")
                ),
                objects: vec![],
            });
        }
    }
    outcome
}

/// A recorded run's outcome, judged against the reference's end state too when the
/// search is differential and no invariant failed.
fn judged(
    scenario: &Scenario,
    seed: u64,
    plan: &Plan,
    outcome: Outcome,
    reference: Option<&crate::oracle::EndState>,
) -> Outcome {
    match reference {
        Some(r) if outcome.violation.is_none() => judge_differential(scenario, seed, plan, r),
        _ => outcome,
    }
}

fn search_seed(
    scenario: &Scenario,
    config: &SearchConfig,
    seed: u64,
    on_failure: &(dyn Fn(u64, usize, &Candidate, &Outcome, &Plan) + Sync),
    report: &mut SearchReport,
) -> SeedReport {
    let base = config.base.plan(scenario, seed);
    let (reference, world) =
        run_world_recording(scenario, seed, base.clone(), TraceMode::Hash, true);
    // The reference's end state, for the differential oracle (a second run of it: the
    // recording run is the same history, but the oracle observes as it goes).
    let reference_state = config
        .differential
        .then(|| crate::oracle::run(scenario, seed, base.clone()).1);
    report.runs += 1;
    report.events += reference.events;
    report.sim_ms += reference.sim_ms;
    let mut one = SeedReport {
        seed,
        reference,
        decisions: world.sim.decisions().len(),
        generated: 0,
        pruned: 0,
        groups: 0,
        singles: 0,
        pairs: 0,
        runs: 0,
        mutations: 0,
        depth: 0,
        repeats: 0,
        first_failure_plan: None,
        left_out: 0,
        swaps_over_cap: 0,
        beyond_envelope: 0,
    };
    let found_already = one.reference.violation.is_some() && config.stop_on_first;
    if let Some(depth) = config.exhaustive {
        if !found_already {
            exhaustive::explore(
                scenario,
                config,
                depth,
                seed,
                &base,
                &world,
                reference_state.as_ref(),
                on_failure,
                report,
                &mut one,
            );
        }
        return one;
    }
    let counts = plans::plans_counted(scenario, &world, config);
    let candidates = counts.plans;
    let [generated, pruned, groups, singles, pairs] = counts.counts;
    one.left_out = counts.left_out;
    one.beyond_envelope = counts.beyond_envelope;
    let reference_signature = signature(world.sim.decisions());
    drop(world);
    (
        one.generated,
        one.pruned,
        one.groups,
        one.singles,
        one.pairs,
    ) = (generated, pruned, groups, singles, pairs);
    if found_already {
        return one;
    }
    if config.coverage {
        let singles: Vec<Candidate> = candidates[..groups + singles].to_vec();
        coverage::coverage_search(
            scenario,
            config,
            seed,
            &base,
            &singles,
            reference_state.as_ref(),
            &reference_signature,
            on_failure,
            report,
            &mut one,
        );
        return one;
    }
    let task = |i: usize| {
        let plan = full_plan(&base, &candidates[i]);
        let outcome = match &reference_state {
            None => run_world(scenario, seed, plan.clone(), TraceMode::Hash).0,
            Some(reference) => judge_differential(scenario, seed, &plan, reference),
        };
        let fails = outcome.violation.is_some();
        if fails {
            on_failure(seed, i, &candidates[i], &outcome, &plan);
        }
        (outcome, fails)
    };
    let results = run_ordered(
        candidates.len(),
        config.jobs,
        config.stop_on_first,
        &|| true,
        &task,
    );
    for (i, o) in results {
        record(report, &mut one, i, &candidates[i], &o);
    }
    one
}

/// Count plan `plan`'s run in the reports, and its failure if it failed (`true`).
fn record(
    report: &mut SearchReport,
    one: &mut SeedReport,
    plan: usize,
    candidate: &Candidate,
    outcome: &Outcome,
) -> bool {
    one.runs += 1;
    report.runs += 1;
    report.events += outcome.events;
    report.sim_ms += outcome.sim_ms;
    let Some(v) = &outcome.violation else {
        return false;
    };
    one.first_failure_plan.get_or_insert(plan);
    report.failures.push(SearchFailure {
        seed: one.seed,
        plan,
        description: candidate.description.clone(),
        invariant: v.invariant.clone(),
        time_ms: v.time.as_ms(),
        beyond_envelope: candidate.beyond_envelope.clone(),
    });
    true
}
