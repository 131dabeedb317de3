//! The API server's wire protocol: requests, responses, patches and watch events.
//!
//! Every call is a message over the simulated network and every answer arrives later as
//! another message, so each `await` of a real client is a point where the scheduler can
//! interleave other processes. Errors mirror the HTTP statuses controllers branch on.

use crate::object::{Kind, Object, ObjectKey, OwnerReference, Uid};
use serde::Serialize;
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
    },
    /// Open (or replace) this process's watch stream number `stream` on `kinds`, from
    /// `from_rv` (exclusive). Events arrive as [`WatchEvent`]s; 410 Gone if too old.
    Watch {
        stream: u32,
        kinds: Vec<Kind>,
        from_rv: u64,
    },
    /// Close a watch stream.
    Unwatch {
        stream: u32,
    },
    /// An HTTP/2 ping: how a client notices a dead connection.
    Ping,
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
    /// machine-api's merge patch of a Machine's provider fields and status: each field
    /// that is `Some` is set (spec.providerID, status.providerStatus.instanceId,
    /// status.phase, status.errorMessage, status.lastUpdated), every other field is left
    /// alone.
    MachineFields {
        provider_id: Option<String>,
        instance_id: Option<String>,
        phase: Option<String>,
        error_message: Option<String>,
        last_updated: Option<reconsim_sim::SimTime>,
    },
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct WatchEvent {
    pub watch_id: u64,
    pub seq: u64,
    pub event: EventType,
    pub object: Arc<Object>,
}
