//! The Cluster API KubeadmControlPlane family in scenario files (`controllers.kcp`, seed
//! incident 2): its settings, validation, the objects and processes it adds to a world,
//! and its workload actions (`scale_kcp`, `upgrade_kcp`).
//!
//! The world: the KubeadmControlPlane `default/controlplane` (replicas, version, failure
//! domains) is seeded in the API server; the KCP controller and the Cluster API Machine
//! controller run as two manager processes (`kcp-controller`, `capi-machine-controller`)
//! on the scenario's `node` (a management node), with no leader election, so a `crash`
//! fault restarts one cold; the workload cluster's etcd model (`etcd`) runs on the `api`
//! host. The management cluster is the workload cluster: the machines' instances join as
//! Nodes of the one API server (docs/seeds/kcp.md).

use crate::etcd::{Etcd, EtcdConfig};
use crate::kinds::{KubeadmControlPlane, KubeadmControlPlaneSpec};
use crate::{CapiMachineOptions, KcpOptions};
use reconsim_check::{NamedCheck, View};
use reconsim_family::{
    Context, Family, FamilySection, ParamError, Range, Services, WorkloadAction,
};
use reconsim_sim::{ProcId, Sim};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Object, ObjectKey, ObjectMeta};
use reconsim_world::{Endpoints, Proc};
use serde::{Deserialize, Serialize};

/// The family, for a binary's registry.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kcp;

impl Family for Kcp {
    fn name(&self) -> &str {
        "kcp"
    }

    fn parse(&self, section: &serde_json::Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(reconsim_family::params::parse::<KcpSpec>(
            section,
        )?))
    }

    fn actions(&self) -> &[&str] {
        &["scale_kcp", "upgrade_kcp"]
    }

    fn invariants(&self) -> Vec<NamedCheck> {
        crate::invariants::invariants()
    }
}

/// `scale_kcp`: set the KubeadmControlPlane's spec.replicas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleKcp {
    pub replicas: u32,
}

/// `upgrade_kcp`: set the KubeadmControlPlane's spec.version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeKcp {
    pub version: String,
}

/// Where the KubeadmControlPlane lives.
pub const KCP_NAMESPACE: &str = "default";
pub const KCP_NAME: &str = "controlplane";
/// The processes this family starts (fault targets).
pub const KCP_PROCESSES: [&str; 3] = ["kcp-controller", "capi-machine-controller", "etcd"];

/// Which release of Cluster API runs, and which half of PR #2958 (8bbdd95a72, merged as
/// 7cda00b20b = the v0.3.4 tag) it has. The PR fixed two controllers independently
/// (docs/semantics.md 7.5, 7.6): the *Machine-controller half* removed
/// isDeleteNodeAllowed's errLastControlPlaneNode refusal
/// ([`CapiMachineOptions::refuse_last_control_plane_node`]); the *KCP half* added
/// reconcileHealth's final "a machine is deleting -> requeue"
/// ([`KcpOptions::wait_for_deletion`]) and dropped scale down's early deleting check
/// ([`KcpOptions::scale_down_checks_deleting_first`]). Neither half touched
/// MachinesNeedingUpgrade or upgradeControlPlane. The two single-half variants are
/// not releases: they say which half fixes which symptom of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KcpVariant {
    /// The parent of 8bbdd95a72 (its controllers equal the v0.3.4 tag's other parent,
    /// ef72ed6530): scale down checks for deleting machines first, scale up does not
    /// wait for them; the Machine controller refuses to delete the last active
    /// control-plane Node.
    #[serde(rename = "v0.3.3")]
    V0_3_3,
    /// v0.3.3 with only the Machine-controller half: the refusal is gone, the KCP is
    /// v0.3.3's. The state in which the report's one-replica upgrade creates a second
    /// machine at the new version (docs/seeds/kcp.md).
    #[serde(rename = "v0.3.3-machine-fix")]
    V0_3_3MachineFix,
    /// v0.3.3 with only the KCP half: reconcileHealth waits for deleting machines and
    /// scale down has no early check; the Machine controller still refuses.
    #[serde(rename = "v0.3.3-kcp-fix")]
    V0_3_3KcpFix,
    /// 8bbdd95a72 (PR #2958, the v0.3.4 tag): both halves.
    #[serde(rename = "v0.3.4")]
    V0_3_4,
    /// v0.3.4 with upgradeControlPlane deciding on the reconcile's snapshot of Machines
    /// (fewer than replicas + 1: scale up) rather than a live Node count, as later
    /// releases do; closes the health-check re-list race.
    #[serde(rename = "v0.3.4-machine-count")]
    V0_3_4MachineCount,
}

impl KcpVariant {
    /// Whether the KCP half of PR #2958 (controller.go reconcileHealth, scale.go
    /// scaleDownControlPlane) is in.
    pub fn kcp_half_fixed(self) -> bool {
        matches!(
            self,
            KcpVariant::V0_3_3KcpFix | KcpVariant::V0_3_4 | KcpVariant::V0_3_4MachineCount
        )
    }

    /// Whether the Machine-controller half of PR #2958 (machine_controller.go
    /// isDeleteNodeAllowed) is in.
    pub fn machine_half_fixed(self) -> bool {
        matches!(
            self,
            KcpVariant::V0_3_3MachineFix | KcpVariant::V0_3_4 | KcpVariant::V0_3_4MachineCount
        )
    }

    pub fn kcp_options(self, workload_client_ms: Range) -> KcpOptions {
        KcpOptions {
            wait_for_deletion: self.kcp_half_fixed(),
            scale_down_checks_deleting_first: !self.kcp_half_fixed(),
            scale_by_machine_count: self == KcpVariant::V0_3_4MachineCount,
            workload_client_ms_min: workload_client_ms.lo,
            workload_client_ms_max: workload_client_ms.hi,
            init_reads_uncached: false,
        }
    }

    pub fn machine_options(self) -> CapiMachineOptions {
        CapiMachineOptions {
            refuse_last_control_plane_node: !self.machine_half_fixed(),
        }
    }
}

/// The etcd model's timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// How often the model looks for booted control-plane instances (their static etcd
    /// pod joins the member).
    pub poll_ms: u64,
    /// Service time of one etcd call (client, port-forward, TLS, consensus).
    pub call_ms: Range,
    /// From a member's add to kubeadm's update-status and mark-control-plane (the
    /// control-plane label on its Node): the wait for the new member to sync.
    #[serde(default = "default_mark_ms")]
    pub mark_ms: Range,
}

fn default_mark_ms() -> Range {
    Range {
        lo: 2_000,
        hi: 10_000,
    }
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            poll_ms: 1_000,
            call_ms: Range { lo: 20, hi: 200 },
            mark_ms: default_mark_ms(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KcpSpec {
    pub variant: KcpVariant,
    /// The management node the controllers run on.
    pub node: String,
    /// spec.replicas at t = 0.
    pub replicas: u32,
    /// spec.version at t = 0.
    pub version: String,
    #[serde(default)]
    pub failure_domains: Vec<String>,
    #[serde(default)]
    pub etcd: EtcdSpec,
    /// How long the KCP controller takes to build a client of the workload cluster
    /// (GetWorkloadCluster: kubeconfig secret, TLS, discovery), per call.
    #[serde(default = "no_delay")]
    pub workload_client_ms: Range,
    /// kubernetes-sigs/cluster-api PR #3002 (in v0.3.6) on top of the variant: the first
    /// Machine is created only after an uncached read finds none
    /// ([`crate::kcp::KcpOptions::init_reads_uncached`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub init_uncached: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn no_delay() -> Range {
    Range::fixed(0)
}

impl FamilySection for KcpSpec {
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        context.node(".node", &self.node)?;
        if self.version.is_empty() {
            return Err(ParamError::at(".version", "a non-empty version"));
        }
        if self.etcd.poll_ms == 0 {
            return Err(ParamError::at(".etcd.poll_ms", "a positive period"));
        }
        self.workload_client_ms.check(".workload_client_ms")?;
        self.etcd.mark_ms.check(".etcd.mark_ms")?;
        self.etcd.call_ms.check(".etcd.call_ms")?;
        Ok(())
    }

    fn processes(&self) -> Vec<String> {
        KCP_PROCESSES.iter().map(|p| p.to_string()).collect()
    }

    /// The KubeadmControlPlane.
    fn seed(&self, server: &mut ApiServer) {
        server.seed_object(Object::new(
            ObjectMeta::named(KCP_NAMESPACE, KCP_NAME),
            Body::new(KubeadmControlPlane {
                spec: self.spec(),
                status: Default::default(),
            }),
        ));
    }

    /// The etcd model, then the two controllers on `node`.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        self.spawn_on(sim, services.endpoints, services.cloud)
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        crate::invariants::converged(view)
    }

    /// `scale_kcp` and `upgrade_kcp`, in time order: each a patch of the spec the earlier
    /// ones left.
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        let mut spec = self.spec();
        let mut ops = Vec::with_capacity(actions.len());
        for (i, a) in actions.iter().enumerate() {
            if i > 0 && actions[i - 1].at_ms > a.at_ms {
                return Err(ParamError::at(
                    a.at_ms_path(),
                    "KubeadmControlPlane actions in time order",
                ));
            }
            match a.name {
                "scale_kcp" => spec.replicas = a.params::<ScaleKcp>()?.replicas,
                _ => {
                    let UpgradeKcp { version } = a.params()?;
                    if version.is_empty() {
                        return Err(ParamError::at(a.path(".version"), "a non-empty version"));
                    }
                    spec.version = version;
                }
            }
            ops.push(ApiOp::Patch {
                key: ObjectKey::new(KubeadmControlPlane::KIND, KCP_NAMESPACE, KCP_NAME),
                ops: vec![PatchOp::Spec(Body::new(KubeadmControlPlane {
                    spec: spec.clone(),
                    status: Default::default(),
                }))],
                resource_version: None,
            });
        }
        Ok(ops)
    }
}

impl KcpSpec {
    fn spec(&self) -> KubeadmControlPlaneSpec {
        KubeadmControlPlaneSpec {
            replicas: self.replicas,
            version: self.version.clone(),
            failure_domains: self.failure_domains.clone(),
        }
    }

    /// The etcd model, then the two controllers on `node`; `cloud` is the cloud API
    /// process both call.
    fn spawn_on(&self, sim: &mut Sim<Proc>, endpoints: Endpoints, cloud: ProcId) {
        let api = sim.host_by_name("api").expect("a fixed host");
        let node = sim.host_by_name(&self.node).expect("validated");
        let etcd = sim.spawn(
            api,
            "etcd",
            Proc::new(Etcd::new(
                EtcdConfig {
                    poll_ms: self.etcd.poll_ms,
                    call_ms_min: self.etcd.call_ms.lo,
                    call_ms_max: self.etcd.call_ms.hi,
                    mark_ms_min: self.etcd.mark_ms.lo,
                    mark_ms_max: self.etcd.mark_ms.hi,
                },
                endpoints,
                cloud,
            )),
        );
        let manager = |name: &str, r: Box<dyn reconsim_world::manager::Reconciler>| {
            Proc::new(Manager::new(
                ManagerConfig {
                    identity: name.to_string(),
                    leader: None,
                    kubelet: None,
                    pod: None,
                    ..Default::default()
                },
                endpoints,
                vec![r],
            ))
        };
        let options = KcpOptions {
            init_reads_uncached: self.init_uncached,
            ..self.variant.kcp_options(self.workload_client_ms)
        };
        let kcp = crate::kcp::controller(options, etcd);
        sim.spawn(node, "kcp-controller", manager("kcp-controller", kcp));
        let machines = crate::machine::controller(self.variant.machine_options(), cloud);
        sim.spawn(
            node,
            "capi-machine-controller",
            manager("capi-machine-controller", machines),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_MS: Range = Range { lo: 100, hi: 1000 };

    /// Each half of PR #2958 switches only its own controller, so a single-half variant
    /// differs from v0.3.3 (and from v0.3.4) in exactly one controller.
    #[test]
    fn each_half_of_the_fix_switches_only_its_own_controller() {
        let old = KcpVariant::V0_3_3;
        let fixed = KcpVariant::V0_3_4;
        let machine = KcpVariant::V0_3_3MachineFix;
        let kcp = KcpVariant::V0_3_3KcpFix;
        assert_eq!(machine.kcp_options(CLIENT_MS), old.kcp_options(CLIENT_MS));
        assert_eq!(machine.machine_options(), fixed.machine_options());
        assert_eq!(kcp.kcp_options(CLIENT_MS), fixed.kcp_options(CLIENT_MS));
        assert_eq!(kcp.machine_options(), old.machine_options());
        assert!(old.machine_options().refuse_last_control_plane_node);
        assert!(!fixed.machine_options().refuse_last_control_plane_node);
        let (o, f) = (old.kcp_options(CLIENT_MS), fixed.kcp_options(CLIENT_MS));
        assert!(!o.wait_for_deletion && o.scale_down_checks_deleting_first);
        assert!(f.wait_for_deletion && !f.scale_down_checks_deleting_first);
    }

    /// The serialized names are a contract: the old ones keep their meaning.
    #[test]
    fn variant_names_round_trip() {
        for (name, v) in [
            ("v0.3.3", KcpVariant::V0_3_3),
            ("v0.3.3-machine-fix", KcpVariant::V0_3_3MachineFix),
            ("v0.3.3-kcp-fix", KcpVariant::V0_3_3KcpFix),
            ("v0.3.4", KcpVariant::V0_3_4),
            ("v0.3.4-machine-count", KcpVariant::V0_3_4MachineCount),
        ] {
            let json = serde_json::Value::String(name.to_string());
            assert_eq!(
                serde_json::from_value::<KcpVariant>(json.clone()).unwrap(),
                v
            );
            assert_eq!(serde_json::to_value(v).unwrap(), json);
        }
    }
}
