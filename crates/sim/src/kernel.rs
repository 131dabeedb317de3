//! The simulator: processes, the event loop, effects and fault injection.
//!
//! An [`Actor`] is a state machine with four entry points (start, message, timer, fault).
//! It acts only through its [`Ctx`], which records effects as data; the kernel applies
//! them after the handler returns. Process lifecycle follows real failure modes:
//! - paused (SIGSTOP, a frozen VM): messages and timers wait and all come due at resume,
//!   and the process believes no time has passed until it next reads its clock;
//! - crashed: memory is lost (`on_crash`), messages to it are dropped, its timers die; it
//!   restarts cold (`on_start`) when the fault reverts, as a new incarnation, so replies
//!   meant for the old incarnation (sent before the crash or while it was down) are
//!   dropped like a reset connection;
//! - stopped: gone for good (a deleted container).
//!
//! [`Sim::step_until`] handles one event and returns what it was, so the caller (the
//! runner) can check invariants after every event without the kernel knowing of them.
//!
//! Faults anchored to events ([`crate::anchor`]) are armed at their time and fire as
//! their message leaves its sender, inside the effect loop of the handler that sent it:
//! a crash there drops the rest of what the handler asked for, a pause defers its sends
//! to the resume. The kernel counts only messages the world classifies, and only while
//! some anchored fault is armed or decisions are being recorded.

use crate::anchor::{DecisionPoint, EventClass, Position};
use crate::fault::{Fault, FaultPlan, PartitionMode};
use crate::id::{HostId, ProcId, TimerId};
use crate::network::{LinkRule, NetConfig, Network};
use crate::queue::{EventQueue, Key};
use crate::rng::{SimRng, Streams};
use crate::time::SimTime;
use crate::trace::{DropReason, RecordKind, Trace, TraceMode};
use rand::Rng;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;

/// A simulated process's logic. All of its state is `self`; all of its effects go
/// through the context.
pub trait Actor: Sized {
    /// What processes send each other (and themselves, as timers).
    type Msg: Clone + Debug + Hash;
    /// The world's own faults, injected through [`Fault::Inject`].
    type Fault: Clone + Debug;

    /// Called when the process starts, and again when it restarts after a crash.
    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>);
    fn on_msg(&mut self, from: ProcId, msg: Self::Msg, ctx: &mut Ctx<'_, Self>);
    fn on_timer(&mut self, timer: TimerId, msg: Self::Msg, ctx: &mut Ctx<'_, Self>);
    /// The process died: drop everything a real process would lose with its memory.
    fn on_crash(&mut self) {}
    /// A world fault starts (`active`) or reverts.
    fn on_fault(&mut self, _fault: &Self::Fault, _active: bool, _ctx: &mut Ctx<'_, Self>) {}

    /// What `msg` is, for event anchors and decision records; `None` for a message no
    /// fault anchors to.
    fn classify(_msg: &Self::Msg) -> Option<EventClass> {
        None
    }
    /// A request's id, to know its answer.
    fn request_id(_msg: &Self::Msg) -> Option<u64> {
        None
    }
    /// The id of the request an answer answers.
    fn answer_id(_msg: &Self::Msg) -> Option<u64> {
        None
    }
    /// A few words for a decision record.
    fn describe(msg: &Self::Msg) -> String {
        format!("{msg:?}")
    }
    /// A timer that resumes a handler's work where it left off (a reconcile's sleep
    /// between two of its steps): what the woken handler sends follows the same answer
    /// as what the handler that set it sent.
    fn continues(_timer: &Self::Msg) -> bool {
        false
    }
    /// What a classified message reads, writes or reports on (a kind of object), so
    /// search can tell a read from the write that makes it stale: `None` if nothing.
    fn subject(_msg: &Self::Msg) -> Option<String> {
        None
    }
    /// What the receiver of `msg` gets when a fault drops it, if its connection would
    /// notice: TCP never loses one message of a stream silently, so a dropped watch
    /// event is a broken connection the client hears of (a reset).
    fn broken_by_drop(_msg: &Self::Msg) -> Option<Self::Msg> {
        None
    }
    /// How long this process's transport keeps trying to carry `msg` (which it `sent`,
    /// or is sent) across a cut link, if its connections retransmit under either
    /// partition mode (a client whose connections no health check closes: kube-rs over
    /// hyper's HTTP/1.1). `None`, the default, leaves the message to the partition's
    /// mode and [`NetConfig`]'s bounds. With a bound, the message is held until the heal
    /// or until the bound runs out, when the connection gives up and this process hears
    /// [`Actor::gave_up`] (docs/semantics.md 4.8).
    fn retransmits_ms(&self, _msg: &Self::Msg, _sent: bool) -> Option<u64> {
        None
    }
    /// Which of this process's connections to the receiver `msg` goes on (its lane):
    /// each lane is a FIFO link of its own, so messages on two lanes may overtake each
    /// other. 0, the default: one connection per receiver.
    fn lane(&self, _msg: &Self::Msg) -> u32 {
        0
    }
    /// What the client end of a connection hears when its transport gives up on `msg`
    /// (its connect timeout, or TCP's retransmissions, ran out under a partition).
    fn gave_up(_msg: &Self::Msg) -> Option<Self::Msg> {
        None
    }
}

/// A process's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcState {
    Running,
    Paused,
    Crashed,
    Stopped,
}

/// An effect an actor asked for; applied by the kernel after the handler returns.
#[derive(Debug)]
enum Effect<A: Actor> {
    Send {
        to: ProcId,
        msg: A::Msg,
    },
    Timer {
        id: TimerId,
        after_ms: u64,
        msg: A::Msg,
    },
    Cancel(TimerId),
    /// Boxed: a world's process is hundreds of bytes, and every effect (a send, most
    /// often) would otherwise be as large as the largest (issue 18: 3-5 % of a run).
    Spawn {
        host: HostRef,
        name: String,
        actor: Box<A>,
    },
    Stop(ProcId),
    /// Every process on the host of this process stops (the machine is shut down).
    StopHost(ProcId),
    /// The process crashes itself (a failpoint's crash) and restarts this much later.
    CrashSelf {
        restart_after_ms: u64,
    },
    Note(String),
}

/// Where a spawned process goes: a known host, or one named (created if new, as a
/// machine that boots and joins).
#[derive(Debug)]
enum HostRef {
    Id(HostId),
    Named(String),
}

/// The only window an actor has on the world.
pub struct Ctx<'a, A: Actor> {
    me: ProcId,
    host: HostId,
    true_now: SimTime,
    local_now: SimTime,
    rng: &'a mut SimRng,
    effects: &'a mut Vec<Effect<A>>,
    next_timer: &'a mut u64,
    next_proc: &'a mut u32,
    notes: bool,
}

impl<A: Actor> Ctx<'_, A> {
    pub fn me(&self) -> ProcId {
        self.me
    }

    pub fn host(&self) -> HostId {
        self.host
    }

    /// This process's clock: true time plus its skew. Durations are never skewed.
    pub fn now(&self) -> SimTime {
        self.local_now
    }

    /// True time, which timers count in: what a monotonic clock follows (a skew moves
    /// the wall clock, not the count of elapsed time).
    pub fn true_now(&self) -> SimTime {
        self.true_now
    }

    /// This process's own random stream.
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }

    /// A uniform draw in `[lo, hi]` from this process's stream.
    pub fn draw_ms(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.rng.next_u64() % (hi - lo + 1)
    }

    pub fn send(&mut self, to: ProcId, msg: A::Msg) {
        self.effects.push(Effect::Send { to, msg });
    }

    /// Deliver `msg` to this process after `after_ms` of true time.
    pub fn set_timer(&mut self, after_ms: u64, msg: A::Msg) -> TimerId {
        let id = TimerId(*self.next_timer);
        *self.next_timer += 1;
        self.effects.push(Effect::Timer { id, after_ms, msg });
        id
    }

    pub fn cancel_timer(&mut self, id: TimerId) {
        self.effects.push(Effect::Cancel(id));
    }

    /// Start a new process on `host`; it gets `on_start` as its own event.
    pub fn spawn(&mut self, host: HostId, name: impl Into<String>, actor: A) -> ProcId {
        let id = ProcId(*self.next_proc);
        *self.next_proc += 1;
        self.effects.push(Effect::Spawn {
            host: HostRef::Id(host),
            name: name.into(),
            actor: Box::new(actor),
        });
        id
    }

    /// Start a new process on the host named `host`, adding the host if it is new.
    pub fn spawn_on(
        &mut self,
        host: impl Into<String>,
        name: impl Into<String>,
        actor: A,
    ) -> ProcId {
        let id = ProcId(*self.next_proc);
        *self.next_proc += 1;
        self.effects.push(Effect::Spawn {
            host: HostRef::Named(host.into()),
            name: name.into(),
            actor: Box::new(actor),
        });
        id
    }

    /// End a process for good (a container killed by its kubelet).
    pub fn stop(&mut self, proc: ProcId) {
        self.effects.push(Effect::Stop(proc));
    }

    /// End for good every process on the host `proc` runs on (a machine shut down: its
    /// agent and every container it started).
    pub fn stop_host_of(&mut self, proc: ProcId) {
        self.effects.push(Effect::StopHost(proc));
    }

    /// Crash this process once the handler returns (what it sent before is sent), as a
    /// `Crash` fault would, and restart it cold `restart_after_ms` later: a failpoint's
    /// crash at a point of the code rather than at a time.
    pub fn crash_self(&mut self, restart_after_ms: u64) {
        self.effects.push(Effect::CrashSelf { restart_after_ms });
    }

    /// Whether notes are kept; build expensive notes only when this is true.
    pub fn notes_enabled(&self) -> bool {
        self.notes
    }

    /// A note for full traces (explain, timelines); never part of the hash.
    pub fn note(&mut self, text: impl FnOnce() -> String) {
        if self.notes {
            self.effects.push(Effect::Note(text()));
        }
    }
}

#[derive(Debug)]
enum Event<M> {
    Start {
        proc: ProcId,
        inc: u32,
    },
    Deliver {
        from: ProcId,
        to: ProcId,
        inc: u32,
        msg: M,
    },
    Timer {
        proc: ProcId,
        inc: u32,
        id: TimerId,
        msg: M,
    },
    /// Restart the incarnation `inc` crashed by [`Ctx::crash_self`], if it is still down.
    Restart {
        proc: ProcId,
        inc: u32,
    },
    /// The transport of `proc`, the client end of a held message's connection, gives up
    /// on it if it is still held ([`Actor::retransmits_ms`]).
    GiveUp {
        proc: ProcId,
        held: u64,
    },
}

impl<M> Event<M> {
    fn target(&self) -> ProcId {
        match self {
            Event::Start { proc, .. }
            | Event::Timer { proc, .. }
            | Event::Restart { proc, .. }
            | Event::GiveUp { proc, .. } => *proc,
            Event::Deliver { to, .. } => *to,
        }
    }
}

#[derive(Debug)]
struct ProcSlot<A: Actor> {
    name: String,
    host: HostId,
    actor: A,
    state: ProcState,
    incarnation: u32,
    rng: SimRng,
    clock_offset_ms: i64,
    /// Events that came due while paused, in order.
    pending: VecDeque<Event<A::Msg>>,
    /// When it last crashed or stopped (its sockets were orphaned then).
    down_at: SimTime,
    /// Sends of a handler an anchored pause caught, sent when it resumes; `true` for a
    /// message already counted for anchors.
    deferred: Vec<(ProcId, A::Msg, bool)>,
}

/// The tie-break of events that came due before the instant they are handled at (events
/// parked while their process was paused, messages held by a partition): they go before
/// everything else due at that instant, in their original order, so no FIFO link is
/// overtaken by a message sent after them. Drawn tie-breaks are never this value.
const DUE_EARLIER: u32 = 0;

/// Run-wide settings of the kernel.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub net: NetConfig,
    pub trace: TraceMode,
    /// Hard bound on handled events: a livelock ends the run instead of hanging it.
    pub max_events: u64,
    /// Keep every decision point ([`Sim::decisions`]): a search's reference run.
    pub record_decisions: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            net: NetConfig::default(),
            trace: TraceMode::Hash,
            max_events: 50_000_000,
            record_decisions: false,
        }
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A process handled an event (start, message or timer).
    Handled(ProcId),
    /// A message was dropped or parked by a partition or a dead receiver.
    Lost(ProcId),
    /// Fault `index` of the plan took effect (`active`) or reverted.
    Fault { index: usize, active: bool },
}

#[derive(Clone, Copy, Debug)]
struct FaultAction {
    time: SimTime,
    index: usize,
    active: bool,
}

struct Held<M> {
    from: ProcId,
    to: ProcId,
    inc: u32,
    msg: M,
    /// When the partition caught it, and the sender's incarnation then.
    held_at: SimTime,
    from_inc: u32,
    /// For a message whose client retransmits ([`Actor::retransmits_ms`]): its number,
    /// for the give-up, and when the client gives up on it.
    retransmitted: Option<(u64, SimTime)>,
}

/// A reference run's record of its decision points.
#[derive(Debug, Default)]
struct Recorder {
    points: Vec<DecisionPoint>,
    /// Events of each class so far, by process name (as anchors count them).
    counts: BTreeMap<String, [u32; EventClass::ALL.len()]>,
    /// Requests awaiting their answer: (caller, callee, id) -> decision.
    pending: BTreeMap<(u32, u32, u64), usize>,
    /// The decision whose answer the running handler is handling.
    cause: Option<usize>,
    /// Pending timers that continue a handler's work ([`Actor::continues`]): their
    /// handler's cause.
    timer_cause: BTreeMap<TimerId, usize>,
}

/// The simulator.
pub struct Sim<A: Actor> {
    config: SimConfig,
    now: SimTime,
    seq: u64,
    queue: EventQueue<Event<A::Msg>>,
    procs: Vec<ProcSlot<A>>,
    hosts: Vec<String>,
    net: Network,
    held: Vec<Held<A::Msg>>,
    /// Numbers the held messages whose client gives up on them.
    next_held: u64,
    streams: Streams,
    tiebreak_rng: SimRng,
    net_rng: SimRng,
    plan: FaultPlan<A::Fault>,
    actions: Vec<FaultAction>,
    next_action: usize,
    cancelled: HashSet<TimerId>,
    /// Anchored faults armed and waiting: (plan index, matching events seen).
    armed: Vec<(usize, u32)>,
    /// When each fault of the plan that waits for an event took effect, and how many did.
    fired_at: Vec<Option<SimTime>>,
    fired: usize,
    /// Answers to lose: (callee, caller, request id).
    lost_answers: Vec<(ProcId, ProcId, u64)>,
    recorder: Option<Box<Recorder>>,
    /// Processes paused by each active `PauseHost` fault (by plan index).
    host_pauses: Vec<(usize, Vec<ProcId>)>,
    next_timer: u64,
    next_proc: u32,
    effects: Vec<Effect<A>>,
    trace: Trace<A::Msg>,
    handled: u64,
}

impl<A: Actor> Sim<A> {
    pub fn new(config: SimConfig, plan: FaultPlan<A::Fault>) -> Self {
        let streams = Streams::new(config.seed);
        // Expand the plan into a sorted list of apply/revert actions: no draws, so a
        // fault's presence never moves any random stream.
        let mut actions = Vec::with_capacity(plan.faults.len() * 2);
        for (index, f) in plan.faults.iter().enumerate() {
            actions.push(FaultAction {
                time: SimTime(f.at_ms),
                index,
                active: true,
            });
            if let Some(d) = f.duration_ms {
                actions.push(FaultAction {
                    time: SimTime(f.at_ms.saturating_add(d)),
                    index,
                    active: false,
                });
            }
        }
        actions.sort_by_key(|a| (a.time, a.index, !a.active));
        // An anchored fault's arming is its only scheduled action; it reverts
        // `duration_ms` after its event, scheduled when that comes.
        actions.retain(|a| a.active || plan.faults[a.index].on.is_none());
        let recorder = config.record_decisions.then(Box::default);
        let fired_at = vec![None; plan.faults.len()];
        Sim {
            now: SimTime::ZERO,
            seq: 0,
            queue: EventQueue::default(),
            procs: Vec::new(),
            hosts: Vec::new(),
            net: Network::new(config.net),
            held: Vec::new(),
            next_held: 0,
            tiebreak_rng: streams.stream("kernel/tiebreak"),
            net_rng: streams.stream("kernel/net"),
            streams,
            plan,
            actions,
            next_action: 0,
            cancelled: HashSet::new(),
            armed: Vec::new(),
            fired_at,
            fired: 0,
            lost_answers: Vec::new(),
            recorder,
            host_pauses: Vec::new(),
            next_timer: 0,
            next_proc: 0,
            effects: Vec::new(),
            trace: Trace::new(config.trace),
            handled: 0,
            config,
        }
    }

    // ----- setup and inspection -------------------------------------------------------

    /// Add a host; names are unique (a second add returns the first id).
    pub fn add_host(&mut self, name: &str) -> HostId {
        if let Some(h) = self.host_by_name(name) {
            return h;
        }
        self.hosts.push(name.to_string());
        HostId(u32::try_from(self.hosts.len() - 1).expect("too many hosts"))
    }

    pub fn host_by_name(&self, name: &str) -> Option<HostId> {
        self.hosts
            .iter()
            .position(|h| h == name)
            .map(|i| HostId(i as u32))
    }

    pub fn host_name(&self, host: HostId) -> &str {
        &self.hosts[host.index()]
    }

    pub fn hosts(&self) -> impl Iterator<Item = (HostId, &str)> {
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, n)| (HostId(i as u32), n.as_str()))
    }

    /// Start a process from outside the run (the initial topology).
    pub fn spawn(&mut self, host: HostId, name: &str, actor: A) -> ProcId {
        assert_eq!(self.next_proc as usize, self.procs.len());
        self.next_proc += 1;
        self.add_proc(host, name.to_string(), actor)
    }

    fn add_proc(&mut self, host: HostId, name: String, actor: A) -> ProcId {
        let id = ProcId(u32::try_from(self.procs.len()).expect("too many processes"));
        let rng = self.streams.stream(&format!("proc/{name}"));
        self.procs.push(ProcSlot {
            name,
            host,
            actor,
            state: ProcState::Running,
            incarnation: 0,
            rng,
            clock_offset_ms: 0,
            pending: VecDeque::new(),
            down_at: SimTime::ZERO,
            deferred: Vec::new(),
        });
        // A process starts before anything else due at its first instant reaches it.
        self.enqueue_with(self.now, DUE_EARLIER, Event::Start { proc: id, inc: 0 });
        id
    }

    pub fn proc_by_name(&self, name: &str) -> Option<ProcId> {
        // Latest first: a name reused after a stop means the new process.
        self.procs
            .iter()
            .rposition(|p| p.name == name)
            .map(|i| ProcId(i as u32))
    }

    pub fn proc_name(&self, p: ProcId) -> &str {
        &self.procs[p.index()].name
    }

    pub fn proc_host(&self, p: ProcId) -> HostId {
        self.procs[p.index()].host
    }

    pub fn proc_state(&self, p: ProcId) -> ProcState {
        self.procs[p.index()].state
    }

    pub fn proc_count(&self) -> usize {
        self.procs.len()
    }

    pub fn actor(&self, p: ProcId) -> &A {
        &self.procs[p.index()].actor
    }

    /// Every process, in id order.
    pub fn actors(&self) -> impl Iterator<Item = (ProcId, &A)> {
        self.procs
            .iter()
            .enumerate()
            .map(|(i, s)| (ProcId(i as u32), &s.actor))
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub fn plan(&self) -> &FaultPlan<A::Fault> {
        &self.plan
    }

    pub fn trace(&self) -> &Trace<A::Msg> {
        &self.trace
    }

    /// The decision points recorded so far (empty unless `record_decisions`).
    pub fn decisions(&self) -> &[DecisionPoint] {
        self.recorder.as_ref().map_or(&[], |r| &r.points)
    }

    /// How many anchored faults have taken effect so far.
    pub fn fired(&self) -> usize {
        self.fired
    }

    /// When fault `index` of the plan took effect, if it waits for an event and its
    /// event came.
    pub fn fired_at(&self, index: usize) -> Option<SimTime> {
        self.fired_at.get(index).copied().flatten()
    }

    /// The end of the last fault's effect as known now: a timed fault's from the plan,
    /// an anchored one's from when its event came (one still waiting does not count);
    /// `None` if some fault that took effect never reverts.
    pub fn heal_ms(&self) -> Option<u64> {
        let mut heal = 0u64;
        for (i, f) in self.plan.faults.iter().enumerate() {
            let start = if f.on.is_some() {
                match self.fired_at[i] {
                    Some(t) => t.as_ms(),
                    None => continue,
                }
            } else {
                f.at_ms
            };
            let end = if f.fault.is_message_fault() {
                start
            } else {
                start.saturating_add(f.duration_ms?)
            };
            heal = heal.max(end);
        }
        Some(heal)
    }

    /// Events handled so far (including losses and faults).
    pub fn handled(&self) -> u64 {
        self.handled
    }

    pub fn budget_exhausted(&self) -> bool {
        self.handled >= self.config.max_events
    }

    // ----- the loop ---------------------------------------------------------------------

    /// Handle the next event due at or before `end`; `None` when there is none or the
    /// event budget is spent. Faults due at an instant go before events at that instant.
    pub fn step_until(&mut self, end: SimTime) -> Option<StepKind> {
        loop {
            if self.budget_exhausted() {
                return None;
            }
            let fault_t = self.actions.get(self.next_action).map(|a| a.time);
            let event_t = self.queue.peek_key().map(|k| k.time);
            let take_fault = match (fault_t, event_t) {
                (Some(f), Some(e)) => f <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            let t = if take_fault { fault_t } else { event_t }.expect("checked above");
            if t > end {
                return None;
            }
            self.now = t;
            if take_fault {
                let action = self.actions[self.next_action];
                self.next_action += 1;
                if action.active && self.plan.faults[action.index].on.is_some() {
                    // Armed: it waits for its event, silently (no step, no trace).
                    self.armed.push((action.index, 0));
                    continue;
                }
                self.apply_fault(action);
                self.handled += 1;
                return Some(StepKind::Fault {
                    index: action.index,
                    active: action.active,
                });
            }
            let (_, event) = self.queue.pop().expect("peeked");
            if let Some(kind) = self.dispatch(event) {
                self.handled += 1;
                return Some(kind);
            }
        }
    }

    /// Run to `end` (or until nothing is left), without looking at the steps.
    pub fn run_until(&mut self, end: SimTime) {
        while self.step_until(end).is_some() {}
    }

    fn enqueue(&mut self, time: SimTime, event: Event<A::Msg>) {
        let tiebreak = self.draw_tiebreak();
        self.enqueue_with(time, tiebreak, event);
    }

    /// A seeded tie-break, never [`DUE_EARLIER`].
    fn draw_tiebreak(&mut self) -> u32 {
        self.tiebreak_rng.next_u32().max(DUE_EARLIER + 1)
    }

    fn enqueue_with(&mut self, time: SimTime, tiebreak: u32, event: Event<A::Msg>) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(
            Key {
                time,
                tiebreak,
                seq,
            },
            event,
        );
    }

    /// Handle one popped event; `None` if it was silently void (a stale or cancelled timer,
    /// an event parked for a paused process).
    fn dispatch(&mut self, event: Event<A::Msg>) -> Option<StepKind> {
        let target = event.target();
        let slot = &self.procs[target.index()];
        let (inc, state, to_host) = (slot.incarnation, slot.state, slot.host);
        match event {
            Event::Restart { proc, inc: ev_inc } => {
                // A fault's restart (or another crash) may have come first.
                if ev_inc == inc && state == ProcState::Crashed {
                    self.restart(proc);
                }
                None
            }
            Event::GiveUp { proc, held } => self.give_up(proc, held),
            Event::Start { proc, inc: ev_inc } => {
                if ev_inc != inc || matches!(state, ProcState::Crashed | ProcState::Stopped) {
                    return None;
                }
                if state == ProcState::Paused {
                    self.procs[proc.index()]
                        .pending
                        .push_back(Event::Start { proc, inc: ev_inc });
                    return None;
                }
                self.trace.push(self.now, RecordKind::Start { proc });
                self.with_ctx(proc, |a, ctx| a.on_start(ctx));
                Some(StepKind::Handled(proc))
            }
            Event::Timer {
                proc,
                inc: ev_inc,
                id,
                msg,
            } => {
                // Forget a cancellation as soon as its timer comes due, whatever else
                // voids it, so the set only holds timers still pending.
                let cancelled = !self.cancelled.is_empty() && self.cancelled.remove(&id);
                if cancelled
                    || ev_inc != inc
                    || matches!(state, ProcState::Crashed | ProcState::Stopped)
                {
                    return None;
                }
                if state == ProcState::Paused {
                    self.procs[proc.index()].pending.push_back(Event::Timer {
                        proc,
                        inc: ev_inc,
                        id,
                        msg,
                    });
                    return None;
                }
                if self.trace.mode() == TraceMode::Full {
                    self.trace.push(
                        self.now,
                        RecordKind::Timer {
                            proc,
                            msg: msg.clone(),
                        },
                    );
                } else {
                    self.trace_hash_only_timer(proc, &msg);
                }
                if let Some(rec) = &mut self.recorder {
                    rec.cause = rec.timer_cause.remove(&id);
                }
                self.with_ctx(proc, |a, ctx| a.on_timer(id, msg, ctx));
                if let Some(rec) = &mut self.recorder {
                    rec.cause = None;
                }
                Some(StepKind::Handled(proc))
            }
            Event::Deliver {
                from,
                to,
                inc: ev_inc,
                msg,
            } => {
                if ev_inc != inc || matches!(state, ProcState::Crashed | ProcState::Stopped) {
                    self.trace.push(
                        self.now,
                        RecordKind::Dropped {
                            from,
                            to,
                            reason: DropReason::ReceiverDown,
                        },
                    );
                    return Some(StepKind::Lost(to));
                }
                let from_host = self.procs[from.index()].host;
                let cut = self.net.cut(from_host, to_host);
                if cut.is_some()
                    && let Some((client, bound_ms)) = self.retransmitted_by(from, to, &msg)
                {
                    // Under either mode: its client's TCP keeps trying until the heal
                    // or until it gives up (docs/semantics.md 4.8).
                    self.next_held += 1;
                    let number = self.next_held;
                    let give_up_at = self.now.plus_ms(bound_ms);
                    self.hold(from, to, ev_inc, msg, Some((number, give_up_at)));
                    self.enqueue(
                        give_up_at,
                        Event::GiveUp {
                            proc: client,
                            held: number,
                        },
                    );
                    return Some(StepKind::Lost(to));
                }
                match cut {
                    Some(PartitionMode::Drop) => {
                        self.trace.push(
                            self.now,
                            RecordKind::Dropped {
                                from,
                                to,
                                reason: DropReason::Partition,
                            },
                        );
                        return Some(StepKind::Lost(to));
                    }
                    Some(PartitionMode::Hold) => {
                        self.hold(from, to, ev_inc, msg, None);
                        return Some(StepKind::Lost(to));
                    }
                    None => {}
                }
                if state == ProcState::Paused {
                    self.procs[to.index()].pending.push_back(Event::Deliver {
                        from,
                        to,
                        inc: ev_inc,
                        msg,
                    });
                    return None;
                }
                if self.trace.mode() == TraceMode::Full {
                    self.trace.push(
                        self.now,
                        RecordKind::Deliver {
                            from,
                            to,
                            msg: msg.clone(),
                        },
                    );
                } else {
                    self.trace_hash_only_deliver(from, to, &msg);
                }
                if let Some(rec) = &mut self.recorder {
                    rec.cause =
                        A::answer_id(&msg).and_then(|id| rec.pending.remove(&(to.0, from.0, id)));
                }
                self.with_ctx(to, |a, ctx| a.on_msg(from, msg, ctx));
                if let Some(rec) = &mut self.recorder {
                    rec.cause = None;
                }
                Some(StepKind::Handled(to))
            }
        }
    }

    // Hash-only traces never keep the message, so they need no clone of it.
    fn trace_hash_only_timer(&mut self, proc: ProcId, msg: &A::Msg) {
        self.trace.push_ref_timer(self.now, proc, msg);
    }

    fn trace_hash_only_deliver(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) {
        self.trace.push_ref_deliver(self.now, from, to, msg);
    }

    /// Run a handler of process `p` with a fresh context, then apply its effects.
    fn with_ctx(&mut self, p: ProcId, f: impl FnOnce(&mut A, &mut Ctx<'_, A>)) {
        let mut effects = std::mem::take(&mut self.effects);
        let notes = self.trace.mode() == TraceMode::Full;
        {
            let slot = &mut self.procs[p.index()];
            let mut ctx = Ctx {
                me: p,
                host: slot.host,
                true_now: self.now,
                local_now: self.now.offset(slot.clock_offset_ms),
                rng: &mut slot.rng,
                effects: &mut effects,
                next_timer: &mut self.next_timer,
                next_proc: &mut self.next_proc,
                notes,
            };
            f(&mut slot.actor, &mut ctx);
        }
        let mut drain = effects.drain(..);
        let was_running = self.procs[p.index()].state == ProcState::Running;
        let mut deferring = false;
        for effect in drain.by_ref() {
            let crashes = matches!(effect, Effect::CrashSelf { .. });
            self.apply_effect(p, effect, deferring);
            if crashes {
                // A dead process does nothing more: what the handler asked for after
                // its crash is dropped with it.
                break;
            }
            if was_running {
                // An anchored fault fired on one of these effects and hit this process.
                match self.procs[p.index()].state {
                    ProcState::Crashed => break,
                    ProcState::Paused => deferring = true,
                    ProcState::Running | ProcState::Stopped => {}
                }
            }
        }
        drop(drain);
        self.effects = effects;
    }

    fn apply_effect(&mut self, me: ProcId, effect: Effect<A>, deferring: bool) {
        match effect {
            Effect::Send { to, msg } if deferring => {
                self.procs[me.index()].deferred.push((to, msg, false));
            }
            Effect::Send { to, msg } => self.send(me, to, msg),
            Effect::Timer { id, after_ms, msg } => {
                if let Some(rec) = &mut self.recorder
                    && let Some(cause) = rec.cause
                    && A::continues(&msg)
                {
                    rec.timer_cause.insert(id, cause);
                }
                let inc = self.procs[me.index()].incarnation;
                self.enqueue(
                    self.now.plus_ms(after_ms),
                    Event::Timer {
                        proc: me,
                        inc,
                        id,
                        msg,
                    },
                );
            }
            Effect::Cancel(id) => {
                self.cancelled.insert(id);
            }
            Effect::Spawn { host, name, actor } => {
                let host = match host {
                    HostRef::Id(h) => h,
                    HostRef::Named(n) => self.add_host(&n),
                };
                self.add_proc(host, name, *actor);
            }
            Effect::Stop(p) => self.stop(p),
            Effect::StopHost(p) => {
                let host = self.procs[p.index()].host;
                for q in (0..self.procs.len() as u32).map(ProcId) {
                    if self.procs[q.index()].host == host {
                        self.stop(q);
                    }
                }
            }
            Effect::CrashSelf { restart_after_ms } => {
                if self.crash(me) {
                    self.trace.push(
                        self.now,
                        RecordKind::Crashed {
                            proc: me,
                            restart_after_ms,
                        },
                    );
                    let inc = self.procs[me.index()].incarnation;
                    self.enqueue(
                        self.now.plus_ms(restart_after_ms),
                        Event::Restart { proc: me, inc },
                    );
                }
            }
            Effect::Note(text) => self
                .trace
                .push(self.now, RecordKind::Note { proc: me, text }),
        }
    }

    /// Send a message a handler asked for: lose it if it is an answer a fault loses,
    /// count it for anchors (firing any whose event it is) and record it as a decision.
    fn send(&mut self, from: ProcId, to: ProcId, msg: A::Msg) {
        if !self.lost_answers.is_empty() && self.lose_answer(from, to, &msg) {
            return;
        }
        if self.armed.is_empty() && self.recorder.is_none() {
            return self.transmit(from, to, msg, 0);
        }
        let Some(class) = A::classify(&msg) else {
            return self.transmit(from, to, msg, 0);
        };
        let anchor_proc = if class.counted_at_receiver() {
            to
        } else {
            from
        };
        if self.recorder.is_some() {
            self.record(from, to, anchor_proc, class, &msg);
        }
        let mut fired: Vec<usize> = Vec::new();
        let (plan, procs) = (&self.plan, &self.procs);
        self.armed.retain_mut(|(index, seen)| {
            let a = plan.faults[*index]
                .on
                .as_ref()
                .expect("armed faults are anchored");
            if a.event != class || procs[anchor_proc.index()].name != a.process {
                return true;
            }
            *seen += 1;
            if *seen < a.nth {
                return true;
            }
            fired.push(*index);
            false
        });
        if fired.is_empty() {
            return self.transmit(from, to, msg, 0);
        }
        let sender_running = self.procs[from.index()].state == ProcState::Running;
        let (mut extra_ms, mut drop, mut lose) = (0u64, false, false);
        for &i in &fired {
            let f = &self.plan.faults[i];
            match f.fault {
                Fault::DropMessage => drop = true,
                Fault::DelayMessage { extra_ms: e } => extra_ms = extra_ms.saturating_add(e),
                Fault::LoseAnswer => lose = true,
                _ => {
                    if f.on
                        .as_ref()
                        .is_some_and(|a| a.position == Position::Before)
                    {
                        self.fire(i);
                    }
                    continue;
                }
            }
            self.fired_at[i] = Some(self.now);
            self.fired += 1;
            self.trace.push(
                self.now,
                RecordKind::Fault {
                    index: i,
                    active: true,
                    applied: true,
                },
            );
        }
        if lose && let Some(id) = A::request_id(&msg) {
            self.lost_answers.push((to, from, id));
        }
        let sender = self.procs[from.index()].state;
        if drop || (sender_running && sender == ProcState::Crashed) {
            // Lost, or never sent: its sender died just before.
            self.dropped_by_fault(from, to);
            if drop && let Some(reset) = A::broken_by_drop(&msg) {
                self.transmit(from, to, reset, extra_ms);
            }
        } else if sender_running && sender == ProcState::Paused {
            self.procs[from.index()].deferred.push((to, msg, true));
        } else {
            self.transmit(from, to, msg, extra_ms);
        }
        for &i in &fired {
            let f = &self.plan.faults[i];
            if !f.fault.is_message_fault()
                && f.on.as_ref().is_some_and(|a| a.position == Position::After)
            {
                self.fire(i);
            }
        }
    }

    /// Drop `msg` if it answers a request whose answer a fault loses.
    fn lose_answer(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) -> bool {
        let Some(id) = A::answer_id(msg) else {
            return false;
        };
        let Some(k) = self
            .lost_answers
            .iter()
            .position(|&(callee, caller, rid)| callee == from && caller == to && rid == id)
        else {
            return false;
        };
        self.lost_answers.swap_remove(k);
        self.dropped_by_fault(from, to);
        true
    }

    fn dropped_by_fault(&mut self, from: ProcId, to: ProcId) {
        self.trace.push(
            self.now,
            RecordKind::Dropped {
                from,
                to,
                reason: DropReason::Fault,
            },
        );
    }

    /// An anchored fault's event came: it takes effect now, and reverts `duration_ms`
    /// from now.
    fn fire(&mut self, index: usize) {
        self.fired_at[index] = Some(self.now);
        self.fired += 1;
        self.apply_fault(FaultAction {
            time: self.now,
            index,
            active: true,
        });
        if let Some(d) = self.plan.faults[index].duration_ms {
            let revert = FaultAction {
                time: self.now.plus_ms(d),
                index,
                active: false,
            };
            let order = |a: &FaultAction| (a.time, a.index, !a.active);
            let at = self.next_action
                + self.actions[self.next_action..].partition_point(|a| order(a) <= order(&revert));
            self.actions.insert(at, revert);
        }
    }

    fn record(
        &mut self,
        from: ProcId,
        to: ProcId,
        anchor_proc: ProcId,
        class: EventClass,
        msg: &A::Msg,
    ) {
        let process = self.procs[anchor_proc.index()].name.clone();
        let peer_proc = if anchor_proc == from { to } else { from };
        let peer = self.procs[peer_proc.index()].name.clone();
        let time_ms = self.now.as_ms();
        let rec = self.recorder.as_mut().expect("recording");
        let counts = rec.counts.entry(process.clone()).or_default();
        counts[class.index()] += 1;
        let nth = counts[class.index()];
        let index = rec.points.len();
        rec.points.push(DecisionPoint {
            time_ms,
            process,
            peer,
            event: class,
            nth,
            label: A::describe(msg),
            subject: A::subject(msg),
            after_answer_of: if class.counted_at_receiver() {
                None
            } else {
                rec.cause
            },
        });
        if let Some(id) = A::request_id(msg) {
            rec.pending.insert((from.0, to.0, id), index);
        }
    }

    /// Put a message on the network, `extra_ms` later than its link would.
    fn transmit(&mut self, from: ProcId, to: ProcId, msg: A::Msg, extra_ms: u64) {
        let Some(receiver) = self.procs.get(to.index()) else {
            panic!("process {from} sent to unknown process {to}");
        };
        let inc = receiver.incarnation;
        let (fh, th) = (self.procs[from.index()].host, receiver.host);
        let NetConfig {
            latency_ms_min: lo,
            latency_ms_max: hi,
            ..
        } = self.net.config;
        let latency = if hi > lo {
            lo + self.net_rng.next_u64() % (hi - lo + 1)
        } else {
            lo
        };
        let earliest = self
            .now
            .plus_ms(latency + self.net.extra_latency_ms(fh, th))
            .plus_ms(extra_ms);
        let tb = self.draw_tiebreak();
        let lane = self.procs[from.index()].actor.lane(&msg);
        let (at, tb) = self.net.fifo(from, to, lane, earliest, tb);
        self.enqueue_with(at, tb, Event::Deliver { from, to, inc, msg });
    }

    // ----- faults -----------------------------------------------------------------------

    fn apply_fault(&mut self, action: FaultAction) {
        let FaultAction { index, active, .. } = action;
        let fault = self.plan.faults[index].fault.clone();
        let applied = match &fault {
            Fault::Partition {
                hosts_a,
                hosts_b,
                mode,
                one_way,
            } => {
                if active {
                    let rule = self.rule(index, hosts_a, hosts_b, *one_way);
                    self.net.add_partition(rule, *mode);
                } else if self.net.remove(index) {
                    self.release_held();
                }
                true
            }
            Fault::SlowLink {
                hosts_a,
                hosts_b,
                extra_latency_ms,
                one_way,
            } => {
                if active {
                    let rule = self.rule(index, hosts_a, hosts_b, *one_way);
                    self.net.add_slow(rule, *extra_latency_ms);
                } else {
                    self.net.remove(index);
                }
                true
            }
            Fault::Pause { process } => match self.proc_by_name(process) {
                Some(p) if active => self.pause(p),
                Some(p) => self.resume(p),
                None => false,
            },
            Fault::PauseHost { host } => match self.host_by_name(host) {
                Some(h) if active => {
                    let on_host: Vec<ProcId> = (0..self.procs.len() as u32)
                        .map(ProcId)
                        .filter(|p| self.procs[p.index()].host == h)
                        .collect();
                    let paused = on_host.into_iter().filter(|p| self.pause(*p)).collect();
                    self.host_pauses.push((index, paused));
                    true
                }
                Some(_) => {
                    let at = self.host_pauses.iter().position(|(i, _)| *i == index);
                    for p in at.map(|i| self.host_pauses.remove(i).1).unwrap_or_default() {
                        self.resume(p);
                    }
                    true
                }
                None => false,
            },
            Fault::Crash { process } => match self.proc_by_name(process) {
                Some(p) if active => self.crash(p),
                Some(p) => self.restart(p),
                None => false,
            },
            Fault::ClockSkew { process, offset_ms } => match self.proc_by_name(process) {
                Some(p) => {
                    self.procs[p.index()].clock_offset_ms = if active { *offset_ms } else { 0 };
                    true
                }
                None => false,
            },
            Fault::Inject { process, fault } => match self.proc_by_name(process) {
                Some(p)
                    if !matches!(
                        self.procs[p.index()].state,
                        ProcState::Crashed | ProcState::Stopped
                    ) =>
                {
                    self.with_ctx(p, |a, ctx| a.on_fault(fault, active, ctx));
                    true
                }
                _ => false,
            },
            // They act on an anchor's message (`send`); at a time they have none.
            Fault::DropMessage | Fault::DelayMessage { .. } | Fault::LoseAnswer => false,
        };
        self.trace.push(
            self.now,
            RecordKind::Fault {
                index,
                active,
                applied,
            },
        );
    }

    fn rule(&self, fault: usize, a: &[String], b: &[String], one_way: bool) -> LinkRule {
        let resolve = |names: &[String]| -> Vec<HostId> {
            names.iter().filter_map(|n| self.host_by_name(n)).collect()
        };
        LinkRule {
            fault,
            hosts_a: resolve(a),
            hosts_b: resolve(b),
            one_way,
        }
    }

    /// Deliver now, in their original order, the held messages whose link is whole again.
    /// They already crossed the network, and they go before anything else due now: a
    /// message sent after them and still in flight at the heal must not overtake them.
    /// One whose receiver died meanwhile is dropped (and recorded) on delivery.
    fn release_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        for h in held {
            let (fh, th) = (
                self.procs[h.from.index()].host,
                self.procs[h.to.index()].host,
            );
            if self.net.cut(fh, th).is_some() {
                self.held.push(h);
                continue;
            }
            // TCP's bounds: an open socket's data for hold_open_ms, an exited sender's
            // for hold_orphan_ms after its exit (network.rs).
            let sender = &self.procs[h.from.index()];
            let mut deadline = match h.retransmitted {
                Some((_, give_up_at)) => give_up_at,
                None => h.held_at.plus_ms(self.net.config.hold_open_ms),
            };
            if sender.incarnation != h.from_inc {
                deadline = deadline.min(sender.down_at.plus_ms(self.net.config.hold_orphan_ms));
            }
            let Held {
                from, to, inc, msg, ..
            } = h;
            if self.now > deadline {
                self.expired(from, to);
                continue;
            }
            self.enqueue_with(self.now, DUE_EARLIER, Event::Deliver { from, to, inc, msg });
        }
    }

    /// A held message lost because TCP stopped retransmitting it.
    fn expired(&mut self, from: ProcId, to: ProcId) {
        self.trace.push(
            self.now,
            RecordKind::Dropped {
                from,
                to,
                reason: DropReason::Expired,
            },
        );
    }

    /// Park a message a partition caught, until the heal releases it.
    fn hold(
        &mut self,
        from: ProcId,
        to: ProcId,
        inc: u32,
        msg: A::Msg,
        retransmitted: Option<(u64, SimTime)>,
    ) {
        self.trace.push(self.now, RecordKind::Held { from, to });
        let from_inc = self.procs[from.index()].incarnation;
        self.held.push(Held {
            from,
            to,
            inc,
            msg,
            held_at: self.now,
            from_inc,
            retransmitted,
        });
    }

    /// Which end of the link `from -> to` retransmits `msg` under a partition, and for
    /// how long: the sender if its transport says so, else the receiver.
    fn retransmitted_by(&self, from: ProcId, to: ProcId, msg: &A::Msg) -> Option<(ProcId, u64)> {
        if let Some(ms) = self.procs[from.index()].actor.retransmits_ms(msg, true) {
            return Some((from, ms));
        }
        self.procs[to.index()]
            .actor
            .retransmits_ms(msg, false)
            .map(|ms| (to, ms))
    }

    /// A client's transport gives up on a message still held: it is lost, and the
    /// client hears of it (its request failed, its stream broke) at once, from itself.
    fn give_up(&mut self, client: ProcId, number: u64) -> Option<StepKind> {
        let at = self
            .held
            .iter()
            .position(|h| h.retransmitted.is_some_and(|(n, _)| n == number))?;
        let Held {
            from,
            to,
            inc,
            msg,
            from_inc,
            ..
        } = self.held.remove(at);
        self.expired(from, to);
        let client_inc = if client == from { from_inc } else { inc };
        if let Some(notice) = A::gave_up(&msg) {
            self.enqueue_with(
                self.now,
                DUE_EARLIER,
                Event::Deliver {
                    from: client,
                    to: client,
                    inc: client_inc,
                    msg: notice,
                },
            );
        }
        Some(StepKind::Lost(client))
    }

    /// Pause a running process. True if it changed state.
    pub fn pause(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Running {
            return false;
        }
        slot.state = ProcState::Paused;
        true
    }

    /// Resume a paused process: everything that came due meanwhile is due now, in the
    /// order it came due, before anything else due at this instant.
    pub fn resume(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Paused {
            return false;
        }
        slot.state = ProcState::Running;
        let pending = std::mem::take(&mut slot.pending);
        let deferred = std::mem::take(&mut slot.deferred);
        for ev in pending {
            self.enqueue_with(self.now, DUE_EARLIER, ev);
        }
        // What an anchored pause caught mid-handler leaves now, in order.
        for (to, msg, counted) in deferred {
            if counted {
                self.transmit(p, to, msg, 0);
            } else {
                self.send(p, to, msg);
            }
        }
        true
    }

    /// End a process for good (idempotent).
    fn stop(&mut self, p: ProcId) {
        let slot = &mut self.procs[p.index()];
        if slot.state == ProcState::Stopped {
            return;
        }
        slot.state = ProcState::Stopped;
        slot.incarnation += 1;
        slot.pending.clear();
        slot.deferred.clear();
        slot.down_at = self.now;
    }

    /// Kill a process: its memory, timers and connections are gone.
    pub fn crash(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if !matches!(slot.state, ProcState::Running | ProcState::Paused) {
            return false;
        }
        slot.state = ProcState::Crashed;
        slot.incarnation += 1;
        slot.pending.clear();
        slot.deferred.clear();
        slot.down_at = self.now;
        slot.actor.on_crash();
        self.net.forget(p);
        true
    }

    /// Restart a crashed process cold, as a new incarnation: anything addressed to it
    /// while it was down was meant for the dead one.
    pub fn restart(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Crashed {
            return false;
        }
        slot.state = ProcState::Running;
        slot.incarnation += 1;
        let inc = slot.incarnation;
        self.enqueue_with(self.now, DUE_EARLIER, Event::Start { proc: p, inc });
        true
    }
}

impl<A: Actor + Debug> Debug for Sim<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("procs", &self.procs.len())
            .field("queued", &self.queue.len())
            .finish()
    }
}
