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
//!
//! This file holds the [`Actor`] trait, the [`Sim`] itself, its setup and inspection;
//! the parts of the kernel live in submodules: `config` (settings, step kinds), `ctx`
//! (the actor's context, effects), `event` (events, their order), `step` (the loop),
//! `proc` (the process table, lifecycle), `wire` (sends, held messages), `faults` (timed
//! fault application), `anchored` (faults anchored to sends), `recorder` (decisions).

mod anchored;
mod config;
mod ctx;
mod event;
mod faults;
mod proc;
mod recorder;
mod step;
mod wire;

pub use config::{SimConfig, StepKind};
pub use ctx::Ctx;
pub use proc::ProcState;

use crate::anchor::{DecisionPoint, EventClass};
use crate::fault::FaultPlan;
use crate::id::{HostId, ProcId, TimerId};
use crate::network::Network;
use crate::queue::EventQueue;
use crate::rng::{SimRng, Streams};
use crate::time::SimTime;
use crate::trace::Trace;
use ctx::Effect;
use event::{DUE_EARLIER, Event};
use faults::FaultAction;
use proc::ProcSlot;
use recorder::Recorder;
use std::collections::{HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use wire::Held;

/// A simulated process's logic. All of its state is `self`; all of its effects go
/// through the context.
pub trait Actor: Sized {
    /// What processes send each other (and themselves, as timers).
    type Msg: Clone + Debug + Hash;
    /// The world's own faults, injected through
    /// [`Fault::Inject`](crate::fault::Fault::Inject).
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
    /// What this process, the client end of the connection that carried `msg` (a
    /// request's sender, an answer's or a stream's receiver), hears when a fault or a
    /// dropping partition loses it: TCP never loses one message of a connection
    /// silently, it breaks the connection (a reset). `None`, the default: what
    /// [`Actor::gave_up`] says (the request failed, the stream ended).
    fn broken_by_drop(&self, _msg: &Self::Msg) -> Option<Self::Msg> {
        None
    }
    /// How long this process's transport keeps trying to carry `msg` (which it `sent`,
    /// or is sent) across a cut link, if its connections retransmit under either
    /// partition mode (a client whose connections no health check closes: kube-rs over
    /// hyper's HTTP/1.1). `None`, the default, leaves the message to the partition's
    /// mode and [`NetConfig`](crate::network::NetConfig)'s bounds. With a bound, the
    /// message is held until the heal or until the bound runs out, when the connection
    /// gives up and this process hears [`Actor::gave_up`] (docs/semantics.md 4.8).
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
    /// What a process's peers receive from it when its host closes its sockets: it
    /// crashed, or ended with its host still up (a killed container). Each process it
    /// had a connection with gets this, as from it, behind what it sent before (a FIN,
    /// or an RST where data was unread: RFC 9293 3.6 and 3.10.7; docs/semantics.md
    /// 4.6). `None`, the default: peers hear nothing.
    fn closed() -> Option<Self::Msg> {
        None
    }
}
/// The simulator.
pub struct Sim<A: Actor> {
    config: SimConfig,
    now: SimTime,
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
    /// Draws for what a process's end makes its host send (its peers' notices, its
    /// refusals): a stream of their own, so a crash moves no other draw.
    closed_rng: SimRng,
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
    /// The run's signature so far ([`SimConfig::record_signature`]).
    signature: Option<Box<recorder::Signature>>,
    /// Processes paused by each active `PauseHost` fault (by plan index).
    host_pauses: Vec<(usize, Vec<ProcId>)>,
    /// Hosts shut down (`Ctx::stop_host_of`) and not started again by a spawn on them:
    /// no kernel answers for their processes, so their peers hear nothing.
    hosts_down: Vec<HostId>,
    /// Active crash, pause and `Inject` faults whose process had not started when they
    /// took effect (a pod's container its kubelet starts later), by plan index: they
    /// take effect when a process of that name is spawned (down or paused from its
    /// first instant) or first starts (an injection: a failpoint armed in a program's
    /// configuration is live from its start).
    awaiting_start: Vec<(usize, String)>,
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
        let signature = config.record_signature.then(Box::default);
        let fired_at = vec![None; plan.faults.len()];
        Sim {
            now: SimTime::ZERO,
            queue: EventQueue::default(),
            procs: Vec::new(),
            hosts: Vec::new(),
            net: Network::new(config.net),
            held: Vec::new(),
            next_held: 0,
            tiebreak_rng: streams.stream("kernel/tiebreak"),
            net_rng: streams.stream("kernel/net"),
            closed_rng: streams.stream("kernel/closed"),
            streams,
            plan,
            actions,
            next_action: 0,
            cancelled: HashSet::new(),
            armed: Vec::new(),
            awaiting_start: Vec::new(),
            fired_at,
            fired: 0,
            lost_answers: Vec::new(),
            recorder,
            signature,
            host_pauses: Vec::new(),
            hosts_down: Vec::new(),
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
        // A process started on a host that was shut down boots it again.
        self.hosts_down.retain(|h| *h != host);
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
        if !self.awaiting_start.is_empty() {
            self.take_effect_at_spawn(id);
        }
        id
    }

    pub fn proc_by_name(&self, name: &str) -> Option<ProcId> {
        // Latest first: a name reused after a stop means the new process.
        self.procs
            .iter()
            .rposition(|p| p.name == name)
            .map(|i| ProcId(i as u32))
    }

    /// The process a fault naming `name` strikes: the latest of `name` and its later
    /// starts, `name#1`, `name#2`, ... (a program started again as a new process, as a
    /// kubelet starts a pod's restarted container). A fault on a pod is a fault on its
    /// running container, not on the one that exited.
    pub fn fault_target(&self, name: &str) -> Option<ProcId> {
        let restart_of = |p: &str| {
            p.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('#'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        self.procs
            .iter()
            .rposition(|p| p.name == name || restart_of(&p.name))
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

    /// The run's abstract signature so far, sorted ([`crate::signature`]; empty unless
    /// `record_signature`).
    pub fn signature(&mut self) -> &[u64] {
        match self.signature.as_mut() {
            Some(s) => s.pairs(),
            None => &[],
        }
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
