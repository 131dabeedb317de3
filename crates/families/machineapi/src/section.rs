//! The machine-api family's section of a scenario (`controllers.machine_api`): its
//! MachineSets, and the MachineSet and Machine controllers as pods of Deployments,
//! seeded already bound to the scenario's node, so a stopped kubelet leaves them running
//! while their replacements start elsewhere, as in the incident. Its one workload action,
//! `scale_machine_set`, patches a MachineSet's replicas.

use crate::MachineOptions;
use crate::approver;
use crate::kinds::{MachineSet, MachineSetSpec};
use reconsim_check::{NamedCheck, View};
use reconsim_family::{
    Context, Family, FamilySection, LeaseSpec, ObjectName, ParamError, Services, WorkloadAction,
};
use reconsim_sim::{ProcId, Sim};
use reconsim_world::Proc;
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::leader::LeaderConfig;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::{
    Body, Object, ObjectKey, ObjectMeta, PodSpec, Resource, TAINT_MASTER, TAINT_NOT_READY,
    TAINT_UNREACHABLE, TaintEffect, Toleration,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The namespace of machine-api objects.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// controller-runtime's SyncPeriod of the machine-api controllers (machine-api-operator
/// cmd/machineset/main.go, `syncPeriod := timeout`, 10 minutes).
pub const MACHINE_API_SYNC_PERIOD_MS: u64 = 600_000;

/// The machine-api Deployments (and images); their first pods are `<name>-0`.
pub const MACHINE_API_PODS: [&str; 2] = ["machineset-controller", "machine-controller"];
/// The label that ties Machines to their MachineSet.
pub const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

/// 120 s / 110 s / 20 s: the AWS Machine controller's leader election in OpenShift
/// 4.5/4.6 (machine-api-operator PR #571; /work/shared/SEED-FACTS.md section 1).
pub const MACHINE_API_4_6_LEASE: LeaseSpec = LeaseSpec {
    lease_duration_ms: 120_000,
    renew_deadline_ms: 110_000,
    retry_period_ms: 20_000,
    fence_ms: 0,
};

/// 120 s / 110 s / 90 s: the MachineSet controller's, slowed "to reduce etcd writes at
/// idle: BZ 1858400" (machine-api-operator release-4.5 and release-4.6
/// cmd/machineset/main.go: leaseDuration, renewDealine, retryPeriod).
pub const MACHINESET_4_6_LEASE: LeaseSpec = LeaseSpec {
    lease_duration_ms: 120_000,
    renew_deadline_ms: 110_000,
    retry_period_ms: 90_000,
    fence_ms: 0,
};

/// The family, for a binary's registry.
#[derive(Clone, Copy, Debug, Default)]
pub struct MachineApi;

impl Family for MachineApi {
    fn name(&self) -> &str {
        "machine_api"
    }

    fn parse(&self, section: &serde_json::Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(reconsim_family::params::parse::<MachineApiSpec>(
            section,
        )?))
    }

    fn actions(&self) -> &[&str] {
        &["scale_machine_set"]
    }

    fn invariants(&self) -> Vec<NamedCheck> {
        crate::invariants::invariants()
    }
}

/// `controllers.machine_api`: OpenShift machine-api (seed incident 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineApiSpec {
    pub variant: MachineApiVariant,
    /// Create instances with the Machine's uid as client token (the answer to the
    /// lease-expiry question).
    #[serde(default)]
    pub idempotent_create: bool,
    /// The node the controllers' pods start on.
    pub node: String,
    /// Per-pod exceptions to `node`, by Deployment name (`machineset-controller`,
    /// `machine-controller`).
    #[serde(default)]
    pub pod_nodes: BTreeMap<String, String>,
    /// How long the pods tolerate an unreachable node (machine-api: 120 s).
    #[serde(default = "default_toleration_seconds")]
    pub toleration_seconds: u64,
    /// Lease timings for `leader-election`, for both controllers (default: 4.6's, 120 s /
    /// 110 s / 90 s for the MachineSet controller and 120 s / 110 s / 20 s for the
    /// Machine controller).
    #[serde(default)]
    pub lease: Option<LeaseSpec>,
    pub machine_sets: Vec<MachineSetEntry>,
}

fn default_toleration_seconds() -> u64 {
    120
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MachineApiVariant {
    /// OpenShift 4.5 and earlier.
    NoLeaderElection,
    /// OpenShift 4.6: one Lease per controller.
    LeaderElection,
}

/// A MachineSet at t = 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSetEntry {
    pub name: String,
    #[serde(default)]
    pub replicas: u32,
}

/// `scale_machine_set`: set a MachineSet's spec.replicas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleMachineSet {
    pub machine_set: String,
    pub replicas: u32,
}

impl FamilySection for MachineApiSpec {
    /// The MachineSets.
    fn object_names(&self) -> Vec<ObjectName> {
        let at = |i| format!(".machine_sets[{i}].name");
        (self.machine_sets.iter().enumerate())
            .map(|(i, ms)| ObjectName::new(at(i), MachineSet::KIND, &ms.name))
            .collect()
    }

    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        context.node(".node", &self.node)?;
        for (pod, node) in &self.pod_nodes {
            if !MACHINE_API_PODS.contains(&pod.as_str()) {
                return Err(ParamError::at(
                    ".pod_nodes",
                    format!("keys among {MACHINE_API_PODS:?}, not `{pod}`"),
                ));
            }
            context.node(&format!(".pod_nodes.{pod}"), node)?;
        }
        if let Some(l) = self.lease {
            l.check(".lease")?;
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, ms) in self.machine_sets.iter().enumerate() {
            if ms.name.is_empty() || !names.insert(&ms.name) {
                return Err(ParamError::at(
                    format!(".machine_sets[{i}].name"),
                    "a unique, non-empty MachineSet name",
                ));
            }
        }
        Ok(())
    }

    fn processes(&self) -> Vec<String> {
        MACHINE_API_PODS.iter().map(|p| format!("{p}-0")).collect()
    }

    fn seed(&self, server: &mut ApiServer) {
        seed(server, self)
    }

    fn images(&self, images: Images, services: &Services) -> Images {
        self::images(images, self, services.cloud)
    }

    /// The machine approver on the controllers' node (the controllers themselves are pods
    /// the kubelets start).
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        let host = sim.host_by_name(&self.node).expect("validated node");
        let config = ManagerConfig {
            identity: approver::NAME.to_string(),
            ..Default::default()
        };
        let approver = Manager::new(config, services.endpoints, vec![approver::controller()]);
        sim.spawn(host, approver::NAME, Proc::new(approver));
    }

    /// cluster-machine-approver approves the nodes that join.
    fn approves_node_certificates(&self) -> bool {
        true
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        crate::invariants::converged(view)
    }

    /// `scale_machine_set`: a patch of the MachineSet's spec.
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let ScaleMachineSet {
                    machine_set,
                    replicas,
                } = a.params()?;
                if !self.machine_sets.iter().any(|m| m.name == machine_set) {
                    return Err(ParamError::at(
                        a.path(".machine_set"),
                        format!(
                            "a MachineSet of controllers.machine_api, not {}",
                            reconsim_world::names::quoted(&machine_set)
                        ),
                    ));
                }
                Ok(ApiOp::Patch {
                    key: ObjectKey::new(MachineSet::KIND, MACHINE_API_NAMESPACE, &machine_set),
                    ops: vec![PatchOp::Spec(Body::new(MachineSet {
                        spec: machine_set_spec(&machine_set, replicas),
                        status: Default::default(),
                    }))],
                    resource_version: None,
                })
            })
            .collect()
    }
}

fn machine_set_spec(name: &str, replicas: u32) -> MachineSetSpec {
    let labels = BTreeMap::from([(MACHINESET_LABEL.to_string(), name.to_string())]);
    MachineSetSpec {
        replicas,
        selector: labels.clone(),
        template_labels: labels,
        delete_policy: Default::default(),
    }
}

/// The MachineSets, and the controllers' Deployments with their first pods already bound
/// to the scenario's node.
fn seed(server: &mut ApiServer, ma: &MachineApiSpec) {
    for ms in &ma.machine_sets {
        server.seed_object(Object::new(
            ObjectMeta::named(MACHINE_API_NAMESPACE, &ms.name),
            Body::new(MachineSet {
                spec: machine_set_spec(&ms.name, ms.replicas),
                status: Default::default(),
            }),
        ));
    }
    // The controllers' pod template (machine-api-operator pkg/operator/sync.go,
    // newPodTemplateSpec; docs/semantics.md 5.10): pinned to masters by nodeSelector,
    // tolerating the masters' NoSchedule taint, and NoExecute not-ready/unreachable for
    // `toleration_seconds`.
    let mut tolerations = vec![Toleration {
        key: TAINT_MASTER.to_string(),
        effect: TaintEffect::NoSchedule,
        toleration_seconds: None,
    }];
    tolerations.extend(
        [TAINT_NOT_READY, TAINT_UNREACHABLE]
            .into_iter()
            .map(|key| Toleration {
                key: key.to_string(),
                effect: TaintEffect::NoExecute,
                toleration_seconds: Some(ma.toleration_seconds),
            }),
    );
    let node_selector = BTreeMap::from([(TAINT_MASTER.to_string(), String::new())]);
    for name in MACHINE_API_PODS {
        let labels = BTreeMap::from([("k8s-app".to_string(), name.to_string())]);
        let template = PodSpec {
            node_name: None,
            image: name.to_string(),
            node_selector: node_selector.clone(),
            tolerations: tolerations.clone(),
            ..Default::default()
        };
        let pods = [(
            format!("{name}-0"),
            ma.pod_nodes.get(name).unwrap_or(&ma.node).clone(),
        )];
        reconsim_family::deployment::seed(
            server,
            MACHINE_API_NAMESPACE,
            name,
            &labels,
            &template,
            &pods,
        );
    }
}

/// The container images of the machine-api pods: a manager per controller, with a Lease
/// each in the `leader-election` variant (machine-api-operator PR #571).
fn images(images: Images, ma: &MachineApiSpec, cloud: ProcId) -> Images {
    let leader = |lease_name: &'static str, default: LeaseSpec| -> Option<LeaderConfig> {
        match ma.variant {
            MachineApiVariant::NoLeaderElection => None,
            MachineApiVariant::LeaderElection => Some(
                ma.lease
                    .unwrap_or(default)
                    .leader(MACHINE_API_NAMESPACE, lease_name),
            ),
        }
    };
    let options = MachineOptions {
        idempotent_create: ma.idempotent_create,
    };
    let ms_leader = leader("machineset-controller-leader", MACHINESET_4_6_LEASE);
    let m_leader = leader("cluster-api-provider-aws-leader", MACHINE_API_4_6_LEASE);
    let manager = |leader: Option<LeaderConfig>,
                   make: fn(MachineOptions, ProcId) -> Box<dyn Reconciler>| {
        move |env: &reconsim_world::kubelet::ContainerEnv| {
            Proc::new(Manager::new(
                ManagerConfig {
                    identity: env.pod_name.clone(),
                    leader: leader.clone(),
                    kubelet: Some(env.kubelet),
                    pod: Some(env.pod_name.clone()),
                    // cmd/machineset/main.go: SyncPeriod 10 min (semantics 4.5).
                    sync_period_ms: Some(MACHINE_API_SYNC_PERIOD_MS),
                    ..Default::default()
                },
                env.endpoints,
                vec![make(options, cloud)],
            ))
        }
    };
    images
        .with(
            MACHINE_API_PODS[0],
            manager(ms_leader, |_, _| crate::machineset::controller()),
        )
        .with(
            MACHINE_API_PODS[1],
            manager(m_leader, |o, cloud| crate::machine::controller(o, cloud)),
        )
}
