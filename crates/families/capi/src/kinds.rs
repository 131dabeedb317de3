//! Cluster API objects of seed incident 2 (KubeadmControlPlane) and the conventions that
//! tie them to the workload cluster.
//!
//! The management cluster is the workload cluster here: one simulated API server holds
//! the KubeadmControlPlane, its Machines and the workload control-plane Nodes; the
//! workload's etcd and kubeadm ClusterStatus live in [`crate::etcd`]. Machines are
//! [`Machine`], cluster.x-k8s.io's (spec.version, spec.failureDomain, status.nodeRef),
//! a kind of its own beside machine-api's.
//!
//! The workload's Nodes are the Nodes that joined from a cloud instance (their
//! providerID is set): the management cluster's own nodes (where the controllers run)
//! are static and have none. The KCP counts and checks the workload's *control-plane*
//! Nodes, which upstream selects by the `node-role.kubernetes.io/master` label
//! (kubernetes-sigs/cluster-api controlplane/kubeadm/internal/workload_cluster.go,
//! getControlPlaneNodes). kubeadm adds that label in its last join phase
//! (mark-control-plane, see [`crate::etcd`]), after the kubelet registered the Node: for
//! a while a joining machine's Node exists (the Machine controller finds it by
//! providerID) and is not yet a control-plane Node.

use reconsim_sim::SimTime;
use reconsim_world::api::Patch;
use reconsim_world::object::{Kind, Object, Uid};
use reconsim_world::object::{KindInfo, Node, Resource};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// cluster.x-k8s.io/v1alpha3 Machine's spec: the providerID its infrastructure machine
/// reports, the Kubernetes version and the failure domain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MachineSpec {
    pub provider_id: Option<String>,
    pub version: Option<String>,
    pub failure_domain: Option<String>,
}

/// The Machine's status, with its infrastructure machine's instance id folded in (the
/// model's Machine controller is also the AWSMachine controller).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MachineStatus {
    /// Provisioning, Provisioned, Running, Deleting, Failed.
    pub phase: Option<String>,
    pub instance_id: Option<String>,
    /// status.nodeRef.name
    pub node_ref: Option<String>,
    pub last_updated: Option<SimTime>,
}

/// A Cluster API Machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Machine {
    pub spec: MachineSpec,
    pub status: MachineStatus,
}

impl Resource for Machine {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "cluster.x-k8s.io",
        "v1alpha3",
        "Machine",
        "machines",
    ));
    reconsim_world::status_subresource!();
}

/// The Machine controller's merge patch of a Machine's provider fields and status:
/// each field that is `Some` is set, every other is left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MachineFields {
    pub provider_id: Option<String>,
    pub instance_id: Option<String>,
    pub phase: Option<String>,
    pub last_updated: Option<SimTime>,
}

impl Patch for MachineFields {
    type Target = Machine;

    fn apply(&self, m: &mut Machine) {
        if self.provider_id.is_some() {
            m.spec.provider_id = self.provider_id.clone();
        }
        if self.instance_id.is_some() {
            m.status.instance_id = self.instance_id.clone();
        }
        if self.phase.is_some() {
            m.status.phase = self.phase.clone();
        }
        if self.last_updated.is_some() {
            m.status.last_updated = self.last_updated;
        }
    }
}

/// The label naming a Machine's Cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// The label marking control-plane Machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlaneSpec {
    pub replicas: u32,
    /// The Kubernetes version; a Machine whose spec.version differs needs an upgrade
    /// (upstream compares a spec hash; the version is what the incident changes).
    pub version: String,
    /// The failure domains machines spread over (upstream: the Cluster's status).
    #[serde(default)]
    pub failure_domains: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlaneStatus {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlane {
    pub spec: KubeadmControlPlaneSpec,
    pub status: KubeadmControlPlaneStatus,
}

impl Resource for KubeadmControlPlane {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "controlplane.cluster.x-k8s.io",
        "v1alpha3",
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
    ));
    reconsim_world::status_subresource!();
}

/// The label kubeadm's mark-control-plane phase puts on a control-plane Node (Kubernetes
/// 1.17/1.18; later releases add `node-role.kubernetes.io/control-plane`).
pub const NODE_ROLE_MASTER_LABEL: &str = "node-role.kubernetes.io/master";

/// Whether `node` is a workload control-plane Node as the KCP sees it: joined from a
/// cloud instance and labelled by kubeadm.
pub fn is_control_plane_node(node: &Object) -> bool {
    is_workload_node(node) && node.meta.labels.contains_key(NODE_ROLE_MASTER_LABEL)
}

/// Whether `node` is a workload Node (joined from a cloud instance).
pub fn is_workload_node(node: &Object) -> bool {
    node.typed::<Node>()
        .is_some_and(|n| n.spec.provider_id.is_some())
}

/// The Machines controlled by the KubeadmControlPlane with `uid`, deleting ones included,
/// oldest first (creation time, then name).
pub fn owned_machines<'a>(
    machines: impl Iterator<Item = &'a Arc<Object>>,
    kcp: Uid,
) -> Vec<Arc<Object>> {
    let mut out: Vec<Arc<Object>> = machines
        .filter(|m| {
            m.kind() == Machine::KIND
                && m.meta
                    .controller_ref()
                    .is_some_and(|r| r.kind == KubeadmControlPlane::KIND && r.uid == kcp)
        })
        .cloned()
        .collect();
    out.sort_by(|a, b| {
        (a.meta.creation_timestamp, &a.meta.name).cmp(&(b.meta.creation_timestamp, &b.meta.name))
    });
    out
}

/// A Machine's spec.version.
pub fn machine_version(m: &Object) -> Option<&str> {
    m.typed::<Machine>().and_then(|x| x.spec.version.as_deref())
}

/// A Machine's status.nodeRef.
pub fn node_ref(m: &Object) -> Option<&str> {
    m.typed::<Machine>()
        .and_then(|x| x.status.node_ref.as_deref())
}
