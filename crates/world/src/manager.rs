//! The controller host: what controller-runtime's manager and controller give a reconciler.
//!
//! A [`Manager`] is one process (one container) hosting one or more controllers. It owns
//! a shared [`Informer`] cache, an optional [`LeaderElector`], and per controller a work
//! queue with controller-runtime's semantics (docs/semantics.md section 2):
//! - a key is never reconciled concurrently with itself; adds while it is processed mark
//!   it dirty and it runs once more afterwards (MaxConcurrentReconciles = 1);
//! - `requeue_after` re-adds after a delay (a second delayed add can only move it
//!   earlier); an error re-adds with per-item exponential backoff (5 ms doubling, capped
//!   at 1000 s) and a success forgets the failures (the default rate limiter's overall
//!   10 qps / burst 100 token bucket, 2.3, is not modelled). Delayed adds are timers on
//!   true time matched by a token, so a clock skew that changes meanwhile cannot lose one;
//! - the worker loops over the queue (no recursion per key), so a large cache replayed at
//!   start costs no stack;
//! - controllers start once the cache has synced and, with leader election, once this
//!   process leads; at start every cached object is offered as an add, as informers
//!   replay their contents to a new handler; losing the lease stops the process, as
//!   controller-runtime exits on `OnStoppedLeading`.
//!
//! A reconciler is a step machine in the style of Anvil (OSDI '24): each call of
//! [`Reconciler::reconcile`] returns one [`Step`] — a request to send, or the end of the
//! reconcile — and the manager calls again with the [`Reply`]. Every request is an
//! interleaving point for the scheduler, exactly where a real controller awaits.

use crate::api::{ApiError, ApiOk, ApiOp, ApiRequest};
use crate::component::{Component, Endpoints, Message, Payload, UNREAD, WorldCtx};
pub use crate::fault::Failpoints;
use crate::fault::{FailpointAction, WorldFault};
use crate::informer::{Informer, RelistNotify};
use crate::leader::{LeaderConfig, LeaderElector, LeaderEvent};
use crate::msg::{Lost, Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::{Kind, Object, ObjectKey};
use crate::reconcile_error::{Protocol, ReconcileError};
use reconsim_sim::{ProcId, SimRng, SimTime};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Debug;
use std::sync::Arc;

/// Per-item backoff of the default controller rate limiter.
pub const BACKOFF_MS_BASE: u64 = 5;
pub const BACKOFF_MS_MAX: u64 = 1_000_000;
/// A request unanswered this long failed: the HTTP/2 health check (30 s idle + 15 s
/// ping) would have closed its connection.
pub const REQUEST_TIMEOUT_MS: u64 = 45_000;

/// A request a reconcile step makes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Call {
    Api(ApiOp),
    /// A call to a family's service process `to` (a cloud API, an etcd model), with the
    /// same timeout and interleaving as an API call.
    Service {
        to: ProcId,
        request: Payload,
    },
}

impl Call {
    /// A call of `request` to the service process `to`.
    pub fn service<T: Message>(to: ProcId, request: T) -> Self {
        Call::Service {
            to,
            request: Payload::new(request),
        }
    }
}

/// The answer to the previous step's [`Call`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Reply {
    Api(Result<ApiOk, ApiError>),
    /// A service's answer.
    Service(Payload),
    /// No answer within [`REQUEST_TIMEOUT_MS`] (a partition, a dead server).
    TimedOut,
    /// A [`Step::Sleep`] is over.
    Woke,
}

impl Reply {
    /// The reply with a service's answer typed as `T`, to match on:
    /// `match reply.answer::<CloudResult>() { Answer::Service(Ok(found)) => .. }`.
    pub fn answer<T: Message>(self) -> Answer<T> {
        match self {
            Reply::Api(r) => Answer::Api(r),
            Reply::Service(p) => match p.take::<T>() {
                Ok(t) => Answer::Service(t),
                Err(p) => Answer::Other(p),
            },
            Reply::TimedOut => Answer::TimedOut,
            Reply::Woke => Answer::Woke,
        }
    }
}

/// A [`Reply`] whose service answer is typed ([`Reply::answer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer<T> {
    Api(Result<ApiOk, ApiError>),
    Service(T),
    TimedOut,
    Woke,
    /// A service's answer of another type than the one asked for.
    Other(Payload),
}

/// What a reconcile step decides.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Step {
    /// Send this request; `reconcile` is called again with its [`Reply`].
    Call(Call),
    /// The reconcile ended; with `requeue_after_ms`, reconcile this key again later
    /// (controller-runtime's `Result{RequeueAfter}`).
    Done { requeue_after_ms: Option<u64> },
    /// The reconcile failed: requeue with backoff (controller-runtime's rate limiter).
    Error(ReconcileError),
    /// The reconcile failed and its error policy said when to retry (kube-runtime's
    /// `error_policy`, [`crate::runtime`]): noted as an error, requeued after
    /// `requeue_after_ms` if set.
    Failed {
        reason: ReconcileError,
        requeue_after_ms: Option<u64>,
    },
    /// The reconcile ended asking to run again after the per-item backoff
    /// (controller-runtime's `Result{Requeue: true}`: `AddRateLimited`).
    RateLimited,
    /// A failpoint crashes the process here ([`ReconcileCtx::failpoint`]): it dies with
    /// the reconcile in progress and restarts cold `restart_after_ms` later.
    Crash { restart_after_ms: u64 },
    /// Wait this long inside the reconcile (a poll of the cache, as `PollImmediate`
    /// loops do), then continue with [`Reply::Woke`]. The key stays in processing.
    Sleep { ms: u64 },
}

impl Step {
    pub fn done() -> Self {
        Step::Done {
            requeue_after_ms: None,
        }
    }

    pub fn requeue_after(ms: u64) -> Self {
        Step::Done {
            requeue_after_ms: Some(ms),
        }
    }

    /// The reconcile failed with `error`, requeued with backoff.
    pub fn error(error: impl std::error::Error + 'static) -> Self {
        Step::Error(ReconcileError::new(error))
    }

    /// The reconcile's protocol with the manager broke (see [`Protocol`]).
    pub fn protocol(what: &'static str) -> Self {
        Step::error(Protocol(what))
    }
}

/// What a reconcile step can see: its key, its cache, the last reply, its clock.
pub struct ReconcileCtx<'a> {
    pub key: &'a ObjectKey,
    pub cache: &'a crate::informer::Cache,
    /// `None` on the first step of a reconcile.
    pub reply: Option<Reply>,
    /// The process's own clock.
    pub now: SimTime,
    /// True time (a skew moves `now`, not this): what monotonic clocks follow.
    pub true_now: SimTime,
    pub rng: &'a mut SimRng,
    /// The process's identity (its pod/process name).
    pub identity: &'a str,
    /// Notes for full traces (explain, timelines), collected only when traced.
    notes_enabled: bool,
    notes: Vec<String>,
    /// The process's armed failpoints (none in a context made by [`ReconcileCtx::new`]).
    failpoints: Option<&'a mut Failpoints>,
}

impl<'a> ReconcileCtx<'a> {
    /// A context for calling [`Reconciler::reconcile`] directly, in a unit test of a
    /// reconciler's steps (the manager builds its own). Notes are kept: see
    /// [`ReconcileCtx::notes`].
    pub fn new(
        key: &'a ObjectKey,
        cache: &'a crate::informer::Cache,
        reply: Option<Reply>,
        now: SimTime,
        rng: &'a mut SimRng,
        identity: &'a str,
    ) -> Self {
        ReconcileCtx {
            key,
            cache,
            reply,
            now,
            true_now: now,
            rng,
            identity,
            notes_enabled: true,
            notes: Vec::new(),
            failpoints: None,
        }
    }

    /// A line for `reconsim explain` and `--timeline` (full traces only; never hashed,
    /// and `text` is not called otherwise).
    pub fn note(&mut self, text: impl FnOnce() -> String) {
        if self.notes_enabled {
            self.notes.push(text());
        }
    }

    /// The notes taken so far (a context from [`ReconcileCtx::new`] keeps them).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// A hit of the failpoint `name`: what the fault plan armed it to do at this hit, if
    /// anything (noted for explain). Unarmed, a failpoint costs a lookup and changes no
    /// history.
    pub fn failpoint(&mut self, name: &str) -> Option<FailpointAction> {
        let (n, action) = self.failpoints.as_mut()?.hit(name)?;
        self.note(|| format!("failpoint {name} hit #{n}: {action}"));
        Some(action)
    }
}

/// controller-runtime's `handler.EnqueueRequestForObject`, for [`Reconciler::keys_for`]:
/// the object itself, when it is of `kind`.
pub fn enqueue_for(object: &Object, kind: Kind, keys: &mut Vec<ObjectKey>) {
    if object.kind() == kind {
        keys.push(object.key());
    }
}

/// controller-runtime's `handler.EnqueueRequestForOwner{IsController: true}`: the
/// controller owner of `object`, when it is of `owner` kind (same namespace).
pub fn enqueue_owner(object: &Object, owner: Kind, keys: &mut Vec<ObjectKey>) {
    if let Some(r) = object.meta.controller_ref()
        && r.kind == owner
    {
        keys.push(ObjectKey::new(owner, &object.meta.namespace, &r.name));
    }
}

/// kube-runtime's `trigger_owners` (`Controller::owns`): every owner of `object` of
/// `owner` kind, controller or not, in the object's namespace (kube-runtime 5.0,
/// `controller/trigger.rs` and `ObjectRef::from_owner_ref`).
pub fn enqueue_owners(object: &Object, owner: Kind, keys: &mut Vec<ObjectKey>) {
    for r in &object.meta.owner_references {
        if r.kind == owner {
            keys.push(ObjectKey::new(owner, &object.meta.namespace, &r.name));
        }
    }
}

/// A controller's logic, as a step machine. All state lives in `self`.
pub trait Reconciler: Debug {
    /// The controller's name, for traces.
    fn name(&self) -> &str;
    /// The kinds the manager's cache must hold for this controller.
    fn watches(&self) -> Vec<Kind>;
    /// The keys to reconcile when `object` changes: itself (For) and/or its controller
    /// owner (Owns). Deleted objects are offered with their last state.
    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>);
    /// One step of a reconcile of `ctx.key`.
    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step;
    /// The process lost its memory: forget everything.
    fn reset(&mut self);
    /// The reconciler as `Any`, so tests can downcast [`Manager::reconciler`] to their
    /// own type and read its state. `None` unless the implementation opts in.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

pub use crate::timer::ManagerTimer as Timer;

/// controller-runtime's work queue for one controller (one worker).
#[derive(Clone, Debug, Default)]
pub struct WorkQueue {
    queue: VecDeque<ObjectKey>,
    dirty: BTreeSet<ObjectKey>,
    processing: Option<ObjectKey>,
    failures: BTreeMap<ObjectKey, u32>,
    /// Earliest pending delayed add per key: when (own clock) and its timer's token.
    waiting: BTreeMap<ObjectKey, (SimTime, u64)>,
    next_token: u64,
}

impl WorkQueue {
    pub fn add(&mut self, key: ObjectKey) {
        if !self.dirty.insert(key.clone()) {
            return;
        }
        if self.processing.as_ref() != Some(&key) {
            self.queue.push_back(key);
        }
    }

    /// The next key to process, if any and if the worker is free.
    pub fn get(&mut self) -> Option<ObjectKey> {
        if self.processing.is_some() {
            return None;
        }
        let key = self.queue.pop_front()?;
        self.dirty.remove(&key);
        self.processing = Some(key.clone());
        Some(key)
    }

    /// Processing of the current key ended; a key re-added meanwhile goes back in line.
    pub fn done(&mut self) {
        if let Some(key) = self.processing.take()
            && self.dirty.contains(&key)
        {
            self.queue.push_back(key);
        }
    }

    /// A delayed add due at `at`: the token of the timer to set, or `None` if an earlier
    /// (or equal) one is already pending (a later add never postpones, semantics 2.2).
    fn wait_until(&mut self, key: &ObjectKey, at: SimTime) -> Option<u64> {
        match self.waiting.get(key) {
            Some((t, _)) if *t <= at => None,
            _ => {
                self.next_token += 1;
                self.waiting.insert(key.clone(), (at, self.next_token));
                Some(self.next_token)
            }
        }
    }

    /// The delayed add with `token` fired: add the key if that is its pending delay (a
    /// superseded, later one does nothing). Matched by token, not by comparing clocks: the
    /// timer runs on true time, and a clock skew that changed meanwhile must not lose it.
    fn fire(&mut self, key: ObjectKey, token: u64) {
        if self.waiting.get(&key).is_some_and(|(_, t)| *t == token) {
            self.waiting.remove(&key);
            self.add(key);
        }
    }

    /// The backoff before retrying `key` after one more failure.
    fn fail(&mut self, key: &ObjectKey) -> u64 {
        let n = self.failures.entry(key.clone()).or_insert(0);
        let delay = BACKOFF_MS_BASE.saturating_mul(1u64 << (*n).min(40));
        *n += 1;
        delay.min(BACKOFF_MS_MAX)
    }

    fn forget(&mut self, key: &ObjectKey) {
        self.failures.remove(key);
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[derive(Debug)]
struct Controller {
    reconciler: Box<dyn Reconciler>,
    queue: WorkQueue,
    ids: ReqIds,
    /// What the current reconcile waits on: a request's (or a sleep's) id, and which.
    in_flight: Option<(u64, Wait)>,
    reconciles: u64,
}

/// What a reconcile's step waits on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wait {
    /// The answer of a read on the API server's connection: a reset makes client-go
    /// send it again ([`Read`]).
    Read(Read),
    /// The answer of a write on the API server's connection, which a reset fails.
    Write,
    /// The answer of a call to this service (the cloud's), on a connection of its own.
    Service(ProcId),
    /// The end of a sleep.
    Sleep,
}

/// A read in flight, kept to send again: client-go retries a GET that failed with a
/// connection reset (or an EOF), after the `Retry-After: 1` it gives itself, and never
/// a write, "as they are not idempotent" (rest `request.go`, `isErrRetryableFunc`;
/// docs/semantics.md 4.12).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Read {
    op: ApiOp,
    /// Times sent again so far.
    retries: u8,
    /// Waiting out its `Retry-After`: on no connection, so no reset fails it.
    waiting: bool,
}

/// client-go's `Retry-After` for a GET that failed with a connection reset.
const READ_RETRY_AFTER_MS: u64 = 1_000;
/// How many times a read is sent again. client-go allows `maxRetries` (10), but only
/// for a reset or an EOF (`net.IsConnectionReset`, `net.IsProbableEOF`): the retry
/// dials a new connection, and while the link is still cut that dial is refused,
/// which is neither, so the read fails then. One retry is what a cut leaves.
const READ_RETRIES_MAX: u8 = 1;

/// Settings of a manager process.
#[derive(Clone, Debug, Default)]
pub struct ManagerConfig {
    /// Identity for leader election and traces (the pod name).
    pub identity: String,
    pub leader: Option<LeaderConfig>,
    /// The kubelet running this container, told when the process exits.
    pub kubelet: Option<ProcId>,
    /// The pod this container belongs to.
    pub pod: Option<String>,
    /// What a relist wakes: client-go's changed objects (controller-runtime) or
    /// kube-runtime's every object (docs/semantics.md 4.2).
    pub relist_notify: RelistNotify,
    /// controller-runtime's SyncPeriod: each watched kind's informer re-delivers every
    /// cached object as an update this often, jittered into [0.9, 1.1) x the period once
    /// per start (pkg/cache `resyncPeriod`; semantics 4.5). `None`: no resync (kube-runtime
    /// has none; controller-runtime's default is 10 h, past any scenario).
    pub sync_period_ms: Option<u64>,
    /// After acquiring the lease, start the controllers only this much later (a fence
    /// against a deposed leader's writes still in flight; 0: at once, as
    /// controller-runtime).
    pub fence_ms: u64,
}

/// The controller host process.
#[derive(Debug)]
pub struct Manager {
    config: ManagerConfig,
    endpoints: Endpoints,
    informer: Informer,
    elector: Option<LeaderElector>,
    controllers: Vec<Controller>,
    running: bool,
    exited: bool,
    changes: Vec<Arc<Object>>,
    keys: Vec<ObjectKey>,
    /// Armed by the fault plan; kept across crashes.
    failpoints: Failpoints,
    /// How many times the process has started: the uniquifier of its leader-election
    /// identity (not memory; it stands in for a fresh uuid).
    starts: u32,
    /// Until when a new leader holds back ([`ManagerConfig::fence_ms`]).
    fence_until: Option<SimTime>,
    /// The watch stall in force ([`WorldFault::WatchStall`]); 0: none.
    watch_stall_ms: u64,
    /// Watch events held by the stall, in order, with their release times (never
    /// decreasing); bounded by the events of one stall period.
    stalled: VecDeque<(SimTime, Msg)>,
}

impl Manager {
    pub fn new(
        config: ManagerConfig,
        endpoints: Endpoints,
        reconcilers: Vec<Box<dyn Reconciler>>,
    ) -> Self {
        let mut kinds: Vec<Kind> = reconcilers.iter().flat_map(|r| r.watches()).collect();
        kinds.sort();
        kinds.dedup();
        let elector = config
            .leader
            .clone()
            .map(|lc| LeaderElector::new(lc, config.identity.clone(), endpoints.apiserver));
        let controllers = reconcilers
            .into_iter()
            .enumerate()
            .map(|(i, reconciler)| Controller {
                reconciler,
                queue: WorkQueue::default(),
                ids: ReqIds::new(tags::RECONCILER + i as u16),
                in_flight: None,
                reconciles: 0,
            })
            .collect();
        Manager {
            informer: Informer::new(0, &kinds, endpoints.apiserver).notifying(config.relist_notify),
            config,
            endpoints,
            elector,
            controllers,
            running: false,
            exited: false,
            changes: Vec::new(),
            keys: Vec::new(),
            failpoints: Failpoints::default(),
            starts: 0,
            fence_until: None,
            watch_stall_ms: 0,
            stalled: VecDeque::new(),
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Whether the controllers run (cache synced and, with leader election, leading).
    pub fn running(&self) -> bool {
        self.running
    }

    /// Whether this process believes it holds the lease (true without leader election).
    pub fn believes_leader(&self) -> bool {
        self.elector.as_ref().is_none_or(|e| e.is_leader())
    }

    pub fn informer(&self) -> &Informer {
        &self.informer
    }

    pub fn reconciler(&self, i: usize) -> &dyn Reconciler {
        self.controllers[i].reconciler.as_ref()
    }

    /// Controller `i`'s work queue.
    pub fn queue(&self, i: usize) -> &WorkQueue {
        &self.controllers[i].queue
    }

    /// Reconciles started, per controller.
    pub fn reconciles(&self) -> Vec<u64> {
        self.controllers.iter().map(|c| c.reconciles).collect()
    }
}

/// The controller host as a process of the world.
impl Component for Manager {
    /// Leader election runs as `<identity>_<start>`: controller-runtime's id is the
    /// hostname, "_" and a new uuid at every process start (semantics 1.14), so a
    /// restarted process is a new candidate and waits out the lease its former self held.
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.running = false;
        self.exited = false;
        self.starts += 1;
        self.informer.start(ctx);
        if let Some(period_ms) = self.config.sync_period_ms {
            let kinds = self.informer.kinds().count() as u16;
            for kind in 0..kinds {
                let period_ms = ctx.draw_ms(period_ms / 10 * 9, (period_ms / 10 * 11).max(1) - 1);
                let timer = Timer::Resync { kind, period_ms };
                ctx.set_timer(period_ms, Msg::Timer(AnyTimer::Manager(timer)));
            }
        }
        if let Some(e) = &mut self.elector {
            e.set_identity(format!("{}_{}", self.config.identity, self.starts));
            e.start(ctx);
        }
    }

    fn on_crash(&mut self) {
        self.running = false;
        self.fence_until = None;
        // The socket buffers died with the process; a fault's end is not delivered to it.
        self.stalled.clear();
        self.watch_stall_ms = 0;
        if let Some(e) = &mut self.elector {
            e.reset();
        }
        for c in &mut self.controllers {
            c.queue = WorkQueue::default();
            c.in_flight = None;
            c.reconciler.reset();
        }
    }

    /// A `Failpoint` fault arms (or, at its end, disarms) a failpoint of this process.
    fn on_fault(&mut self, f: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        if matches!(f, WorldFault::Resync) && active && !self.exited {
            let kinds: Vec<_> = self.informer.kinds().collect();
            for kind in kinds {
                self.resync(kind, ctx);
            }
        }
        if let WorldFault::WatchStall { lag_ms } = f {
            // Overlapping stalls add up, as the API server's lags do.
            self.watch_stall_ms = if active {
                self.watch_stall_ms.saturating_add(*lag_ms)
            } else {
                self.watch_stall_ms.saturating_sub(*lag_ms)
            };
        }
        if let WorldFault::Failpoint { name, hit, action } = f {
            if active {
                self.failpoints.arm(name, *hit, *action);
            } else {
                self.failpoints.disarm(name, *hit, *action);
            }
        }
    }

    /// The API server's end closed: its one connection broke, as on a reset. A
    /// service's: the call in flight on it failed.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if self.exited {
            return;
        }
        if peer == self.endpoints.apiserver {
            return self.handle(Msg::ConnectionReset, ctx);
        }
        let calls: Vec<u64> = self
            .controllers
            .iter()
            .filter_map(|c| match &c.in_flight {
                Some((id, Wait::Service(to))) if *to == peer => Some(*id),
                _ => None,
            })
            .collect();
        for id in calls {
            self.failed(id, |w| matches!(w, Wait::Service(_)), ctx);
        }
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        if self.exited {
            return;
        }
        if matches!(msg, Msg::Watch(_)) && (self.watch_stall_ms > 0 || !self.stalled.is_empty()) {
            // Behind the stall, or behind events it still holds (order first).
            let now = ctx.now();
            let release = self
                .stalled
                .back()
                .map_or(now, |(at, _)| *at)
                .max(now.plus_ms(self.watch_stall_ms));
            self.stalled.push_back((release, msg));
            ctx.set_timer(
                release.since(now),
                Msg::Timer(AnyTimer::Manager(Timer::ReleaseWatch)),
            );
            return;
        }
        self.handle(msg, ctx);
    }

    fn on_timer(&mut self, timer: AnyTimer, ctx: &mut WorldCtx<'_>) {
        if self.exited {
            return;
        }
        match timer {
            AnyTimer::Informer(t) => {
                self.informer.on_timer(&t, ctx);
            }
            AnyTimer::Leader(t) => {
                if let Some(e) = &mut self.elector {
                    let handled = e.on_timer(&t, ctx);
                    self.on_leader_event(handled.event, ctx);
                }
            }
            AnyTimer::Manager(Timer::FenceOver) => self.maybe_start(ctx),
            AnyTimer::Manager(Timer::ReleaseWatch) => {
                let now = ctx.now();
                while self.stalled.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, msg) = self.stalled.pop_front().expect("checked");
                    self.handle(msg, ctx);
                    if self.exited {
                        return;
                    }
                }
            }
            AnyTimer::Manager(Timer::Resync { kind, period_ms }) => {
                let timer = Timer::Resync { kind, period_ms };
                ctx.set_timer(period_ms, Msg::Timer(AnyTimer::Manager(timer)));
                let kind = self
                    .informer
                    .kinds()
                    .nth(kind as usize)
                    .expect("a watched kind");
                self.resync(kind, ctx);
            }
            AnyTimer::Manager(Timer::Requeue { ctrl, key, token }) => {
                self.controllers[ctrl as usize].queue.fire(key, token);
                self.pump(ctrl as usize, ctx);
            }
            AnyTimer::Manager(Timer::RequestTimeout { ctrl, req }) => {
                let c = &mut self.controllers[ctrl as usize];
                if c.in_flight.as_ref().is_some_and(|(id, _)| *id == req) {
                    c.in_flight = None;
                    self.step(ctrl as usize, Some(Reply::TimedOut), ctx);
                    self.pump(ctrl as usize, ctx);
                }
            }
            AnyTimer::Manager(Timer::Retry { ctrl, req }) => {
                self.retry_read(ctrl as usize, req, ctx);
            }
            AnyTimer::Manager(Timer::Wake { ctrl, req }) => {
                let c = &mut self.controllers[ctrl as usize];
                if c.in_flight.as_ref().is_some_and(|(id, _)| *id == req) {
                    c.in_flight = None;
                    self.step(ctrl as usize, Some(Reply::Woke), ctx);
                    self.pump(ctrl as usize, ctx);
                }
            }
            other => panic!("manager got a foreign timer {other:?}"),
        }
    }

    /// Its reconcilers' state shows in the API server's store (tests read it).
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Manager {
    /// Every cached object of `kind`, as an update with old == new (a resync).
    fn resync(&mut self, kind: crate::object::Kind, ctx: &mut WorldCtx<'_>) {
        if self.informer.synced() {
            let mut changes = std::mem::take(&mut self.changes);
            changes.extend(self.informer.cache().list(kind).cloned());
            self.offer(&changes, ctx);
            changes.clear();
            self.changes = changes;
        }
    }

    /// A message as it reaches the manager's code (after any watch stall).
    fn handle(&mut self, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::ConnectionReset => return self.connection_reset(ctx),
            Msg::ConnectionLost(Lost::Request(id)) => {
                return self.failed(id, |w| matches!(w, Wait::Service(_)), ctx);
            }
            _ => {}
        }
        let mut changes = std::mem::take(&mut self.changes);
        if self.informer.handle(&msg, ctx, &mut changes) {
            self.offer(&changes, ctx);
            changes.clear();
            self.changes = changes;
            self.maybe_start(ctx);
            return;
        }
        self.changes = changes;
        if let Some(e) = &mut self.elector {
            let handled = e.handle(&msg, ctx);
            if handled.ours {
                self.on_leader_event(handled.event, ctx);
                return;
            }
        }
        let (id, reply) = match msg {
            Msg::ApiResp(r) => (r.id, Reply::Api(r.result)),
            Msg::Response { id, body } => (id, Reply::Service(body)),
            _ => return,
        };
        if let Some(i) = self
            .controllers
            .iter()
            .position(|c| c.in_flight.as_ref().is_some_and(|(f, _)| *f == id))
        {
            self.controllers[i].in_flight = None;
            self.step(i, Some(reply), ctx);
            self.pump(i, ctx);
        }
    }

    /// The API server's connection broke (a lost message of it, the server's restart;
    /// client-go keeps one HTTP/2 connection for all, semantics 4.12): every watch on
    /// it relists, and the elector's and every controller's request on it failed.
    fn connection_reset(&mut self, ctx: &mut WorldCtx<'_>) {
        let mut changes = std::mem::take(&mut self.changes);
        self.informer
            .handle(&Msg::ConnectionReset, ctx, &mut changes);
        self.offer(&changes, ctx);
        changes.clear();
        self.changes = changes;
        if let Some(e) = &mut self.elector {
            let handled = e.handle(&Msg::ConnectionReset, ctx);
            self.on_leader_event(handled.event, ctx);
            if self.exited {
                return;
            }
        }
        for i in 0..self.controllers.len() {
            match &mut self.controllers[i].in_flight {
                Some((id, Wait::Write)) => {
                    let id = *id;
                    self.failed(id, |w| *w == Wait::Write, ctx);
                }
                Some((_, Wait::Read(read))) if read.waiting => {}
                Some((id, Wait::Read(read))) if read.retries < READ_RETRIES_MAX => {
                    read.waiting = true;
                    let req = *id;
                    ctx.set_timer(
                        READ_RETRY_AFTER_MS,
                        Msg::Timer(AnyTimer::Manager(Timer::Retry {
                            ctrl: i as u16,
                            req,
                        })),
                    );
                }
                Some((id, Wait::Read(_))) => {
                    let id = *id;
                    self.failed(id, |w| matches!(w, Wait::Read(_)), ctx);
                }
                _ => {}
            }
        }
        self.maybe_start(ctx);
    }

    /// Request `id`, waited on as `wait` says, failed with a transport error: the
    /// reconcile waiting on it sees it fail, as when it timed out.
    fn failed(&mut self, id: u64, wait: impl Fn(&Wait) -> bool, ctx: &mut WorldCtx<'_>) {
        if let Some(i) = self.controllers.iter().position(|c| {
            c.in_flight
                .as_ref()
                .is_some_and(|(f, w)| *f == id && wait(w))
        }) {
            self.controllers[i].in_flight = None;
            self.step(i, Some(Reply::TimedOut), ctx);
            self.pump(i, ctx);
        }
    }

    /// Send controller `ctrl`'s read `req` again, as a new request (an answer to the
    /// old one is no longer waited for), with its own timeout.
    fn retry_read(&mut self, ctrl: usize, req: u64, ctx: &mut WorldCtx<'_>) {
        let c = &mut self.controllers[ctrl];
        let Some((id, Wait::Read(read))) = &mut c.in_flight else {
            return;
        };
        if *id != req || !read.waiting {
            return;
        }
        read.waiting = false;
        read.retries += 1;
        let next = c.ids.issue();
        *id = next;
        let op = read.op.clone();
        ctx.send(
            self.endpoints.apiserver,
            Msg::Api(ApiRequest { id: next, op }),
        );
        ctx.set_timer(
            REQUEST_TIMEOUT_MS,
            Msg::Timer(AnyTimer::Manager(Timer::RequestTimeout {
                ctrl: ctrl as u16,
                req: next,
            })),
        );
    }

    fn on_leader_event(&mut self, event: Option<LeaderEvent>, ctx: &mut WorldCtx<'_>) {
        match event {
            Some(LeaderEvent::StartedLeading) => {
                ctx.note(|| "started leading".to_string());
                if self.config.fence_ms > 0 {
                    self.fence_until = Some(ctx.now().plus_ms(self.config.fence_ms));
                    ctx.set_timer(
                        self.config.fence_ms,
                        Msg::Timer(AnyTimer::Manager(Timer::FenceOver)),
                    );
                    ctx.note(|| format!("fenced: acting in {} ms", self.config.fence_ms));
                }
                self.maybe_start(ctx)
            }
            Some(LeaderEvent::StoppedLeading) => {
                ctx.note(|| "lost the lease: exiting".to_string());
                // controller-runtime: "leader election lost" -> the process exits.
                self.exited = true;
                self.running = false;
                if let Some(kubelet) = self.config.kubelet {
                    ctx.send(kubelet, Msg::ContainerExited);
                }
                ctx.stop(ctx.me());
            }
            None => {}
        }
    }

    /// Start the controllers once synced and leading; replay the cache as adds.
    fn maybe_start(&mut self, ctx: &mut WorldCtx<'_>) {
        if self.running || !self.informer.synced() || !self.believes_leader() {
            return;
        }
        if self.fence_until.is_some_and(|t| ctx.now() < t) {
            return;
        }
        self.running = true;
        let all: Vec<Arc<Object>> = self
            .informer
            .kinds()
            .flat_map(|k| self.informer.cache().list(k).cloned().collect::<Vec<_>>())
            .collect();
        self.offer(&all, ctx);
    }

    /// Enqueue the keys the changed objects map to, then let idle workers go.
    fn offer(&mut self, changed: &[Arc<Object>], ctx: &mut WorldCtx<'_>) {
        if !self.running {
            return;
        }
        for i in 0..self.controllers.len() {
            let c = &mut self.controllers[i];
            for obj in changed {
                self.keys.clear();
                c.reconciler.keys_for(obj, &mut self.keys);
                for key in self.keys.drain(..) {
                    c.queue.add(key);
                }
            }
            self.pump(i, ctx);
        }
    }

    /// While controller `i`'s worker is idle, start reconciling the next key. A loop, not
    /// a recursion through `step`: reconciles that end at once (a full queue at start)
    /// must not grow the stack per key. Bounded by the queue's length: a reconcile that
    /// ends never adds to the queue at once (requeues go through timers).
    fn pump(&mut self, i: usize, ctx: &mut WorldCtx<'_>) {
        while self.running
            && self.controllers[i].in_flight.is_none()
            && self.controllers[i].queue.get().is_some()
        {
            self.controllers[i].reconciles += 1;
            if ctx.notes_enabled() {
                let c = &self.controllers[i];
                let key = c.queue.processing.as_ref().expect("just taken");
                let cache = self.informer.cache();
                let own = match cache.get(key) {
                    Some(o) => format!("rv {}", o.meta.resource_version),
                    None => "absent".to_string(),
                };
                // How far each watched kind's cache has got: the newest write it holds.
                let seen: Vec<String> = self
                    .informer
                    .kinds()
                    .map(|k| {
                        let rv = cache.list(k).map(|o| o.meta.resource_version).max();
                        format!("{k}@{}", rv.unwrap_or(0))
                    })
                    .collect();
                let n = c.reconciles;
                let name = c.reconciler.name().to_string();
                ctx.note(|| {
                    format!(
                        "{name} reconcile #{n} of {key} (cache: {own}; seen {})",
                        seen.join(", ")
                    )
                });
            }
            self.step(i, None, ctx);
        }
    }

    /// Run one reconcile step of controller `i`: it sends a request, sleeps, or ends. The
    /// caller pumps afterwards, so the next key starts once this reconcile ended.
    fn step(&mut self, i: usize, reply: Option<Reply>, ctx: &mut WorldCtx<'_>) {
        let c = &mut self.controllers[i];
        // Borrowed for the step: only a reconcile that ends needs its own copy.
        let Some(key) = c.queue.processing.as_ref() else {
            return;
        };
        let now = ctx.now();
        let true_now = ctx.true_now();
        let notes_enabled = ctx.notes_enabled();
        let (step, notes) = {
            let mut rctx = ReconcileCtx {
                key,
                cache: self.informer.cache(),
                reply,
                now,
                true_now,
                rng: ctx.rng(),
                identity: &self.config.identity,
                notes_enabled,
                notes: Vec::new(),
                failpoints: Some(&mut self.failpoints),
            };
            let step = c.reconciler.reconcile(&mut rctx);
            (step, rctx.notes)
        };
        let name = c.reconciler.name();
        for n in notes {
            ctx.note(|| format!("{name}: {n}"));
        }
        match step {
            Step::Call(call) => {
                let id = c.ids.issue();
                let (to, msg, wait) = match call {
                    Call::Api(op) => {
                        let wait = match op {
                            ApiOp::Get(_) | ApiOp::List { .. } => Wait::Read(Read {
                                op: op.clone(),
                                retries: 0,
                                waiting: false,
                            }),
                            _ => Wait::Write,
                        };
                        (
                            self.endpoints.apiserver,
                            Msg::Api(ApiRequest { id, op }),
                            wait,
                        )
                    }
                    Call::Service { to, request } => {
                        (to, Msg::Request { id, body: request }, Wait::Service(to))
                    }
                };
                c.in_flight = Some((id, wait));
                ctx.send(to, msg);
                ctx.set_timer(
                    REQUEST_TIMEOUT_MS,
                    Msg::Timer(AnyTimer::Manager(Timer::RequestTimeout {
                        ctrl: i as u16,
                        req: id,
                    })),
                );
            }
            Step::Sleep { ms } => {
                let id = c.ids.issue();
                c.in_flight = Some((id, Wait::Sleep));
                ctx.set_timer(
                    ms,
                    Msg::Timer(AnyTimer::Manager(Timer::Wake {
                        ctrl: i as u16,
                        req: id,
                    })),
                );
            }
            Step::Crash { restart_after_ms } => {
                let name = c.reconciler.name();
                ctx.note(|| format!("{name} reconcile of {key} crashes the process"));
                ctx.crash_self(restart_after_ms);
            }
            end => {
                let key = key.clone();
                // How the reconcile ended: its note, and when the key comes back
                // (controller-runtime's reconcileHandler, semantics 2.4).
                let (how, reason, requeue) = match &end {
                    Step::Done { requeue_after_ms } => {
                        c.queue.forget(&key);
                        ("", None, *requeue_after_ms)
                    }
                    Step::Error(reason) => (" in error: ", Some(reason), Some(c.queue.fail(&key))),
                    Step::RateLimited => {
                        (", requeued rate-limited", None, Some(c.queue.fail(&key)))
                    }
                    Step::Failed {
                        reason,
                        requeue_after_ms,
                    } => (" in error: ", Some(reason), *requeue_after_ms),
                    Step::Call(_) | Step::Sleep { .. } | Step::Crash { .. } => {
                        unreachable!("matched above")
                    }
                };
                let name = c.reconciler.name();
                ctx.note(|| {
                    let reason = reason.map(ToString::to_string).unwrap_or_default();
                    format!("{name} reconcile of {key} ends{how}{reason}")
                });
                c.queue.done();
                if let Some(ms) = requeue {
                    self.add_after(i, key, ms, ctx);
                }
            }
        }
    }

    fn add_after(&mut self, i: usize, key: ObjectKey, ms: u64, ctx: &mut WorldCtx<'_>) {
        let at = ctx.now().plus_ms(ms);
        if let Some(token) = self.controllers[i].queue.wait_until(&key, at) {
            ctx.set_timer(
                ms,
                Msg::Timer(AnyTimer::Manager(Timer::Requeue {
                    ctrl: i as u16,
                    key,
                    token,
                })),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Pod, Resource};

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Pod::KIND, "ns", name)
    }

    #[test]
    fn a_later_delayed_add_does_not_postpone_an_earlier_one() {
        // semantics 2.2: only an earlier ready time replaces the pending one.
        let mut q = WorkQueue::default();
        let a = key("a");
        let first = q
            .wait_until(&a, SimTime(100))
            .expect("nothing pending: set a timer");
        assert_eq!(q.wait_until(&a, SimTime(200)), None, "later: no new timer");
        assert_eq!(
            q.wait_until(&a, SimTime(100)),
            None,
            "same time: no new timer"
        );
        q.fire(a.clone(), first);
        assert_eq!(q.get(), Some(a.clone()), "the first delay added the key");
        q.done();
        assert_eq!(q.get(), None);
        // Once fired, a new delayed add sets a timer again.
        assert!(q.wait_until(&a, SimTime(300)).is_some());
    }

    #[test]
    fn an_earlier_delayed_add_supersedes_and_the_old_timer_does_nothing() {
        let mut q = WorkQueue::default();
        let a = key("a");
        let late = q.wait_until(&a, SimTime(500)).unwrap();
        let early = q.wait_until(&a, SimTime(100)).unwrap();
        assert_ne!(late, early);
        q.fire(a.clone(), early);
        assert_eq!(q.get(), Some(a.clone()));
        q.done();
        q.fire(a.clone(), late);
        assert_eq!(q.get(), None, "the superseded timer adds nothing");
        // A timer fires by its token, whatever the clock says now (a skew that changed).
        let t = q.wait_until(&a, SimTime(1_000_000)).unwrap();
        q.fire(a.clone(), t);
        assert_eq!(q.get(), Some(a));
    }

    #[test]
    fn error_backoff_doubles_from_5_ms_and_caps_at_1000_s() {
        // semantics 2.3: 5 ms x 2^failures, capped at 1000 s, per item.
        let mut q = WorkQueue::default();
        let (a, b) = (key("a"), key("b"));
        let delays: Vec<u64> = (0..100).map(|_| q.fail(&a)).collect();
        assert_eq!(&delays[..5], &[5, 10, 20, 40, 80]);
        assert_eq!(delays[17], 655_360);
        assert!(delays[18..].iter().all(|d| *d == BACKOFF_MS_MAX));
        assert_eq!(BACKOFF_MS_MAX, 1_000_000);
        assert_eq!(q.fail(&b), 5, "per item: b's count is its own");
        q.forget(&a);
        assert_eq!(q.fail(&a), 5, "a success forgets the failures");
        assert_eq!(q.fail(&b), 10, "forgetting a leaves b alone");
    }
}
