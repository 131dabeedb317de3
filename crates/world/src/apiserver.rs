//! The simulated API server (with its etcd): one process that owns every object.
//!
//! It models the semantics controllers race on (sources in docs/semantics.md section 3):
//! - a store-wide resourceVersion; update/patch with a stale one is 409 Conflict;
//! - create with a taken name is 409 AlreadyExists; generateName appends 5 random
//!   characters from the real 27-character alphabet, retrying a clash;
//! - create with a name (or generateName) its kind's rule refuses is 422 Invalid, in
//!   the real server's words ([`crate::names`], 4.18);
//! - generation bumps on spec changes only (and once when deletion starts);
//! - delete with finalizers sets deletionTimestamp; the object goes when the last
//!   finalizer does; no finalizer may be added to a deleting object (422);
//! - bound Pods are deleted gracefully (3.6): deletionTimestamp = now + grace period
//!   (30 s by default), and the Pod stays, whatever is written to it, until its kubelet
//!   confirms with a zero grace period (then it goes once its finalizers are gone);
//! - garbage collection (3.8, 3.9), a pass about `gc_delay_ms` after the server notices
//!   (an owner removed or marked, an object written with a dangling owner reference, as
//!   the real collector's graph sees it): an object whose owners are all gone (looked up
//!   in its namespace) is deleted, a gone owner's reference beside a live one is patched
//!   away; an object with no owner references is never collected, so removing an owner
//!   reference orphans; a delete in the foreground (`foregroundDeletion`) waits for the
//!   dependents that block owner deletion, an orphaning one (`orphan`) unhooks them; the
//!   pass is re-armed when the server restarts;
//! - watches: ordered per stream, resumed from each type's watch-cache buffer
//!   ([`crate::watch_window`]: per type, evicted only when full, rebuilt at the current
//!   revision when the server restarts), 410 Gone for a resourceVersion it no longer
//!   holds (3.10); lists at an older resourceVersion (continue tokens) read etcd's
//!   revisions, compacted by age (`compaction_ms`);
//! - watch caches, one per resource type ([`crate::watch_cache`]): the real server
//!   answers a write from etcd but feeds watches from its watch caches, which follow
//!   etcd through watches of their own, so a client can get its write's response before
//!   the event (3.12), and two types' events can cross (3.19). A type's events wait for
//!   its lag ([`WorldFault::WatchLag`], on every type or one) and the configured
//!   per-event delay (`watch_delay_ms`), in the type's order, while responses go out at
//!   once. A type's watch cache also serves reflectors' lists (3.15): while it lags, a
//!   list with `from_watch_cache` answers the state its released events built.

use crate::api::{
    ApiError, ApiOk, ApiOp, ApiRequest, ApiResponse, DeleteOptions, EventType, PatchOp,
    Propagation, WatchEvent, WatchOptions,
};
use crate::component::{Component, WorldCtx};
use crate::fault::WorldFault;
use crate::msg::{Msg, Timer as AnyTimer};
use crate::object::{Kind, Object, ObjectKey, OwnerReference, Uid, of_kind};
use crate::object::{
    Pod, TAINT_NOT_READY, TAINT_UNREACHABLE, TaintEffect, Toleration, pod_spec_update_forbidden,
};
use crate::watch_cache::{DelayRange, HeldEvent, WatchCaches};
pub use crate::watch_window::WatchWindowConfig;
use crate::watch_window::{Recorded, WatchWindows};
use reconsim_sim::{ProcId, SimTime};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The alphabet of generated name suffixes (k8s.io/apiserver names.go: no vowels, no
/// confusable digits).
const NAME_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
/// How many generated names to try before answering AlreadyExists (kube-apiserver 1.32
/// retries up to 7 times).
const GENERATE_NAME_TRIES: usize = 8;
/// generateName keeps at most this much of the prefix (63 - 5; semantics.md 3.3).
const GENERATE_NAME_PREFIX_MAX: usize = 58;
/// A Pod's default grace period (terminationGracePeriodSeconds; semantics.md 3.6).
pub const POD_GRACE_PERIOD_SECONDS_DEFAULT: u64 = 30;

pub use crate::timer::ApiServerTimer as Timer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiServerConfig {
    /// How long etcd keeps a revision: a list at an older resourceVersion (a continue
    /// token, an exact list) is 410 Gone. kube-apiserver compacts every 5 minutes
    /// (`--etcd-compaction-interval`).
    pub compaction_ms: u64,
    /// Each type's watch-cache buffer: which resourceVersions a watch resumes from.
    pub watch_cache: WatchWindowConfig,
    /// Delay between an owner's removal and the collection of its dependents.
    pub gc_delay_ms: u64,
    /// The DefaultTolerationSeconds admission plugin's tolerationSeconds, given to a new
    /// Pod for not-ready and unreachable (NoExecute) unless it tolerates them already
    /// (`--default-not-ready-toleration-seconds`, `--default-unreachable-...`: 300 s;
    /// docs/semantics.md 5.5). `None`: the plugin is off.
    pub default_toleration_seconds: Option<u64>,
    /// The NamespaceLifecycle admission plugin: a create into a namespace that does not
    /// exist is 404 (docs/semantics.md 4.13). Off by default: the world's families do
    /// not model their own Namespace objects; the program path's world turns it on.
    pub namespace_lifecycle: bool,
    /// How long each watch event waits in its type's watch cache, drawn per event: the
    /// watch-latency of a real server (etcd's watch to the cacher to the watcher), which
    /// lets a write's response reach its writer before the write's own event and two
    /// types' events cross (docs/semantics.md 3.19). `None` (or a range of 0 ms): events
    /// leave with the write. Default: [`DEFAULT_WATCH_DELAY_MS`].
    pub watch_delay_ms: Option<DelayRange>,
}

/// The watch latency a world has unless it says otherwise: 1-20 ms from a write to its
/// event leaving the type's watch cache, so a writer usually hears its response first, as
/// from a real server (docs/semantics.md 3.19). Every event leaving with its write hides
/// the stale-cache races a real cluster has.
pub const DEFAULT_WATCH_DELAY_MS: DelayRange = DelayRange {
    lo_ms: 1,
    hi_ms: 20,
};

/// How the notes of the server's own controllers begin: their writes answer no request,
/// so timelines and explain show these notes instead ([`is_own_controller_note`]).
const GC_NOTE: &str = "garbage collector: ";
const NAMESPACE_NOTE: &str = "namespace controller: ";

/// Whether an API server note is an action of its garbage collector or namespace
/// controller (a full trace's note; none reaches the hash).
pub fn is_own_controller_note(text: &str) -> bool {
    text.starts_with(GC_NOTE) || text.starts_with(NAMESPACE_NOTE)
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            compaction_ms: 300_000,
            watch_cache: WatchWindowConfig::default(),
            gc_delay_ms: 500,
            default_toleration_seconds: Some(300),
            namespace_lifecycle: false,
            watch_delay_ms: Some(DEFAULT_WATCH_DELAY_MS),
        }
    }
}

#[derive(Clone, Debug)]
struct Watcher {
    proc: ProcId,
    stream: u32,
    watch_id: u64,
    kinds: Vec<Kind>,
    seq: u64,
    /// When its `timeoutSeconds` runs out.
    deadline: Option<SimTime>,
    /// Whether it asked for bookmarks.
    bookmarks: bool,
}

/// A watch request: who asks, its request id, its stream and kinds, its options.
struct Open {
    from: ProcId,
    id: u64,
    stream: u32,
    kinds: Vec<Kind>,
    options: WatchOptions,
}

impl Open {
    fn new(from: ProcId, id: u64, stream: u32, kinds: Vec<Kind>, options: WatchOptions) -> Self {
        Open {
            from,
            id,
            stream,
            kinds,
            options,
        }
    }
}

/// How often a watch that asked for bookmarks gets one (the cacher's
/// `bookmarkFrequency`, a minute).
const BOOKMARK_FREQUENCY_MS: u64 = 60_000;

/// The namespaces a cluster has from its start: the API server's system namespaces
/// controller creates them (kubernetes `pkg/controlplane/controller/systemnamespaces`:
/// kube-system, kube-public, kube-node-lease, default).
pub const BUILTIN_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The API server process.
#[derive(Debug)]
pub struct ApiServer {
    config: ApiServerConfig,
    objects: BTreeMap<ObjectKey, Arc<Object>>,
    uids: BTreeMap<Uid, ObjectKey>,
    /// Namespaces that exist beyond the four every cluster has ([`BUILTIN_NAMESPACES`]):
    /// a Namespace object's name, and every namespace an object was stored in (the
    /// world does not model its own namespaces' objects). A Namespace object's name
    /// goes with it.
    namespaces: BTreeSet<String>,
    /// Namespaces being terminated, with their Namespace object's uid: the object stays
    /// (its `spec.finalizers` hold it, `kubernetes`) until the namespace controller has
    /// deleted their content (docs/semantics.md 4.13).
    terminating: BTreeMap<String, Uid>,
    resource_version: u64,
    next_uid: u64,
    /// etcd's revisions still kept (lists at an older resourceVersion).
    history: VecDeque<Recorded>,
    /// Every event with a resourceVersion above this one is still in `history`.
    history_floor: u64,
    watchers: Vec<Watcher>,
    next_watch_id: u64,
    gc_pending: bool,
    /// Objects marked for graceful deletion with a non-zero grace period (the real
    /// deletionGracePeriodSeconds > 0): no update removes them, only a delete with a
    /// zero grace period (their kubelet's confirmation) does.
    awaiting_grace: BTreeSet<Uid>,
    /// Writes to the store: statistics, and its change count (`Component::changes`).
    writes: u64,
    /// The same, per kind written (a checker's inputs: `reconsim_check::Reads`); a
    /// handful of kinds, so a short list.
    kind_writes: Vec<(Kind, u64)>,
    /// Creates and removals: a count that moves exactly when the set of stored objects
    /// does (an oracle's record of what was created and deleted).
    creates_and_removals: u64,
    /// The watch caches, one per resource type, and the events they hold back.
    caches: WatchCaches,
    /// Each type's watch-cache buffer (watch resumption, 410 Gone).
    windows: WatchWindows,
}

impl ApiServer {
    pub fn new(config: ApiServerConfig) -> Self {
        ApiServer {
            config,
            objects: BTreeMap::new(),
            uids: BTreeMap::new(),
            namespaces: BTreeSet::new(),
            terminating: BTreeMap::new(),
            resource_version: 0,
            next_uid: 0,
            history: VecDeque::new(),
            history_floor: 0,
            watchers: Vec::new(),
            next_watch_id: 0,
            gc_pending: false,
            awaiting_grace: BTreeSet::new(),
            writes: 0,
            kind_writes: Vec::new(),
            creates_and_removals: 0,
            caches: WatchCaches::new(config.watch_delay_ms),
            windows: WatchWindows::new(config.watch_cache),
        }
    }

    // ----- read access for checkers and tests (never for controllers) ------------------

    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Object>> {
        self.objects.get(key)
    }

    /// Every stored object of `kind`, in key order.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Arc<Object>> {
        crate::object::of_kind(&self.objects, kind)
    }

    pub fn objects(&self) -> impl Iterator<Item = &Arc<Object>> {
        self.objects.values()
    }

    pub fn by_uid(&self, uid: Uid) -> Option<&Arc<Object>> {
        self.uids.get(&uid).and_then(|k| self.objects.get(k))
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Writes of objects of `kind` so far (creates, updates, deletes): a count that
    /// moves exactly when `list(kind)` may answer otherwise.
    pub fn kind_writes(&self, kind: Kind) -> u64 {
        self.kind_writes
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Creates and removals so far: moves exactly when `objects()` gains or loses one.
    pub fn creates_and_removals(&self) -> u64 {
        self.creates_and_removals
    }

    fn count_write(&mut self, kind: Kind) {
        self.writes += 1;
        match self.kind_writes.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.kind_writes.push((kind, 1)),
        }
    }

    /// The capacity of `kind`'s watch-cache buffer now, in events.
    pub fn watch_cache_capacity(&self, kind: Kind) -> usize {
        self.windows.capacity(kind)
    }

    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// Store an object before the run starts (the initial cluster), as if created at t=0.
    pub fn seed_object(&mut self, mut object: Object) -> Arc<Object> {
        let key = object.key();
        assert!(!self.objects.contains_key(&key), "seeded twice: {key}");
        self.next_uid += 1;
        self.resource_version += 1;
        object.meta.uid = Uid(self.next_uid);
        object.meta.resource_version = self.resource_version;
        object.meta.generation = 1;
        let arc = Arc::new(object);
        self.uids.insert(arc.meta.uid, key.clone());
        self.note_namespace(&arc);
        self.objects.insert(key, arc.clone());
        self.history_floor = self.resource_version;
        self.windows.relist(self.resource_version);
        arc
    }
}

/// The API server as a process of the world.
impl Component for ApiServer {
    /// Arm a garbage-collector sweep: at the start of a run (seeded objects may have
    /// dangling owners) and after a restart (the sweep pending at the crash died with it).
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.schedule_gc(ctx);
        if !self.terminating.is_empty() {
            ctx.set_timer(
                NAMESPACE_DELETION_GRACE_MS,
                Msg::Timer(AnyTimer::ApiServer(Timer::NamespaceSweep)),
            );
        }
    }

    fn on_crash(&mut self) {
        // etcd keeps the objects; open watches die with their connections, which the
        // host resets (the kernel tells every peer, docs/semantics.md 4.6). The watch
        // caches are rebuilt by lists at the current revision when the server starts
        // again: a watch from before the crash is 410 Gone.
        self.watchers.clear();
        self.windows.relist(self.resource_version);
        self.gc_pending = false;
        // The watch caches are rebuilt from etcd when the server starts again; a fault's
        // end is not delivered to a crashed process.
        self.caches.clear();
    }

    /// A client ended: its watches ended with their connections.
    fn on_peer_closed(&mut self, peer: ProcId, _ctx: &mut WorldCtx<'_>) {
        self.watchers.retain(|w| w.proc != peer);
    }

    fn on_fault(&mut self, fault: &WorldFault, active: bool, _ctx: &mut WorldCtx<'_>) {
        // Overlapping lags add up, as the cloud's do.
        if let WorldFault::WatchLag { lag_ms, of_kind } = fault {
            self.caches.lag(of_kind.as_deref(), *lag_ms, active);
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Api(ApiRequest { id, op }) = msg else {
            return;
        };
        let result = self.serve(from, id, op, ctx);
        if let Some(result) = result {
            ctx.send(from, Msg::ApiResp(ApiResponse { id, result }));
        }
    }

    fn on_timer(&mut self, timer: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::ApiServer(timer) = timer else {
            panic!("timer {timer:?} reached the wrong component: the API server");
        };
        match timer {
            Timer::GcSweep => self.gc_sweep(ctx),
            Timer::WatchTick { watch_id } => self.watch_tick(watch_id, ctx),
            Timer::NamespaceSweep => self.namespace_sweep(ctx),
            Timer::ReleaseWatch => {
                let watchers = &mut self.watchers;
                self.caches.release(ctx.now(), |held| {
                    // A stream closed meanwhile takes nothing more.
                    if let Some(w) = watchers.iter_mut().find(|w| w.watch_id == held.watch_id) {
                        send_event(w, held.event, (&held.object, &held.prev), ctx);
                    }
                });
            }
        }
    }

    /// Its writes (a GC sweep's deletions too): a read or a watch changes nothing a
    /// checker reads.
    fn changes(&self) -> Option<u64> {
        Some(self.writes)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl ApiServer {
    /// Serve one request. `None` only for a watch, which answers itself (its response
    /// must precede the replayed events on the FIFO link).
    fn serve(
        &mut self,
        from: ProcId,
        id: u64,
        op: ApiOp,
        ctx: &mut WorldCtx<'_>,
    ) -> Option<Result<ApiOk, ApiError>> {
        Some(match op {
            ApiOp::Get(key) => self
                .objects
                .get(&key)
                .map(|o| ApiOk::Object(o.clone()))
                .ok_or(ApiError::NotFound),
            ApiOp::GetCached {
                key,
                not_older_than,
            } => self
                .caches
                .get(&key, not_older_than, self.resource_version)
                .unwrap_or_else(|| self.objects.get(&key))
                .map(|o| ApiOk::Object(o.clone()))
                .ok_or(ApiError::NotFound),
            ApiOp::List {
                kind,
                namespace,
                from_watch_cache,
            } => {
                let in_ns =
                    |o: &&Arc<Object>| namespace.as_ref().is_none_or(|ns| &o.meta.namespace == ns);
                let cached = from_watch_cache
                    .then(|| self.caches.list(kind, self.resource_version))
                    .flatten();
                let (items, resource_version) = match cached {
                    Some((cached, rv)) => (cached.filter(in_ns).cloned().collect(), rv),
                    None => (
                        self.list(kind).filter(in_ns).cloned().collect(),
                        self.resource_version,
                    ),
                };
                Ok(ApiOk::List {
                    items,
                    resource_version,
                })
            }
            ApiOp::ListAt {
                kind,
                namespace,
                resource_version,
            } => self.list_at(kind, namespace.as_deref(), resource_version, ctx.now()),
            ApiOp::Create(object) => self.create(*object, ctx),
            ApiOp::Update {
                object,
                precondition,
            } => self.update(*object, precondition, ctx),
            ApiOp::Patch {
                key,
                ops,
                resource_version,
            } => self.patch(&key, &ops, resource_version, ctx),
            ApiOp::Delete {
                key,
                uid,
                grace_period_seconds,
                options,
            } => self.delete(&key, uid, grace_period_seconds, *options, ctx),
            ApiOp::Bind {
                key,
                uid,
                node_name,
            } => self.bind(&key, uid, node_name, ctx),
            ApiOp::Watch {
                stream,
                kinds,
                from_rv,
                options,
            } => {
                let open = Open::new(from, id, stream, kinds, options);
                return self.watch(open, from_rv, ctx).err().map(Err);
            }
            ApiOp::WatchState {
                stream,
                kinds,
                options,
            } => {
                self.watch_state(Open::new(from, id, stream, kinds, options), ctx);
                return None;
            }
            ApiOp::Unwatch { stream } => {
                self.unwatch(from, stream);
                Ok(ApiOk::Pong)
            }
            ApiOp::Ping => Ok(ApiOk::Pong),
        })
    }

    /// The objects of `kind` (in `namespace`, or all) as they were at `rv`, in key order:
    /// the store now, with every later write in the history undone.
    fn list_at(
        &mut self,
        kind: Kind,
        namespace: Option<&str>,
        rv: u64,
        now: SimTime,
    ) -> Result<ApiOk, ApiError> {
        self.trim_history(now);
        if rv < self.history_floor || rv > self.resource_version {
            return Err(ApiError::Gone);
        }
        let in_ns = |o: &Object| namespace.is_none_or(|ns| o.meta.namespace == ns);
        let mut at: BTreeMap<ObjectKey, Arc<Object>> = of_kind(&self.objects, kind)
            .filter(|o| in_ns(o))
            .map(|o| (o.key(), o.clone()))
            .collect();
        for h in self.history.iter().rev().take_while(|h| h.rv > rv) {
            if h.object.kind() != kind || !in_ns(&h.object) {
                continue;
            }
            match (h.event, &h.prev) {
                (EventType::Added, _) | (_, None) => at.remove(&h.object.key()),
                (_, Some(prev)) => at.insert(prev.key(), prev.clone()),
            };
        }
        Ok(ApiOk::List {
            items: at.into_values().collect(),
            resource_version: rv,
        })
    }

    /// Whether namespace `ns` exists (semantics 4.13).
    fn namespace_exists(&self, ns: &str) -> bool {
        BUILTIN_NAMESPACES.contains(&ns) || self.namespaces.contains(ns)
    }

    /// Remember the namespace `object` makes exist: its own if it is a Namespace, the
    /// one it lives in otherwise. Only while the admission is on: nothing else reads it.
    fn note_namespace(&mut self, object: &Object) {
        if !self.config.namespace_lifecycle {
            return;
        }
        let kind = object.kind();
        let ns = if is_namespace(kind) {
            &object.meta.name
        } else {
            &object.meta.namespace
        };
        if !ns.is_empty() && !self.namespace_exists(ns) {
            self.namespaces.insert(ns.clone());
        }
    }

    fn create(&mut self, mut object: Object, ctx: &mut WorldCtx<'_>) -> Result<ApiOk, ApiError> {
        let kind = object.kind();
        if kind.namespaced() == object.meta.namespace.is_empty() {
            return Err(ApiError::Invalid(format!(
                "{kind}: namespace must be {}",
                if kind.namespaced() { "set" } else { "empty" }
            )));
        }
        if self.config.namespace_lifecycle
            && kind.namespaced()
            && !self.namespace_exists(&object.meta.namespace)
        {
            // The NamespaceLifecycle admission plugin refuses it before any storage.
            return Err(ApiError::NamespaceNotFound(object.meta.namespace));
        }
        if self.config.namespace_lifecycle && self.terminating.contains_key(&object.meta.namespace)
        {
            // And a create into a namespace being terminated (`lifecycle.Admit`).
            let info = kind.info();
            let resource = if info.group.is_empty() {
                info.plural.to_string()
            } else {
                format!("{}.{}", info.plural, info.group)
            };
            return Err(ApiError::NamespaceTerminating {
                namespace: object.meta.namespace,
                resource,
                name: object.meta.name,
            });
        }
        if object.meta.name.is_empty() {
            let Some(mut prefix) = object.meta.generate_name.clone() else {
                return Err(ApiError::Invalid("name or generateName is required".into()));
            };
            if prefix.len() > GENERATE_NAME_PREFIX_MAX {
                let mut end = GENERATE_NAME_PREFIX_MAX;
                while !prefix.is_char_boundary(end) {
                    end -= 1;
                }
                prefix.truncate(end);
            }
            let mut found = None;
            for _ in 0..GENERATE_NAME_TRIES {
                let mut name = prefix.clone();
                for _ in 0..5 {
                    let i = ctx.draw_ms(0, NAME_ALPHABET.len() as u64 - 1) as usize;
                    name.push(NAME_ALPHABET[i] as char);
                }
                let key = ObjectKey::new(kind, &object.meta.namespace, &name);
                if !self.objects.contains_key(&key) {
                    found = Some(name);
                    break;
                }
            }
            object.meta.name = found.ok_or(ApiError::AlreadyExists)?;
        }
        // The strategy's name rules, on the generated name too, after admission and
        // before storage (`rest.BeforeCreate`; crate::names, semantics 4.18).
        if let Some(why) = crate::names::create_invalid(
            kind,
            &object.meta.name,
            object.meta.generate_name.as_deref(),
        ) {
            return Err(ApiError::Invalid(why));
        }
        let key = object.key();
        if self.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists);
        }
        if let Some(seconds) = self.config.default_toleration_seconds
            && let Some(pod) = object.typed_mut::<Pod>()
        {
            for key in [TAINT_NOT_READY, TAINT_UNREACHABLE] {
                let tolerated = pod
                    .spec
                    .tolerations
                    .iter()
                    .any(|t| t.key == key && t.effect == TaintEffect::NoExecute);
                if !tolerated {
                    pod.spec.tolerations.push(Toleration {
                        key: key.to_string(),
                        effect: TaintEffect::NoExecute,
                        toleration_seconds: Some(seconds),
                    });
                }
            }
        }
        self.next_uid += 1;
        let meta = &mut object.meta;
        meta.uid = Uid(self.next_uid);
        meta.generation = 1;
        meta.creation_timestamp = ctx.now();
        meta.deletion_timestamp = None;
        let stored = self.store(&key, object, EventType::Added, ctx);
        Ok(ApiOk::Object(stored))
    }

    fn update(
        &mut self,
        object: Object,
        precondition: bool,
        ctx: &mut WorldCtx<'_>,
    ) -> Result<ApiOk, ApiError> {
        let key = object.key();
        let current = self.objects.get(&key).ok_or(ApiError::NotFound)?.clone();
        if precondition && object.meta.resource_version != current.meta.resource_version {
            return Err(ApiError::Conflict);
        }
        if object.meta.uid != Uid(0) && object.meta.uid != current.meta.uid {
            return Err(ApiError::Conflict);
        }
        let mut next = object;
        // Server-owned metadata cannot be written by clients.
        next.meta.uid = current.meta.uid;
        next.meta.creation_timestamp = current.meta.creation_timestamp;
        next.meta.deletion_timestamp = current.meta.deletion_timestamp;
        next.meta.generate_name = current.meta.generate_name.clone();
        next.meta.generation = current.meta.generation;
        self.commit(&key, &current, next, ctx)
    }

    fn patch(
        &mut self,
        key: &ObjectKey,
        ops: &[PatchOp],
        resource_version: Option<u64>,
        ctx: &mut WorldCtx<'_>,
    ) -> Result<ApiOk, ApiError> {
        let Some(current) = self.objects.get(key).cloned() else {
            // A server-side apply of an object that does not exist creates it
            // (docs/semantics.md 4.9); any other patch is 404.
            if let ([PatchOp::Object(p)], None) = (ops, resource_version)
                && let Some(made) = p.create(key)
            {
                return self.create(made?, ctx);
            }
            return Err(ApiError::NotFound);
        };
        if resource_version.is_some_and(|rv| rv != current.meta.resource_version) {
            return Err(ApiError::Conflict);
        }
        let mut next = (*current).clone();
        for op in ops {
            apply_patch(&mut next, op)?;
        }
        if !ops.iter().any(|op| matches!(op, PatchOp::Object(_))) {
            return self.commit(key, &current, next, ctx);
        }
        // A whole-object patch (the real-code path's writes) that ends the object's life
        // answers the object as last written, as the real server answers an update that
        // empties a deleting object's finalizers (registry/store.go,
        // deleteWithoutFinalizers returns the object); a family's patch gets `Deleted`.
        let last = next.clone();
        match self.commit(key, &current, next, ctx)? {
            ApiOk::Deleted => Ok(ApiOk::Object(Arc::new(last))),
            ok => Ok(ok),
        }
    }

    /// The binding subresource (BindingREST.setPodHostAndAnnotations: a pod being deleted
    /// or already assigned is a 409 Conflict; docs/semantics.md 3.14).
    fn bind(
        &mut self,
        key: &ObjectKey,
        uid: Option<Uid>,
        node_name: String,
        ctx: &mut WorldCtx<'_>,
    ) -> Result<ApiOk, ApiError> {
        let current = self.objects.get(key).ok_or(ApiError::NotFound)?.clone();
        if uid.is_some_and(|u| u != current.meta.uid) {
            return Err(ApiError::Conflict);
        }
        let Some(pod) = current.typed::<Pod>() else {
            return Err(ApiError::Invalid(format!(
                "{}: only a Pod can be bound",
                key.kind
            )));
        };
        if current.meta.is_deleting() || pod.spec.node_name.is_some() {
            return Err(ApiError::Conflict);
        }
        let mut next = (*current).clone();
        next.typed_mut::<Pod>().expect("a Pod").spec.node_name = Some(node_name);
        next.meta.generation = current.meta.generation + 1;
        let stored = self.store(key, next, EventType::Modified, ctx);
        Ok(ApiOk::Object(stored))
    }

    /// The shared tail of update and patch: validation, generation, finalizer-driven
    /// removal, the write itself.
    fn commit(
        &mut self,
        key: &ObjectKey,
        current: &Arc<Object>,
        mut next: Object,
        ctx: &mut WorldCtx<'_>,
    ) -> Result<ApiOk, ApiError> {
        if current.meta.is_deleting()
            && next
                .meta
                .finalizers
                .iter()
                .any(|f| !current.meta.has_finalizer(f))
        {
            return Err(ApiError::Invalid(
                "no new finalizers can be added if the object is being deleted".into(),
            ));
        }
        if next.body.kind() != current.kind() {
            return Err(ApiError::Invalid("kind cannot change".into()));
        }
        if let (Some(old), Some(new)) = (current.typed::<Pod>(), next.typed::<Pod>())
            && let Some(reason) = pod_spec_update_forbidden(&old.spec, &new.spec)
        {
            return Err(ApiError::Invalid(reason));
        }
        // A Deployment's annotations count as spec: "annotation updates bump the
        // generation because annotations are copied from deployments to their replica
        // sets" (registry/apps/deployment/strategy.go, PrepareForUpdate). The other
        // kinds' strategies (ReplicaSet, StatefulSet, DaemonSet, ...) look at spec alone.
        if !next.body.same_spec(&current.body)
            || (is_deployment(current.kind()) && next.meta.annotations != current.meta.annotations)
        {
            next.meta.generation = current.meta.generation + 1;
        }
        next.meta.resource_version = current.meta.resource_version;
        if next == **current {
            // A no-op write: no new resourceVersion, no event (as the real server).
            return Ok(ApiOk::Object(current.clone()));
        }
        if next.meta.is_deleting()
            && next.meta.finalizers.is_empty()
            && !self.awaiting_grace.contains(&current.meta.uid)
            && !self.terminating.values().any(|u| *u == current.meta.uid)
        {
            self.remove(key, Some(next), ctx);
            return Ok(ApiOk::Deleted);
        }
        let stored = self.store(key, next, EventType::Modified, ctx);
        Ok(ApiOk::Object(stored))
    }

    fn delete(
        &mut self,
        key: &ObjectKey,
        uid: Option<Uid>,
        grace_period_seconds: Option<u64>,
        options: DeleteOptions,
        ctx: &mut WorldCtx<'_>,
    ) -> Result<ApiOk, ApiError> {
        let current = self.objects.get(key).ok_or(ApiError::NotFound)?.clone();
        // Preconditions (rest/delete.go, BeforeDelete): either mismatch is 409 Conflict.
        if uid.is_some_and(|u| u != current.meta.uid)
            || options
                .resource_version
                .is_some_and(|rv| rv != current.meta.resource_version)
        {
            return Err(ApiError::Conflict);
        }
        // Only a Pod bound to a node has a grace period (an unbound one goes at once).
        let grace_s = if current
            .typed::<Pod>()
            .is_some_and(|p| p.spec.node_name.is_some())
        {
            grace_period_seconds.unwrap_or(POD_GRACE_PERIOD_SECONDS_DEFAULT)
        } else {
            0
        };
        if current.meta.is_deleting() && self.awaiting_grace.contains(&current.meta.uid) {
            // A graceful deletion is pending: only its confirmation changes anything
            // ("finalizers cannot be updated via DeleteOptions if a deletion is already
            // pending", registry/store.go Delete).
            if grace_s == 0 {
                // Confirmed: from now on only the finalizers hold it.
                self.awaiting_grace.remove(&current.meta.uid);
                if current.meta.finalizers.is_empty() {
                    self.remove(key, None, ctx);
                    return Ok(ApiOk::Deleted);
                }
            }
            return Ok(ApiOk::Object(current));
        }
        let finalizers = gc_finalizers(&current.meta.finalizers, options.propagation);
        let namespace = self.config.namespace_lifecycle && is_namespace(current.kind());
        if namespace && !current.meta.is_deleting() {
            // Held for the namespace controller (the `kubernetes` finalizer of its spec),
            // which takes it up `namespaceDeletionGracePeriod` later.
            self.terminating
                .insert(current.meta.name.clone(), current.meta.uid);
            ctx.set_timer(
                NAMESPACE_DELETION_GRACE_MS,
                Msg::Timer(AnyTimer::ApiServer(Timer::NamespaceSweep)),
            );
        }
        // A Namespace goes only through the namespace controller's pass.
        if finalizers.is_empty() && grace_s == 0 && !namespace {
            self.remove(key, None, ctx);
            return Ok(ApiOk::Deleted);
        }
        let mut next = (*current).clone();
        if !current.meta.is_deleting() {
            next.meta.deletion_timestamp = Some(ctx.now().plus_ms(grace_s.saturating_mul(1000)));
            next.meta.deletion_grace_period_seconds = Some(grace_s);
            next.meta.generation += 1;
            if grace_s > 0 {
                self.awaiting_grace.insert(current.meta.uid);
            }
        }
        next.meta.finalizers = finalizers;
        if next == *current {
            return Ok(ApiOk::Object(current));
        }
        let stored = self.store(key, next, EventType::Modified, ctx);
        if stored.meta.has_finalizer(FINALIZER_ORPHAN)
            || stored.meta.has_finalizer(FINALIZER_FOREGROUND)
        {
            self.schedule_gc(ctx);
        }
        Ok(ApiOk::Object(stored))
    }

    /// Write `object` under `key` with a new resourceVersion and tell the watchers.
    fn store(
        &mut self,
        key: &ObjectKey,
        mut object: Object,
        event: EventType,
        ctx: &mut WorldCtx<'_>,
    ) -> Arc<Object> {
        self.resource_version += 1;
        self.count_write(key.kind);
        object.meta.resource_version = self.resource_version;
        ctx.note(|| format!("stored {key} rv {}", self.resource_version));
        let arc = Arc::new(object);
        if event == EventType::Added {
            self.creates_and_removals += 1;
            self.uids.insert(arc.meta.uid, key.clone());
            self.note_namespace(&arc);
        }
        // An update replaces its object in place; only a create makes the store's key.
        let prev = match self.objects.get_mut(key) {
            Some(slot) => Some(std::mem::replace(slot, arc.clone())),
            None => self.objects.insert(key.clone(), arc.clone()),
        };
        // Only a write that changes an object's owner references gives the collector new
        // work (an owner's own removal or marking arms it otherwise): most writes (a
        // status, a renewal) skip the lookups.
        let refs_changed = prev
            .as_ref()
            .is_none_or(|p| p.meta.owner_references != arc.meta.owner_references);
        // A reference that blocked an owner's deletion in the foreground is gone: the
        // real collector's graph hears of it and looks at the owner again.
        let unblocked = refs_changed
            && prev.as_ref().is_some_and(|p| {
                p.meta.owner_references.iter().any(|r| {
                    r.blocks_owner_deletion()
                        && !arc.meta.owner_references.contains(r)
                        && self.waits_for_dependents(r.uid)
                })
            });
        self.emit(event, &arc, prev, ctx);
        if refs_changed && (unblocked || self.gc_action(&arc).is_some()) {
            // Written with dangling owners (e.g. created from a stale cache after its
            // owner went): the real collector's graph sees it too.
            self.schedule_gc(ctx);
        }
        arc
    }

    /// Remove an object (its final state is `last`, or the stored one) and schedule the
    /// garbage collector for its dependents.
    fn remove(&mut self, key: &ObjectKey, last: Option<Object>, ctx: &mut WorldCtx<'_>) {
        let Some(stored) = self.objects.remove(key) else {
            return;
        };
        self.uids.remove(&stored.meta.uid);
        self.awaiting_grace.remove(&stored.meta.uid);
        if self.config.namespace_lifecycle && is_namespace(stored.kind()) {
            self.namespaces.remove(&stored.meta.name);
            self.terminating.remove(&stored.meta.name);
        }
        self.resource_version += 1;
        self.count_write(key.kind);
        self.creates_and_removals += 1;
        ctx.note(|| format!("removed {key} rv {}", self.resource_version));
        let mut last = last.unwrap_or_else(|| (*stored).clone());
        last.meta.resource_version = self.resource_version;
        let arc = Arc::new(last);
        self.emit(EventType::Deleted, &arc, Some(stored), ctx);
        self.schedule_gc(ctx);
    }

    fn schedule_gc(&mut self, ctx: &mut WorldCtx<'_>) {
        if !self.gc_pending {
            self.gc_pending = true;
            ctx.set_timer(
                self.config.gc_delay_ms,
                Msg::Timer(AnyTimer::ApiServer(Timer::GcSweep)),
            );
        }
    }

    /// How the collector sees `dependent`'s reference `r` (garbagecollector.go,
    /// `isDangling` and `classifyReferences`; docs/semantics.md 3.9): the owner is looked
    /// up by name in the dependent's namespace (or cluster-wide, for a cluster-scoped
    /// owner), so an owner in another namespace, or one whose uid or kind differs, is
    /// absent.
    fn owner_state(&self, dependent: &Object, r: &OwnerReference) -> OwnerState {
        let Some(owner) = self.uids.get(&r.uid).and_then(|k| self.objects.get(k)) else {
            return OwnerState::Dangling;
        };
        let owner_ns = &owner.meta.namespace;
        if !owner_ns.is_empty() {
            if dependent.meta.namespace.is_empty() {
                return OwnerState::Invalid;
            }
            if *owner_ns != dependent.meta.namespace {
                return OwnerState::Dangling;
            }
        }
        if owner.meta.name != r.name || owner.kind() != r.kind {
            return OwnerState::Dangling;
        }
        if owner.meta.is_deleting() && owner.meta.has_finalizer(FINALIZER_FOREGROUND) {
            OwnerState::WaitingForDependents
        } else {
            OwnerState::Solid
        }
    }

    /// What the collector does with `o` now, if anything.
    fn gc_action(&self, o: &Object) -> Option<GcAction> {
        if o.meta.owner_references.is_empty() || o.meta.is_deleting() {
            return None;
        }
        let (mut solid, mut waiting) = (false, false);
        let mut unhook = Vec::new();
        for r in &o.meta.owner_references {
            match self.owner_state(o, r) {
                // The real collector's lookup fails and the item is dropped, untouched.
                OwnerState::Invalid => return None,
                OwnerState::Solid => solid = true,
                OwnerState::Dangling => unhook.push(r.uid),
                OwnerState::WaitingForDependents => {
                    waiting = true;
                    unhook.push(r.uid);
                }
            }
        }
        if solid {
            // An owner lives: the others' references are patched away, never the object.
            return (!unhook.is_empty()).then_some(GcAction::Unhook(unhook));
        }
        // No owner lives: deleted, in the foreground if an owner waits for it and it has
        // dependents of its own, else as its own finalizers say.
        let foreground = waiting && self.has_dependents(o.meta.uid);
        Some(GcAction::Delete(
            foreground.then_some(Propagation::Foreground),
        ))
    }

    /// Whether object `uid` is being deleted in the foreground.
    fn waits_for_dependents(&self, uid: Uid) -> bool {
        self.uids
            .get(&uid)
            .and_then(|k| self.objects.get(k))
            .is_some_and(|o| o.meta.is_deleting() && o.meta.has_finalizer(FINALIZER_FOREGROUND))
    }

    fn has_dependents(&self, uid: Uid) -> bool {
        self.objects
            .values()
            .any(|o| o.meta.owner_references.iter().any(|r| r.uid == uid))
    }

    /// One pass of the garbage collector: dependents whose owners are gone or waiting
    /// are deleted, or unhooked from them while another owner lives (3.9); an owner
    /// deleted with `orphan` has the references to it removed from its dependents, then
    /// loses the finalizer; one deleted in the foreground loses `foregroundDeletion`
    /// once no dependent that blocks owner deletion is left (3.8). Owners are judged
    /// before the pass's own deletions, so an owner goes one pass after its last
    /// blocking dependent, as the real collector hears of it through its informers.
    fn gc_sweep(&mut self, ctx: &mut WorldCtx<'_>) {
        self.gc_pending = false;
        let mut owners_done: Vec<(ObjectKey, &'static str)> = Vec::new();
        let mut orphaned: Vec<Uid> = Vec::new();
        for (k, o) in &self.objects {
            if !o.meta.is_deleting() {
                continue;
            }
            let uid = o.meta.uid;
            if o.meta.has_finalizer(FINALIZER_ORPHAN) {
                orphaned.push(uid);
                owners_done.push((k.clone(), FINALIZER_ORPHAN));
            } else if o.meta.has_finalizer(FINALIZER_FOREGROUND) {
                let blocked = self.objects.values().any(|d| {
                    d.meta
                        .owner_references
                        .iter()
                        .any(|r| r.uid == uid && r.blocks_owner_deletion())
                });
                if !blocked {
                    owners_done.push((k.clone(), FINALIZER_FOREGROUND));
                }
            }
        }
        let mut work: Vec<(ObjectKey, Uid, GcAction)> = Vec::new();
        for (k, o) in &self.objects {
            let orphaning: Vec<Uid> = o
                .meta
                .owner_references
                .iter()
                .map(|r| r.uid)
                .filter(|u| orphaned.contains(u))
                .collect();
            let action = if orphaning.is_empty() {
                self.gc_action(o)
            } else {
                Some(GcAction::Unhook(orphaning))
            };
            if let Some(action) = action {
                work.push((k.clone(), o.meta.uid, action));
            }
        }
        for (key, uid, action) in work {
            match action {
                GcAction::Delete(propagation) => {
                    // A collected bound Pod still goes through its kubelet, like any delete.
                    let options = DeleteOptions {
                        resource_version: None,
                        propagation,
                    };
                    ctx.note(|| format!("{GC_NOTE}deleting {key}: no owner of it lives on"));
                    let _ = self.delete(&key, Some(uid), None, options, ctx);
                }
                GcAction::Unhook(owners) => {
                    ctx.note(|| {
                        format!("{GC_NOTE}{key} loses its references to owners gone or going")
                    });
                    let ops: Vec<PatchOp> = owners
                        .into_iter()
                        .map(PatchOp::RemoveOwnerReference)
                        .collect();
                    let _ = self.patch(&key, &ops, None, ctx);
                }
            }
        }
        for (key, finalizer) in owners_done {
            ctx.note(|| format!("{GC_NOTE}{key}'s dependents are done: {finalizer} removed"));
            let op = PatchOp::RemoveFinalizer(finalizer.to_string());
            let _ = self.patch(&key, &[op], None, ctx);
        }
    }

    /// The namespace controller's pass (kube-controller-manager `pkg/controller/namespace`,
    /// `NamespacedResourcesDeleter.Delete`): every object of a terminating namespace is
    /// deleted (in the background, as its `deleteCollection` does); once none is left
    /// the namespace is finalized and goes (its own finalizers permitting), else the pass
    /// comes again `estimate / 2 + 1` seconds later, the estimate the longest grace
    /// period of its Pods still there.
    fn namespace_sweep(&mut self, ctx: &mut WorldCtx<'_>) {
        let names: Vec<String> = self.terminating.keys().cloned().collect();
        let mut again_s: Option<u64> = None;
        for ns in names {
            let in_ns = |objects: &BTreeMap<ObjectKey, Arc<Object>>| -> Vec<Arc<Object>> {
                objects
                    .values()
                    .filter(|o| o.meta.namespace == ns)
                    .cloned()
                    .collect()
            };
            for o in in_ns(&self.objects) {
                if !o.meta.is_deleting() {
                    let options = DeleteOptions {
                        propagation: Some(Propagation::Background),
                        ..Default::default()
                    };
                    ctx.note(|| {
                        format!(
                            "{NAMESPACE_NOTE}deleting {}: namespace {ns} is terminating",
                            o.key()
                        )
                    });
                    let _ = self.delete(&o.key(), None, None, options, ctx);
                }
            }
            let left = in_ns(&self.objects);
            if left.is_empty() {
                // Finalized: only its own finalizers can hold it now.
                let Some(uid) = self.terminating.remove(&ns) else {
                    continue;
                };
                let key = self.uids.get(&uid).cloned();
                if let Some(key) = key
                    && self
                        .objects
                        .get(&key)
                        .is_some_and(|n| n.meta.finalizers.is_empty())
                {
                    self.remove(&key, None, ctx);
                }
                continue;
            }
            let estimate = left
                .iter()
                .filter_map(|o| o.meta.deletion_grace_period_seconds)
                .max()
                .unwrap_or(0);
            let wait_s = estimate / 2 + 1;
            again_s = Some(again_s.map_or(wait_s, |w| w.min(wait_s)));
        }
        if let Some(s) = again_s {
            ctx.set_timer(
                s * 1000,
                Msg::Timer(AnyTimer::ApiServer(Timer::NamespaceSweep)),
            );
        }
    }

    fn watch(&mut self, open: Open, from_rv: u64, ctx: &mut WorldCtx<'_>) -> Result<(), ApiError> {
        self.unwatch(open.from, open.stream);
        if !open.kinds.iter().all(|k| self.windows.holds(*k, from_rv)) {
            return Err(ApiError::Gone);
        }
        let mut watcher = self.open_watch(open, ctx);
        for h in self.windows.since(&watcher.kinds, from_rv) {
            send_event(&mut watcher, h.event, (&h.object, &h.prev), ctx);
        }
        self.watchers.push(watcher);
        Ok(())
    }

    /// A watch from the current state: an ADDED event for every object of `kinds` now,
    /// in key order, then every change after (api-concepts, "Semantics for watch":
    /// resourceVersion unset starts "at most recent" and "0" "at any", each "with
    /// synthetic 'Added' events of all resources instances that exist at the starting
    /// resource version"). Served at the most recent, which "any" allows.
    /// With `send_initial_events` (a streaming list), a bookmark follows them at once
    /// ("immediately when the watcher is fully initialized", `nextBookmarkTime`).
    fn watch_state(&mut self, open: Open, ctx: &mut WorldCtx<'_>) {
        self.unwatch(open.from, open.stream);
        let initial_events_end = open.options.send_initial_events;
        let mut watcher = self.open_watch(open, ctx);
        for object in self.objects.values() {
            if watcher.kinds.contains(&object.kind()) {
                send_event(&mut watcher, EventType::Added, (object, &None), ctx);
            }
        }
        if initial_events_end {
            ctx.send(
                watcher.proc,
                Msg::WatchBookmark {
                    watch_id: watcher.watch_id,
                    resource_version: self.resource_version,
                },
            );
        }
        self.watchers.push(watcher);
    }

    /// Close `from`'s watch stream `stream`, if it has one (a new watch replaces it).
    fn unwatch(&mut self, from: ProcId, stream: u32) {
        self.watchers
            .retain(|w| !(w.proc == from && w.stream == stream));
    }

    /// A new watch's number, answered to request `id`: the answer goes first, and the
    /// FIFO link keeps it ahead of the events the watch then sends. A watch with a
    /// timeout or bookmarks has its first tick armed.
    fn open_watch(&mut self, open: Open, ctx: &mut WorldCtx<'_>) -> Watcher {
        self.next_watch_id += 1;
        let watch_id = self.next_watch_id;
        ctx.send(
            open.from,
            Msg::ApiResp(ApiResponse {
                id: open.id,
                result: Ok(ApiOk::Watching { watch_id }),
            }),
        );
        let watcher = Watcher {
            proc: open.from,
            stream: open.stream,
            watch_id,
            kinds: open.kinds,
            seq: 0,
            deadline: open.options.timeout_ms.map(|ms| ctx.now().plus_ms(ms)),
            bookmarks: open.options.bookmarks,
        };
        self.arm_watch_tick(&watcher, ctx);
        watcher
    }

    /// Arm `w`'s next tick: its next bookmark, about a minute from now or 2 s before its
    /// deadline, whichever is first; else its deadline (apiserver
    /// `storage/cacher/cache_watcher.go`, `nextBookmarkTime`; docs/semantics.md 3.18).
    fn arm_watch_tick(&self, w: &Watcher, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        let bookmark = w.bookmarks.then(|| {
            let beat = now.plus_ms(BOOKMARK_FREQUENCY_MS);
            match w.deadline {
                Some(d) => beat.min(SimTime::from_ms(d.as_ms().saturating_sub(2_000))),
                None => beat,
            }
        });
        let next = match (bookmark.filter(|b| *b > now), w.deadline) {
            (Some(b), _) => b,
            (None, Some(d)) => d,
            (None, None) => return,
        };
        ctx.set_timer(
            next.since(now),
            Msg::Timer(AnyTimer::ApiServer(Timer::WatchTick {
                watch_id: w.watch_id,
            })),
        );
    }

    /// Watch `watch_id`'s tick: at its deadline it ends (after the events the lag still
    /// holds for it), else it gets a bookmark at the watch cache's resourceVersion (none
    /// while events for it are held: they come first, and the next tick has it).
    fn watch_tick(&mut self, watch_id: u64, ctx: &mut WorldCtx<'_>) {
        let Some(i) = self.watchers.iter().position(|w| w.watch_id == watch_id) else {
            return;
        };
        let now = ctx.now();
        let held_until = self.caches.held_until(watch_id);
        let w = &self.watchers[i];
        if w.deadline.is_some_and(|d| d <= now) {
            if let Some(at) = held_until {
                ctx.set_timer(
                    at.since(now),
                    Msg::Timer(AnyTimer::ApiServer(Timer::WatchTick { watch_id })),
                );
                return;
            }
            let w = self.watchers.remove(i);
            ctx.send(w.proc, Msg::WatchEnd { watch_id });
            return;
        }
        if held_until.is_none() {
            let resource_version = self
                .caches
                .resource_version(&w.kinds, self.resource_version);
            ctx.send(
                w.proc,
                Msg::WatchBookmark {
                    watch_id,
                    resource_version,
                },
            );
        }
        self.arm_watch_tick(&self.watchers[i], ctx);
    }

    fn emit(
        &mut self,
        event: EventType,
        object: &Arc<Object>,
        prev: Option<Arc<Object>>,
        ctx: &mut WorldCtx<'_>,
    ) {
        let kind = object.kind();
        let now = ctx.now();
        let release = if self.caches.idle() {
            None
        } else {
            self.caches
                .hold(&self.objects, (event, object, &prev), now, |lo, hi| {
                    ctx.draw_ms(lo, hi)
                })
        };
        if let Some(release) = release {
            // Behind its type's watch cache: the events wait, in the type's order.
            for w in &self.watchers {
                if w.kinds.contains(&kind) {
                    self.caches.hold_for(
                        release,
                        HeldEvent {
                            watch_id: w.watch_id,
                            event,
                            object: object.clone(),
                            prev: prev.clone(),
                        },
                    );
                }
            }
            ctx.set_timer(
                release.since(now),
                Msg::Timer(AnyTimer::ApiServer(Timer::ReleaseWatch)),
            );
        } else {
            for w in &mut self.watchers {
                if w.kinds.contains(&kind) {
                    send_event(w, event, (object, &prev), ctx);
                }
            }
        }
        let now = ctx.now();
        let recorded = Recorded {
            at: now,
            rv: object.meta.resource_version,
            event,
            object: object.clone(),
            prev,
        };
        self.windows.record(recorded.clone());
        self.history.push_back(recorded);
        self.trim_history(now);
    }

    /// Forget the revisions etcd compacted.
    fn trim_history(&mut self, now: SimTime) {
        while let Some(front) = self.history.front() {
            if now.since(front.at) <= self.config.compaction_ms {
                break;
            }
            self.history_floor = front.rv;
            self.history.pop_front();
        }
    }
}

/// How long the namespace controller waits before it takes up a namespace marked for
/// deletion (`namespaceDeletionGracePeriod`, 5 s: so that every API server's admission
/// has seen it terminate and no late create escapes the cleanup).
const NAMESPACE_DELETION_GRACE_MS: u64 = 5_000;

/// Whether `kind` is core/v1 Namespace.
fn is_namespace(kind: Kind) -> bool {
    kind.group().is_empty() && kind.as_str() == "Namespace"
}

/// apps/v1 Deployment, the world's or a program's (whose generation its annotations
/// bump too).
fn is_deployment(kind: Kind) -> bool {
    kind.group() == "apps" && kind.as_str() == "Deployment"
}

/// The finalizer a deletion in the foreground holds its object with
/// (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
/// The finalizer an orphaning deletion holds its object with
/// (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";

/// A dependent's owner reference as the garbage collector classifies it.
enum OwnerState {
    /// The owner exists and is not waiting for its dependents' deletion.
    Solid,
    /// No such owner in the dependent's namespace (or cluster-wide).
    Dangling,
    /// The owner is being deleted in the foreground.
    WaitingForDependents,
    /// A cluster-scoped dependent naming a namespaced owner: never resolved.
    Invalid,
}

/// What one pass of the collector does to a dependent.
enum GcAction {
    /// Delete it, with this propagation (`None`: as its own finalizers say).
    Delete(Option<Propagation>),
    /// Remove its references to these owners.
    Unhook(Vec<Uid>),
}

/// The finalizers a delete leaves, as registry/store.go's
/// `deletionFinalizersForGarbageCollection` computes them: `orphan` and
/// `foregroundDeletion` both dropped, then the one the policy (or, without one, the one
/// already there) asks for put back.
fn gc_finalizers(finalizers: &[String], propagation: Option<Propagation>) -> Vec<String> {
    let (orphan, foreground) = match propagation {
        Some(Propagation::Orphan) => (true, false),
        Some(Propagation::Foreground) => (false, true),
        Some(Propagation::Background) => (false, false),
        None => {
            // The first of the two in the list decides (`shouldOrphanDependents`).
            let first = finalizers
                .iter()
                .find(|f| *f == FINALIZER_ORPHAN || *f == FINALIZER_FOREGROUND);
            (
                first.is_some_and(|f| f == FINALIZER_ORPHAN),
                first.is_some_and(|f| f == FINALIZER_FOREGROUND),
            )
        }
    };
    let has = |f: &str| finalizers.iter().any(|x| x == f);
    if has(FINALIZER_ORPHAN) == orphan && has(FINALIZER_FOREGROUND) == foreground {
        // The same set: the list stays as it is.
        return finalizers.to_vec();
    }
    let mut next: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        next.push(FINALIZER_ORPHAN.to_string());
    }
    if foreground {
        next.push(FINALIZER_FOREGROUND.to_string());
    }
    next
}

/// The object a write left, and the one it replaced.
type Written<'a> = (&'a Arc<Object>, &'a Option<Arc<Object>>);

fn send_event(w: &mut Watcher, event: EventType, written: Written<'_>, ctx: &mut WorldCtx<'_>) {
    let e = next_event(w, event, written);
    ctx.send(w.proc, Msg::Watch(e));
}

/// The watcher's next numbered event.
fn next_event(w: &mut Watcher, event: EventType, (object, prev): Written<'_>) -> WatchEvent {
    let e = WatchEvent {
        watch_id: w.watch_id,
        seq: w.seq,
        event,
        object: object.clone(),
        prev: prev.clone(),
    };
    w.seq += 1;
    e
}

fn apply_patch(object: &mut Object, op: &PatchOp) -> Result<(), ApiError> {
    let meta = &mut object.meta;
    match op {
        PatchOp::AddFinalizer(f) => {
            if !meta.has_finalizer(f) {
                meta.finalizers.push(f.clone());
            }
        }
        PatchOp::RemoveFinalizer(f) => meta.finalizers.retain(|x| x != f),
        PatchOp::SetLabel(k, v) => set_or_remove(&mut meta.labels, k, v),
        PatchOp::SetAnnotation(k, v) => set_or_remove(&mut meta.annotations, k, v),
        PatchOp::SetOwnerReferences(refs) => meta.owner_references = refs.clone(),
        PatchOp::RemoveOwnerReference(uid) => meta.owner_references.retain(|r| r.uid != *uid),
        PatchOp::Spec(body) => {
            if !object.body.set_spec_from(body) {
                return Err(ApiError::Invalid("spec patch of another kind".into()));
            }
        }
        PatchOp::Status(body) => {
            if !object.body.set_status_from(body) {
                return Err(ApiError::Invalid("status patch of another kind".into()));
            }
        }
        PatchOp::Object(patch) => *object = patch.apply(object)?,
        PatchOp::Merge(patch) => {
            if !patch.apply_to(object) {
                return Err(ApiError::Invalid(format!(
                    "a merge patch for another kind than {}",
                    object.kind()
                )));
            }
        }
    }
    Ok(())
}

fn set_or_remove(map: &mut BTreeMap<String, String>, k: &str, v: &Option<String>) {
    match v {
        Some(v) => {
            map.insert(k.to_string(), v.clone());
        }
        None => {
            map.remove(k);
        }
    }
}
