//! The machine-api family's section of a scenario (seed incident 1): its MachineSets, and
//! the MachineSet and Machine controllers as pods of Deployments, seeded already bound
//! to the scenario's node, so a stopped kubelet leaves them running while their
//! replacements start elsewhere, as in the incident.

use crate::family::{FamilySection, Services};
use crate::format::{Action, MachineApiSpec, MachineApiVariant, Scenario};
use reconsim_check::View;
use reconsim_machineapi::kinds::{MachineSet, MachineSetSpec};
use reconsim_machineapi::{MachineController, MachineOptions, MachineSetController};
use reconsim_sim::{ProcId, Sim};
use reconsim_world::Proc;
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::leader::LeaderConfig;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::{
    Body, Deployment, DeploymentSpec, Object, ObjectKey, ObjectMeta, OwnerReference, Pod, PodSpec,
    PodTemplate, Resource, TAINT_NOT_READY, TAINT_UNREACHABLE, TaintEffect, Toleration,
};
use std::collections::BTreeMap;

/// The namespace of machine-api objects.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// The machine-api Deployments (and images); their first pods are `<name>-0`.
pub const MACHINE_API_PODS: [&str; 2] = ["machineset-controller", "machine-controller"];
/// The label that ties Machines to their MachineSet.
pub const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

impl FamilySection for MachineApiSpec {
    fn validate(&self, scenario: &Scenario) -> Result<(), (String, String)> {
        let err = |path: &str, msg: String| Err((path.to_string(), msg));
        if !scenario.nodes().any(|n| *n == self.node) {
            return err(
                ".controllers.machine_api.node",
                format!("one of the topology's nodes, not `{}`", self.node),
            );
        }
        for (pod, node) in &self.pod_nodes {
            if !MACHINE_API_PODS.contains(&pod.as_str()) {
                return err(
                    ".controllers.machine_api.pod_nodes",
                    format!("keys among {:?}, not `{pod}`", MACHINE_API_PODS),
                );
            }
            if !scenario.nodes().any(|n| n == node) {
                return err(
                    &format!(".controllers.machine_api.pod_nodes.{pod}"),
                    format!("one of the topology's nodes, not `{node}`"),
                );
            }
        }
        if let Some(l) = self.lease
            && !(l.lease_duration_ms > l.renew_deadline_ms
                && l.renew_deadline_ms * 10 > l.retry_period_ms * 12)
        {
            return err(
                ".controllers.machine_api.lease",
                "lease_duration_ms > renew_deadline_ms > 1.2 * retry_period_ms (client-go's rule)"
                    .into(),
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, ms) in self.machine_sets.iter().enumerate() {
            if ms.name.is_empty() || !names.insert(&ms.name) {
                return err(
                    &format!(".controllers.machine_api.machine_sets[{i}].name"),
                    "a unique, non-empty MachineSet name".into(),
                );
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

    /// Nothing: its controllers are pods the kubelets start.
    fn spawn(&self, _: &mut Sim<Proc>, _: &Services) {}

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        reconsim_machineapi::invariants::converged(view)
    }

    /// `scale_machine_set`: a patch of the MachineSet's spec.
    fn action(&self, scenario: &Scenario, index: usize) -> Option<Result<ApiOp, (String, String)>> {
        let Action::ScaleMachineSet {
            machine_set,
            replicas,
        } = &scenario.workload[index].action
        else {
            return None;
        };
        if !self.machine_sets.iter().any(|m| &m.name == machine_set) {
            return Some(Err((
                format!(".workload[{index}].machine_set"),
                format!("a MachineSet of controllers.machine_api, not `{machine_set}`"),
            )));
        }
        Some(Ok(ApiOp::Patch {
            key: ObjectKey::new(MachineSet::KIND, MACHINE_API_NAMESPACE, machine_set),
            ops: vec![PatchOp::Spec(Body::new(MachineSet {
                spec: machine_set_spec(machine_set, *replicas),
                status: Default::default(),
            }))],
            resource_version: None,
        }))
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
    let tolerations: Vec<Toleration> = [TAINT_UNREACHABLE, TAINT_NOT_READY]
        .into_iter()
        .map(|key| Toleration {
            key: key.to_string(),
            effect: TaintEffect::NoExecute,
            toleration_seconds: Some(ma.toleration_seconds),
        })
        .collect();
    for name in MACHINE_API_PODS {
        let labels = BTreeMap::from([("k8s-app".to_string(), name.to_string())]);
        let template = PodSpec {
            node_name: None,
            image: name.to_string(),
            tolerations: tolerations.clone(),
        };
        let mut meta = ObjectMeta::named(MACHINE_API_NAMESPACE, name);
        meta.labels = labels.clone();
        let deployment = server.seed_object(Object::new(
            meta,
            Body::new(Deployment {
                spec: DeploymentSpec {
                    replicas: 1,
                    selector: labels.clone(),
                    template: PodTemplate {
                        labels: labels.clone(),
                        spec: template.clone(),
                    },
                },
                status: Default::default(),
            }),
        ));
        let mut meta = ObjectMeta::named(MACHINE_API_NAMESPACE, &format!("{name}-0"));
        meta.labels = labels;
        meta.owner_references = vec![OwnerReference {
            kind: Deployment::KIND,
            name: name.to_string(),
            uid: deployment.meta.uid,
            controller: true,
        }];
        server.seed_object(Object::new(
            meta,
            Body::new(Pod {
                spec: PodSpec {
                    node_name: Some(ma.pod_nodes.get(name).unwrap_or(&ma.node).clone()),
                    ..template
                },
                status: Default::default(),
            }),
        ));
    }
}

/// The container images of the machine-api pods: a manager per controller, with a Lease
/// each in the `leader-election` variant (machine-api-operator PR #571).
fn images(images: Images, ma: &MachineApiSpec, cloud: ProcId) -> Images {
    let leader = |lease_name: &'static str| -> Option<LeaderConfig> {
        match ma.variant {
            MachineApiVariant::NoLeaderElection => None,
            MachineApiVariant::LeaderElection => Some(match ma.lease {
                Some(l) => LeaderConfig::new(
                    MACHINE_API_NAMESPACE,
                    lease_name,
                    l.lease_duration_ms,
                    l.renew_deadline_ms,
                    l.retry_period_ms,
                ),
                None => LeaderConfig::machine_api_4_6(MACHINE_API_NAMESPACE, lease_name),
            }),
        }
    };
    let options = MachineOptions {
        idempotent_create: ma.idempotent_create,
    };
    let ms_leader = leader("machineset-controller-leader");
    let m_leader = leader("cluster-api-provider-aws-leader");
    let manager = |leader: Option<LeaderConfig>,
                   make: fn(MachineOptions, ProcId) -> Box<dyn Reconciler>| {
        move |env: &reconsim_world::kubelet::ContainerEnv| {
            Proc::Manager(Manager::new(
                ManagerConfig {
                    identity: env.pod_name.clone(),
                    leader: leader.clone(),
                    kubelet: Some(env.kubelet),
                    pod: Some(env.pod_name.clone()),
                },
                env.endpoints,
                vec![make(options, cloud)],
            ))
        }
    };
    images
        .with(
            MACHINE_API_PODS[0],
            manager(ms_leader, |_, _| Box::new(MachineSetController::new())),
        )
        .with(
            MACHINE_API_PODS[1],
            manager(m_leader, |o, cloud| {
                Box::new(MachineController::new(o, cloud))
            }),
        )
}
