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
//!    write, and the scenario's own fault generators placed at the steps of what they
//!    target, within their windows.
//! 3. Pruning. Causality, as Sieve prunes: a crash right after a step is kept only if
//!    the reconcile went on from that step's answer (else nothing of it was in flight);
//!    a delayed or dropped watch event only if its receiver sent something while it
//!    would have been missing. Repeats: a plan whose kind, fault, message, previous
//!    message of the same process and latest message of any other process are an
//!    earlier plan's is the same plan again.
//! 4. Order: kinds take turns; within a kind, the scenario's fault windows first, then
//!    the rarest messages (a message the run sends once is a step of a state change,
//!    one it sends hundreds of times a heartbeat), spread over the run.
//! 5. Plans run across jobs, each an ordinary run whose failure is an ordinary failure
//!    file; the report is the same for any `--jobs`. Then pairs, within the budget.
//!    With [`SearchConfig::differential`], a plan that ends unlike its reference fails
//!    too (crates/scenario/src/oracle.rs).

use crate::build::World;
use crate::faults::{Choose, fault_of, targets};
use crate::format::{FaultKind, Plan, Range, Scenario};
use crate::jobs::run_ordered;
use crate::runner::{Outcome, run_world, run_world_recording};
use reconsim_sim::{
    Anchor, DecisionPoint, EventClass, Fault, PartitionMode, Position, TimedFault, TraceMode,
};
use reconsim_world::object::Lease;
use reconsim_world::{Proc, WorldFault};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
    /// Stop at the first failing plan (in plan order, whatever `jobs` is).
    pub stop_on_first: bool,
    /// The faults of every plan besides its perturbation (the reference run's too).
    pub base: Base,
    /// Coverage guidance (Mallory-style): run the singles in rounds, keep a plan whose
    /// run reaches a new abstract signature (which process role made which kind of step
    /// after which), and try its mutations (its anchors one event earlier or later, and
    /// it paired with the first singles) before the rest; no blind pairs.
    pub coverage: bool,
    /// Also judge each plan by Sieve's differential oracle (crates/scenario/src/oracle.rs):
    /// a plan whose run holds every invariant but ends differently from its reference
    /// run (masked end state, objects created and deleted) fails as [`DIFFERENTIAL`].
    pub differential: bool,
}

/// The invariant name of a plan the differential oracle flagged.
pub const DIFFERENTIAL: &str = "differential";

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
            stop_on_first: false,
            base: Base::None,
            differential: false,
            coverage: false,
        }
    }
}

/// How long a perturbation lasts when nothing in the scenario says.
pub const CRASH_RESTART_MS: u64 = 10_000;
/// A watch event's delay: longer than a reconcile, shorter than a resync.
pub const EVENT_DELAY_MS: u64 = 30_000;
/// A pause with no lease to outlast.
pub const PAUSE_MS_DEFAULT: u64 = 60_000;
/// Pairs are taken among the first this many singles.
pub const PAIR_POOL: usize = 40;

/// One plan: its perturbations, in words and as faults.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    /// `crash_after`, `lose_answer`, `pause_before`, `delay_event`, `drop_event`,
    /// `resync_after`, or `scenario:<i>` for the scenario's fault generator `i`.
    pub kinds: Vec<String>,
    pub description: String,
    /// The perturbations' faults (without the base plan's).
    pub faults: Plan,
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
    pub singles: usize,
    /// Pair plans queued within the budget.
    pub pairs: usize,
    /// Plans that ran.
    pub runs: usize,
    /// Of those, mutations of plans that reached new coverage ([`SearchConfig::coverage`]).
    pub mutations: usize,
    pub first_failure_plan: Option<usize>,
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

/// A generator's choices for one plan: its target and partition mode enumerated, its
/// values drawn from the generator's ranges as a seed's plan would draw them (the
/// strongest value is not always the one that opens the window: a stall that ends too
/// late can hide the very event that would have raced).
struct Placed {
    target: usize,
    hold: bool,
    rng: reconsim_sim::SimRng,
}

impl Choose for Placed {
    fn pick(&mut self, n: usize) -> usize {
        self.target % n.max(1)
    }

    fn draw(&mut self, r: Range) -> u64 {
        self.rng.draw(r)
    }

    fn hold(&mut self) -> bool {
        self.hold
    }
}

/// What the reference run tells the generator about its processes.
struct Cast {
    /// Controller processes (managers): the code under test.
    controllers: BTreeSet<String>,
    /// Processes that play the user's actions (the workload): a fault right before a
    /// user's write is the classic race with an operator's change.
    users: BTreeSet<String>,
    /// Each process's host.
    host_of: BTreeMap<String, String>,
    /// The longest lease a process held, in ms.
    lease_ms: u64,
}

impl Cast {
    fn of(world: &World) -> Cast {
        let sim = &world.sim;
        let mut controllers = BTreeSet::new();
        let mut users = BTreeSet::new();
        let mut host_of = BTreeMap::new();
        for (p, actor) in sim.actors() {
            let name = sim.proc_name(p).to_string();
            match actor {
                Proc::Manager(_) => {
                    controllers.insert(name.clone());
                }
                Proc::Script(_) => {
                    users.insert(name.clone());
                }
                _ => {}
            }
            host_of.insert(name, sim.host_name(sim.proc_host(p)).to_string());
        }
        let Proc::ApiServer(api) = sim.actor(world.apiserver) else {
            unreachable!("process 0 is the API server")
        };
        let lease_ms = api
            .list(<Lease as reconsim_world::object::Resource>::KIND)
            .filter_map(|o| o.typed::<Lease>())
            .filter(|l| l.holder_identity.is_some())
            .map(|l| u64::from(l.lease_duration_seconds) * 1000)
            .max()
            .unwrap_or(0);
        Cast {
            controllers,
            users,
            host_of,
            lease_ms,
        }
    }
}

/// A candidate before pruning and ordering.
struct Single {
    kind: String,
    /// The decision it perturbs.
    at: usize,
    fault: TimedFault<WorldFault>,
}

fn anchor(d: &DecisionPoint, position: Position) -> Anchor {
    Anchor {
        process: d.process.clone(),
        event: d.event,
        nth: d.nth,
        position,
    }
}

fn sends(class: EventClass) -> bool {
    matches!(
        class,
        EventClass::Write | EventClass::Call | EventClass::Renewal
    )
}

/// Sieve's perturbations of one controller's decision.
fn builtin(i: usize, d: &DecisionPoint, followed: bool, cast: &Cast, out: &mut Vec<Single>) {
    let mut push = |kind: &str, position, duration_ms, fault| {
        out.push(Single {
            kind: kind.into(),
            at: i,
            fault: TimedFault::on(anchor(d, position), duration_ms, fault),
        })
    };
    match d.event {
        EventClass::Write | EventClass::Call => {
            if followed {
                push(
                    "crash_after",
                    Position::After,
                    Some(CRASH_RESTART_MS),
                    Fault::Crash {
                        process: d.process.clone(),
                    },
                );
            }
            push("lose_answer", Position::After, None, Fault::LoseAnswer);
        }
        EventClass::Renewal => {
            let pause_ms = if cast.lease_ms > 0 {
                2 * cast.lease_ms
            } else {
                PAUSE_MS_DEFAULT
            };
            push(
                "pause_before",
                Position::Before,
                Some(pause_ms),
                Fault::Pause {
                    process: d.process.clone(),
                },
            );
        }
        EventClass::WatchEvent => {
            push(
                "delay_event",
                Position::After,
                None,
                Fault::DelayMessage {
                    extra_ms: EVENT_DELAY_MS,
                },
            );
            push("drop_event", Position::After, None, Fault::DropMessage);
        }
        EventClass::Read => {}
    }
}

/// The scenario's generator `gi` as faults anchored to the decisions of what it
/// targets, within its window: each target (and each partition mode it allows), its
/// values drawn per plan from the generator's ranges.
#[allow(clippy::too_many_arguments)]
fn from_generator(
    gi: usize,
    kind: &FaultKind,
    window: Range,
    duration: Range,
    decisions: &[DecisionPoint],
    cast: &Cast,
    streams: &reconsim_sim::Streams,
    out: &mut Vec<Single>,
    timed: &mut Vec<(String, TimedFault<WorldFault>)>,
) {
    if let FaultKind::Failpoint { hit, .. } = kind {
        // A failpoint is anchored to a point of the code already: armed at the start
        // of its window, one plan per hit (the first 16), for the rest of the window.
        for target in 0..targets(kind) {
            for h in hit.lo..=hit.hi.min(hit.lo.saturating_add(15)) {
                let rng = streams.indexed(&format!("search/{gi}/{target}"), h);
                let mut fault = fault_of(
                    kind,
                    &mut Placed {
                        target,
                        hold: false,
                        rng,
                    },
                );
                if let Fault::Inject {
                    fault: WorldFault::Failpoint { hit, .. },
                    ..
                } = &mut fault
                {
                    *hit = u32::try_from(h).unwrap_or(u32::MAX);
                }
                timed.push((
                    format!("scenario:{gi}"),
                    TimedFault::at(
                        window.lo,
                        Some(window.hi.saturating_sub(window.lo).max(duration.hi)),
                        fault,
                    ),
                ));
            }
        }
        return;
    }
    let holds: &[bool] = match kind {
        FaultKind::Partition {
            mode: crate::format::PartitionChoice::Either,
            ..
        } => &[false, true],
        _ => &[false],
    };
    for target in 0..targets(kind) {
        for &hold in holds {
            // Its values drawn for each plan, from the plan's own stream: the plans
            // that place it differ in when and in how much, as seeds' plans would.
            let draw = |i: usize| {
                let mut rng = streams.indexed(&format!("search/{gi}/{target}/{hold}"), i as u64);
                let duration_ms = rng.draw(duration);
                (
                    duration_ms,
                    fault_of(kind, &mut Placed { target, hold, rng }),
                )
            };
            // Which processes' steps place it: known from the fault's target alone.
            let fault = draw(0).1;
            let reacts = match &fault {
                Fault::Crash { process } | Fault::Pause { process } => {
                    cast.controllers.contains(process)
                }
                _ => false,
            };
            let Placement {
                whose,
                position,
                classes,
            } = placement(&fault);
            // Within the generator's own window: when the scenario says it can happen.
            let within = |t: u64| window.lo <= t && t <= window.hi;
            for (i, d) in decisions.iter().enumerate() {
                if !within(d.time_ms) {
                    continue;
                }
                // Its targets' own steps; just before a user's action; and, for a
                // controller's crash or pause, right after the world outside the
                // controllers changes (a Node registers, a kubelet labels it): the
                // restart or resume then lands on a state the controller has not seen.
                let position = if classes.contains(&d.event) && whose.matches(&d.process, cast) {
                    // Paused right after a read, it acts on what it read that long ago
                    // (Sieve's stale state); before a send, the send waits.
                    if d.event == EventClass::Read {
                        Position::After
                    } else {
                        position
                    }
                } else if d.event == EventClass::Write && cast.users.contains(&d.process) {
                    Position::Before
                } else if d.event == EventClass::Write
                    && reacts
                    && !cast.controllers.contains(&d.process)
                {
                    Position::After
                } else {
                    continue;
                };
                let (duration_ms, fault) = draw(i);
                out.push(Single {
                    kind: format!("scenario:{gi}"),
                    at: i,
                    fault: TimedFault::on(anchor(d, position), Some(duration_ms), fault),
                });
            }
        }
    }
}

/// Whose steps a generator's fault is placed at.
enum Whose {
    Process(String),
    /// Every process on the host.
    Host(String),
    /// Every controller (a cluster-wide fault).
    Controllers,
}

impl Whose {
    fn matches(&self, process: &str, cast: &Cast) -> bool {
        match self {
            Whose::Process(p) => p == process,
            Whose::Host(h) => cast.host_of.get(process) == Some(h),
            Whose::Controllers => cast.controllers.contains(process),
        }
    }
}

/// Where a generator's fault goes: whose steps, which of them, and on which side.
struct Placement {
    whose: Whose,
    position: Position,
    classes: &'static [EventClass],
}

const SENDS: &[EventClass] = &[EventClass::Write, EventClass::Call, EventClass::Renewal];
const SENDS_AND_READS: &[EventClass] = &[
    EventClass::Write,
    EventClass::Call,
    EventClass::Renewal,
    EventClass::Read,
];

fn placement(fault: &Fault<WorldFault>) -> Placement {
    let (whose, position, classes) = match fault {
        // A crash right after a step: what was in flight is lost.
        Fault::Crash { process } => (Whose::Process(process.clone()), Position::After, SENDS),
        // A pause just before a send (or right after a read: it acts on what it read
        // that long ago, Sieve's stale state).
        Fault::Pause { process } => (
            Whose::Process(process.clone()),
            Position::Before,
            SENDS_AND_READS,
        ),
        // The host's steps catch the fault: its VM freezes, its link is cut or slow,
        // its kubelet stops, just before it sends.
        Fault::PauseHost { host } => (Whose::Host(host.clone()), Position::Before, SENDS),
        Fault::Partition { hosts_a, .. } | Fault::SlowLink { hosts_a, .. } => (
            Whose::Host(hosts_a.first().cloned().unwrap_or_default()),
            Position::Before,
            SENDS,
        ),
        Fault::Inject {
            process,
            fault: WorldFault::KubeletStop,
        } => (
            Whose::Host(
                process
                    .strip_prefix("kubelet/")
                    .unwrap_or(process)
                    .to_string(),
            ),
            Position::Before,
            SENDS,
        ),
        // A stalled watch stream, from one of its events.
        Fault::Inject {
            process,
            fault: WorldFault::WatchStall { .. },
        } => (
            Whose::Process(process.clone()),
            Position::After,
            &[EventClass::WatchEvent][..],
        ),
        // Cluster-wide (cloud lag, join delay, watch lag): from a controller's step,
        // renewals included (in a quiet spell they are the only ones).
        _ => (Whose::Controllers, Position::After, SENDS),
    };
    Placement {
        whose,
        position,
        classes,
    }
}

/// The decisions of each process, in order: (time, decision index).
fn by_process(decisions: &[DecisionPoint]) -> BTreeMap<&str, Vec<(u64, usize)>> {
    let mut m: BTreeMap<&str, Vec<(u64, usize)>> = BTreeMap::new();
    for (i, d) in decisions.iter().enumerate() {
        m.entry(d.process.as_str())
            .or_default()
            .push((d.time_ms, i));
    }
    m
}

/// Sieve's causality: the perturbation can reach a later decision.
fn causal(
    s: &Single,
    decisions: &[DecisionPoint],
    own: &BTreeMap<&str, Vec<(u64, usize)>>,
) -> bool {
    let d = &decisions[s.at];
    match s.fault.fault {
        Fault::DelayMessage { extra_ms } => {
            // A decision of the receiver while the event would have been missing.
            own.get(d.process.as_str()).is_some_and(|v| {
                v.iter().any(|&(t, j)| {
                    j > s.at && t <= d.time_ms + extra_ms && sends(decisions[j].event)
                })
            })
        }
        Fault::DropMessage if d.event == EventClass::WatchEvent => {
            // Until its reflector relists at the next event, or for as long as a delay.
            own.get(d.process.as_str()).is_some_and(|v| {
                v.iter().any(|&(t, j)| {
                    j > s.at && t <= d.time_ms + EVENT_DELAY_MS && sends(decisions[j].event)
                })
            })
        }
        _ => true,
    }
}

/// A kept single's order key ((outside the scenario's windows, rarity)), its decision
/// and its fault.
type Entry = ((bool, usize), usize, TimedFault<WorldFault>);

/// Plans from a reference run: (generated, candidates in run order).
fn plan_singles(
    scenario: &Scenario,
    seed: u64,
    decisions: &[DecisionPoint],
    cast: &Cast,
) -> (usize, Vec<Candidate>) {
    let streams = reconsim_sim::Streams::new(seed);
    let mut raw = Vec::new();
    let mut timed = Vec::new();
    let followed: BTreeSet<usize> = decisions.iter().filter_map(|d| d.after_answer_of).collect();
    for (i, d) in decisions.iter().enumerate() {
        if cast.controllers.contains(&d.process) {
            builtin(i, d, followed.contains(&i), cast, &mut raw);
        }
        if d.event == EventClass::Write {
            // A controller's periodic resync lands right after someone else's write:
            // it reconciles from a cache that has not seen that write yet, while its
            // live reads may.
            for c in cast.controllers.iter().filter(|c| **c != d.process) {
                raw.push(Single {
                    kind: "resync_after".into(),
                    at: i,
                    fault: TimedFault::on(
                        anchor(d, Position::After),
                        None,
                        Fault::Inject {
                            process: c.clone(),
                            fault: WorldFault::Resync,
                        },
                    ),
                });
            }
        }
    }
    for (gi, g) in scenario.faults.iter().enumerate() {
        from_generator(
            gi,
            &g.fault,
            g.at_ms,
            g.duration_ms,
            decisions,
            cast,
            &streams,
            &mut raw,
            &mut timed,
        );
    }
    let generated = raw.len() + timed.len();
    let own = by_process(decisions);
    // The previous decision of the same process, for repeats.
    let mut previous: Vec<Option<usize>> = vec![None; decisions.len()];
    for v in own.values() {
        for w in v.windows(2) {
            previous[w[1].1] = Some(w[0].1);
        }
    }
    // The latest decision of any other process before each one: the cluster's context.
    let mut context: Vec<Option<usize>> = vec![None; decisions.len()];
    let mut last: Option<usize> = None;
    let mut last_other: BTreeMap<&str, Option<usize>> = BTreeMap::new();
    for (i, d) in decisions.iter().enumerate() {
        // `last` is the latest decision overall; if it was this process's own, the
        // context is the latest before it by someone else, kept per process.
        context[i] = match last {
            Some(j) if decisions[j].process != d.process => Some(j),
            _ => last_other.get(d.process.as_str()).copied().flatten(),
        };
        last_other.insert(d.process.as_str(), context[i]);
        last = Some(i);
    }
    let mut label_count: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for d in decisions {
        *label_count
            .entry((d.process.as_str(), d.label.as_str()))
            .or_default() += 1;
    }
    // Sieve's perturbations go first where the scenario's own faults may strike.
    let windows: Vec<Range> = scenario.faults.iter().map(|g| g.at_ms).collect();
    let outside = |t: u64| !windows.is_empty() && !windows.iter().any(|w| w.lo <= t && t <= w.hi);
    let mut seen = BTreeSet::new();
    let mut kept: Vec<(String, Entry)> = Vec::new();
    for s in raw {
        if !causal(&s, decisions, &own) {
            continue;
        }
        let d = &decisions[s.at];
        let label = |j: Option<usize>| j.map(|j| decisions[j].label.clone());
        let fault_key = serde_json::to_string(&s.fault).expect("faults serialize");
        let key = (
            s.kind.clone(),
            fault_key.replace(&format!("\"nth\":{}", d.nth), ""),
            d.label.clone(),
            label(previous[s.at]),
            label(context[s.at]),
        );
        if !seen.insert(key) {
            continue;
        }
        let rarity = label_count[&(d.process.as_str(), d.label.as_str())];
        kept.push((s.kind, ((outside(d.time_ms), rarity), s.at, s.fault)));
    }
    // Rarest first, then round-robin over kinds, each spread over the run.
    let mut buckets: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for (kind, entry) in kept {
        buckets.entry(kind).or_default().push(entry);
    }
    // Failpoint plans (timed, one per hit) go first in their generator's bucket.
    let mut failpoints: BTreeMap<String, Vec<TimedFault<WorldFault>>> = BTreeMap::new();
    for (kind, fault) in timed {
        failpoints.entry(kind).or_default().push(fault);
    }
    for b in buckets.values_mut() {
        b.sort_by_key(|(rarity, at, _)| (*rarity, *at));
        spread(b, |(rarity, _, _)| *rarity);
    }
    let mut order = Vec::new();
    let mut queues: Vec<(String, std::collections::VecDeque<Entry>)> =
        buckets.into_iter().map(|(k, v)| (k, v.into())).collect();
    for (kind, faults) in failpoints {
        for fault in faults {
            order.push(Candidate {
                kinds: vec![kind.clone()],
                description: format!(
                    "{kind}: {} from {} ms",
                    fault_words(&fault.fault),
                    fault.at_ms
                ),
                faults: Plan::new(vec![fault]),
            });
        }
    }
    while queues.iter().any(|(_, q)| !q.is_empty()) {
        for (kind, q) in &mut queues {
            if let Some((_, at, fault)) = q.pop_front() {
                order.push(Candidate {
                    kinds: vec![kind.clone()],
                    description: describe(kind, &fault, &decisions[at]),
                    faults: Plan::new(vec![fault]),
                });
            }
        }
    }
    (generated, order)
}

/// Reorder each run of equal keys (already in time order) so that any prefix covers
/// its span of the run evenly: the middle first, then the quarters, and so on (the
/// van der Corput sequence). A bug's window is as likely late as early; time order
/// would reach a late window only after every earlier anchor.
fn spread<T: Clone, K: PartialEq>(v: &mut [T], key: impl Fn(&T) -> K) {
    let mut start = 0;
    while start < v.len() {
        let k = key(&v[start]);
        let n = v[start..].iter().take_while(|e| key(e) == k).count();
        let group: Vec<T> = v[start..start + n].to_vec();
        let mut rank: Vec<(u64, usize)> = (0..n).map(|i| (van_der_corput(i, n), i)).collect();
        rank.sort_unstable();
        for (slot, (_, i)) in v[start..start + n].iter_mut().zip(rank) {
            *slot = group[i].clone();
        }
        start += n;
    }
}

/// Index `i` of `n` by its place in the bit-reversed order of `0..n.next_power_of_two()`.
fn van_der_corput(i: usize, n: usize) -> u64 {
    let bits = n.next_power_of_two().trailing_zeros();
    if bits == 0 {
        return 0;
    }
    (i as u64).reverse_bits() >> (64 - bits)
}

fn describe(kind: &str, f: &TimedFault<WorldFault>, d: &DecisionPoint) -> String {
    let what = fault_words(&f.fault);
    let anchor = f.on.as_ref().map(|a| a.to_string()).unwrap_or_default();
    let lasting = f
        .duration_ms
        .filter(|_| !f.fault.is_message_fault())
        .map(|d| format!(" for {d} ms"))
        .unwrap_or_default();
    format!(
        "{kind}: {what}{lasting} {anchor} (at {} ms: {})",
        d.time_ms, d.label
    )
}

fn fault_words(fault: &Fault<WorldFault>) -> String {
    match fault {
        Fault::Crash { process } => format!("crash {process}"),
        Fault::Pause { process } => format!("pause {process}"),
        Fault::PauseHost { host } => format!("freeze host {host}"),
        Fault::Partition {
            hosts_a,
            hosts_b,
            mode,
            ..
        } => format!(
            "partition {} | {} ({})",
            hosts_a.join(","),
            hosts_b.join(","),
            match mode {
                PartitionMode::Drop => "drop",
                PartitionMode::Hold => "hold",
            }
        ),
        Fault::SlowLink { hosts_a, .. } => format!("slow link from {}", hosts_a.join(",")),
        Fault::ClockSkew { process, .. } => format!("skew the clock of {process}"),
        Fault::Inject { process, fault } => format!("{fault:?} on {process}"),
        Fault::DropMessage => "drop".into(),
        Fault::DelayMessage { extra_ms } => format!("delay +{extra_ms} ms"),
        Fault::LoseAnswer => "lose the answer to".into(),
    }
}

/// Pairs of the first singles, in order of the pair's later index.
fn plan_pairs(singles: &[Candidate], budget: usize) -> Vec<Candidate> {
    let pool = singles.len().min(PAIR_POOL);
    let mut out = Vec::new();
    'all: for j in 1..pool {
        for i in 0..j {
            if out.len() >= budget {
                break 'all;
            }
            let (a, b) = (&singles[i], &singles[j]);
            let mut faults = a.faults.faults.clone();
            faults.extend(b.faults.faults.iter().cloned());
            out.push(Candidate {
                kinds: a.kinds.iter().chain(&b.kinds).cloned().collect(),
                description: format!("{} + {}", a.description, b.description),
                faults: Plan::new(faults),
            });
        }
    }
    out
}

/// The plans of a search, from its reference run, in run order: singles then pairs,
/// `max_plans` at most; with the counts (generated, pruned, singles, pairs).
pub fn plans(
    scenario: &Scenario,
    reference: &World,
    config: &SearchConfig,
) -> (Vec<Candidate>, [usize; 4]) {
    let cast = Cast::of(reference);
    let seed = reference.sim.config().seed;
    let (generated, mut singles) = plan_singles(scenario, seed, reference.sim.decisions(), &cast);
    let kept = singles.len();
    singles.truncate(config.max_plans);
    let room = config.max_plans - singles.len();
    let pairs = if config.pairs {
        plan_pairs(&singles, room)
    } else {
        Vec::new()
    };
    let counts = [generated, generated - kept, singles.len(), pairs.len()];
    singles.extend(pairs);
    (singles, counts)
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
/// end state: a difference is a [`DIFFERENTIAL`] violation at the run's end.
pub fn judge_differential(
    scenario: &Scenario,
    seed: u64,
    plan: &Plan,
    reference: &crate::oracle::EndState,
) -> Outcome {
    let (mut outcome, state) = crate::oracle::run(scenario, seed, plan.clone());
    if outcome.violation.is_none() {
        let diff = reference.diff(&state);
        if !diff.is_empty() {
            outcome.violation = Some(reconsim_check::Violation {
                invariant: DIFFERENTIAL.into(),
                time: reconsim_sim::SimTime(outcome.sim_ms),
                message: format!(
                    "ends differently from its reference run ({} differences): {}",
                    diff.total(),
                    diff.to_string().trim_end().replace('\n', "; ")
                ),
                objects: vec![],
            });
        }
    }
    outcome
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
    let decisions = world.sim.decisions().len();
    let (candidates, [generated, pruned, singles, pairs]) = plans(scenario, &world, config);
    let reference_signature = signature(world.sim.decisions());
    drop(world);
    report.runs += 1;
    report.events += reference.events;
    report.sim_ms += reference.sim_ms;
    let mut one = SeedReport {
        seed,
        reference,
        decisions,
        generated,
        pruned,
        singles,
        pairs,
        runs: 0,
        mutations: 0,
        first_failure_plan: None,
    };
    if one.reference.violation.is_some() && config.stop_on_first {
        return one;
    }
    if config.coverage {
        let singles: Vec<Candidate> = candidates[..singles].to_vec();
        coverage_search(
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
        one.runs += 1;
        report.runs += 1;
        report.events += o.events;
        report.sim_ms += o.sim_ms;
        if let Some(v) = &o.violation {
            one.first_failure_plan.get_or_insert(i);
            report.failures.push(SearchFailure {
                seed,
                plan: i,
                description: candidates[i].description.clone(),
                invariant: v.invariant.clone(),
                time_ms: v.time.as_ms(),
            });
        }
    }
    one
}

/// A run's abstract signature: for each process, the pairs (its previous step, this
/// step), each step as its process's role (the name without its trailing index) and the
/// first two words of its message (`patch Machine`, `call RunInstances`, `Modified
/// Node`): which controller did what kind of thing after what, names and times aside.
pub fn signature(decisions: &[DecisionPoint]) -> BTreeSet<u64> {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for d in decisions {
        let role = d
            .process
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.');
        let shape: String = d
            .label
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        let step = reconsim_sim::StableHasher::hash_one(&(role, d.event, shape));
        let prev = last.insert(d.process.as_str(), step).unwrap_or(0);
        out.insert(reconsim_sim::StableHasher::hash_one(&(prev, step)));
    }
    out
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
            });
        }
    }
    for s in singles.iter().take(COVERAGE_PAIRS) {
        if s.faults == c.faults {
            continue;
        }
        let mut faults = c.faults.faults.clone();
        faults.extend(s.faults.faults.iter().cloned());
        out.push(Candidate {
            kinds: c.kinds.iter().chain(&s.kinds).cloned().collect(),
            description: format!("{} + {}", c.description, s.description),
            faults: Plan::new(faults),
        });
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn coverage_search(
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
            let (mut outcome, world) =
                run_world_recording(scenario, seed, plan.clone(), TraceMode::Hash, true);
            let sig = signature(world.sim.decisions());
            drop(world);
            if outcome.violation.is_none()
                && let Some(reference) = reference_state
            {
                outcome = judge_differential(scenario, seed, &plan, reference);
            }
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
            one.runs += 1;
            one.mutations += usize::from(round[i].1);
            report.runs += 1;
            report.events += o.events;
            report.sim_ms += o.sim_ms;
            if let Some(v) = &o.violation {
                one.first_failure_plan.get_or_insert(index + i);
                report.failures.push(SearchFailure {
                    seed,
                    plan: index + i,
                    description: round[i].0.description.clone(),
                    invariant: v.invariant.clone(),
                    time_ms: v.time.as_ms(),
                });
                if config.stop_on_first {
                    return;
                }
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
}
