//! Leases and leader election, as client-go's `tools/leaderelection` does it.
//!
//! Sources: docs/semantics.md section 1 (facts 1.1-1.13), which cites
//! kubernetes/client-go `tools/leaderelection/leaderelection.go` (@b4217e14; the newer copy in
//! kubernetes/kubernetes `staging/src/k8s.io/client-go/tools/leaderelection/leaderelection.go`
//! @0138c828) and `tools/leaderelection/resourcelock/leaselock.go`.
//!
//! A [`LeaderElector`] is a component embedded in a controller process, as an
//! [`crate::informer::Informer`] is: the host forwards messages and timers to it and reacts to
//! the [`LeaderEvent`]s it returns. [`Candidate`] is the smallest such host: a process that does
//! nothing but take part in the election (tests use it; users can use it as a plain
//! leader-elected process).
//!
//! What is modelled (section numbers are docs/semantics.md's):
//! - tryAcquireOrRenew (1.5, 1.7, 1.8): Get the Lease; NotFound -> Create it (success iff the
//!   create succeeds); held by another identity and still valid -> fail; else Update with the
//!   fetched object's resourceVersion as precondition (a concurrent writer -> 409 -> fail),
//!   writing holderIdentity, leaseDurationSeconds, renewTime = now, acquireTime (kept when the
//!   record already names me, else now) and leaseTransitions (+1 unless it already names me).
//!   Only the slow path is modelled; the newer fast path (1.6, Update from the cache without a
//!   Get when I believe I lead) is not.
//! - Expiry on the elector's OWN clock (1.4): the elector keeps the record it last saw and
//!   `observed_time` = its `ctx.now()` when that record last changed; the lease is still held
//!   iff `observed_time + leaseDurationSeconds (of the record) > now`. renewTime/acquireTime
//!   are only ever written, never compared with a clock, so a constant clock skew changes
//!   nothing. A skew that changes mid-run (a `ClockSkew` fault applied after the elector has
//!   observed a record) acts as a clock step here; real client-go compares Go monotonic clock
//!   readings and would not see a wall-clock step (its package doc only promises tolerance of
//!   skew, not of skew rate).
//! - Acquire loop (1.9): attempt at once, then after every failure wait
//!   `retry_period * (1 + r * 1.2)`, r uniform in [0, 1) from the process's own stream
//!   (`wait.JitterUntil(.., RetryPeriod, 1.2, sliding=true, ..)`).
//! - Renew loop (1.10): `wait.Until` starts a renew window at once after acquiring, then
//!   `retry_period` after each window that succeeded (no jitter). A window is a timer of
//!   `renew_deadline` started at its beginning; inside it the elector tries at once and, after
//!   each failure, again `retry_period` later. If the window's timer fires before a success,
//!   leadership is lost: [`LeaderEvent::StoppedLeading`], and the elector stops for good (Run
//!   returns). controller-runtime then exits the process (1.11); the host decides, e.g.
//!   [`Candidate`] stops its own process. So a leader cut off from the API server stops at
//!   most `retry_period + renew_deadline` after its last successful renew, on its own clock.
//! - A paused leader (1.13): the kernel holds its messages and timers, so nothing checks the
//!   time while it is frozen. On resume it still believes it leads ([`LeaderElector::is_leader`])
//!   until its renew window's timer fires: at once if the pause began inside a window whose
//!   deadline passed, else `renew_deadline` after the window that the resume starts. Failed
//!   renew attempts meanwhile are just retried, as in client-go. There is no fencing.
//! - Lost requests: a request unanswered after `renew_deadline` counts as a failed attempt.
//!   client-go's renew loop runs tryAcquireOrRenew under a context that times out at the
//!   window's end (1.10), and kube-scheduler builds its leader-election client with
//!   `rest.Config.Timeout = RenewDeadline` (cmd/kube-scheduler/app/options `createClients`); the
//!   acquire loop's own timeout depends on the binary, and renew_deadline is used for it too.
//!   A late answer to a timed-out request is ignored.
//! - Not modelled: ReleaseOnCancel (1.12), the fast path (1.6).
//!
//! Times written into the Lease (acquireTime, renewTime) are the writer's own clock.

use crate::api::{ApiError, ApiOk, ApiOp, ApiRequest};
use crate::component::{Component, UNREAD, WorldCtx};
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::Resource;
use crate::object::{Body, Lease, Object, ObjectKey, ObjectMeta};
use reconsim_sim::{ProcId, SimTime, TimerId};
use serde::Serialize;
use std::sync::Arc;

/// client-go's `JitterFactor` for the acquire loop (1.2), in tenths.
pub const JITTER_FACTOR_TENTHS: u64 = 12;
/// How long client-go waits before it sends a GET that failed with a reset again (the
/// manager's reads wait the same: docs/semantics.md 4.12).
const GET_RETRY_AFTER_MS: u64 = 1_000;

/// How many leadership changes a [`Candidate`] remembers; older ones are dropped.
pub const HISTORY_MAX: usize = 4096;

pub use crate::timer::LeaderTimer as Timer;

/// Timing and lock of an election. Durations in milliseconds of the elector's own clock.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LeaderConfig {
    pub lease_namespace: String,
    pub lease_name: String,
    /// How long a non-leader waits after it last saw the record change before taking over.
    pub lease_duration_ms: u64,
    /// How long the leader keeps trying to renew (one renew window) before giving up.
    pub renew_deadline_ms: u64,
    /// Wait between attempts.
    pub retry_period_ms: u64,
}

impl LeaderConfig {
    pub fn new(
        namespace: &str,
        name: &str,
        lease_duration_ms: u64,
        renew_deadline_ms: u64,
        retry_period_ms: u64,
    ) -> Self {
        LeaderConfig {
            lease_namespace: namespace.to_string(),
            lease_name: name.to_string(),
            lease_duration_ms,
            renew_deadline_ms,
            retry_period_ms,
        }
    }

    /// 15 s / 10 s / 2 s: core components and controller-runtime's manager (semantics 1.1).
    pub fn client_go_defaults(namespace: &str, name: &str) -> Self {
        Self::new(namespace, name, 15_000, 10_000, 2_000)
    }

    /// 137 s / 107 s / 26 s: library-go's later defaults for HA OpenShift operators (1.11).
    pub fn library_go_ha(namespace: &str, name: &str) -> Self {
        Self::new(namespace, name, 137_000, 107_000, 26_000)
    }

    /// client-go's `NewLeaderElector` checks (semantics 1.3): all positive, leaseDuration >
    /// renewDeadline > 1.2 x retryPeriod. The elector runs with any values, so scenarios can
    /// model a misconfiguration; loaders should call this to reject one.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration_ms == 0 || self.renew_deadline_ms == 0 || self.retry_period_ms == 0 {
            return Err("leader election durations must be positive".into());
        }
        if self.lease_duration_ms <= self.renew_deadline_ms {
            return Err("lease_duration_ms must be greater than renew_deadline_ms".into());
        }
        if self.renew_deadline_ms * 10 <= self.retry_period_ms * JITTER_FACTOR_TENTHS {
            return Err("renew_deadline_ms must be greater than 1.2 x retry_period_ms".into());
        }
        Ok(())
    }

    pub fn lease_key(&self) -> ObjectKey {
        ObjectKey::new(Lease::KIND, &self.lease_namespace, &self.lease_name)
    }
}

/// What the elector tells its host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LeaderEvent {
    /// This process now leads (client-go's OnStartedLeading).
    StartedLeading,
    /// This process lost the lease and the elector has stopped (OnStoppedLeading); a
    /// controller-runtime process exits now.
    StoppedLeading,
}

/// The result of offering a message or timer to the elector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handled {
    /// The message or timer belonged to the elector (the host should not look at it).
    pub ours: bool,
    pub event: Option<LeaderEvent>,
}

impl Handled {
    const NOT_OURS: Handled = Handled {
        ours: false,
        event: None,
    };

    fn ours(event: Option<LeaderEvent>) -> Self {
        Handled { ours: true, event }
    }
}

/// Where the elector is in client-go's `Run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Phase {
    /// Not started (or reset).
    Idle,
    /// In the acquire loop.
    Acquiring,
    /// In the renew loop: believes it leads.
    Leading,
    /// Lost the lease; Run has returned. Only a reset starts it again.
    Stopped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Get,
    Create,
    Update,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    req: u64,
    step: Step,
    timeout: TimerId,
    /// A GET sent again after a reset: client-go retries it once, never a write.
    retried: bool,
    /// Between a reset and the GET's second sending: nothing of it is on the wire.
    waiting: bool,
}

/// The record as last seen, and when (own clock) it last changed.
#[derive(Clone, Debug)]
struct Observed {
    object: Arc<Object>,
    time: SimTime,
}

impl Observed {
    fn lease(&self) -> &Lease {
        self.object
            .typed::<Lease>()
            .expect("only Lease objects are observed")
    }
}

/// One process's participation in a leader election on a Lease.
#[derive(Clone, Debug)]
pub struct LeaderElector {
    config: LeaderConfig,
    identity: String,
    pub(crate) apiserver: ProcId,
    /// Kept across resets, so a late answer never matches a new request.
    ids: ReqIds,
    /// Bumped whenever a run ends, so its pending timers do nothing.
    epoch: u64,
    phase: Phase,
    in_flight: Option<InFlight>,
    observed: Option<Observed>,
    /// The current renew window, its deadline timer, and whether it succeeded.
    window: u64,
    window_deadline: Option<TimerId>,
    /// Own clock at the last successful tryAcquireOrRenew.
    last_success: Option<SimTime>,
    /// Own clock when leadership was last acquired.
    acquired_at: Option<SimTime>,
}

impl LeaderElector {
    pub fn new(config: LeaderConfig, identity: String, apiserver: ProcId) -> Self {
        LeaderElector {
            config,
            identity,
            apiserver,
            ids: ReqIds::new(tags::LEADER),
            epoch: 0,
            phase: Phase::Idle,
            in_flight: None,
            observed: None,
            window: 0,
            window_deadline: None,
            last_success: None,
            acquired_at: None,
        }
    }

    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Take part as `identity` from the next `start` on (a new process start's id).
    pub fn set_identity(&mut self, identity: String) {
        self.identity = identity;
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether this process BELIEVES it leads (a paused or partitioned leader may be wrong).
    pub fn is_leader(&self) -> bool {
        self.phase == Phase::Leading
    }

    /// Whether the elector lost the lease and stopped (the host should exit).
    pub fn stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// Own clock at the last successful acquire or renew.
    pub fn last_success(&self) -> Option<SimTime> {
        self.last_success
    }

    /// Own clock when this process last became leader.
    pub fn acquired_at(&self) -> Option<SimTime> {
        self.acquired_at
    }

    /// The holder named by the record this elector last saw.
    pub fn observed_holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .and_then(|o| o.lease().holder_identity.as_deref())
    }

    /// Own clock when the record last seen last changed (client-go's observedTime).
    pub fn observed_time(&self) -> Option<SimTime> {
        self.observed.as_ref().map(|o| o.time)
    }

    /// Enter the acquire loop (client-go `Run`): the first attempt goes out at once. Does
    /// nothing unless idle (new or reset).
    pub fn start(&mut self, ctx: &mut WorldCtx<'_>) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::Acquiring;
        self.try_acquire_or_renew(ctx);
    }

    /// Forget everything a process loses with its memory (a crash). `start` begins again.
    pub fn reset(&mut self) {
        let ids = self.ids.clone();
        let epoch = self.epoch + 1;
        *self = LeaderElector::new(
            self.config.clone(),
            std::mem::take(&mut self.identity),
            self.apiserver,
        );
        self.ids = ids;
        self.epoch = epoch;
    }

    /// Offer a message; API responses to the elector's requests are its own.
    pub fn handle(&mut self, msg: &Msg, ctx: &mut WorldCtx<'_>) -> Handled {
        if let Msg::ConnectionReset = msg {
            // Its connection broke: the request in flight on it failed (the reset is
            // also other components', so it is never only ours). client-go sends a GET
            // that failed so again after a second, once (rest client's retry on
            // `IsProbableEOF`, GET only; docs/semantics.md 4.12).
            if let Some(f) = &mut self.in_flight {
                if f.waiting {
                    return Handled::NOT_OURS;
                }
                if f.step == Step::Get && !f.retried {
                    f.retried = true;
                    f.waiting = true;
                    let req = f.req;
                    ctx.note(|| format!("leader: request {req:#x} reset; sent again in 1 s"));
                    self.set_timer(GET_RETRY_AFTER_MS, Timer::RetryGet { req }, ctx);
                    return Handled::NOT_OURS;
                }
            }
            if let Some(f) = self.in_flight.take() {
                ctx.cancel_timer(f.timeout);
                ctx.note(|| format!("leader: request {:#x} failed: connection reset", f.req));
                return Handled {
                    ours: false,
                    event: self.attempt_done(false, ctx),
                };
            }
            return Handled::NOT_OURS;
        }
        let Msg::ApiResp(resp) = msg else {
            return Handled::NOT_OURS;
        };
        if !self.ids.owns(resp.id) {
            return Handled::NOT_OURS;
        }
        let Some(f) = self.in_flight.filter(|f| f.req == resp.id) else {
            return Handled::ours(None); // Timed out, or from a run that ended.
        };
        self.in_flight = None;
        ctx.cancel_timer(f.timeout);
        let ok = match (f.step, &resp.result) {
            (Step::Get, Err(ApiError::NotFound)) => {
                self.send_create(ctx);
                return Handled::ours(None);
            }
            (Step::Get, Ok(ApiOk::Object(obj))) if obj.typed::<Lease>().is_some() => {
                self.observe(obj.clone(), ctx.now());
                if self.send_update_if_free(ctx) {
                    return Handled::ours(None);
                }
                false
            }
            (Step::Create | Step::Update, Ok(ApiOk::Object(obj)))
                if obj.typed::<Lease>().is_some() =>
            {
                // client-go: setObservedRecord(the record it wrote), observedTime = now.
                self.observed = Some(Observed {
                    object: obj.clone(),
                    time: ctx.now(),
                });
                true
            }
            _ => false,
        };
        Handled::ours(self.attempt_done(ok, ctx))
    }

    /// Offer a timer of this module.
    pub fn on_timer(&mut self, t: &Timer, ctx: &mut WorldCtx<'_>) -> Handled {
        match *t {
            Timer::Attempt { epoch } => {
                if epoch == self.epoch
                    && matches!(self.phase, Phase::Acquiring | Phase::Leading)
                    && self.in_flight.is_none()
                {
                    self.try_acquire_or_renew(ctx);
                }
                Handled::ours(None)
            }
            Timer::RenewWindow { epoch } => {
                if epoch == self.epoch && self.phase == Phase::Leading && self.in_flight.is_none() {
                    self.begin_window(ctx);
                }
                Handled::ours(None)
            }
            Timer::RenewDeadline { epoch, window } => {
                let live = epoch == self.epoch
                    && self.phase == Phase::Leading
                    && window == self.window
                    && self.window_deadline.is_some();
                if !live {
                    return Handled::ours(None);
                }
                self.window_deadline = None;
                Handled::ours(Some(self.lose(ctx)))
            }
            Timer::RequestTimeout { req } => {
                if !self.ids.owns(req) {
                    return Handled::NOT_OURS;
                }
                match self.in_flight {
                    Some(f) if f.req == req => {
                        self.in_flight = None;
                        ctx.note(|| format!("leader: request {req:#x} timed out"));
                        Handled::ours(self.attempt_done(false, ctx))
                    }
                    _ => Handled::ours(None),
                }
            }
            Timer::RetryGet { req } => {
                if !self.ids.owns(req) {
                    return Handled::NOT_OURS;
                }
                if let Some(f) = &mut self.in_flight
                    && f.req == req
                    && f.waiting
                {
                    f.waiting = false;
                    let op = ApiOp::Get(self.config.lease_key());
                    ctx.send(self.apiserver, Msg::Api(ApiRequest { id: req, op }));
                }
                Handled::ours(None)
            }
            Timer::Rejoin => Handled::NOT_OURS,
        }
    }

    // ----- the loops ----------------------------------------------------------------------

    fn set_timer(&self, after_ms: u64, t: Timer, ctx: &mut WorldCtx<'_>) -> TimerId {
        ctx.set_timer(after_ms, Msg::Timer(AnyTimer::Leader(t)))
    }

    /// A renew window: its deadline timer, and an attempt at once (PollImmediateUntil).
    fn begin_window(&mut self, ctx: &mut WorldCtx<'_>) {
        self.window += 1;
        let t = Timer::RenewDeadline {
            epoch: self.epoch,
            window: self.window,
        };
        self.window_deadline = Some(self.set_timer(self.config.renew_deadline_ms, t, ctx));
        self.try_acquire_or_renew(ctx);
    }

    /// One tryAcquireOrRenew finished.
    fn attempt_done(&mut self, ok: bool, ctx: &mut WorldCtx<'_>) -> Option<LeaderEvent> {
        let epoch = self.epoch;
        match (self.phase, ok) {
            (Phase::Acquiring, true) => {
                let now = ctx.now();
                self.phase = Phase::Leading;
                self.acquired_at = Some(now);
                self.last_success = Some(now);
                ctx.note(|| format!("leader: {} acquired the lease", self.identity));
                // wait.Until runs its first renew window at once.
                self.begin_window(ctx);
                Some(LeaderEvent::StartedLeading)
            }
            (Phase::Acquiring, false) => {
                let retry = self.config.retry_period_ms;
                let span = retry * JITTER_FACTOR_TENTHS / 10;
                let jitter = if span == 0 {
                    0
                } else {
                    ctx.draw_ms(0, span - 1)
                };
                self.set_timer(retry + jitter, Timer::Attempt { epoch }, ctx);
                None
            }
            (Phase::Leading, true) => {
                self.last_success = Some(ctx.now());
                if let Some(id) = self.window_deadline.take() {
                    ctx.cancel_timer(id);
                }
                self.set_timer(
                    self.config.retry_period_ms,
                    Timer::RenewWindow { epoch },
                    ctx,
                );
                None
            }
            (Phase::Leading, false) => {
                // A failed poll is only retried; the window's timer decides.
                self.set_timer(self.config.retry_period_ms, Timer::Attempt { epoch }, ctx);
                None
            }
            (Phase::Idle | Phase::Stopped, _) => None,
        }
    }

    /// The renew window ended without a success: Run returns.
    fn lose(&mut self, ctx: &mut WorldCtx<'_>) -> LeaderEvent {
        if let Some(f) = self.in_flight.take() {
            ctx.cancel_timer(f.timeout);
        }
        self.phase = Phase::Stopped;
        self.epoch += 1;
        ctx.note(|| format!("leader: {} stopped leading", self.identity));
        LeaderEvent::StoppedLeading
    }

    // ----- tryAcquireOrRenew --------------------------------------------------------------

    fn request(&mut self, step: Step, op: ApiOp, ctx: &mut WorldCtx<'_>) {
        debug_assert!(self.in_flight.is_none(), "one request at a time");
        let req = self.ids.issue();
        let timeout = self.set_timer(
            self.config.renew_deadline_ms,
            Timer::RequestTimeout { req },
            ctx,
        );
        self.in_flight = Some(InFlight {
            req,
            step,
            timeout,
            retried: false,
            waiting: false,
        });
        ctx.send(self.apiserver, Msg::Api(ApiRequest { id: req, op }));
    }

    fn try_acquire_or_renew(&mut self, ctx: &mut WorldCtx<'_>) {
        self.request(Step::Get, ApiOp::Get(self.config.lease_key()), ctx);
    }

    fn my_record(&self, old: Option<&Lease>, now: SimTime) -> Lease {
        let mine = old.is_some_and(|l| l.holder_identity.as_deref() == Some(&self.identity));
        let lease_duration_seconds =
            u32::try_from(self.config.lease_duration_ms.div_ceil(1000)).unwrap_or(u32::MAX);
        Lease {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds,
            acquire_time: match old {
                Some(l) if mine => l.acquire_time,
                _ => Some(now),
            },
            renew_time: Some(now),
            lease_transitions: match old {
                Some(l) if mine => l.lease_transitions,
                Some(l) => l.lease_transitions.saturating_add(1),
                None => 0,
            },
            // client-go's LeaseLock.Update replaces the whole spec with its record.
            verbatim: Default::default(),
        }
    }

    fn send_create(&mut self, ctx: &mut WorldCtx<'_>) {
        let meta = ObjectMeta::named(&self.config.lease_namespace, &self.config.lease_name);
        let body = Body::new(self.my_record(None, ctx.now()));
        self.request(
            Step::Create,
            ApiOp::Create(Box::new(Object::new(meta, body))),
            ctx,
        );
    }

    /// Remember the fetched record; its observed time moves only when it changed.
    fn observe(&mut self, object: Arc<Object>, now: SimTime) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.lease() != object.typed::<Lease>().expect("checked by the caller"));
        let time = match &self.observed {
            Some(o) if !changed => o.time,
            _ => now,
        };
        self.observed = Some(Observed { object, time });
    }

    /// After a Get: fail if another holder's lease is still valid on my clock, else send the
    /// Update. True if it was sent.
    fn send_update_if_free(&mut self, ctx: &mut WorldCtx<'_>) -> bool {
        let now = ctx.now();
        let observed = self.observed.as_ref().expect("observed by the caller");
        let old = observed.lease();
        let holder = old.holder_identity.as_deref().unwrap_or("");
        let valid_ms = u64::from(old.lease_duration_seconds) * 1000;
        let valid = observed.time.plus_ms(valid_ms) > now;
        if !holder.is_empty() && holder != self.identity && valid {
            return false;
        }
        let record = self.my_record(Some(old), now);
        let mut object = Object::clone(&observed.object);
        object.body = Body::new(record);
        self.request(
            Step::Update,
            ApiOp::Update {
                object: Box::new(object),
                precondition: true,
            },
            ctx,
        );
        true
    }
}

/// What a [`Candidate`] does when it loses the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum OnLost {
    /// Stop its own process for good (controller-runtime exits, semantics 1.11).
    Exit,
    /// Start a fresh elector after `after_ms` (a container restarted by its kubelet).
    Rejoin { after_ms: u64 },
}

/// A process that only takes part in an election.
#[derive(Clone, Debug)]
pub struct Candidate {
    elector: LeaderElector,
    pub on_lost: OnLost,
    /// Every change of belief, (own clock, leads). A crash ends a belief without an entry
    /// (the process has no clock while dead); [`Candidate::is_leader`] says it.
    pub history: Vec<(SimTime, bool)>,
}

impl Candidate {
    /// A candidate that exits when it loses the lease.
    pub fn new(config: LeaderConfig, identity: String, apiserver: ProcId) -> Self {
        Candidate {
            elector: LeaderElector::new(config, identity, apiserver),
            on_lost: OnLost::Exit,
            history: Vec::new(),
        }
    }

    pub fn with_on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    pub fn elector(&self) -> &LeaderElector {
        &self.elector
    }

    pub fn is_leader(&self) -> bool {
        self.elector.is_leader()
    }

    fn react(&mut self, h: Handled, ctx: &mut WorldCtx<'_>) {
        let Some(event) = h.event else {
            return;
        };
        if self.history.len() >= HISTORY_MAX {
            self.history.remove(0);
        }
        let leads = event == LeaderEvent::StartedLeading;
        self.history.push((ctx.now(), leads));
        if leads {
            return;
        }
        match self.on_lost {
            OnLost::Exit => {
                let me = ctx.me();
                ctx.stop(me);
            }
            OnLost::Rejoin { after_ms } => {
                ctx.set_timer(after_ms, Msg::Timer(AnyTimer::Leader(Timer::Rejoin)));
            }
        }
    }
}

impl Component for Candidate {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.elector.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.elector.start(ctx);
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let h = self.elector.handle(&msg, ctx);
        self.react(h, ctx);
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::Leader(t) = t else {
            panic!("timer {t:?} reached the wrong component: a candidate");
        };
        if t == Timer::Rejoin {
            self.elector.reset();
            self.elector.start(ctx);
            return;
        }
        let h = self.elector.on_timer(&t, ctx);
        self.react(h, ctx);
    }

    fn on_crash(&mut self) {
        self.elector.reset();
    }

    /// Its history is for tests; the Lease it holds is in the API server's store.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
