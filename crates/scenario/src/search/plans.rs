//! Plans from a reference run: which perturbations each decision point yields, which
//! are pruned (causality, repeats), and in what order the rest run (docs/search.md).

use super::{
    CRASH_RESTART_MS, Candidate, EVENT_DELAY_MS, PAIR_POOL, PAUSE_MS_DEFAULT, STALE_READ_WINDOW_MS,
    SearchConfig,
};
use crate::build::World;
use crate::envelope::Envelope;
use crate::faults::{Choose, fault_of, targets};
use crate::format::{FaultKind, Plan, Range, Scenario};
use crate::timeline::fault_words;
use reconsim_sim::{Anchor, DecisionPoint, EventClass, Fault, Position, TimedFault};
use reconsim_world::WorldFault;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::manager::Manager;
use reconsim_world::object::Lease;
use reconsim_world::script::Script;
use std::collections::{BTreeMap, BTreeSet};

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
pub(super) struct Cast {
    /// Controller processes (managers): the code under test.
    pub(super) controllers: BTreeSet<String>,
    /// Processes that play the user's actions (the workload): a fault right before a
    /// user's write is the classic race with an operator's change.
    users: BTreeSet<String>,
    /// Each process's host.
    host_of: BTreeMap<String, String>,
    /// The longest lease a process held, in ms.
    lease_ms: u64,
}

impl Cast {
    pub(super) fn of(world: &World) -> Cast {
        let sim = &world.sim;
        let mut controllers = BTreeSet::new();
        let mut users = BTreeSet::new();
        let mut host_of = BTreeMap::new();
        for (p, actor) in sim.actors() {
            let name = sim.proc_name(p).to_string();
            if actor.component::<Manager>().is_some() {
                controllers.insert(name.clone());
            } else if actor.component::<Script>().is_some() {
                users.insert(name.clone());
            }
            host_of.insert(name, sim.host_name(sim.proc_host(p)).to_string());
        }
        let Some(api) = sim.actor(world.apiserver).component::<ApiServer>() else {
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
    /// Its faults, all anchored to that decision (one, but for `interleave`).
    faults: Vec<TimedFault<WorldFault>>,
    /// For the race-directed kinds, the race's width in the reference run (how far
    /// apart the two steps it reorders were): the narrowest races go first.
    race_ms: u64,
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

/// The kinds that reorder two steps the reference run took close together, as
/// RaceFuzzer (PLDI'08) directs a scheduler at the races a detector reported: a read
/// and the write that makes it stale, a multi-step change and another controller's
/// reconcile. Their group plans run first, and they follow the scenario's own in every
/// round of the singles.
const RACE_KINDS: &[&str] = &["stale_read", "late_write", "interleave", "straddle"];

/// How far back `late_write` looks for the write a read saw: a write that recent may
/// as well have come just after.
const LATE_WRITE_WINDOW_MS: u64 = 5_000;

/// `stale_read` plans per read: one for each of its next this many stale-making writes.
const STALE_READ_WRITES_MAX: usize = 4;

/// At most this many perturbations in one group plan.
const GROUP_MAX: usize = 64;

/// The kinds each process reads or watches.
fn observers(decisions: &[DecisionPoint]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut observes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for d in decisions {
        if matches!(d.event, EventClass::Read | EventClass::WatchEvent)
            && let Some(k) = &d.subject
        {
            observes
                .entry(d.process.as_str())
                .or_default()
                .insert(k.as_str());
        }
    }
    observes
}

fn resync(d: &DecisionPoint, controller: &str) -> TimedFault<WorldFault> {
    TimedFault::on(
        anchor(d, Position::After),
        None,
        Fault::Inject {
            process: controller.to_string(),
            fault: WorldFault::Resync,
        },
    )
}

/// Decision `at`'s process paused at it for the race's width and `settle_ms` more.
fn paused(
    kind: &str,
    at: usize,
    d: &DecisionPoint,
    position: Position,
    race_ms: u64,
    settle_ms: u64,
) -> Single {
    Single {
        kind: kind.into(),
        at,
        faults: vec![TimedFault::on(
            anchor(d, position),
            Some(race_ms + settle_ms),
            Fault::Pause {
                process: d.process.clone(),
            },
        )],
        race_ms,
    }
}

/// The race-directed perturbations of the reference run's decisions:
/// - `stale_read`: a controller read a kind, went on from the answer, and another
///   process wrote that kind soon after (within [`STALE_READ_WINDOW_MS`]): pause the
///   reader right after its read until that write has landed (`settle_ms` later), so
///   it acts on what it read (a check-then-act race; Kamera's stale views of a live
///   read);
/// - `late_write`: a controller read a kind just after another process wrote it
///   (within [`LATE_WRITE_WINDOW_MS`]) and went on from the answer: pause that writer
///   just before its write until the read has gone by, so the read misses it and the
///   reconcile's later reads see it (a check and an act that disagree);
/// - `interleave` and `straddle`: some process wrote a kind a controller reads or
///   watches: that controller reconciles right then (a resync right after the write).
///   When the writer's reconcile goes on from the answer (a change in several steps:
///   `interleave`), the controller sees the intermediate state; after a last step
///   (`straddle`), its reconcile straddles the write: it starts from a cache that has
///   not seen it yet and re-reads after it.
fn races(
    decisions: &[DecisionPoint],
    followed: &BTreeSet<usize>,
    cast: &Cast,
    settle_ms: u64,
    out: &mut Vec<Single>,
) {
    let observes = observers(decisions);
    // The first decision sent from the handler of each decision's answer.
    let mut next_step: BTreeMap<usize, usize> = BTreeMap::new();
    for (j, d) in decisions.iter().enumerate() {
        if let Some(i) = d.after_answer_of {
            next_step.entry(i).or_insert(j);
        }
    }
    let foreign_write = |w: &DecisionPoint, reader: &str, kind: &str| {
        w.event == EventClass::Write && w.process != reader && w.subject.as_deref() == Some(kind)
    };
    for (i, d) in decisions.iter().enumerate() {
        let Some(kind) = d.subject.as_deref() else {
            continue;
        };
        match d.event {
            EventClass::Read if cast.controllers.contains(&d.process) && followed.contains(&i) => {
                // Each of the next few writes that would make it stale, one plan each:
                // the first is not always the one the reconcile's decision rests on.
                let stale_by = decisions[i + 1..]
                    .iter()
                    .take_while(|w| w.time_ms <= d.time_ms + STALE_READ_WINDOW_MS)
                    .filter(|w| foreign_write(w, &d.process, kind))
                    .take(STALE_READ_WRITES_MAX);
                for w in stale_by {
                    let race_ms = w.time_ms - d.time_ms;
                    out.push(paused(
                        "stale_read",
                        i,
                        d,
                        Position::After,
                        race_ms,
                        settle_ms,
                    ));
                }
                // The other way round: the latest write that the read saw, held back
                // (its writer paused just before it) until the read has gone by.
                let seen = decisions[..i]
                    .iter()
                    .enumerate()
                    .rev()
                    .take_while(|(_, w)| w.time_ms + LATE_WRITE_WINDOW_MS >= d.time_ms)
                    .find(|(_, w)| foreign_write(w, &d.process, kind));
                if let Some((j, w)) = seen {
                    let race_ms = d.time_ms - w.time_ms;
                    out.push(paused(
                        "late_write",
                        j,
                        w,
                        Position::Before,
                        race_ms,
                        settle_ms,
                    ));
                }
            }
            EventClass::Write => {
                // A change in several steps: the window is as wide as the time to the
                // writer's next step. A last step's is the cache's lag.
                let (what, race_ms) = match next_step.get(&i) {
                    Some(&j) => ("interleave", decisions[j].time_ms - d.time_ms),
                    None => ("straddle", 0),
                };
                for c in cast.controllers.iter().filter(|c| **c != d.process) {
                    if observes.get(c.as_str()).is_some_and(|o| o.contains(kind)) {
                        out.push(Single {
                            kind: what.into(),
                            at: i,
                            faults: vec![resync(d, c)],
                            race_ms,
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// Sieve's perturbations of one controller's decision. Within the scenario's fault
/// envelope (`within`: not `--beyond-envelope`), a crash's downtime, a pause and a
/// watch event's delay are at most what the envelope allows the process (Sieve's own
/// values otherwise: a 10 s restart, twice the lease, 30 s); one it does not allow at
/// all is made as Sieve makes it and left out by the envelope's judgement.
fn builtin(
    i: usize,
    d: &DecisionPoint,
    followed: bool,
    cast: &Cast,
    within: Option<&Envelope>,
    out: &mut Vec<Single>,
) {
    let mut push = |kind: &str, position, duration_ms, fault| {
        out.push(Single {
            kind: kind.into(),
            at: i,
            faults: vec![TimedFault::on(anchor(d, position), duration_ms, fault)],
            race_ms: 0,
        })
    };
    match d.event {
        EventClass::Write | EventClass::Call => {
            if followed {
                let restart_ms = within
                    .and_then(|e| e.crash_max_ms(&d.process))
                    .map_or(CRASH_RESTART_MS, |max| CRASH_RESTART_MS.min(max));
                push(
                    "crash_after",
                    Position::After,
                    Some(restart_ms),
                    Fault::Crash {
                        process: d.process.clone(),
                    },
                );
            }
            push("lose_answer", Position::After, None, Fault::LoseAnswer);
        }
        EventClass::Renewal => {
            let mut pause_ms = if cast.lease_ms > 0 {
                2 * cast.lease_ms
            } else {
                PAUSE_MS_DEFAULT
            };
            if let Some(max) = within
                .map(|e| e.pause_max_ms(&d.process))
                .filter(|m| *m > 0)
            {
                pause_ms = pause_ms.min(max);
            }
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
            let extra_ms = within.map_or(EVENT_DELAY_MS, |e| {
                EVENT_DELAY_MS.min(e.event_delay_max_ms(&d.process))
            });
            if extra_ms > 0 {
                push(
                    "delay_event",
                    Position::After,
                    None,
                    Fault::DelayMessage { extra_ms },
                );
            }
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
                    faults: vec![TimedFault::on(
                        anchor(d, position),
                        Some(duration_ms),
                        fault,
                    )],
                    race_ms: 0,
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
    match s.faults[0].fault {
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

/// A kept single's order key ((outside the scenario's windows, how far from between a
/// check and its act, the race's width in powers of two, rarity)), its decision and
/// its faults.
type Entry = (
    (bool, bool, u8, u32, usize),
    usize,
    Vec<TimedFault<WorldFault>>,
);

/// Plans from a reference run: (generated, generated beyond the envelope, group plans,
/// candidates in run order: the group plans first). Singles beyond `envelope` are left
/// out unless `beyond` (`--beyond-envelope`).
fn plan_singles(
    scenario: &Scenario,
    seed: u64,
    decisions: &[DecisionPoint],
    cast: &Cast,
    (envelope, beyond): (&Envelope, bool),
    groups: bool,
) -> (usize, usize, usize, Vec<Candidate>) {
    let streams = reconsim_sim::Streams::new(seed);
    let mut raw = Vec::new();
    let mut timed = Vec::new();
    let followed: BTreeSet<usize> = decisions.iter().filter_map(|d| d.after_answer_of).collect();
    let observes = observers(decisions);
    // The resyncs `interleave` places (and `resync_after` does not repeat).
    let interleaves = |d: &DecisionPoint, c: &str| {
        d.subject
            .as_deref()
            .is_some_and(|k| observes.get(c).is_some_and(|o| o.contains(k)))
    };
    for (i, d) in decisions.iter().enumerate() {
        if cast.controllers.contains(&d.process) {
            builtin(
                i,
                d,
                followed.contains(&i),
                cast,
                (!beyond).then_some(envelope),
                &mut raw,
            );
        }
        if d.event == EventClass::Write {
            // A controller's periodic resync lands right after someone else's write:
            // it reconciles from a cache that has not seen that write yet, while its
            // live reads may.
            for c in cast.controllers.iter().filter(|c| **c != d.process) {
                if interleaves(d, c) {
                    continue;
                }
                raw.push(Single {
                    kind: "resync_after".into(),
                    at: i,
                    faults: vec![resync(d, c)],
                    race_ms: 0,
                });
            }
        }
    }
    // A write reaches the API server within twice the longest link latency of a
    // fault-free run (there and back, with room).
    let settle_ms = scenario
        .net
        .latency_ms
        .hi
        .saturating_mul(2)
        .saturating_add(1);
    races(decisions, &followed, cast, settle_ms, &mut raw);
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
    // The scenario's fault envelope: a single beyond it runs only when asked.
    let mut beyond_count = 0;
    raw.retain(|s| {
        let within = s.faults.iter().all(|f| envelope.beyond(f).is_none());
        beyond_count += usize::from(!within);
        within || beyond
    });
    timed.retain(|(_, f)| {
        let within = envelope.beyond(f).is_none();
        beyond_count += usize::from(!within);
        within || beyond
    });
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
        // The fault and its anchor, but for which event it waits for.
        let mut unnumbered = s.faults.clone();
        for f in &mut unnumbered {
            if let Some(a) = &mut f.on {
                a.nth = 0;
            }
        }
        let key = (
            s.kind.clone(),
            serde_json::to_string(&unnumbered).expect("faults serialize"),
            d.label.clone(),
            label(previous[s.at]),
            label(context[s.at]),
            // A step its reconcile went on from is no repeat of a last step.
            followed.contains(&s.at),
        );
        if !seen.insert(key) {
            continue;
        }
        let rarity = label_count[&(d.process.as_str(), d.label.as_str())];
        // Races bucketed by width (1, 2, 4, ... ms) so that equal widths spread.
        let width = u64::BITS - s.race_ms.leading_zeros();
        // A fault just before a send that acts on an answer (a launch after a lookup
        // that found nothing) holds the check and the act apart: those first, and
        // first of them a service call, which no resourceVersion guards (a stale
        // update of an object fails with a conflict; a second launch does not).
        let apart = if s.faults[0]
            .on
            .as_ref()
            .is_some_and(|a| a.position == Position::Before)
            && d.after_answer_of.is_some()
        {
            u8::from(d.event != EventClass::Call)
        } else {
            2
        };
        // A pause before a Lease create pauses a candidate that does not lead yet (a
        // create is the first acquisition; client-go's tryAcquireOrRenew then only
        // updates): DESIGN.md section 10's perturbation is the *leader* paused before a
        // renewal, so pauses before updates, which the holder makes, go first.
        let acquiring = s.kind == "pause_before" && d.label.starts_with("create ");
        kept.push((
            s.kind,
            (
                (outside(d.time_ms), acquiring, apart, width, rarity),
                s.at,
                s.faults,
            ),
        ));
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
    // Each round: the scenario's own faults first (what its author says its
    // environment does), then the race-directed kinds (each reorders two steps the
    // reference run took close together, where a race of the code under test lives;
    // their group plans ran already), then Sieve's.
    queues.sort_by_key(|(k, _)| {
        if RACE_KINDS.contains(&k.as_str()) {
            1
        } else if k.starts_with("scenario:") {
            0
        } else {
            2
        }
    });
    // Group testing first: most perturbations are harmless, so one run tries dozens
    // and shrink finds the ones that matter. Every race-directed perturbation at once
    // (the kinds taking turns, GROUP_MAX at most), then each race-directed kind's.
    let mut all = Vec::new();
    let present: Vec<String> = queues
        .iter()
        .filter(|(k, q)| RACE_KINDS.contains(&k.as_str()) && !q.is_empty())
        .map(|(k, _)| k.clone())
        .collect();
    for round in 0..GROUP_MAX {
        for (kind, q) in &queues {
            if RACE_KINDS.contains(&kind.as_str())
                && let Some((_, _, f)) = q.get(round)
                && all.len() < GROUP_MAX
            {
                all.extend(f.iter().cloned());
            }
        }
    }
    if groups && present.len() > 1 && all.len() > 1 {
        order.push(Candidate {
            kinds: present,
            description: {
                // Past GROUP_MAX, the group says how many it holds of how many.
                let total: usize = queues
                    .iter()
                    .filter(|(k, _)| RACE_KINDS.contains(&k.as_str()))
                    .map(|(_, q)| q.len())
                    .sum();
                if total > all.len() {
                    format!("races: {} of {total} at once", all.len())
                } else {
                    format!("races: {} at once", all.len())
                }
            },
            faults: Plan::new(all),
            beyond_envelope: Vec::new(),
        });
    }
    for (kind, q) in &queues {
        if !groups || !RACE_KINDS.contains(&kind.as_str()) || q.len() < 2 {
            continue;
        }
        let faults: Vec<_> = q
            .iter()
            .take(GROUP_MAX)
            .flat_map(|(_, _, f)| f.iter().cloned())
            .collect();
        order.push(Candidate {
            kinds: vec![kind.clone()],
            description: if q.len() > GROUP_MAX {
                format!("{kind}: its first {GROUP_MAX} of {} at once", q.len())
            } else {
                format!("{kind}: all {} at once", q.len())
            },
            faults: Plan::new(faults),
            beyond_envelope: Vec::new(),
        });
    }
    let groups = order.len();
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
                beyond_envelope: Vec::new(),
            });
        }
    }
    while queues.iter().any(|(_, q)| !q.is_empty()) {
        for (kind, q) in &mut queues {
            if let Some((_, at, faults)) = q.pop_front() {
                order.push(Candidate {
                    kinds: vec![kind.clone()],
                    description: describe(kind, &faults, &decisions[at]),
                    faults: Plan::new(faults),
                    beyond_envelope: Vec::new(),
                });
            }
        }
    }
    (generated, beyond_count, groups, order)
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

fn describe(kind: &str, faults: &[TimedFault<WorldFault>], d: &DecisionPoint) -> String {
    let words: Vec<String> = faults
        .iter()
        .map(|f| {
            let what = fault_words(&f.fault);
            let lasting = f
                .duration_ms
                .filter(|_| !f.fault.is_message_fault())
                .map(|d| format!(" for {d} ms"))
                .unwrap_or_default();
            format!("{what}{lasting}")
        })
        .collect();
    // All of a single's faults share the decision's anchor.
    let anchor = faults
        .first()
        .and_then(|f| f.on.as_ref())
        .map(|a| a.to_string())
        .unwrap_or_default();
    format!(
        "{kind}: {} {anchor} (at {} ms: {})",
        words.join(" and "),
        d.time_ms,
        label_words(&d.label)
    )
}

/// A decision's message in words. A cloud call's label is its body as the kernel
/// recorded it, Rust's debug form cut at 80 characters, maybe in the middle of a value
/// (`call RunInstances { tags: {"Name": "web-5dffx", "kubernetes.io/clu`): here its
/// fields as `key=value` (empty ones left out), and where the label was cut, its last
/// whole value and `…` (`call RunInstances tags={Name: web-5dffx, …}`). A plain label
/// longer than that is cut at a word boundary, with `…`.
pub(super) fn label_words(label: &str) -> String {
    const WIDTH: usize = 80;
    let Some(open) = label.find(" { ") else {
        if label.chars().count() <= WIDTH {
            return label.to_string();
        }
        let head: String = label.chars().take(WIDTH).collect();
        let cut = head.rfind(' ').unwrap_or(head.len());
        return format!("{} …", &head[..cut]);
    };
    let (head, body) = (&label[..open], &label[open + 3..]);
    let (fields, whole) = split_top(body, '}');
    let mut out = vec![head.to_string()];
    for (i, field) in fields.iter().enumerate() {
        let last_cut = !whole && i + 1 == fields.len();
        let Some((key, value)) = field.split_once(": ") else {
            continue;
        };
        let value = value.trim();
        if !last_cut {
            if !matches!(value, "{}" | "[]" | "\"\"" | "None") {
                let value = value
                    .strip_prefix("Some(")
                    .and_then(|v| v.strip_suffix(')'))
                    .unwrap_or(value);
                out.push(format!("{key}={}", value.replace('"', "")));
            }
            continue;
        }
        // Cut inside this field: a list or map keeps its whole items.
        let close = match value.chars().next() {
            Some('{') => '}',
            Some('[') => ']',
            _ => break,
        };
        let (items, _) = split_top(&value[1..], close);
        let kept: Vec<String> = items[..items.len().saturating_sub(1)]
            .iter()
            .map(|item| item.replace('"', ""))
            .collect();
        if !kept.is_empty() {
            let open = if close == '}' { '{' } else { '[' };
            out.push(format!("{key}={open}{}, …{close}", kept.join(", ")));
            return out.join(" ");
        }
        break;
    }
    if !whole {
        out.push("…".into());
    }
    out.join(" ")
}

/// The items of a debug-printed list, map or struct body up to its closing `close`,
/// split at its own commas (not those of nested values or strings), and whether the
/// close was reached (else the text was cut, and its last item with it).
fn split_top(body: &str, close: char) -> (Vec<String>, bool) {
    let mut items = Vec::new();
    let mut item = String::new();
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for c in body.chars() {
        if quoted {
            item.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' if depth == 0 && c == close => {
                if !item.trim().is_empty() {
                    items.push(item.trim().to_string());
                }
                return (items, true);
            }
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(item.trim().to_string());
                item.clear();
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    if !item.trim().is_empty() {
        items.push(item.trim().to_string());
    }
    (items, false)
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
            out.push(singles[i].and(&singles[j]));
        }
    }
    out
}

/// The plans of a search, from its reference run, in run order: group plans, singles,
/// then pairs of singles, `max_plans` at most; with the counts (generated, pruned,
/// groups, singles, pairs).
pub fn plans(
    scenario: &Scenario,
    reference: &World,
    config: &SearchConfig,
) -> (Vec<Candidate>, [usize; 5]) {
    let (plans, counts, _) = plans_and_left_out(scenario, reference, config);
    (plans, counts)
}

/// [`plans`], and how many group plans and singles `max_plans` left out (the last in run
/// order).
pub fn plans_and_left_out(
    scenario: &Scenario,
    reference: &World,
    config: &SearchConfig,
) -> (Vec<Candidate>, [usize; 5], usize) {
    let c = plans_counted(scenario, reference, config);
    (c.plans, c.counts, c.left_out)
}

/// A reference run's plans, in run order, and what became of the rest.
#[derive(Clone, Debug)]
pub struct PlanCounts {
    pub plans: Vec<Candidate>,
    /// Generated, pruned (causality, repeats), groups, singles and pairs queued.
    pub counts: [usize; 5],
    /// Group plans and singles past `max_plans` (the last in run order).
    pub left_out: usize,
    /// Singles generated beyond the scenario's fault envelope ([`crate::envelope`]):
    /// left out, unless [`SearchConfig::beyond_envelope`] runs them.
    pub beyond_envelope: usize,
}

/// [`plans`] with every count: the plans within the scenario's fault envelope (all
/// of them with [`SearchConfig::beyond_envelope`], each saying what it goes beyond).
pub fn plans_counted(scenario: &Scenario, reference: &World, config: &SearchConfig) -> PlanCounts {
    let cast = Cast::of(reference);
    let envelope = Envelope::of_world(scenario, reference);
    let seed = reference.sim.config().seed;
    let (generated, beyond_count, groups, mut plans) = plan_singles(
        scenario,
        seed,
        reference.sim.decisions(),
        &cast,
        (&envelope, config.beyond_envelope),
        config.groups,
    );
    let kept = plans.len() - groups;
    for p in &mut plans {
        p.beyond_envelope = envelope.beyond_plan(&p.faults);
    }
    let left_beyond = if config.beyond_envelope {
        0
    } else {
        beyond_count
    };
    let left_out = plans.len().saturating_sub(config.max_plans);
    plans.truncate(config.max_plans);
    let groups = groups.min(plans.len());
    let singles = plans.len() - groups;
    let room = config.max_plans - plans.len();
    let pairs = if config.pairs {
        plan_pairs(&plans[groups..], room)
    } else {
        Vec::new()
    };
    let counts = [
        generated,
        generated - kept - left_beyond,
        groups,
        singles,
        pairs.len(),
    ];
    plans.extend(pairs);
    PlanCounts {
        plans,
        counts,
        left_out,
        beyond_envelope: beyond_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_label_reads_as_words_and_ends_with_whole_values() {
        // Cut by the kernel in the middle of a tag's name.
        assert_eq!(
            label_words(
                r#"call RunInstances { tags: {"Name": "worker-us-west-2b-5dffx", "kubernetes.io/cluster/"#
            ),
            "call RunInstances tags={Name: worker-us-west-2b-5dffx, …}"
        );
        // Cut in a later field: the whole ones kept, the cut one left out.
        assert_eq!(
            label_words(r#"call DescribeInstances { ids: ["i-00000000000000001"], tag_f"#),
            "call DescribeInstances ids=[i-00000000000000001] …"
        );
        // Whole: every field but the empty ones.
        assert_eq!(
            label_words(
                r#"call DescribeInstances { ids: ["i-00000000000000001"], tag_filters: {}, states: [] }"#
            ),
            "call DescribeInstances ids=[i-00000000000000001]"
        );
        assert_eq!(
            label_words(
                r#"call ForwardLeadership { leaving: "ip-10-0-0-1", candidate: Some("ip-10-0-0-2") }"#
            ),
            "call ForwardLeadership leaving=ip-10-0-0-1 candidate=ip-10-0-0-2"
        );
        // A comma inside a string is no field's end.
        assert_eq!(
            label_words(r#"call Put { key: "a, b", value: "c" }"#),
            "call Put key=a, b value=c"
        );
        // API labels stay as they are; a long one is cut at a word.
        assert_eq!(
            label_words("update Lease openshift-machine-api/machineset-controller-leader"),
            "update Lease openshift-machine-api/machineset-controller-leader"
        );
        let long = format!("patch Machine {}", "word ".repeat(30));
        let words = label_words(&long);
        assert!(words.ends_with("word …"), "{words}");
        assert!(words.chars().count() <= 82, "{words}");
    }

    #[test]
    fn plan_descriptions_use_the_timelines_words_for_faults() {
        let d = DecisionPoint {
            time_ms: 480_112,
            process: "machine-controller-0".into(),
            peer: "cloud".into(),
            event: EventClass::Call,
            nth: 2,
            label: r#"call RunInstances { tags: {"Name": "worker-5dffx", "kubernetes.io/cluster/"#
                .into(),
            subject: None,
            after_answer_of: None,
        };
        let faults = [
            TimedFault::on(
                anchor(&d, Position::Before),
                Some(14_619),
                Fault::Inject {
                    process: "cloud".into(),
                    fault: WorldFault::CloudDescribeLag { lag_ms: 13_534 },
                },
            ),
            TimedFault::on(
                anchor(&d, Position::Before),
                Some(14_619),
                Fault::Inject {
                    process: "kubelet/master-0".into(),
                    fault: WorldFault::KubeletStop,
                },
            ),
        ];
        let text = describe("scenario:3", &faults, &d);
        assert_eq!(
            text,
            "scenario:3: new instances invisible to DescribeInstances 13.534s longer for 14619 ms \
             and stop the kubelet of master-0 for 14619 ms before call of machine-controller-0 #2 \
             (at 480112 ms: call RunInstances tags={Name: worker-5dffx, …})"
        );
        // No Rust type names: no `Name { field: value }` nor a bare variant name.
        for debug in ["{ ", "CloudDescribeLag", "KubeletStop", "Resync"] {
            assert!(!text.contains(debug), "{debug:?} in {text}");
        }
    }
}
