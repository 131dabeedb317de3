//! Informers: list-and-watch caches that lag the API server, as client-go's are.
//!
//! An [`Informer`] runs one reflector per kind (its own List, then a Watch from the
//! list's resourceVersion on its own stream) and keeps one [`Cache`]. Its view lags the
//! server by the network, can skip intermediate states (a relist sees only the latest),
//! and goes stale during a partition. How a reflector notices trouble, as in reality
//! (docs/semantics.md sections 3-4):
//! - a gap in a watch stream's sequence (an event lost to a dropping partition) or
//!   410 Gone: relist;
//! - a dead connection: client-go's HTTP/2 health check pings after 30 s without a
//!   read and gives up 15 s later; then every reflector relists, retrying with backoff
//!   (800 ms doubling to 30 s) until the server answers again;
//! - a list or watch-open request with no answer within `REQUEST_TIMEOUT_MS` (it or its
//!   answer was lost to a dropping partition, maybe on a connection the health check
//!   already replaced): that attempt failed, retry with backoff (4.4: requests on a dead
//!   connection fail after the same detection). Without it a reflector whose request
//!   was lost would wait forever once pings got through again;
//! - a watch ends by itself after a random 5-10 min (its timeoutSeconds, 3.11): the
//!   reflector re-watches from the last resourceVersion it saw (no relist; a 410 Gone
//!   then relists). This also bounds how long an event lost without any later one
//!   (a short dropping partition) can keep the cache stale;
//! - the server process crashed: its host closes its connections at once
//!   ([`Msg::PeerClosed`], handled as [`Msg::ConnectionReset`]): every reflector backs
//!   off and relists, without waiting for the health check; its lists are refused until
//!   the server is back (docs/semantics.md 4.19).
//!
//! Events never regress the cache: one whose resourceVersion is not newer than the
//! cached object's is ignored, so overlapping list and watch replay are harmless.

use crate::api::{ApiError, ApiOk, ApiOp, ApiRequest, ApiResponse, EventType, WatchEvent};
use crate::component::{Component, UNREAD, WorldCtx};
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::{Kind, Object, ObjectKey};
use reconsim_sim::{ProcId, SimTime};
use std::collections::BTreeMap;
use std::sync::Arc;

/// HTTP/2 ReadIdleTimeout of client-go's transport.
pub const READ_IDLE_TIMEOUT_MS: u64 = 30_000;
/// HTTP/2 PingTimeout of client-go's transport.
pub const PING_TIMEOUT_MS: u64 = 15_000;
/// Reflector backoff: initial and maximum delay between failed list attempts.
pub const RELIST_BACKOFF_MS_MIN: u64 = 800;
pub const RELIST_BACKOFF_MS_MAX: u64 = 30_000;
/// client-go's minWatchTimeout: each watch lasts a random [1, 2] x this (3.11).
pub const MIN_WATCH_TIMEOUT_MS: u64 = 300_000;
/// How long a reflector waits for the answer to a list or watch-open request.
pub const REQUEST_TIMEOUT_MS: u64 = READ_IDLE_TIMEOUT_MS + PING_TIMEOUT_MS;

pub use crate::timer::InformerTimer as Timer;

/// A read-only view of cached objects, ordered by key.
#[derive(Clone, Debug, Default)]
pub struct Cache {
    objects: BTreeMap<ObjectKey, Arc<Object>>,
}

impl Cache {
    /// A cache holding exactly `objects` (the last of equal keys wins): for unit tests
    /// of a reconciler's steps without a world.
    pub fn from_objects(objects: impl IntoIterator<Item = Object>) -> Cache {
        Cache {
            objects: objects
                .into_iter()
                .map(|o| (o.key(), Arc::new(o)))
                .collect(),
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Object>> {
        self.objects.get(key)
    }

    /// Every cached object of `kind`, in key order.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Arc<Object>> {
        crate::object::of_kind(&self.objects, kind)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting to retry a list.
    Idle,
    Listing {
        req: u64,
    },
    Opening {
        req: u64,
    },
    Watching {
        watch_id: u64,
        next_seq: u64,
    },
}

#[derive(Clone, Debug)]
struct Reflector {
    kind: Kind,
    stream: u32,
    phase: Phase,
    /// The last resourceVersion seen, by list or event (lastSyncResourceVersion): a
    /// re-watch starts after it.
    last_rv: u64,
    synced: bool,
    backoff_ms: u64,
}

/// What a relist tells an informer's handlers about the objects it lists
/// (docs/semantics.md 4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RelistNotify {
    /// client-go's shared informer (controller-runtime, the core's controllers): an
    /// object whose resourceVersion did not change is a resync notification, delivered
    /// only to handlers due for a resync, so effectively none: changed, new and gone
    /// objects only.
    #[default]
    Changed,
    /// kube-runtime's watcher: every listed object is an `InitApply`, and a controller
    /// reconciles each (`applied_objects`, `touched_objects`).
    Every,
}

/// A set of reflectors sharing one cache and one connection.
#[derive(Clone, Debug)]
pub struct Informer {
    id: u32,
    pub(crate) apiserver: ProcId,
    ids: ReqIds,
    reflectors: Vec<Reflector>,
    cache: Cache,
    last_heard: SimTime,
    ping: Option<SimTime>,
    relists: u64,
    relist_notify: RelistNotify,
}

impl Informer {
    /// An informer over `kinds`, using watch streams `id * 16 + i`.
    pub fn new(id: u32, kinds: &[Kind], apiserver: ProcId) -> Self {
        assert!(kinds.len() <= 16, "an informer watches at most 16 kinds");
        Informer {
            id,
            apiserver,
            ids: ReqIds::new(tags::INFORMER + id as u16),
            reflectors: kinds
                .iter()
                .enumerate()
                .map(|(i, &kind)| Reflector {
                    kind,
                    stream: id * 16 + i as u32,
                    phase: Phase::Idle,
                    last_rv: 0,
                    synced: false,
                    backoff_ms: RELIST_BACKOFF_MS_MIN,
                })
                .collect(),
            cache: Cache::default(),
            last_heard: SimTime::ZERO,
            ping: None,
            relists: 0,
            relist_notify: RelistNotify::Changed,
        }
    }

    /// This informer, telling its handlers about relisted objects as `notify` says.
    pub fn notifying(mut self, notify: RelistNotify) -> Self {
        self.relist_notify = notify;
        self
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Every reflector has listed once (controller-runtime's WaitForCacheSync).
    pub fn synced(&self) -> bool {
        self.reflectors.iter().all(|r| r.synced)
    }

    /// Lists after the first, per reflector: how often the view was rebuilt.
    pub fn relists(&self) -> u64 {
        self.relists
    }

    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.reflectors.iter().map(|r| r.kind)
    }

    /// Start (or restart cold, after a crash): list everything, arm the health check.
    pub fn start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.cache = Cache::default();
        self.last_heard = ctx.now();
        self.ping = None;
        for i in 0..self.reflectors.len() {
            self.reflectors[i].synced = false;
            self.list(i, ctx);
        }
        ctx.set_timer(
            READ_IDLE_TIMEOUT_MS,
            Msg::Timer(AnyTimer::Informer(Timer::Health { id: self.id })),
        );
    }

    fn list(&mut self, i: usize, ctx: &mut WorldCtx<'_>) {
        let req = self.ids.issue();
        let r = &mut self.reflectors[i];
        if r.synced {
            self.relists += 1;
        }
        r.phase = Phase::Listing { req };
        ctx.send(
            self.apiserver,
            Msg::Api(ApiRequest {
                id: req,
                op: ApiOp::List {
                    kind: r.kind,
                    namespace: None,
                    from_watch_cache: true,
                },
            }),
        );
        self.arm_request_timeout(i, req, ctx);
    }

    /// Open (or re-open) reflector `i`'s watch after the last resourceVersion it saw.
    fn open_watch(&mut self, i: usize, ctx: &mut WorldCtx<'_>) {
        let req = self.ids.issue();
        let r = &mut self.reflectors[i];
        r.phase = Phase::Opening { req };
        ctx.send(
            self.apiserver,
            Msg::Api(ApiRequest {
                id: req,
                op: ApiOp::Watch {
                    stream: r.stream,
                    kinds: vec![r.kind],
                    from_rv: r.last_rv,
                    options: Default::default(),
                },
            }),
        );
        self.arm_request_timeout(i, req, ctx);
    }

    fn arm_request_timeout(&self, i: usize, req: u64, ctx: &mut WorldCtx<'_>) {
        ctx.set_timer(
            REQUEST_TIMEOUT_MS,
            Msg::Timer(AnyTimer::Informer(Timer::Request {
                id: self.id,
                index: i as u32,
                req,
            })),
        );
    }

    /// Relist reflector `i` after its backoff (the connection or the watch failed).
    fn retry(&mut self, i: usize, ctx: &mut WorldCtx<'_>) {
        let r = &mut self.reflectors[i];
        r.phase = Phase::Idle;
        let delay = r.backoff_ms;
        r.backoff_ms = (r.backoff_ms * 2).min(RELIST_BACKOFF_MS_MAX);
        ctx.set_timer(
            delay,
            Msg::Timer(AnyTimer::Informer(Timer::Relist {
                id: self.id,
                index: i as u32,
            })),
        );
    }

    /// The connection broke: every reflector with a list, a watch-open or a watch on it
    /// failed and backs off. One already backing off has nothing on it and keeps its
    /// own timer (client-go's reflectors back off each on its own).
    fn connection_lost(&mut self, ctx: &mut WorldCtx<'_>) {
        for i in 0..self.reflectors.len() {
            if self.reflectors[i].phase != Phase::Idle {
                self.retry(i, ctx);
            }
        }
    }

    /// Offer a message to the informer. Returns false if it is not the informer's; else
    /// appends every object whose cached state changed (for a deletion: its last state).
    pub fn handle(
        &mut self,
        msg: &Msg,
        ctx: &mut WorldCtx<'_>,
        changes: &mut Vec<Arc<Object>>,
    ) -> bool {
        match msg {
            Msg::ApiResp(resp) if self.ids.owns(resp.id) => {
                self.last_heard = ctx.now();
                self.ping = None;
                self.on_response(resp, ctx, changes);
                true
            }
            Msg::ConnectionReset => {
                // The server's connections were reset: every watch on them is gone.
                self.ping = None;
                self.last_heard = ctx.now();
                self.connection_lost(ctx);
                true
            }
            Msg::Watch(ev) => {
                let Some(i) = self.reflectors.iter().position(
                    |r| matches!(r.phase, Phase::Watching { watch_id, .. } if watch_id == ev.watch_id),
                ) else {
                    // Not ours, or from a watch we already replaced.
                    return self.reflectors.iter().any(|r| r.kind == ev.object.kind());
                };
                self.last_heard = ctx.now();
                self.ping = None;
                self.on_event(i, ev, ctx, changes);
                true
            }
            _ => false,
        }
    }

    fn on_response(
        &mut self,
        resp: &ApiResponse,
        ctx: &mut WorldCtx<'_>,
        changes: &mut Vec<Arc<Object>>,
    ) {
        let Some(i) = self.reflectors.iter().position(|r| match r.phase {
            Phase::Listing { req } | Phase::Opening { req } => req == resp.id,
            _ => false,
        }) else {
            return; // A ping's answer, or a stale response.
        };
        match (&self.reflectors[i].phase, &resp.result) {
            (
                Phase::Listing { .. },
                Ok(ApiOk::List {
                    items,
                    resource_version,
                }),
            ) => {
                self.replace(i, items, changes);
                let r = &mut self.reflectors[i];
                r.last_rv = *resource_version;
                r.synced = true;
                r.backoff_ms = RELIST_BACKOFF_MS_MIN;
                self.open_watch(i, ctx);
            }
            (Phase::Opening { .. }, Ok(ApiOk::Watching { watch_id })) => {
                self.reflectors[i].phase = Phase::Watching {
                    watch_id: *watch_id,
                    next_seq: 0,
                };
                let lasts_ms = ctx.draw_ms(MIN_WATCH_TIMEOUT_MS, 2 * MIN_WATCH_TIMEOUT_MS);
                ctx.set_timer(
                    lasts_ms,
                    Msg::Timer(AnyTimer::Informer(Timer::WatchEnd {
                        id: self.id,
                        index: i as u32,
                        watch_id: *watch_id,
                    })),
                );
            }
            (Phase::Opening { .. }, Err(ApiError::Gone)) => self.list(i, ctx),
            _ => self.retry(i, ctx),
        }
    }

    /// Replace the cached objects of reflector `i`'s kind with a fresh list.
    fn replace(&mut self, i: usize, items: &[Arc<Object>], changes: &mut Vec<Arc<Object>>) {
        let kind = self.reflectors[i].kind;
        let stale: Vec<ObjectKey> = self
            .cache
            .list(kind)
            .filter(|o| {
                !items
                    .iter()
                    .any(|n| n.meta.uid == o.meta.uid && n.meta.name == o.meta.name)
            })
            .map(|o| o.key())
            .collect();
        for key in stale {
            if let Some(old) = self.cache.objects.remove(&key) {
                changes.push(old);
            }
        }
        let every = self.relist_notify == RelistNotify::Every;
        for item in items {
            let key = item.key();
            let changed = self
                .cache
                .objects
                .get(&key)
                .is_none_or(|o| o.meta.resource_version != item.meta.resource_version);
            if changed {
                self.cache.objects.insert(key, item.clone());
            }
            if changed || every {
                changes.push(item.clone());
            }
        }
    }

    fn on_event(
        &mut self,
        i: usize,
        ev: &WatchEvent,
        ctx: &mut WorldCtx<'_>,
        changes: &mut Vec<Arc<Object>>,
    ) {
        let Phase::Watching { next_seq, .. } = &mut self.reflectors[i].phase else {
            unreachable!("matched a watching reflector");
        };
        if ev.seq != *next_seq {
            // An event was lost: the view can no longer be trusted.
            self.list(i, ctx);
            return;
        }
        *next_seq += 1;
        let r = &mut self.reflectors[i];
        r.last_rv = r.last_rv.max(ev.object.meta.resource_version);
        // An older cached object is replaced in place (one search, by the object's own
        // place: no key is made) or removed; a newer one stays. Only a new object's
        // entry makes its key.
        let rv = ev.object.meta.resource_version;
        let objects = &mut self.cache.objects;
        match (objects.get_mut(ev.object.place()), ev.event) {
            (Some(cached), _) if cached.meta.resource_version >= rv => {}
            (Some(cached), EventType::Added | EventType::Modified) => {
                *cached = ev.object.clone();
                changes.push(ev.object.clone());
            }
            (Some(_), EventType::Deleted) => {
                objects.remove(ev.object.place());
                changes.push(ev.object.clone());
            }
            (None, EventType::Added | EventType::Modified) => {
                objects.insert(ev.object.key(), ev.object.clone());
                changes.push(ev.object.clone());
            }
            (None, EventType::Deleted) => {}
        }
    }

    pub fn on_timer(&mut self, t: &Timer, ctx: &mut WorldCtx<'_>) -> bool {
        match *t {
            Timer::Health { id } if id == self.id => {
                self.health(ctx);
                true
            }
            Timer::Relist { id, index } if id == self.id => {
                if self.reflectors[index as usize].phase == Phase::Idle {
                    self.list(index as usize, ctx);
                }
                true
            }
            Timer::WatchEnd {
                id,
                index,
                watch_id,
            } if id == self.id => {
                let i = index as usize;
                if matches!(self.reflectors[i].phase,
                    Phase::Watching { watch_id: w, .. } if w == watch_id)
                {
                    self.open_watch(i, ctx);
                }
                true
            }
            Timer::Request { id, index, req } if id == self.id => {
                let i = index as usize;
                if matches!(self.reflectors[i].phase,
                    Phase::Listing { req: r } | Phase::Opening { req: r } if r == req)
                {
                    self.retry(i, ctx);
                }
                true
            }
            _ => false,
        }
    }

    /// The HTTP/2 health check: ping after a quiet `READ_IDLE_TIMEOUT_MS`, declare the
    /// connection dead `PING_TIMEOUT_MS` after an unanswered ping.
    fn health(&mut self, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        let timer = Msg::Timer(AnyTimer::Informer(Timer::Health { id: self.id }));
        let idle = now.since(self.last_heard);
        if idle < READ_IDLE_TIMEOUT_MS {
            ctx.set_timer(READ_IDLE_TIMEOUT_MS - idle, timer);
            return;
        }
        match self.ping {
            None => {
                self.ping = Some(now);
                let id = self.ids.issue();
                ctx.send(
                    self.apiserver,
                    Msg::Api(ApiRequest {
                        id,
                        op: ApiOp::Ping,
                    }),
                );
                ctx.set_timer(PING_TIMEOUT_MS, timer);
            }
            Some(sent) if now.since(sent) < PING_TIMEOUT_MS => {
                ctx.set_timer(PING_TIMEOUT_MS - now.since(sent), timer);
            }
            Some(_) => {
                // Dead connection: every watch and request on it is gone.
                self.ping = None;
                self.last_heard = now;
                self.connection_lost(ctx);
                ctx.set_timer(READ_IDLE_TIMEOUT_MS, timer);
            }
        }
    }
}

/// Bound on [`Watcher::log`]: later changes are counted in `log_dropped`, not kept.
pub const WATCHER_LOG_MAX: usize = 100_000;

/// A process that only runs an [`Informer`] and logs every change of its cache: the
/// smallest component that embeds one, for tests and for observing what a controller
/// would see. `log` is an observation record (like a trace), so it survives a crash;
/// the informer itself restarts cold.
#[derive(Clone, Debug)]
pub struct Watcher {
    pub informer: Informer,
    /// (local time, key, resourceVersion) of every cache change, in order; a deletion
    /// logs the object's last state.
    pub log: Vec<(SimTime, ObjectKey, u64 /* rv */)>,
    /// Changes not logged because `log` was full.
    pub log_dropped: u64,
}

impl Watcher {
    pub fn new(informer: Informer) -> Self {
        Watcher {
            informer,
            log: Vec::new(),
            log_dropped: 0,
        }
    }
}

impl Component for Watcher {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.informer.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.informer.start(ctx);
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let mut changes = Vec::new();
        self.informer.handle(&msg, ctx, &mut changes);
        for o in changes {
            if self.log.len() < WATCHER_LOG_MAX {
                self.log.push((ctx.now(), o.key(), o.meta.resource_version));
            } else {
                self.log_dropped += 1;
            }
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::Informer(t) = t else {
            panic!("timer {t:?} reached the wrong component: a watcher");
        };
        self.informer.on_timer(&t, ctx);
    }

    /// The process died: its cache and connections are gone.
    fn on_crash(&mut self) {
        let kinds: Vec<Kind> = self.informer.kinds().collect();
        self.informer = Informer::new(self.informer.id, &kinds, self.informer.apiserver);
    }

    /// Its log is for tests, not for checkers.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
