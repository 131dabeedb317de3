//! The machine.openshift.io/v1beta1 kinds: Machine and MachineSet, and the actuator's
//! merge patch of a Machine's provider fields.

use reconsim_sim::SimTime;
use reconsim_world::api::Patch;
use reconsim_world::object::{Kind, KindInfo, Resource};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineSpec {
    /// `aws:///<zone>/<instance-id>`, set by the machine controller after create.
    pub provider_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineStatus {
    /// status.phase: Provisioning, Provisioned, Running, Deleting, Failed.
    pub phase: Option<String>,
    /// status.providerStatus.instanceId
    pub instance_id: Option<String>,
    /// status.nodeRef.name
    pub node_ref: Option<String>,
    /// status.addresses' NodeInternalDNS: the instance's private DNS name, the name its
    /// Node will have (the machine approver matches CSRs against it).
    pub internal_dns: Option<String>,
    pub error_message: Option<String>,
    /// status.lastUpdated: when the controller last wrote the status (its clock).
    pub last_updated: Option<SimTime>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Machine {
    pub spec: MachineSpec,
    pub status: MachineStatus,
}

impl Resource for Machine {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "machine.openshift.io",
        "v1beta1",
        "Machine",
        "machines",
    ));
    reconsim_world::status_subresource!();
}

/// machine-api's merge patch of a Machine's provider fields and status: each field that
/// is `Some` is set (spec.providerID, status.providerStatus.instanceId, status.phase,
/// status.errorMessage, status.lastUpdated), every other field is left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct MachineFields {
    pub provider_id: Option<String>,
    pub instance_id: Option<String>,
    pub phase: Option<String>,
    pub error_message: Option<String>,
    pub last_updated: Option<SimTime>,
    pub internal_dns: Option<String>,
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
        if self.internal_dns.is_some() {
            m.status.internal_dns = self.internal_dns.clone();
        }
        if self.phase.is_some() {
            m.status.phase = self.phase.clone();
        }
        if self.error_message.is_some() {
            m.status.error_message = self.error_message.clone();
        }
        if self.last_updated.is_some() {
            m.status.last_updated = self.last_updated;
        }
    }

    fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(i) = &self.instance_id {
            parts.push(format!("instanceId={i}"));
        }
        if let Some(p) = &self.phase {
            parts.push(format!("phase={p}"));
        }
        parts.join(" ")
    }
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

impl Resource for MachineSet {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "machine.openshift.io",
        "v1beta1",
        "MachineSet",
        "machinesets",
    ));
    reconsim_world::status_subresource!();

    fn summary(&self) -> Option<String> {
        Some(format!("replicas={}", self.spec.replicas))
    }
}
