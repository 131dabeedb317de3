//! The open object model: kinds registered by name, a shared [`ObjectMeta`], and typed
//! bodies that the core never needs to know.
//!
//! A kind is a [`KindInfo`] (group, version, kind, plural, scope) that the core declares
//! for Kubernetes' own kinds (Lease, Node, Pod, Deployment, below) and a family declares
//! for its own; a body is any plain-data type that implements [`Resource`]. The API
//! server, informers and checkers handle objects through [`Body`], a type-erased,
//! reference-counted body: no JSON on the hot path, typed access by downcast
//! ([`Object::typed`]), a stable hash for the trace (the kind's id, then the body's own
//! stable hash, computed once per shared body), and a spec/status split so the API server bumps `generation` only on spec
//! changes, as the real one does for resources with a status subresource.
//!
//! A kind known only at run time (the real-code path's, crates/kube) has a [`Document`]
//! body instead: the same contract, with the kind carried by the body.
//!
//! Objects are shared as `Arc<Object>` between the API server's store, watch events and
//! informer caches, so fan-out costs a reference count; a write copies the metadata and
//! shares the body unless the write changes it.

use reconsim_sim::{SimTime, StableHasher};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// An object's uid: unique over a run, never reused (a re-created name gets a new uid).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Uid(pub u64);

/// What the API server needs to know of a kind: its group, version and name, the
/// plural of its REST path, and whether its objects live in a namespace. Made at
/// compile time by [`KindInfo::namespaced`] or [`KindInfo::cluster_scoped`], which also
/// compute the kind's id (the stable hash of group and name: FNV-1a over the group, a
/// 0xff byte and the name) and its rank (the name's first 16 bytes, big-endian), so a
/// kind compares and hashes as one word however long its names, and orders by name.
#[derive(Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The resource name in REST paths (`machines`).
    pub plural: &'static str,
    /// Cluster-scoped kinds have an empty namespace.
    pub namespaced: bool,
    id: u64,
    rank: u128,
}

const fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u64).wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

impl KindInfo {
    /// A kind whose objects live in a namespace.
    pub const fn namespaced(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Self {
        Self::new(group, version, kind, plural, true)
    }

    /// A kind whose objects have no namespace (Node).
    pub const fn cluster_scoped(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Self {
        Self::new(group, version, kind, plural, false)
    }

    const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
    ) -> Self {
        let h = fnv1a(0xcbf2_9ce4_8422_2325, group.as_bytes());
        let h = fnv1a(h, &[0xff]);
        let name = kind.as_bytes();
        // The name's first 16 bytes, big-endian: kinds order by name with one integer
        // comparison unless two names share 16 bytes (MachineConfig and
        // MachineConfigPool share 8: an 8-byte rank sent every comparison of theirs
        // to memcmp).
        let mut rank = 0u128;
        let mut i = 0;
        while i < 16 {
            rank = (rank << 8) | if i < name.len() { name[i] as u128 } else { 0 };
            i += 1;
        }
        KindInfo {
            group,
            version,
            kind,
            plural,
            namespaced,
            id: fnv1a(h, name),
            rank,
        }
    }
}

/// A kind: `const KIND: Kind = Kind::new(&KindInfo::namespaced(group, version, kind,
/// plural))`. One pointer; two kinds are the same when their ids are (group and name),
/// whatever the address of the constant that made them.
#[derive(Clone, Copy)]
pub struct Kind(&'static KindInfo);

/// A kind's apiVersion ([`Kind::api_version`]) as `Display`: written where it goes (an
/// object's JSON text) with no `String` made for it.
#[derive(Clone, Copy, Debug)]
pub struct ApiVersion(pub Kind);

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.0.info();
        if info.group.is_empty() {
            f.write_str(info.version)
        } else {
            write!(f, "{}/{}", info.group, info.version)
        }
    }
}

impl Kind {
    pub const fn new(info: &'static KindInfo) -> Self {
        Kind(info)
    }

    pub fn info(self) -> &'static KindInfo {
        self.0
    }

    /// The kind's name (`Machine`).
    pub fn as_str(self) -> &'static str {
        self.0.kind
    }

    pub fn group(self) -> &'static str {
        self.0.group
    }

    /// `group/version`, or `version` for the core group (an object's apiVersion).
    pub fn api_version(self) -> String {
        ApiVersion(self).to_string()
    }

    /// Cluster-scoped kinds have an empty namespace.
    pub fn namespaced(self) -> bool {
        self.0.namespaced
    }
}

impl PartialEq for Kind {
    #[inline]
    fn eq(&self, other: &Kind) -> bool {
        std::ptr::eq(self.0, other.0) || self.0.id == other.0.id
    }
}

impl Eq for Kind {}

impl Ord for Kind {
    #[inline]
    fn cmp(&self, other: &Kind) -> Ordering {
        if self == other {
            return Ordering::Equal;
        }
        self.0.rank.cmp(&other.0.rank).then_with(|| {
            str_cmp(self.0.kind, other.0.kind).then_with(|| str_cmp(self.0.group, other.0.group))
        })
    }
}

impl PartialOrd for Kind {
    #[inline]
    fn partial_cmp(&self, other: &Kind) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Kind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.id);
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.kind)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.kind)
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.kind)
    }
}

/// A kind's typed body: plain data, cloneable, serializable, with a derived `Hash` (the
/// trace's stable hash runs through it).
///
/// The defaults describe a kind without a status subresource (a Lease, a ConfigMap):
/// every field is spec. A kind with `spec` and `status` fields says so with
/// [`status_subresource!`](crate::status_subresource) inside its impl.
pub trait Resource: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static {
    const KIND: Kind;

    /// Whether the spec parts are equal (status may differ): decides `generation`.
    fn same_spec(&self, other: &Self) -> bool {
        self == other
    }

    /// Replace the spec part with `other`'s, keeping status.
    fn set_spec_from(&mut self, other: &Self) {
        *self = other.clone();
    }

    /// Replace the status part with `other`'s, keeping spec; `false` when the kind has
    /// no status.
    fn set_status_from(&mut self, _other: &Self) -> bool {
        false
    }

    /// What a timeline shows of a write of this body, in a few words (`replicas=3`);
    /// `None`: the kind and name alone.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// The [`Resource`] methods of a kind whose body has `spec` and `status` fields and a
/// status subresource: `impl Resource for X { const KIND: Kind = ..; status_subresource!(); }`.
#[macro_export]
macro_rules! status_subresource {
    () => {
        fn same_spec(&self, other: &Self) -> bool {
            self.spec == other.spec
        }
        fn set_spec_from(&mut self, other: &Self) {
            self.spec = other.spec.clone();
        }
        fn set_status_from(&mut self, other: &Self) -> bool {
            self.status = other.status.clone();
            true
        }
    };
}

/// The object-safe face of a [`Resource`], implemented for every one.
trait DynBody: Send + Sync + fmt::Debug + 'static {
    fn kind(&self) -> Kind;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_shared(&self) -> Arc<Shared<dyn DynBody>>;
    fn eq_dyn(&self, other: &dyn DynBody) -> bool;
    /// The body's derived `Hash` through a concrete [`StableHasher`] (no virtual call per
    /// field).
    fn stable_hash(&self) -> u64;
    fn same_spec_dyn(&self, other: &dyn DynBody) -> bool;
    fn set_spec_from_dyn(&mut self, other: &dyn DynBody) -> bool;
    fn set_status_from_dyn(&mut self, other: &dyn DynBody) -> bool;
    fn as_serialize(&self) -> &dyn erased_serde::Serialize;
    fn summary(&self) -> Option<String>;
}

impl<T: Resource> DynBody for T {
    fn kind(&self) -> Kind {
        T::KIND
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_shared(&self) -> Arc<Shared<dyn DynBody>> {
        Arc::new(Shared::new(self.clone()))
    }
    fn eq_dyn(&self, other: &dyn DynBody) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn stable_hash(&self) -> u64 {
        StableHasher::hash_one(self)
    }
    fn same_spec_dyn(&self, other: &dyn DynBody) -> bool {
        other
            .as_any()
            .downcast_ref::<T>()
            .is_some_and(|o| self.same_spec(o))
    }
    fn set_spec_from_dyn(&mut self, other: &dyn DynBody) -> bool {
        match other.as_any().downcast_ref::<T>() {
            Some(o) => {
                self.set_spec_from(o);
                true
            }
            None => false,
        }
    }
    fn set_status_from_dyn(&mut self, other: &dyn DynBody) -> bool {
        match other.as_any().downcast_ref::<T>() {
            Some(o) => self.set_status_from(o),
            None => false,
        }
    }
    fn summary(&self) -> Option<String> {
        Resource::summary(self)
    }
    fn as_serialize(&self) -> &dyn erased_serde::Serialize {
        self
    }
}

/// A body whose kind is known only at run time: the real-code path's JSON documents
/// (crates/kube serves any kube-rs type, its kind registered when a world is built, so
/// there is no `const KIND` to give). Otherwise what a [`Resource`] is: plain data,
/// compared, hashed and split into spec and status the same way.
pub trait Document: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static {
    fn kind(&self) -> Kind;
    /// Whether the spec parts are equal (status may differ): decides `generation`.
    fn same_spec(&self, other: &Self) -> bool;
    /// Replace the spec part with `other`'s, keeping status.
    fn set_spec_from(&mut self, other: &Self);
    /// Replace the status part with `other`'s, keeping spec; `false` when the kind has
    /// no status subresource.
    fn set_status_from(&mut self, other: &Self) -> bool;
    /// What a timeline shows of a write of this body; `None`: the kind and name alone.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// A [`Document`] as a body (a wrapper, so its blanket impl and [`Resource`]'s cannot
/// overlap).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Doc<D>(D);

impl<D: Document> DynBody for Doc<D> {
    fn kind(&self) -> Kind {
        self.0.kind()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_shared(&self) -> Arc<Shared<dyn DynBody>> {
        Arc::new(Shared::new(self.clone()))
    }
    fn eq_dyn(&self, other: &dyn DynBody) -> bool {
        other.as_any().downcast_ref::<Doc<D>>() == Some(self)
    }
    fn stable_hash(&self) -> u64 {
        StableHasher::hash_one(&self.0)
    }
    fn same_spec_dyn(&self, other: &dyn DynBody) -> bool {
        other
            .as_any()
            .downcast_ref::<Doc<D>>()
            .is_some_and(|o| self.0.kind() == o.0.kind() && self.0.same_spec(&o.0))
    }
    fn set_spec_from_dyn(&mut self, other: &dyn DynBody) -> bool {
        match other.as_any().downcast_ref::<Doc<D>>() {
            Some(o) if o.0.kind() == self.0.kind() => {
                self.0.set_spec_from(&o.0);
                true
            }
            _ => false,
        }
    }
    fn set_status_from_dyn(&mut self, other: &dyn DynBody) -> bool {
        match other.as_any().downcast_ref::<Doc<D>>() {
            Some(o) if o.0.kind() == self.0.kind() => self.0.set_status_from(&o.0),
            _ => false,
        }
    }
    fn summary(&self) -> Option<String> {
        self.0.summary()
    }
    fn as_serialize(&self) -> &dyn erased_serde::Serialize {
        &self.0
    }
}

/// A shared body and its stable hash, computed once: a body is immutable while shared,
/// and the trace hashes the same body once per watch event it travels in.
struct Shared<B: ?Sized> {
    hash: OnceLock<u64>,
    value: B,
}

impl<B> Shared<B> {
    fn new(value: B) -> Self {
        Shared {
            hash: OnceLock::new(),
            value,
        }
    }
}

/// The typed part of an object, whatever its kind: shared until written.
#[derive(Clone)]
pub struct Body(Arc<Shared<dyn DynBody>>);

impl Body {
    pub fn new<T: Resource>(body: T) -> Self {
        Body(Arc::new(Shared::new(body)))
    }

    pub fn kind(&self) -> Kind {
        self.0.value.kind()
    }

    /// The body as `T`, if it is one.
    pub fn typed<T: Resource>(&self) -> Option<&T> {
        self.0.value.as_any().downcast_ref::<T>()
    }

    /// A body of a [`Document`], whose kind it carries.
    pub fn document<D: Document>(doc: D) -> Self {
        Body(Arc::new(Shared::new(Doc(doc))))
    }

    /// The body as the document `D`, if it is one.
    pub fn as_document<D: Document>(&self) -> Option<&D> {
        self.0.value.as_any().downcast_ref::<Doc<D>>().map(|d| &d.0)
    }

    /// Its kind's [`Resource::summary`].
    pub fn summary(&self) -> Option<String> {
        self.0.value.summary()
    }

    /// The body as `T` to write, if it is one (copied first if shared).
    pub fn typed_mut<T: Resource>(&mut self) -> Option<&mut T> {
        self.typed::<T>()?;
        self.make_mut().as_any_mut().downcast_mut::<T>()
    }

    /// The body to write: copied first if shared, its cached hash dropped.
    fn make_mut(&mut self) -> &mut dyn DynBody {
        if Arc::get_mut(&mut self.0).is_none() {
            self.0 = self.0.value.clone_shared();
        }
        let shared = Arc::get_mut(&mut self.0).expect("just made unique");
        shared.hash = OnceLock::new();
        &mut shared.value
    }

    /// Whether the spec parts are equal (status may differ): decides `generation`.
    pub fn same_spec(&self, other: &Body) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value.same_spec_dyn(&other.0.value)
    }

    /// Replace this body's spec with `other`'s (same kind), keeping status.
    pub fn set_spec_from(&mut self, other: &Body) -> bool {
        if self.kind() != other.kind() {
            return false;
        }
        self.make_mut().set_spec_from_dyn(&other.0.value)
    }

    /// Replace this body's status with `other`'s (same kind), keeping spec; `false` for
    /// another kind or a kind without status.
    pub fn set_status_from(&mut self, other: &Body) -> bool {
        if self.kind() != other.kind() {
            return false;
        }
        self.make_mut().set_status_from_dyn(&other.0.value)
    }
}

impl<T: Resource> From<T> for Body {
    fn from(body: T) -> Self {
        Body::new(body)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value.eq_dyn(&other.0.value)
    }
}

impl Eq for Body {}

impl Hash for Body {
    /// The kind's id, then the body's own stable hash (computed once per shared body).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind().hash(state);
        state.write_u64(*self.0.hash.get_or_init(|| self.0.value.stable_hash()));
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

impl Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(self.0.value.as_serialize(), s)
    }
}

/// Where an object lives: the store's key, ordered by kind first so a kind lists as a range.
///
/// Equality and order are by (kind, namespace, name), written out so that the strings
/// compare inline a word at a time and never reach `memcmp`, whose call and set-up cost
/// more than comparing a namespace or a name (and two orders of magnitude more than a
/// length check on an empty one: every cluster-scoped namespace, the start key of a
/// kind's range).
#[derive(Clone, Debug, Serialize)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

/// `a == b` inline (see [`bytes_cmp`]).
#[inline]
fn str_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bytes_cmp(a.as_bytes(), b.as_bytes()) == Ordering::Equal
}

/// `a.cmp(b)` inline (see [`bytes_cmp`]).
#[inline]
fn str_cmp(a: &str, b: &str) -> Ordering {
    bytes_cmp(a.as_bytes(), b.as_bytes())
}

/// The order of two byte strings, compared a word at a time inline: keys' strings are
/// short (a namespace, a name), and a call to `memcmp` and its set-up cost more than the
/// comparison. Words read big-endian order as their bytes do; the last word is read
/// ending at the shorter string's end, overlapping bytes already found equal, so the
/// first byte that differs decides as it would alone.
#[inline]
fn bytes_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let prefix = if n >= 8 {
        let mut i = 0;
        loop {
            let at = i.min(n - 8);
            let (x, y) = (word8(a, at), word8(b, at));
            if x != y {
                break x.cmp(&y);
            }
            if at == n - 8 {
                break Ordering::Equal;
            }
            i += 8;
        }
    } else if n >= 4 {
        let (x, y) = (word4(a, 0), word4(b, 0));
        let (x2, y2) = (word4(a, n - 4), word4(b, n - 4));
        x.cmp(&y).then(x2.cmp(&y2))
    } else {
        // A slice's `cmp` would call `memcmp`.
        (0..n)
            .map(|i| a[i].cmp(&b[i]))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    prefix.then(a.len().cmp(&b.len()))
}

#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(s[at..at + 8].try_into().expect("eight bytes"))
}

#[inline(always)]
fn word4(s: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(s[at..at + 4].try_into().expect("four bytes"))
}

impl PartialEq for ObjectKey {
    #[inline]
    fn eq(&self, other: &ObjectKey) -> bool {
        self.kind == other.kind
            && str_eq(&self.name, &other.name)
            && str_eq(&self.namespace, &other.namespace)
    }
}

impl Eq for ObjectKey {}

impl Hash for ObjectKey {
    /// As derived: kind, namespace, name (consistent with the equality above).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.namespace.hash(state);
        self.name.hash(state);
    }
}

impl Ord for ObjectKey {
    #[inline]
    fn cmp(&self, other: &ObjectKey) -> Ordering {
        self.kind
            .cmp(&other.kind)
            .then_with(|| str_cmp(&self.namespace, &other.namespace))
            .then_with(|| str_cmp(&self.name, &other.name))
    }
}

impl PartialOrd for ObjectKey {
    #[inline]
    fn partial_cmp(&self, other: &ObjectKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An object's place (kind, namespace, name) borrowed from what holds it: a map keyed by
/// [`ObjectKey`] is searched with an object's own (`map.get(object.place())`) without
/// making a key's two strings first, as a watch event's every cache used to (issue 33).
/// It orders and compares as the key does, which `Borrow` requires.
pub trait Place {
    fn parts(&self) -> (Kind, &str, &str);
}

impl Place for ObjectKey {
    #[inline]
    fn parts(&self) -> (Kind, &str, &str) {
        (self.kind, &self.namespace, &self.name)
    }
}

impl Place for Object {
    #[inline]
    fn parts(&self) -> (Kind, &str, &str) {
        (self.kind(), &self.meta.namespace, &self.meta.name)
    }
}

impl<'a> std::borrow::Borrow<dyn Place + 'a> for ObjectKey {
    fn borrow(&self) -> &(dyn Place + 'a) {
        self
    }
}

impl Ord for dyn Place + '_ {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        let ((k1, ns1, n1), (k2, ns2, n2)) = (self.parts(), other.parts());
        k1.cmp(&k2)
            .then_with(|| str_cmp(ns1, ns2))
            .then_with(|| str_cmp(n1, n2))
    }
}

impl PartialOrd for dyn Place + '_ {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn Place + '_ {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Place + '_ {}

impl ObjectKey {
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// metadata.ownerReferences[]
///
/// `controller` and `blockOwnerDeletion` are tri-state, as apimachinery's
/// `OwnerReference` has them (`Controller *bool`, `BlockOwnerDeletion *bool`, both
/// `omitempty`): a reference reads back exactly as it was written, absent when the
/// writer left it out and `false` when it sent `false`. kube's `Resource::owner_ref`
/// leaves both unset, and code that adopts an object only if
/// `!refs.contains(&owner.owner_ref(&()))` depends on reading that back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OwnerReference {
    pub kind: Kind,
    pub name: String,
    pub uid: Uid,
    /// At most one owner is the managing controller (`Some(true)`); `None`: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// `blockOwnerDeletion`: an owner deleted in the foreground waits until this
    /// dependent is gone (docs/semantics.md 3.8), when `Some(true)`. client-go's
    /// `NewControllerRef` sets it, kube's `controller_owner_ref` does not; the world's
    /// families leave it unset (none of them deletes in the foreground).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

impl OwnerReference {
    /// Whether this owner is the managing controller (`controller: true`).
    pub fn is_controller(&self) -> bool {
        self.controller == Some(true)
    }

    /// Whether a foreground deletion of the owner waits for this dependent
    /// (`blockOwnerDeletion: true`).
    pub fn blocks_owner_deletion(&self) -> bool {
        self.block_owner_deletion == Some(true)
    }
}

/// By hand, so that every trace hash stays what it was before the fields were
/// tri-state: `controller` as the bool it was (unset as `false`), `blockOwnerDeletion`
/// only when true; an explicit `false` of either, which the world's own code never
/// writes, adds a tag of its own.
impl std::hash::Hash for OwnerReference {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.name.hash(state);
        self.uid.hash(state);
        self.is_controller().hash(state);
        if self.blocks_owner_deletion() {
            true.hash(state);
        }
        if self.controller == Some(false) {
            state.write_u8(2);
        }
        if self.block_owner_deletion == Some(false) {
            state.write_u8(3);
        }
    }
}

/// The metadata every object carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ObjectMeta {
    pub name: String,
    pub namespace: String,
    /// On create with an empty name: the server appends a random 5-character suffix.
    pub generate_name: Option<String>,
    pub uid: Uid,
    /// The store-wide write counter at this object's last write.
    pub resource_version: u64,
    /// Bumped on spec changes (and once when deletion starts).
    pub generation: u64,
    pub creation_timestamp: SimTime,
    pub deletion_timestamp: Option<SimTime>,
    /// The grace period a graceful delete gave the object (a Pod's kubelet waits this
    /// long for its containers to exit before it kills them).
    pub deletion_grace_period_seconds: Option<u64>,
    pub finalizers: Vec<String>,
    pub owner_references: Vec<OwnerReference>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Who owns which field of a world kind's object that real code wrote
    /// (`metadata.managedFields`; [`Opaque`]).
    #[serde(skip)]
    pub managed_fields: Opaque,
}

/// What the real-code path keeps of an object that the world does not read (crates/kube's
/// field ownership for server-side apply): compared, so a write that only hands fields
/// over is a write, but never hashed nor serialized, since it follows from the writes
/// that are.
#[derive(Clone, Default)]
pub struct Opaque(Option<Arc<dyn OpaqueValue>>);

/// A value kept in an [`Opaque`]: plain data compared by its own `Eq`.
pub trait OpaqueValue: Any + Send + Sync + fmt::Debug {
    fn eq_dyn(&self, other: &dyn OpaqueValue) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + Send + Sync + fmt::Debug + PartialEq> OpaqueValue for T {
    fn eq_dyn(&self, other: &dyn OpaqueValue) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Opaque {
    pub fn new<T: OpaqueValue>(value: T) -> Self {
        Opaque(Some(Arc::new(value)))
    }

    /// The value, if it is a `T`.
    pub fn get<T: OpaqueValue>(&self) -> Option<&T> {
        self.0.as_deref()?.as_any().downcast_ref::<T>()
    }
}

impl PartialEq for Opaque {
    fn eq(&self, other: &Opaque) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => a.eq_dyn(b.as_ref()),
            _ => false,
        }
    }
}

impl Eq for Opaque {}

impl Hash for Opaque {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("-"),
            Some(v) => v.fmt(f),
        }
    }
}

impl ObjectMeta {
    pub fn named(namespace: &str, name: &str) -> Self {
        ObjectMeta {
            name: name.to_string(),
            namespace: namespace.to_string(),
            ..Default::default()
        }
    }

    pub fn is_deleting(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// The owner reference with `controller: true`, if any.
    pub fn controller_ref(&self) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|r| r.is_controller())
    }

    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }

    /// Make `kind` `name` (`uid`) the object's only owner, not its controller (a node's
    /// Lease: the kubelet's, an MCO machine's), both flags unset as the kubelet leaves
    /// them. A renewal's Lease has it already, and keeps it without a new vector and name.
    pub fn set_only_owner(&mut self, kind: Kind, name: &str, uid: Uid) {
        if let [r] = self.owner_references.as_slice()
            && (r.kind, r.uid, r.controller, r.block_owner_deletion) == (kind, uid, None, None)
            && r.name == name
        {
            return;
        }
        self.owner_references = vec![OwnerReference {
            kind,
            name: name.to_string(),
            uid,
            controller: None,
            block_owner_deletion: None,
        }];
    }
}

/// A stored object: metadata and a typed body.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Object {
    pub meta: ObjectMeta,
    pub body: Body,
}

impl Object {
    pub fn new(meta: ObjectMeta, body: impl Into<Body>) -> Self {
        Object {
            meta,
            body: body.into(),
        }
    }

    pub fn kind(&self) -> Kind {
        self.body.kind()
    }

    /// The body as `T`, if the object is one: `obj.typed::<Machine>()`.
    pub fn typed<T: Resource>(&self) -> Option<&T> {
        self.body.typed::<T>()
    }

    /// The body as `T` to write, if the object is one.
    pub fn typed_mut<T: Resource>(&mut self) -> Option<&mut T> {
        self.body.typed_mut::<T>()
    }

    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            kind: self.kind(),
            namespace: self.meta.namespace.clone(),
            name: self.meta.name.clone(),
        }
    }

    /// Where the object lives, borrowed: a map keyed by [`ObjectKey`] is searched with
    /// it without making the key ([`Place`]).
    #[inline]
    pub fn place(&self) -> &dyn Place {
        self
    }

    /// Whether `self` is the object named by `key` (no allocation).
    pub fn is(&self, key: &ObjectKey) -> bool {
        self.kind() == key.kind
            && str_eq(&self.meta.name, &key.name)
            && str_eq(&self.meta.namespace, &key.namespace)
    }
}

// ----- fields the world does not model ------------------------------------------------------

/// A part of a built-in object (its spec, or its status) as a real-code client last wrote
/// it, as canonical JSON text: the fields the world does not model (a container's
/// command, a Node's addresses) are kept there, so a client reads back what it wrote, as
/// from the real API server. The world's own fields are read from it when it is written
/// and written over it when it is read (crates/kube's `world_kinds`). Objects that only
/// the world's components wrote have none, and then it adds nothing to a hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verbatim(Option<Arc<str>>);

impl Verbatim {
    pub fn new(json: impl Into<Arc<str>>) -> Self {
        Verbatim(Some(json.into()))
    }

    pub fn json(&self) -> Option<&str> {
        self.0.as_deref()
    }

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl Hash for Verbatim {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Nothing when absent: a world-only object hashes as it did before this field.
        if let Some(text) = &self.0 {
            text.hash(state);
        }
    }
}

impl Serialize for Verbatim {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.as_deref().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Verbatim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Verbatim(Option::<String>::deserialize(d)?.map(Into::into)))
    }
}

// ----- coordination.k8s.io/v1 Lease ---------------------------------------------------------

/// A Lease: leader election locks and kubelet heartbeats. Times are the writer's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    pub holder_identity: Option<String>,
    pub lease_duration_seconds: u32,
    pub acquire_time: Option<SimTime>,
    pub renew_time: Option<SimTime>,
    pub lease_transitions: u32,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

impl Resource for Lease {
    /// A Lease has no status subresource: every change is a spec change.
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
    ));
}

// ----- core/v1 Node and Pod ----------------------------------------------------------------

/// A taint's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    NoExecute,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub effect: TaintEffect,
    pub time_added: Option<SimTime>,
}

/// The taint the node lifecycle controller puts on a node that stopped reporting.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint (NoSchedule) and label of control-plane nodes (OpenShift 4.x masters;
/// kubeadm before 1.24 used the same key).
pub const TAINT_MASTER: &str = "node-role.kubernetes.io/master";
/// The taint for a node that reports NotReady.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";

/// A condition's status.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum ConditionStatus {
    True,
    False,
    #[default]
    Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeSpec {
    /// `aws:///<zone>/<instance-id>`: ties the Node to its cloud instance.
    pub provider_id: Option<String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The Ready condition.
    pub ready: ConditionStatus,
    /// When Ready last changed (lastTransitionTime).
    pub ready_since: Option<SimTime>,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Node {
    pub spec: NodeSpec,
    pub status: NodeStatus,
}

impl Resource for Node {
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped("", "v1", "Node", "nodes"));
    crate::status_subresource!();
}

/// A toleration of a taint key, for `toleration_seconds` (None: forever) for NoExecute.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Toleration {
    pub key: String,
    pub effect: TaintEffect,
    pub toleration_seconds: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodSpec {
    /// Set when the pod is bound (the binding subresource, [`crate::api::ApiOp::Bind`]);
    /// no update may change it.
    pub node_name: Option<String>,
    /// What the container runs: a name the kubelet's image registry knows.
    pub image: String,
    /// The labels a node must carry (every pair) for the pod to be scheduled there.
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

/// Why a pod spec update is refused, if it is: the API server lets an update change only
/// the image and add tolerations (ValidatePodUpdate; docs/semantics.md 3.13).
pub fn pod_spec_update_forbidden(old: &PodSpec, new: &PodSpec) -> Option<String> {
    // nodeName is set only through the binding subresource.
    if old.node_name != new.node_name || old.node_selector != new.node_selector {
        return Some("spec: Forbidden: pod updates may not change fields other than spec.containers[*].image and spec.tolerations (only additions to existing tolerations)".into());
    }
    // An existing toleration stays; only its tolerationSeconds may change.
    let kept = old.tolerations.iter().all(|t| {
        new.tolerations
            .iter()
            .any(|n| n.key == t.key && n.effect == t.effect)
    });
    if !kept {
        return Some("spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds".into());
    }
    None
}

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodStatus {
    pub phase: PodPhase,
    pub restart_count: u32,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    pub spec: PodSpec,
    pub status: PodStatus,
}

impl Resource for Pod {
    const KIND: Kind = Kind::new(&KindInfo::namespaced("", "v1", "Pod", "pods"));
    crate::status_subresource!();
}

// ----- certificates.k8s.io/v1 CertificateSigningRequest --------------------------------------

/// The username a bootstrapping kubelet's CSR carries in OpenShift (the machine-config
/// operator's node-bootstrapper service account).
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CsrSpec {
    /// The requesting user (`spec.username`).
    pub username: String,
    /// The node the client certificate is for: the request's CN `system:node:<name>`.
    pub node_name: String,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CsrStatus {
    /// The Approved condition (and the certificate issued with it).
    pub approved: bool,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

/// A kubelet's request for its client certificate (TLS bootstrap): the kubelet may
/// register its Node only once it is approved (docs/semantics.md 5.12).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CertificateSigningRequest {
    pub spec: CsrSpec,
    pub status: CsrStatus,
}

impl Resource for CertificateSigningRequest {
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
    ));
    crate::status_subresource!();
}

// ----- apps/v1 Deployment --------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodTemplate {
    pub labels: BTreeMap<String, String>,
    pub spec: PodSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeploymentSpec {
    pub replicas: u32,
    pub selector: BTreeMap<String, String>,
    pub template: PodTemplate,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeploymentStatus {
    pub replicas: u32,
    /// What a real-code client wrote beyond the fields above ([`Verbatim`]).
    #[serde(default, skip_serializing_if = "Verbatim::is_none")]
    pub verbatim: Verbatim,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Deployment {
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
}

impl Resource for Deployment {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "apps",
        "v1",
        "Deployment",
        "deployments",
    ));
    crate::status_subresource!();
}

/// The objects of one kind in a key-ordered map (keys order by kind first, so a kind is
/// one contiguous range).
pub fn of_kind(
    objects: &BTreeMap<ObjectKey, std::sync::Arc<Object>>,
    kind: Kind,
) -> impl Iterator<Item = &std::sync::Arc<Object>> {
    objects
        .range(ObjectKey::new(kind, "", "")..)
        .take_while(move |(k, _)| k.kind == kind)
        .map(|(_, o)| o)
}

/// Whether `labels` match every pair of `selector` (matchLabels semantics).
pub fn selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! kind {
        ($group:literal, $kind:literal) => {
            Kind::new(&KindInfo::namespaced($group, "v1", $kind, ""))
        };
    }
    // Same name, other groups; names sharing their first 8 bytes, and 16.
    const WIDGET_A: Kind = kind!("a.example", "Widget");
    const WIDGET_B: Kind = kind!("b.example", "Widget");
    const KIND_A: Kind = kind!("a.example", "Gadget");
    const KIND_B: Kind = kind!("a.example", "WidgetConfig");
    const KIND_C: Kind = kind!("a.example", "WidgetConfigPool");
    const KIND_D: Kind = kind!("a.example", "WidgetSet");
    const KIND_E: Kind = kind!("a.example", "WidgetConfigPoolSet");

    #[test]
    fn kinds_are_their_group_and_name_and_order_by_name() {
        let kinds = [
            Deployment::KIND,
            KIND_A,
            Lease::KIND,
            Node::KIND,
            Pod::KIND,
            WIDGET_A,
            WIDGET_B,
            KIND_B,
            KIND_C,
            KIND_E,
            KIND_D,
        ];
        for (i, a) in kinds.iter().enumerate() {
            for (j, b) in kinds.iter().enumerate() {
                assert_eq!(a == b, i == j, "{a:?} vs {b:?}");
                let by_name = (a.as_str(), a.group()).cmp(&(b.as_str(), b.group()));
                assert_eq!(a.cmp(b), by_name, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(WIDGET_B.api_version(), "b.example/v1");
        // A kind is one pointer: every key and message holding one stays small.
        assert_eq!(std::mem::size_of::<Kind>(), std::mem::size_of::<usize>());
        assert_eq!(Node::KIND.api_version(), "v1");
    }

    #[test]
    fn keys_order_and_compare_as_their_strings_do() {
        let names = ["", "a", "ab", "b", ""];
        for ns_a in names {
            for ns_b in names {
                for n in names {
                    let a = ObjectKey::new(Pod::KIND, ns_a, n);
                    let b = ObjectKey::new(Pod::KIND, ns_b, "x");
                    assert_eq!(a.cmp(&b), (ns_a, n).cmp(&(ns_b, "x")));
                    assert_eq!(a == b, (ns_a, n) == (ns_b, "x"));
                }
            }
        }
    }

    /// `Borrow`'s contract: an object's place orders as its key, so a map keyed by
    /// `ObjectKey` finds by place what it finds by key.
    #[test]
    fn a_place_orders_and_finds_as_its_key() {
        let names = ["", "a", "worker-0", "worker-10", "kube-node-lease-x"];
        let mut objects = Vec::new();
        for ns in ["", "default", "kube-node-lease"] {
            for name in names {
                let meta = || ObjectMeta::named(ns, name);
                objects.push(Object::new(meta(), Pod::default()));
                objects.push(Object::new(meta(), Lease::default()));
                objects.push(Object::new(meta(), Node::default()));
            }
        }
        let mut map = BTreeMap::new();
        for (i, o) in objects.iter().enumerate().step_by(2) {
            map.insert(o.key(), i);
        }
        for a in &objects {
            for b in &objects {
                assert_eq!(a.place().cmp(b.place()), a.key().cmp(&b.key()));
                assert_eq!(a.place() == b.place(), a.key() == b.key());
            }
            assert_eq!(map.get(a.place()), map.get(&a.key()), "{}", a.key());
        }
    }

    #[test]
    fn str_cmp_is_the_order_of_strs() {
        let words = [
            "",
            "a",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefgha",
            "abcdefgz",
            "abcdefghabcdefgh",
            "abcdefghabcdefgi",
            "abcdefghabcdefgh1",
            "kube-node-lease",
            "kube-node-leasf",
            "worker-0",
            "worker-10",
            "é",
            "\u{10ffff}",
        ];
        for a in words {
            for b in words {
                assert_eq!(str_cmp(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
        // Every length to 40 of strings that share a prefix and differ at one byte,
        // read by every width of word.
        let base: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        let mut strings = Vec::new();
        for len in 0..=base.len() {
            strings.push(base[..len].to_vec());
            for at in 0..len {
                for by in [b'\0', b'b', 0xff] {
                    let mut s = base[..len].to_vec();
                    s[at] = by;
                    strings.push(s);
                }
            }
        }
        for a in &strings {
            for b in &strings {
                assert_eq!(bytes_cmp(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn a_shared_body_is_copied_on_write_and_rehashed() {
        let mut a = Object::new(
            ObjectMeta::named("ns", "p"),
            Pod {
                spec: PodSpec {
                    image: "one".into(),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        let hash = |o: &Object| reconsim_sim::StableHasher::hash_one(o);
        let before = hash(&a);
        let shared = a.clone();
        a.typed_mut::<Pod>().unwrap().spec.image = "two".into();
        assert_eq!(
            shared.typed::<Pod>().unwrap().spec.image,
            "one",
            "the copy kept"
        );
        assert_ne!(hash(&a), before, "the written body hashes anew");
        assert_eq!(hash(&shared), before);
        let fresh = Object::new(a.meta.clone(), a.typed::<Pod>().unwrap().clone());
        assert_eq!(hash(&a), hash(&fresh), "a cached hash is the fresh one");
        assert_eq!(a, fresh);
        assert!(
            a.typed_mut::<Node>().is_none(),
            "another kind: no access, no copy"
        );
    }
}
