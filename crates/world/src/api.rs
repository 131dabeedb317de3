//! The API server's wire protocol: requests, responses, patches and watch events.
//!
//! Every call is a message over the simulated network and every answer arrives later as
//! another message, so each `await` of a real client is a point where the scheduler can
//! interleave other processes. Errors mirror the HTTP statuses controllers branch on.

use crate::object::{Kind, Object, ObjectKey, OwnerReference, Resource, Uid};
use serde::Serialize;
use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A request to the API server; `id` is chosen by the caller to match the response.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ApiRequest {
    pub id: u64,
    pub op: ApiOp,
}

/// What a client asks of the API server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ApiOp {
    Get(ObjectKey),
    /// All objects of a kind (in every namespace when `namespace` is `None`).
    List {
        kind: Kind,
        namespace: Option<String>,
        /// A reflector's list (resourceVersion "0", or its last one): served from the
        /// watch cache, which lags the store while a watch lag holds its events
        /// (docs/semantics.md 3.15). Otherwise a consistent read of the store.
        from_watch_cache: bool,
    },
    /// Create; with an empty `meta.name`, `meta.generate_name` + 5 random characters.
    /// Server-owned metadata (uid, resourceVersion, timestamps) in the request is ignored.
    Create(Box<Object>),
    /// Replace the object. With `precondition`, `meta.resource_version` must match the
    /// stored one or the answer is 409 Conflict; without it the last writer wins.
    Update {
        object: Box<Object>,
        precondition: bool,
    },
    /// Apply field-level changes, as a JSON merge patch does; a `resource_version` makes
    /// it conditional (409 Conflict when stale).
    Patch {
        key: ObjectKey,
        ops: Vec<PatchOp>,
        resource_version: Option<u64>,
    },
    /// Delete; with finalizers left, only sets deletionTimestamp. A `uid` precondition
    /// makes it fail with 409 Conflict if the name now holds another object. A Pod bound
    /// to a node is deleted gracefully (marked, left for its kubelet to confirm) unless
    /// `grace_period_seconds` is `Some(0)`.
    Delete {
        key: ObjectKey,
        uid: Option<Uid>,
        grace_period_seconds: Option<u64>,
        /// A resourceVersion precondition and the propagation policy
        /// ([`DeleteOptions::default`]: neither, as most deletes are). Boxed, so that a
        /// delete is no larger than the other requests (every message is as large as
        /// its largest kind).
        #[serde(skip_serializing_if = "DeleteOptions::is_default_boxed")]
        options: Box<DeleteOptions>,
    },
    /// Bind a Pod to a node (the `pods/binding` subresource, the only way to set
    /// `spec.nodeName` once the pod exists): 409 Conflict if it is already bound or being
    /// deleted, or, with `uid`, if the name now holds another pod.
    Bind {
        key: ObjectKey,
        uid: Option<Uid>,
        node_name: String,
    },
    /// Open (or replace) this process's watch stream number `stream` on `kinds`, from
    /// `from_rv` (exclusive). Events arrive as [`WatchEvent`]s; 410 Gone if too old.
    Watch {
        stream: u32,
        kinds: Vec<Kind>,
        from_rv: u64,
        /// `timeoutSeconds` and `allowWatchBookmarks` ([`WatchOptions::default`]:
        /// neither, as the families' informers watch).
        #[serde(skip_serializing_if = "WatchOptions::is_default")]
        options: WatchOptions,
    },
    /// Close a watch stream.
    Unwatch {
        stream: u32,
    },
    /// An HTTP/2 ping: how a client notices a dead connection.
    Ping,
    /// Open (or replace) watch stream `stream` on `kinds` from the current state: an
    /// ADDED event for every object of `kinds` as it is now, then every change after,
    /// as a watch with resourceVersion unset or "0" starts (docs/semantics.md 3.17).
    WatchState {
        stream: u32,
        kinds: Vec<Kind>,
        #[serde(skip_serializing_if = "WatchOptions::is_default")]
        options: WatchOptions,
    },
    /// The objects of a kind (in `namespace`, or all) as the store held them at
    /// `resource_version`: a paginated list's next page, which the real server serves
    /// from etcd at the first page's revision (docs/semantics.md 4.16). 410 Gone once
    /// the history no longer reaches back to it.
    ListAt {
        kind: Kind,
        namespace: Option<String>,
        resource_version: u64,
    },
    /// A GET with a resourceVersion, which the real API server answers from the kind's
    /// watch cache (apiserver `storage/cacher/cacher.go`, `Get`: only an unset version
    /// reads etcd): "0" is "Any", N is "Not older than" N (website
    /// `reference/using-api/api-concepts.md`, "Semantics for get and list";
    /// docs/semantics.md 3.15). While the kind's cache lags the store (3.19) and is at
    /// `not_older_than` or later, the answer is the object as the cache's released
    /// events left it, 404 if they have not brought it yet; otherwise the store's.
    /// Last of the variants, so the others hash as they did.
    GetCached {
        key: ObjectKey,
        not_older_than: u64,
    },
}

/// How a deletion treats the object's dependents (`DeleteOptions.propagationPolicy`;
/// docs/semantics.md 3.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Propagation {
    /// The object goes now; the garbage collector deletes its dependents after.
    Background,
    /// The object stays, with the `foregroundDeletion` finalizer, until the collector has
    /// deleted every dependent whose reference to it blocks owner deletion.
    Foreground,
    /// The object stays, with the `orphan` finalizer, until the collector has removed the
    /// references to it from all its dependents, which live on.
    Orphan,
}

/// A delete's options beyond its uid precondition and grace period. The default (no
/// resourceVersion precondition, no propagation policy) hashes to nothing, so that the
/// trace of a run without them is what it was before they existed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeleteOptions {
    /// `preconditions.resourceVersion`: the delete is 409 Conflict unless the stored
    /// object is at this resourceVersion.
    pub resource_version: Option<u64>,
    /// `propagationPolicy`; `None` leaves it to the object's own `orphan` or
    /// `foregroundDeletion` finalizer, else background (registry/store.go,
    /// `shouldOrphanDependents`, `shouldDeleteDependents`).
    pub propagation: Option<Propagation>,
}

impl DeleteOptions {
    pub fn is_default(&self) -> bool {
        *self == DeleteOptions::default()
    }

    /// serde's `skip_serializing_if` hands the field as it is: a `&Box`.
    #[allow(clippy::borrowed_box)]
    fn is_default_boxed(options: &Box<DeleteOptions>) -> bool {
        options.is_default()
    }
}

impl Hash for DeleteOptions {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if !self.is_default() {
            self.resource_version.hash(state);
            self.propagation.hash(state);
        }
    }
}

/// How long a watch lasts and whether it hears bookmarks (docs/semantics.md 3.18). The
/// default (neither) hashes to nothing, so that the trace of a run without them is what
/// it was before they existed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WatchOptions {
    /// `timeoutSeconds`, in ms: the server ends the watch this long after it opened
    /// ([`crate::Msg::WatchEnd`]). `None`: the watch lasts until its client ends it.
    pub timeout_ms: Option<u64>,
    /// `allowWatchBookmarks`: about every minute, and 2 s before the timeout, the server
    /// sends the watch cache's resourceVersion ([`crate::Msg::WatchBookmark`]), so a
    /// client re-watches from there, not from its last event's.
    pub bookmarks: bool,
    /// `sendInitialEvents` (a streaming list): a bookmark right after the current
    /// state's ADDED events says they are over ([`ApiOp::WatchState`] only).
    pub send_initial_events: bool,
}

impl WatchOptions {
    pub fn is_default(&self) -> bool {
        *self == WatchOptions::default()
    }
}

impl Hash for WatchOptions {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if !self.is_default() {
            self.timeout_ms.hash(state);
            self.bookmarks.hash(state);
            self.send_initial_events.hash(state);
        }
    }
}

/// One field-level change of a patch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PatchOp {
    AddFinalizer(String),
    RemoveFinalizer(String),
    SetLabel(String, Option<String>),
    SetAnnotation(String, Option<String>),
    SetOwnerReferences(Vec<OwnerReference>),
    /// Drop the owner reference to `uid` (the dependent is orphaned, never deleted).
    RemoveOwnerReference(Uid),
    /// Replace the spec part with that of the given body (same kind).
    Spec(crate::object::Body),
    /// Replace the status part with that of the given body (same kind).
    Status(crate::object::Body),
    /// A merge patch of the body's fields, typed by the family that owns the kind
    /// ([`Patch`]): it sets the fields it names and leaves every other alone, as a JSON
    /// merge patch of those fields does.
    Merge(MergePatch),
    /// A change computed from the whole stored object ([`ObjectPatch`]): the real-code
    /// path's replaces and JSON and merge patches, which name fields of metadata and
    /// body alike and can fail (a JSON patch's `test`, a stale resourceVersion).
    Object(WholePatch),
}

/// A family's merge patch of one kind's body: plain data (hashed into the trace, shown
/// by timelines), applied by the API server without a JSON round trip. Which fields it
/// sets is the patch's own business; the server bumps `generation` if the spec changed.
pub trait Patch: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static {
    type Target: Resource;
    fn apply(&self, target: &mut Self::Target);
    /// A few words for timelines (`phase=Running`): by default, each field the patch
    /// sets as `field=value`, from its serialized form (never a Rust type name).
    fn summary(&self) -> String {
        fields_summary(&serde_json::to_value(self).unwrap_or_default())
    }
}

/// The fields a serialized patch sets, as `field=value` words (strings bare, other
/// values as JSON; unset fields, `null`, left out), cut after a whole word at
/// [`SUMMARY_CHARS`] with an ellipsis.
pub fn fields_summary(value: &serde_json::Value) -> String {
    use serde_json::Value;
    let words: Vec<String> = match value {
        Value::Object(fields) => fields
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| format!("{k}={}", value_words(v)))
            .collect(),
        Value::Null => Vec::new(),
        other => vec![value_words(other)],
    };
    let mut out = String::new();
    for w in words {
        let sep = usize::from(!out.is_empty());
        if out.chars().count() + sep + w.chars().count() > SUMMARY_CHARS {
            if out.is_empty() {
                // One long word: its start.
                out.extend(w.chars().take(SUMMARY_CHARS - 1));
                out.push('\u{2026}');
            } else {
                out.push_str(" \u{2026}");
            }
            break;
        }
        if sep == 1 {
            out.push(' ');
        }
        out.push_str(&w);
    }
    out
}

/// A value in words: strings bare, lists `[a, b]`, maps `{k: v}`, no quotes.
fn value_words(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_words).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}: {}", value_words(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// How long a patch's default summary may grow before it is cut (at a word).
pub const SUMMARY_CHARS: usize = 100;

trait DynPatch: Send + Sync + fmt::Debug + 'static {
    fn apply_to(&self, object: &mut Object) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn eq_dyn(&self, other: &dyn DynPatch) -> bool;
    /// The derived `Hash` through a concrete stable hasher (no virtual call per field).
    fn stable_hash(&self) -> u64;
    fn summary(&self) -> String;
    fn as_serialize(&self) -> &dyn erased_serde::Serialize;
}

impl<P: Patch> DynPatch for P {
    fn apply_to(&self, object: &mut Object) -> bool {
        match object.typed_mut::<P::Target>() {
            Some(t) => {
                self.apply(t);
                true
            }
            None => false,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn eq_dyn(&self, other: &dyn DynPatch) -> bool {
        other.as_any().downcast_ref::<P>() == Some(self)
    }
    fn stable_hash(&self) -> u64 {
        reconsim_sim::StableHasher::hash_one(self)
    }
    fn summary(&self) -> String {
        Patch::summary(self)
    }
    fn as_serialize(&self) -> &dyn erased_serde::Serialize {
        self
    }
}

/// A type-erased [`Patch`], as [`PatchOp::Merge`] carries it.
#[derive(Clone)]
pub struct MergePatch(Arc<dyn DynPatch>);

impl MergePatch {
    pub fn new<P: Patch>(patch: P) -> Self {
        MergePatch(Arc::new(patch))
    }

    /// Apply to `object`; `false` if it is not of the patch's kind.
    pub fn apply_to(&self, object: &mut Object) -> bool {
        self.0.apply_to(object)
    }

    /// The patch as `P`, if it is one.
    pub fn typed<P: Patch>(&self) -> Option<&P> {
        self.0.as_any().downcast_ref::<P>()
    }

    pub fn summary(&self) -> String {
        self.0.summary()
    }
}

impl PartialEq for MergePatch {
    fn eq(&self, other: &MergePatch) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.eq_dyn(&*other.0)
    }
}

impl Eq for MergePatch {}

impl Hash for MergePatch {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.stable_hash());
    }
}

impl fmt::Debug for MergePatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for MergePatch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(self.0.as_serialize(), s)
    }
}

impl<P: Patch> From<P> for PatchOp {
    fn from(patch: P) -> Self {
        PatchOp::Merge(MergePatch::new(patch))
    }
}

/// A patch of the whole object: given the stored object, the object to write, or the
/// error to answer. The API server keeps its own rules after it (server-owned metadata
/// is the patch's to keep; generation, finalizers of a deleting object, no-op writes and
/// removal are the server's).
pub trait ObjectPatch: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static {
    fn apply(&self, current: &Object) -> Result<Object, ApiError>;
    /// The object this patch makes when `key` holds none, if it makes one (a
    /// server-side apply creates what it names; every other patch is 404).
    fn create(&self, _key: &ObjectKey) -> Option<Result<Object, ApiError>> {
        None
    }
    /// A few words for timelines.
    fn summary(&self) -> String {
        format!("{self:?}").chars().take(40).collect()
    }
}

trait DynObjectPatch: Send + Sync + fmt::Debug + 'static {
    fn apply(&self, current: &Object) -> Result<Object, ApiError>;
    fn create(&self, key: &ObjectKey) -> Option<Result<Object, ApiError>>;
    fn as_any(&self) -> &dyn Any;
    fn eq_dyn(&self, other: &dyn DynObjectPatch) -> bool;
    fn stable_hash(&self) -> u64;
    fn summary(&self) -> String;
    fn as_serialize(&self) -> &dyn erased_serde::Serialize;
}

impl<P: ObjectPatch> DynObjectPatch for P {
    fn apply(&self, current: &Object) -> Result<Object, ApiError> {
        ObjectPatch::apply(self, current)
    }
    fn create(&self, key: &ObjectKey) -> Option<Result<Object, ApiError>> {
        ObjectPatch::create(self, key)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn eq_dyn(&self, other: &dyn DynObjectPatch) -> bool {
        other.as_any().downcast_ref::<P>() == Some(self)
    }
    fn stable_hash(&self) -> u64 {
        reconsim_sim::StableHasher::hash_one(self)
    }
    fn summary(&self) -> String {
        ObjectPatch::summary(self)
    }
    fn as_serialize(&self) -> &dyn erased_serde::Serialize {
        self
    }
}

/// A type-erased [`ObjectPatch`], as [`PatchOp::Object`] carries it.
#[derive(Clone)]
pub struct WholePatch(Arc<dyn DynObjectPatch>);

impl WholePatch {
    pub fn new<P: ObjectPatch>(patch: P) -> Self {
        WholePatch(Arc::new(patch))
    }

    /// The object to write in place of `current`, or the error to answer.
    pub fn apply(&self, current: &Object) -> Result<Object, ApiError> {
        self.0.apply(current)
    }

    /// The object the patch makes at `key`, which holds none, if it makes one.
    pub fn create(&self, key: &ObjectKey) -> Option<Result<Object, ApiError>> {
        self.0.create(key)
    }

    /// The patch as `P`, if it is one.
    pub fn typed<P: ObjectPatch>(&self) -> Option<&P> {
        self.0.as_any().downcast_ref::<P>()
    }

    pub fn summary(&self) -> String {
        self.0.summary()
    }
}

impl PartialEq for WholePatch {
    fn eq(&self, other: &WholePatch) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.eq_dyn(&*other.0)
    }
}

impl Eq for WholePatch {}

impl Hash for WholePatch {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.stable_hash());
    }
}

impl fmt::Debug for WholePatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for WholePatch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(self.0.as_serialize(), s)
    }
}

/// The answer to an [`ApiRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ApiResponse {
    pub id: u64,
    pub result: Result<ApiOk, ApiError>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ApiOk {
    /// The object as stored after the call (for a delete that only marked it: marked).
    Object(Arc<Object>),
    /// A delete that removed the object.
    Deleted,
    List {
        items: Vec<Arc<Object>>,
        resource_version: u64,
    },
    /// The watch is open; its events carry `watch_id`.
    Watching {
        watch_id: u64,
    },
    Pong,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ApiError {
    /// 404
    NotFound,
    /// 409 on create
    AlreadyExists,
    /// 409 on a stale resourceVersion or uid precondition
    Conflict,
    /// 410: the watch's resourceVersion is older than the server's history
    Gone,
    /// 422, with the reason
    Invalid(String),
    /// 409 on a server-side apply that would change fields other managers own: the
    /// conflicts, as the server words them
    ApplyConflict(String),
    /// 404 on a create into a namespace that does not exist: its name
    /// (docs/semantics.md 4.13)
    NamespaceNotFound(String),
    /// 403 on a create into a namespace being terminated (docs/semantics.md 4.13): the
    /// namespace, the resource (`configmaps`, `configsets.example.dev`) and the name
    /// asked for (empty for a generated one)
    NamespaceTerminating {
        namespace: String,
        resource: String,
        name: String,
    },
}

impl ApiError {
    /// A 403's message as apimachinery's `NewForbidden` words it (empty otherwise).
    pub fn forbidden(&self) -> String {
        let ApiError::NamespaceTerminating {
            namespace,
            resource,
            name,
        } = self
        else {
            return String::new();
        };
        let why = format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        );
        if name.is_empty() {
            format!("{resource} is forbidden: {why}")
        } else {
            format!("{resource} {name:?} is forbidden: {why}")
        }
    }
}

/// ADDED / MODIFIED / DELETED
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One event of a watch stream. `seq` counts the events of this watch from 0, so a
/// client sees a gap when one was lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchEvent {
    pub watch_id: u64,
    pub seq: u64,
    pub event: EventType,
    pub object: Arc<Object>,
    /// The object as it was before this write (none for a create), as the API server's
    /// watch cache keeps it (`watchCacheEvent.PrevObject`): a watch with a label
    /// selector turns a change into ADDED or DELETED when the object starts or stops
    /// matching (docs/semantics.md 3.16). Not hashed nor serialized: what the write
    /// changed is `object`, which is.
    #[serde(skip)]
    pub prev: Option<Arc<Object>>,
}

/// By hand, without `prev`, so that every trace hash stays what it was before `prev`.
impl std::hash::Hash for WatchEvent {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.watch_id.hash(state);
        self.seq.hash(state);
        self.event.hash(state);
        self.object.hash(state);
    }
}

#[cfg(test)]
mod summary_tests {
    use super::fields_summary;
    use serde_json::json;

    #[test]
    fn a_patch_summary_is_words_cut_at_a_word() {
        let v =
            json!({"provider_id": null, "instance_id": "i-1", "phase": "Running", "replicas": 3});
        assert_eq!(
            fields_summary(&v),
            "instance_id=i-1 phase=Running replicas=3"
        );
        let long = json!({"a": "x".repeat(60), "b": "y".repeat(60)});
        let s = fields_summary(&long);
        assert_eq!(s, format!("a={} \u{2026}", "x".repeat(60)));
        let nested = json!({"ids": ["i-1", "i-2"], "tags": {"Name": "web"}});
        assert_eq!(fields_summary(&nested), "ids=[i-1, i-2] tags={Name: web}");
        let one = json!({"a": "z".repeat(200)});
        assert_eq!(fields_summary(&one).chars().count(), super::SUMMARY_CHARS);
    }
}
