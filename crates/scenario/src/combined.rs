//! The combined campaign: one budget of runs spent across random seeds, swarm seeds and
//! search plans, with one verdict (what `check` runs, and `fuzz --campaign combined`).
//!
//! Random seeds find the wide windows, swarm seeds the bugs one fault generator hides
//! from another, search plans the narrow ones (a fault placed at a step of a fault-free
//! reference run, crates/scenario/src/search.rs); a user should not have to know which
//! their controller needs. The budget is spent in rounds of [`ROUND_RUNS`] runs, each
//! split between the three arms: the stated split ([`Split::DEFAULT`]: half seeds, a
//! quarter swarm, a quarter search), except that a quarter of a round more goes to the
//! arm whose runs reached the most new run signatures (which role made which kind of
//! step after which, [`crate::search::signature`]) per run in the round before. Within a
//! round the arms take turns in proportion to their shares.
//!
//! The search arm takes reference seeds in order: each one's fault-free reference run
//! is a run of the campaign, and its first [`PLANS_PER_REFERENCE`] plans (group plans
//! first, then singles, within the scenario's fault envelope) follow it, in `search`'s
//! order. Each arm draws from its own seeds in order, from the campaign's first seed.
//!
//! Determinism: a round's trials are fixed before it runs, its results are read in
//! trial order ([`crate::jobs`]), and the next round is computed from them alone, so
//! the campaign (its runs, failures and findings) is the same for any `--jobs`. A
//! wall-clock budget stops the claiming of runs, so the runs made are always a prefix of
//! the campaign's; the clock is read between runs, never inside one.

use crate::build::Keep;
use crate::format::{Plan, Scenario};
use crate::jobs::run_streamed;
use crate::oracle::EndState;
use crate::runner::{Outcome, run_world_keeping};
use crate::search::{
    Candidate, DIVERGENCE, SearchConfig, against_reference, differ, full_plan, plans_counted,
};
use reconsim_sim::TraceMode;
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs per round: the arms' shares are fixed for a round, and read again after it.
pub const ROUND_RUNS: usize = 32;
/// Plans run from one reference seed before the next reference: the first plans of
/// search's order are its most promising (group plans, the scenario's own faults and
/// the race kinds in turn), and a window one reference's timings close another's may
/// open.
pub const PLANS_PER_REFERENCE: usize = 48;
/// Failures a report lists (the rest are counted): a clean scenario's campaign stops at
/// its first, a buggy one's may fail on most runs.
pub const FAILURES_LISTED_MAX: usize = 10_000;
/// Run signatures the campaign remembers: past this, new ones still count as new but
/// are not kept (a campaign's memory stays bounded).
pub const SIGNATURES_MAX: usize = 1 << 20;

/// One of the three ways the campaign draws a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// A seed's fault plan, drawn from every generator of the scenario (`run --seed S`).
    Seeds,
    /// A seed's fault plan drawn from some generators only (`run --seed S --swarm`).
    Swarm,
    /// A fault-free reference run, then plans of faults placed at its steps.
    Search,
}

impl Arm {
    pub const ALL: [Arm; 3] = [Arm::Seeds, Arm::Swarm, Arm::Search];

    /// As the JSON output names it.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Seeds => "seeds",
            Arm::Swarm => "swarm",
            Arm::Search => "search",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Each arm's share of a round, in parts of the three's sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Split {
    pub seeds: u32,
    pub swarm: u32,
    pub search: u32,
}

impl Split {
    /// Half random seeds, a quarter swarm seeds, a quarter search plans.
    pub const DEFAULT: Split = Split {
        seeds: 2,
        swarm: 1,
        search: 1,
    };

    fn shares(self) -> [u64; 3] {
        [
            u64::from(self.seeds),
            u64::from(self.swarm),
            u64::from(self.search),
        ]
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The first seed of each arm (random seeds, swarm seeds, reference seeds).
    pub first_seed: u64,
    /// Runs in all, reference runs included.
    pub budget_runs: u64,
    pub jobs: usize,
    /// End at the first failing run, in the campaign's order.
    pub stop_on_first: bool,
    /// Claim no new run once this much wall time has passed.
    pub time_budget: Option<Duration>,
    pub split: Split,
    /// A quarter of each round more for the arm that found the most new signatures per
    /// run in the round before (off: the stated split throughout).
    pub adaptive: bool,
    pub plans_per_reference: usize,
    /// Judge by two oracles too, findings without an invariant: each search plan's end
    /// against its reference run's (Sieve's differential oracle, [`crate::search::DIFFERENTIAL`]),
    /// and each reference run's end against the first reference's (Kamera's
    /// divergence oracle, [`DIVERGENCE`]: the same workload, two fault-free schedules).
    pub differential: bool,
}

impl Config {
    /// `budget_runs` runs from seed 0, the default split, adaptive.
    pub fn new(budget_runs: u64, jobs: usize) -> Config {
        Config {
            first_seed: 0,
            budget_runs,
            jobs,
            stop_on_first: false,
            time_budget: None,
            split: Split::DEFAULT,
            adaptive: true,
            plans_per_reference: PLANS_PER_REFERENCE,
            differential: false,
        }
    }

    /// The search each reference seed's plans come from: `search NAME --seeds R..R+1
    /// --max-plans P --no-pairs` (within the envelope, group plans first).
    pub fn search(&self) -> SearchConfig {
        SearchConfig {
            max_plans: self.plans_per_reference,
            pairs: false,
            ..SearchConfig::default()
        }
    }
}

/// One run of the campaign.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Trial {
    pub arm: Arm,
    /// The run's seed: a random or swarm seed, or the reference seed of a search plan.
    pub seed: u64,
    /// The plan's place in its reference seed's order (`None`: a seed's own run, or the
    /// reference run itself).
    pub plan: Option<usize>,
    /// The plan in words (search plans only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Trial {
    /// `seed 3`, `swarm seed 3`, `reference seed 0`, `seed 0 plan #4 (interleave: ...)`.
    pub fn label(&self) -> String {
        match (self.arm, self.plan) {
            (Arm::Seeds, _) => format!("seed {}", self.seed),
            (Arm::Swarm, _) => format!("swarm seed {}", self.seed),
            (Arm::Search, None) => format!("reference seed {}'s fault-free run", self.seed),
            (Arm::Search, Some(p)) => format!(
                "search plan #{p} of reference seed {}{}",
                self.seed,
                self.description
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// One failing run.
#[derive(Clone, Debug, Serialize)]
pub struct CombinedFailure {
    /// Its place in the campaign's order, from 0: the runs up to it are `index + 1`.
    pub index: u64,
    pub trial: Trial,
    pub invariant: String,
    pub time_ms: u64,
    /// The failing run's trace hash, 16 hex digits: its replay gives the same.
    pub trace_hash: String,
    /// Whether it is the first failure of its invariant (a finding, saved once).
    pub finding: bool,
    /// A [`DIVERGENCE`]: the reference seed whose fault-free run it ends unlike.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diverges_from: Option<u64>,
}

/// What one arm ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ArmReport {
    pub runs: u64,
    /// Seeds `first_seed..next_seed` run (for search: the reference seeds of its runs).
    pub next_seed: u64,
    /// Search: the reference runs among `runs` (the rest are plans).
    pub references: u64,
    pub failures: u64,
    /// Run signatures its runs reached first.
    pub new_signatures: u64,
}

/// What a combined campaign did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub runs: u64,
    pub rounds: u64,
    /// Per arm, in [`Arm::ALL`]'s order.
    pub arms: [ArmReport; 3],
    /// Every failure, in campaign order, while their number stays within
    /// [`FAILURES_LISTED_MAX`]; `failure_count` counts all.
    pub failures: Vec<CombinedFailure>,
    pub failure_count: u64,
    /// Distinct invariants violated: the findings, each saved once.
    pub findings: u64,
    pub signatures: u64,
    /// Whether the time budget ended the campaign before its budget of runs.
    pub out_of_time: bool,
    /// Every run's trace hash folded in campaign order: equal for two campaigns exactly
    /// when they made the same runs (the same for any `--jobs`).
    pub trace_hash: u64,
    pub events: u64,
    pub sim_ms: u64,
}

impl Report {
    pub fn first_failure(&self) -> Option<&CombinedFailure> {
        self.failures.first()
    }

    pub fn arm(&self, arm: Arm) -> &ArmReport {
        &self.arms[arm.index()]
    }
}

/// A run's result as a round reads it.
#[derive(Clone)]
struct Ran {
    outcome: Outcome,
    /// The full plan, kept only for a failure.
    plan: Option<Plan>,
    /// Sorted, without repeats.
    signature: Vec<u64>,
}

/// A trial of a round, ready to run.
enum Job {
    Seed(u64),
    Swarm(u64),
    /// A reference run already made (its world was needed for its plans).
    Reference(Box<Ran>),
    Plan(u64, Box<Candidate>, Option<Arc<EndState>>),
}

/// The search arm's state: the reference seed being searched and its plans left.
struct SearchArm {
    next_reference: u64,
    plans: std::collections::VecDeque<(usize, Candidate)>,
    seed: u64,
    /// The reference's end state, its plans' differential reference.
    state: Option<Arc<EndState>>,
    /// The first reference's seed and end state, every later reference's divergence
    /// reference.
    first: Option<(u64, Arc<EndState>)>,
}

/// The campaign between rounds: each arm's next seed, the search queue, the signatures
/// seen, the invariants already found.
struct State<'a> {
    scenario: &'a Scenario,
    config: &'a Config,
    next_seed: [u64; 2],
    search: SearchArm,
    seen: BTreeSet<u64>,
    found: BTreeSet<String>,
    /// Shares of the next round.
    shares: [u64; 3],
}

/// Run a combined campaign. `on_finding` sees the first failure of each invariant, in
/// campaign order (on the calling thread), with its outcome and full plan, so a caller
/// can save it; `on_progress` sees runs and failures so far.
pub fn run(
    scenario: &Scenario,
    config: &Config,
    on_finding: &mut dyn FnMut(&CombinedFailure, &Outcome, &Plan),
    on_progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    let deadline = config
        .time_budget
        .and_then(|b| Instant::now().checked_add(b));
    let in_time = || deadline.is_none_or(|d| Instant::now() < d);
    let mut state = State {
        scenario,
        config,
        next_seed: [config.first_seed; 2],
        search: SearchArm {
            next_reference: config.first_seed,
            plans: Default::default(),
            seed: config.first_seed,
            state: None,
            first: None,
        },
        seen: BTreeSet::new(),
        found: BTreeSet::new(),
        shares: config.split.shares(),
    };
    let mut report = Report {
        arms: Default::default(),
        ..Report::default()
    };
    for arm in Arm::ALL {
        report.arms[arm.index()].next_seed = config.first_seed;
    }
    let done = std::sync::atomic::AtomicU64::new(0);
    let failed = std::sync::atomic::AtomicU64::new(0);
    while report.runs < config.budget_runs && !report.out_of_time {
        if !in_time() {
            report.out_of_time = true;
            break;
        }
        let size = (config.budget_runs - report.runs).min(ROUND_RUNS as u64) as usize;
        let round = state.round(size);
        let mut new_per_arm = [0u64; 3];
        let mut runs_per_arm = [0u64; 3];
        let mut stop = false;
        let mut claimed_all = true;
        {
            let claim = || in_time();
            let task = |i: u64| {
                let ran = state.run(&round[i as usize].1);
                let fails = ran.outcome.violation.is_some();
                let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let f = failed.fetch_add(u64::from(fails), std::sync::atomic::Ordering::SeqCst)
                    + u64::from(fails);
                on_progress(n, f);
                (ran, fails)
            };
            let mut read = 0usize;
            let mut results: Vec<(u64, Ran)> = Vec::with_capacity(round.len());
            run_streamed(
                round.len() as u64,
                config.jobs,
                config.stop_on_first,
                &claim,
                &task,
                &mut |i, ran| {
                    read += 1;
                    results.push((i, ran));
                },
            );
            if read < round.len() {
                claimed_all = false;
            }
            for (i, ran) in results {
                let trial = &round[i as usize].0;
                let a = trial.arm.index();
                runs_per_arm[a] += 1;
                let index = report.runs;
                report.runs += 1;
                report.arms[a].runs += 1;
                // What ran, not what the round drew: a campaign that stops mid-round
                // reports only the seeds it reached.
                report.arms[a].next_seed = report.arms[a].next_seed.max(trial.seed + 1);
                if trial.arm == Arm::Search && trial.plan.is_none() {
                    report.arms[a].references += 1;
                }
                report.events += ran.outcome.events;
                report.trace_hash = reconsim_sim::StableHasher::hash_one(&(
                    report.trace_hash,
                    ran.outcome.trace_hash,
                ));
                report.sim_ms += ran.outcome.sim_ms;
                let mut new = 0;
                for s in &ran.signature {
                    if !state.seen.contains(s) {
                        new += 1;
                        if state.seen.len() < SIGNATURES_MAX {
                            state.seen.insert(*s);
                        }
                    }
                }
                new_per_arm[a] += new;
                report.arms[a].new_signatures += new;
                if let Some(v) = &ran.outcome.violation {
                    report.failure_count += 1;
                    report.arms[a].failures += 1;
                    let finding = state.found.insert(v.invariant.clone());
                    let failure = CombinedFailure {
                        index,
                        trial: trial.clone(),
                        invariant: v.invariant.clone(),
                        time_ms: v.time.as_ms(),
                        trace_hash: ran.outcome.trace_hash_hex(),
                        finding,
                        diverges_from: (v.invariant == DIVERGENCE)
                            .then(|| state.search.first.as_ref().map(|(s, _)| *s))
                            .flatten(),
                    };
                    if finding {
                        report.findings += 1;
                        let plan = ran.plan.as_ref().expect("a failing run keeps its plan");
                        on_finding(&failure, &ran.outcome, plan);
                    }
                    if report.failures.len() < FAILURES_LISTED_MAX {
                        report.failures.push(failure);
                    }
                    if config.stop_on_first {
                        stop = true;
                        break;
                    }
                }
            }
        }
        report.rounds += 1;
        report.signatures = state.seen.len() as u64;
        if stop {
            break;
        }
        if !claimed_all {
            report.out_of_time = true;
            break;
        }
        state.adapt(&new_per_arm, &runs_per_arm);
    }
    report
}

/// The run of `trial` again, as the campaign under `config` made it (a search plan's
/// reference run is made again for its plans); `None` for a plan index its reference
/// does not have.
pub fn rerun(scenario: &Scenario, config: &Config, trial: &Trial) -> Option<Outcome> {
    let plan = match (trial.arm, trial.plan) {
        (Arm::Seeds, _) => crate::faults::generate(scenario, trial.seed),
        (Arm::Swarm, _) => crate::faults::generate_swarm(scenario, trial.seed),
        (Arm::Search, None) => Plan::default(),
        (Arm::Search, Some(k)) => {
            let keep = Keep {
                decisions: true,
                signature: false,
            };
            let (_, world) =
                run_world_keeping(scenario, trial.seed, Plan::default(), TraceMode::Hash, keep);
            let plans = plans_counted(scenario, &world, &config.search()).plans;
            full_plan(&Plan::default(), plans.get(k)?)
        }
    };
    // Judged as the campaign judged it: a plan against its reference, a later
    // reference against the first.
    if config.differential && trial.arm == Arm::Search {
        let judge = match trial.plan {
            Some(_) => crate::failure::Judge::Differential,
            None if trial.seed != config.first_seed => crate::failure::Judge::Divergence {
                from: config.first_seed,
            },
            None => crate::failure::Judge::Invariants,
        };
        return Some(crate::failure::rerun(
            scenario,
            trial.seed,
            &plan,
            judge,
            TraceMode::Hash,
        ));
    }
    Some(crate::runner::run_world(scenario, trial.seed, plan, TraceMode::Hash).0)
}

impl State<'_> {
    /// The next round's trials, in the order they count: the arms in turn by their
    /// shares (smooth weighted round robin), each from its next seed or plan.
    /// The first `size` trials of a full round: a round is always apportioned and
    /// interleaved as [`ROUND_RUNS`] runs, so a campaign cut short (by its run budget or
    /// its time) ran a prefix of what a larger budget runs.
    fn round(&mut self, size: usize) -> Vec<(Trial, Job)> {
        let quota = apportion(ROUND_RUNS as u64, self.shares);
        let total: u64 = quota.iter().sum();
        let mut credit = [0i64; 3];
        let mut left = quota;
        let mut out = Vec::with_capacity(size);
        while out.len() < size.min(ROUND_RUNS) {
            for a in 0..3 {
                if left[a] > 0 {
                    credit[a] += quota[a] as i64;
                }
            }
            let a = (0..3)
                .filter(|a| left[*a] > 0)
                .max_by_key(|a| (credit[*a], std::cmp::Reverse(*a)))
                .expect("a round's quotas add up to its size");
            credit[a] -= total as i64;
            left[a] -= 1;
            out.push(self.next_trial(Arm::ALL[a]));
        }
        out
    }

    fn next_trial(&mut self, arm: Arm) -> (Trial, Job) {
        let trial = |arm, seed, plan, description| Trial {
            arm,
            seed,
            plan,
            description,
        };
        match arm {
            Arm::Seeds | Arm::Swarm => {
                let seed = self.next_seed[arm.index()];
                self.next_seed[arm.index()] = seed.saturating_add(1);
                let job = if arm == Arm::Seeds {
                    Job::Seed(seed)
                } else {
                    Job::Swarm(seed)
                };
                (trial(arm, seed, None, None), job)
            }
            Arm::Search => {
                if let Some((k, c)) = self.search.plans.pop_front() {
                    let seed = self.search.seed;
                    let description = Some(c.description.clone());
                    return (
                        trial(arm, seed, Some(k), description),
                        Job::Plan(seed, Box::new(c), self.search.state.clone()),
                    );
                }
                // The next reference: run now (its world makes its plans), counted as
                // the round's run at this place.
                let seed = self.search.next_reference;
                self.search.next_reference = seed.saturating_add(1);
                self.search.seed = seed;
                let keep = Keep {
                    decisions: true,
                    signature: self.config.adaptive,
                };
                let (outcome, mut world) = if self.config.differential {
                    let (outcome, state, world) =
                        crate::oracle::run_kept(self.scenario, seed, Plan::default(), keep);
                    let state = Arc::new(state);
                    self.search.state = Some(state.clone());
                    // Kamera's divergence: a later reference's fault-free run against
                    // the first's (the same workload, other timings).
                    let outcome = match &self.search.first {
                        None => {
                            self.search.first = Some((seed, state));
                            outcome
                        }
                        Some((from, first)) => differ(
                            outcome,
                            &state,
                            first,
                            DIVERGENCE,
                            &format!("seed {from}'s fault-free run"),
                        ),
                    };
                    (outcome, world)
                } else {
                    run_world_keeping(self.scenario, seed, Plan::default(), TraceMode::Hash, keep)
                };
                let sig = world.sim.signature().to_vec();
                let counts = plans_counted(self.scenario, &world, &self.config.search());
                drop(world);
                self.search.plans = counts.plans.into_iter().enumerate().collect();
                let fails = outcome.violation.is_some();
                let ran = Ran {
                    outcome,
                    plan: fails.then(Plan::default),
                    signature: sig,
                };
                (trial(arm, seed, None, None), Job::Reference(Box::new(ran)))
            }
        }
    }

    /// Run one trial (on a worker thread).
    fn run(&self, job: &Job) -> Ran {
        let recorded = |seed: u64, plan: Plan| {
            let keep = Keep {
                decisions: false,
                signature: self.config.adaptive,
            };
            let (outcome, mut world) =
                run_world_keeping(self.scenario, seed, plan.clone(), TraceMode::Hash, keep);
            let signature = world.sim.signature().to_vec();
            drop(world);
            let plan = outcome.violation.is_some().then_some(plan);
            Ran {
                outcome,
                plan,
                signature,
            }
        };
        match job {
            Job::Seed(seed) => recorded(*seed, crate::faults::generate(self.scenario, *seed)),
            Job::Swarm(seed) => {
                recorded(*seed, crate::faults::generate_swarm(self.scenario, *seed))
            }
            Job::Reference(ran) => ran.as_ref().clone(),
            Job::Plan(seed, c, None) => recorded(*seed, full_plan(&Plan::default(), c)),
            // Sieve's differential oracle: the plan's end against its reference's.
            Job::Plan(seed, c, Some(reference)) => {
                let plan = full_plan(&Plan::default(), c);
                let keep = Keep {
                    decisions: false,
                    signature: self.config.adaptive,
                };
                let (outcome, state, mut world) =
                    crate::oracle::run_kept(self.scenario, *seed, plan.clone(), keep);
                let signature = world.sim.signature().to_vec();
                drop(world);
                let outcome = against_reference(&plan, outcome, &state, reference);
                let plan = outcome.violation.is_some().then_some(plan);
                Ran {
                    outcome,
                    plan,
                    signature,
                }
            }
        }
    }

    /// The next round's shares: the stated split, and a quarter of the round more for
    /// the arm whose runs reached the most new signatures per run (none if no arm did),
    /// taken from the others in proportion to their shares.
    fn adapt(&mut self, new: &[u64; 3], runs: &[u64; 3]) {
        let base = self.config.split.shares();
        self.shares = base;
        if !self.config.adaptive {
            return;
        }
        // New signatures per run, compared as fractions (no floating point); a tie goes
        // to the earlier arm.
        let best = (0..3)
            .filter(|a| runs[*a] > 0 && new[*a] > 0)
            .max_by(|x, y| {
                (u128::from(new[*x]) * u128::from(runs[*y]))
                    .cmp(&(u128::from(new[*y]) * u128::from(runs[*x])))
                    .then(y.cmp(x))
            });
        let Some(w) = best else { return };
        let total: u64 = base.iter().sum();
        let others = total - base[w];
        // Scaled by 4 * others: the winner's base + total / 4, each other arm's base less
        // its part of total / 4. Others with less than a quarter between them keep theirs.
        if 4 * others <= total {
            return;
        }
        for (a, s) in self.shares.iter_mut().enumerate() {
            *s = if a == w {
                (4 * base[w] + total) * others
            } else {
                base[a] * (4 * others - total)
            };
        }
    }
}

/// `size` runs apportioned to shares by largest remainder (ties to the earlier arm);
/// an arm with a share gets at least one run of a round of at least three.
fn apportion(size: u64, shares: [u64; 3]) -> [u64; 3] {
    let total: u64 = shares.iter().sum::<u64>().max(1);
    let mut out = [0u64; 3];
    let mut rem = [0u64; 3];
    for a in 0..3 {
        let exact = u128::from(size) * u128::from(shares[a]);
        out[a] = (exact / u128::from(total)) as u64;
        rem[a] = (exact % u128::from(total)) as u64;
    }
    let mut left = size - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..3).collect();
    order.sort_by_key(|a| (std::cmp::Reverse(rem[*a]), *a));
    for a in order {
        if left == 0 {
            break;
        }
        if shares[a] > 0 {
            out[a] += 1;
            left -= 1;
        }
    }
    if size >= 3 {
        for a in 0..3 {
            if shares[a] > 0 && out[a] == 0 {
                let donor = (0..3).max_by_key(|d| out[*d]).expect("three arms");
                out[donor] -= 1;
                out[a] += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_apportioned_by_share_and_add_up() {
        assert_eq!(apportion(32, [2, 1, 1]), [16, 8, 8]);
        assert_eq!(apportion(5, [2, 1, 1]), [3, 1, 1]);
        assert_eq!(apportion(1, [2, 1, 1]), [1, 0, 0]);
        assert_eq!(apportion(3, [100, 1, 1]), [1, 1, 1]);
        assert_eq!(apportion(32, [0, 0, 1]), [0, 0, 32]);
    }
}
