//! Typed Kubernetes objects with a shared [`ObjectMeta`].
//!
//! Objects are plain Rust values (no JSON on the hot path), hashed with derived `Hash` into
//! the trace, and shared as `Arc<Object>` between the API server's store, watch events and
//! informer caches, so fan-out costs a reference count, not a deep copy. Each body splits
//! into spec and status so the API server can bump `generation` only on spec changes, as
//! the real one does for resources with a status subresource.

use reconsim_sim::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// An object's uid: unique over a run, never reused (a re-created name gets a new uid).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Uid(pub u64);

/// The kinds the simulated API server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Lease,
    Node,
    Pod,
    Deployment,
    Machine,
    MachineSet,
    KubeadmControlPlane,
    MachineConfig,
    MachineConfigPool,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Lease,
        Kind::Node,
        Kind::Pod,
        Kind::Deployment,
        Kind::Machine,
        Kind::MachineSet,
        Kind::KubeadmControlPlane,
        Kind::MachineConfig,
        Kind::MachineConfigPool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lease => "Lease",
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::Deployment => "Deployment",
            Kind::Machine => "Machine",
            Kind::MachineSet => "MachineSet",
            Kind::KubeadmControlPlane => "KubeadmControlPlane",
            Kind::MachineConfig => "MachineConfig",
            Kind::MachineConfigPool => "MachineConfigPool",
        }
    }

    /// Cluster-scoped kinds have an empty namespace.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::Node | Kind::MachineConfig | Kind::MachineConfigPool
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an object lives: the store's key, ordered by kind first so a kind lists as a range.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OwnerReference {
    pub kind: Kind,
    pub name: String,
    pub uid: Uid,
    /// At most one owner is the managing controller.
    pub controller: bool,
}

/// The metadata every object carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    pub finalizers: Vec<String>,
    pub owner_references: Vec<OwnerReference>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
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
        self.owner_references.iter().find(|r| r.controller)
    }

    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }
}

/// A stored object: metadata and a typed body.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Object {
    pub meta: ObjectMeta,
    pub body: Body,
}

impl Object {
    pub fn new(meta: ObjectMeta, body: Body) -> Self {
        Object { meta, body }
    }

    pub fn kind(&self) -> Kind {
        self.body.kind()
    }

    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            kind: self.kind(),
            namespace: self.meta.namespace.clone(),
            name: self.meta.name.clone(),
        }
    }

    /// Whether `self` is the object named by `key` (no allocation).
    pub fn is(&self, key: &ObjectKey) -> bool {
        self.kind() == key.kind
            && self.meta.name == key.name
            && self.meta.namespace == key.namespace
    }
}

/// The typed part of an object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Body {
    Lease(Lease),
    Node(Node),
    Pod(Pod),
    Deployment(Deployment),
    Machine(Machine),
    MachineSet(MachineSet),
    KubeadmControlPlane(crate::capi::KubeadmControlPlane),
    MachineConfig(crate::mco::MachineConfig),
    MachineConfigPool(crate::mco::MachineConfigPool),
}

impl Body {
    pub fn kind(&self) -> Kind {
        match self {
            Body::Lease(_) => Kind::Lease,
            Body::Node(_) => Kind::Node,
            Body::Pod(_) => Kind::Pod,
            Body::Deployment(_) => Kind::Deployment,
            Body::Machine(_) => Kind::Machine,
            Body::MachineSet(_) => Kind::MachineSet,
            Body::KubeadmControlPlane(_) => Kind::KubeadmControlPlane,
            Body::MachineConfig(_) => Kind::MachineConfig,
            Body::MachineConfigPool(_) => Kind::MachineConfigPool,
        }
    }

    /// Whether the spec parts are equal (status may differ): decides `generation`.
    pub fn same_spec(&self, other: &Body) -> bool {
        match (self, other) {
            // A Lease has no status subresource: every change is a spec change.
            (Body::Lease(a), Body::Lease(b)) => a == b,
            (Body::Node(a), Body::Node(b)) => a.spec == b.spec,
            (Body::Pod(a), Body::Pod(b)) => a.spec == b.spec,
            (Body::Deployment(a), Body::Deployment(b)) => a.spec == b.spec,
            (Body::Machine(a), Body::Machine(b)) => a.spec == b.spec,
            (Body::MachineSet(a), Body::MachineSet(b)) => a.spec == b.spec,
            (Body::KubeadmControlPlane(a), Body::KubeadmControlPlane(b)) => a.spec == b.spec,
            // A MachineConfig has no status: every change is a spec change.
            (Body::MachineConfig(a), Body::MachineConfig(b)) => a == b,
            (Body::MachineConfigPool(a), Body::MachineConfigPool(b)) => a.spec == b.spec,
            _ => false,
        }
    }

    /// Replace this body's spec with `other`'s (same kind), keeping status.
    pub fn set_spec_from(&mut self, other: &Body) -> bool {
        match (self, other) {
            (Body::Lease(a), Body::Lease(b)) => *a = b.clone(),
            (Body::Node(a), Body::Node(b)) => a.spec = b.spec.clone(),
            (Body::Pod(a), Body::Pod(b)) => a.spec = b.spec.clone(),
            (Body::Deployment(a), Body::Deployment(b)) => a.spec = b.spec.clone(),
            (Body::Machine(a), Body::Machine(b)) => a.spec = b.spec.clone(),
            (Body::MachineSet(a), Body::MachineSet(b)) => a.spec = b.spec.clone(),
            (Body::KubeadmControlPlane(a), Body::KubeadmControlPlane(b)) => a.spec = b.spec.clone(),
            (Body::MachineConfig(a), Body::MachineConfig(b)) => *a = b.clone(),
            (Body::MachineConfigPool(a), Body::MachineConfigPool(b)) => a.spec = b.spec.clone(),
            _ => return false,
        }
        true
    }

    /// Replace this body's status with `other`'s (same kind), keeping spec.
    pub fn set_status_from(&mut self, other: &Body) -> bool {
        match (self, other) {
            (Body::Lease(_), Body::Lease(_)) => return false,
            (Body::Node(a), Body::Node(b)) => a.status = b.status.clone(),
            (Body::Pod(a), Body::Pod(b)) => a.status = b.status.clone(),
            (Body::Deployment(a), Body::Deployment(b)) => a.status = b.status.clone(),
            (Body::Machine(a), Body::Machine(b)) => a.status = b.status.clone(),
            (Body::MachineSet(a), Body::MachineSet(b)) => a.status = b.status.clone(),
            (Body::KubeadmControlPlane(a), Body::KubeadmControlPlane(b)) => {
                a.status = b.status.clone()
            }
            (Body::MachineConfig(_), Body::MachineConfig(_)) => return false,
            (Body::MachineConfigPool(a), Body::MachineConfigPool(b)) => a.status = b.status.clone(),
            _ => return false,
        }
        true
    }
}

macro_rules! accessors {
    ($($variant:ident => $as:ident, $as_mut:ident;)*) => {
        impl Object {
            $(
                pub fn $as(&self) -> Option<&$variant> {
                    match &self.body { Body::$variant(x) => Some(x), _ => None }
                }
                pub fn $as_mut(&mut self) -> Option<&mut $variant> {
                    match &mut self.body { Body::$variant(x) => Some(x), _ => None }
                }
            )*
        }
    };
}

accessors! {
    Lease => as_lease, as_lease_mut;
    Node => as_node, as_node_mut;
    Pod => as_pod, as_pod_mut;
    Deployment => as_deployment, as_deployment_mut;
    Machine => as_machine, as_machine_mut;
    MachineSet => as_machine_set, as_machine_set_mut;
}

macro_rules! accessors_in {
    ($($module:ident :: $variant:ident => $as:ident, $as_mut:ident;)*) => {
        impl Object {
            $(
                pub fn $as(&self) -> Option<&crate::$module::$variant> {
                    match &self.body { Body::$variant(x) => Some(x), _ => None }
                }
                pub fn $as_mut(&mut self) -> Option<&mut crate::$module::$variant> {
                    match &mut self.body { Body::$variant(x) => Some(x), _ => None }
                }
            )*
        }
    };
}

accessors_in! {
    capi::KubeadmControlPlane => as_kcp, as_kcp_mut;
    mco::MachineConfig => as_machine_config, as_machine_config_mut;
    mco::MachineConfigPool => as_machine_config_pool, as_machine_config_pool_mut;
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
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The Ready condition.
    pub ready: ConditionStatus,
    /// When Ready last changed (lastTransitionTime).
    pub ready_since: Option<SimTime>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Node {
    pub spec: NodeSpec,
    pub status: NodeStatus,
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
    /// Set by the scheduler when the pod is bound.
    pub node_name: Option<String>,
    /// What the container runs: a name the kubelet's image registry knows.
    pub image: String,
    pub tolerations: Vec<Toleration>,
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
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    pub spec: PodSpec,
    pub status: PodStatus,
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
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeploymentStatus {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Deployment {
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
}

// ----- machine.openshift.io/v1beta1 Machine and MachineSet --------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineSpec {
    /// `aws:///<zone>/<instance-id>`, set by the machine controller after create.
    pub provider_id: Option<String>,
    /// Cluster API spec.version: the Kubernetes version the machine runs (incident 2).
    #[serde(default)]
    pub version: Option<String>,
    /// Cluster API spec.failureDomain (incident 2).
    #[serde(default)]
    pub failure_domain: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineStatus {
    /// status.phase: Provisioning, Provisioned, Running, Deleting, Failed.
    pub phase: Option<String>,
    /// status.providerStatus.instanceId
    pub instance_id: Option<String>,
    /// status.nodeRef.name
    pub node_ref: Option<String>,
    pub error_message: Option<String>,
    /// status.lastUpdated: when the controller last wrote the status (its clock).
    pub last_updated: Option<SimTime>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Machine {
    pub spec: MachineSpec,
    pub status: MachineStatus,
}

/// Which machines a MachineSet deletes first when scaling down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeletePolicy {
    #[default]
    Random,
    Newest,
    Oldest,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineSetSpec {
    pub replicas: u32,
    pub selector: BTreeMap<String, String>,
    pub template_labels: BTreeMap<String, String>,
    pub delete_policy: DeletePolicy,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineSetStatus {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineSet {
    pub spec: MachineSetSpec,
    pub status: MachineSetStatus,
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
