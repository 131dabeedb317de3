//! The Cluster API KubeadmControlPlane (seed incident 2) part of a scenario: its settings,
//! validation, the objects and processes it adds to a world, and its user actions.
//!
//! The world: the KubeadmControlPlane `default/controlplane` (replicas, version, failure
//! domains) is seeded in the API server; the KCP controller and the Cluster API Machine
//! controller run as two manager processes (`kcp-controller`, `capi-machine-controller`)
//! on the scenario's `node` (a management node), with no leader election, so a `crash`
//! fault restarts one cold; the workload cluster's etcd model (`etcd`) runs on the `api`
//! host. The management cluster is the workload cluster: the machines' instances join as
//! Nodes of the one API server (docs/seeds/kcp.md).

use crate::family::{FamilySection, Services};
use crate::format::{Action, Range, Scenario};
use reconsim_capi::etcd::{Etcd, EtcdConfig};
use reconsim_capi::kinds::{KubeadmControlPlane, KubeadmControlPlaneSpec};
use reconsim_capi::{CapiMachineController, CapiMachineOptions, KcpController, KcpOptions};
use reconsim_check::View;
use reconsim_sim::{ProcId, Sim};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Object, ObjectKey, ObjectMeta};
use reconsim_world::{Endpoints, Proc};
use serde::{Deserialize, Serialize};

/// Where the KubeadmControlPlane lives.
pub const KCP_NAMESPACE: &str = "default";
pub const KCP_NAME: &str = "controlplane";
/// The processes this family starts (fault targets).
pub const KCP_PROCESSES: [&str; 3] = ["kcp-controller", "capi-machine-controller", "etcd"];

/// Which release of Cluster API runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KcpVariant {
    /// The parent of 8bbdd95a72: scale up does not wait for deleting machines; the
    /// Machine controller refuses to delete the last active control-plane Node.
    #[serde(rename = "v0.3.3")]
    V0_3_3,
    /// 8bbdd95a72 (PR #2958): reconcileHealth waits for deleting machines; the refusal is
    /// gone.
    #[serde(rename = "v0.3.4")]
    V0_3_4,
    /// v0.3.4 with upgradeControlPlane deciding on the reconcile's snapshot of Machines
    /// (fewer than replicas + 1: scale up) rather than a live Node count, as later
    /// releases do; closes the health-check re-list race.
    #[serde(rename = "v0.3.4-machine-count")]
    V0_3_4MachineCount,
}

impl KcpVariant {
    pub fn kcp_options(self, workload_client_ms: Range) -> KcpOptions {
        KcpOptions {
            wait_for_deletion: self != KcpVariant::V0_3_3,
            scale_by_machine_count: self == KcpVariant::V0_3_4MachineCount,
            workload_client_ms_min: workload_client_ms.lo,
            workload_client_ms_max: workload_client_ms.hi,
        }
    }

    pub fn machine_options(self) -> CapiMachineOptions {
        CapiMachineOptions {
            refuse_last_control_plane_node: self == KcpVariant::V0_3_3,
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
}

fn no_delay() -> Range {
    Range::fixed(0)
}

impl FamilySection for KcpSpec {
    fn validate(&self, scenario: &Scenario) -> Result<(), (String, String)> {
        let err = |path: &str, msg: String| Err((path.to_string(), msg));
        if !scenario.nodes().any(|n| *n == self.node) {
            return err(
                ".controllers.kcp.node",
                format!("one of the topology's nodes, not `{}`", self.node),
            );
        }
        if self.version.is_empty() {
            return err(".controllers.kcp.version", "a non-empty version".into());
        }
        if self.etcd.poll_ms == 0 {
            return err(".controllers.kcp.etcd.poll_ms", "a positive period".into());
        }
        if self.workload_client_ms.lo > self.workload_client_ms.hi {
            return err(
                ".controllers.kcp.workload_client_ms",
                format!(
                    "[lo, hi] with lo <= hi, not [{}, {}]",
                    self.workload_client_ms.lo, self.workload_client_ms.hi
                ),
            );
        }
        if self.etcd.mark_ms.lo > self.etcd.mark_ms.hi {
            return err(
                ".controllers.kcp.etcd.mark_ms",
                format!(
                    "[lo, hi] with lo <= hi, not [{}, {}]",
                    self.etcd.mark_ms.lo, self.etcd.mark_ms.hi
                ),
            );
        }
        if self.etcd.call_ms.lo > self.etcd.call_ms.hi {
            return err(
                ".controllers.kcp.etcd.call_ms",
                format!(
                    "[lo, hi] with lo <= hi, not [{}, {}]",
                    self.etcd.call_ms.lo, self.etcd.call_ms.hi
                ),
            );
        }
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

    /// None: its controllers are processes, not pods.
    fn images(&self, images: Images, _: &Services) -> Images {
        images
    }

    /// The etcd model, then the two controllers on `node`.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        self.spawn_on(sim, services.endpoints, services.cloud)
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        reconsim_capi::invariants::converged(view)
    }

    /// `scale_kcp` and `upgrade_kcp`, in time order: each a patch of the spec the earlier
    /// ones left.
    fn action(&self, scenario: &Scenario, index: usize) -> Option<Result<ApiOp, (String, String)>> {
        let a = &scenario.workload[index];
        if !matches!(
            a.action,
            Action::ScaleKcp { .. } | Action::UpgradeKcp { .. }
        ) {
            return None;
        }
        if index > 0 && scenario.workload[index - 1].at_ms > a.at_ms {
            return Some(Err((
                format!(".workload[{index}].at_ms"),
                "KubeadmControlPlane actions in time order".into(),
            )));
        }
        if let Action::UpgradeKcp { version } = &a.action
            && version.is_empty()
        {
            return Some(Err((
                format!(".workload[{index}].action.upgrade_kcp.version"),
                "a non-empty version".into(),
            )));
        }
        Some(Ok(self.action_op(scenario, index)))
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
            Proc::Component(Box::new(Etcd::new(
                EtcdConfig {
                    poll_ms: self.etcd.poll_ms,
                    call_ms_min: self.etcd.call_ms.lo,
                    call_ms_max: self.etcd.call_ms.hi,
                    mark_ms_min: self.etcd.mark_ms.lo,
                    mark_ms_max: self.etcd.mark_ms.hi,
                },
                endpoints,
                cloud,
            ))),
        );
        let manager = |name: &str, r: Box<dyn reconsim_world::manager::Reconciler>| {
            Proc::Manager(Manager::new(
                ManagerConfig {
                    identity: name.to_string(),
                    leader: None,
                    kubelet: None,
                    pod: None,
                },
                endpoints,
                vec![r],
            ))
        };
        let kcp = KcpController::new(self.variant.kcp_options(self.workload_client_ms), etcd);
        sim.spawn(
            node,
            "kcp-controller",
            manager("kcp-controller", Box::new(kcp)),
        );
        let machines = CapiMachineController::new(self.variant.machine_options(), cloud);
        sim.spawn(
            node,
            "capi-machine-controller",
            manager("capi-machine-controller", Box::new(machines)),
        );
    }

    /// The spec once the user actions up to and including `workload[index]` applied.
    fn spec_after(&self, scenario: &Scenario, index: usize) -> KubeadmControlPlaneSpec {
        let mut spec = self.spec();
        for a in scenario.workload.iter().take(index + 1) {
            match &a.action {
                Action::ScaleKcp { replicas } => spec.replicas = *replicas,
                Action::UpgradeKcp { version } => spec.version = version.clone(),
                _ => {}
            }
        }
        spec
    }

    /// The API call of user action `workload[index]` (a KCP action): a spec patch that
    /// keeps what earlier actions set.
    fn action_op(&self, scenario: &Scenario, index: usize) -> ApiOp {
        ApiOp::Patch {
            key: ObjectKey::new(KubeadmControlPlane::KIND, KCP_NAMESPACE, KCP_NAME),
            ops: vec![PatchOp::Spec(Body::new(KubeadmControlPlane {
                spec: self.spec_after(scenario, index),
                status: Default::default(),
            }))],
            resource_version: None,
        }
    }
}
