//! Building a world from a scenario: hosts, the cluster's processes, its first objects,
//! the controllers under test as pods, and the user's script.
//!
//! Layout: the API server on host `api`; the node lifecycle controller and the workloads
//! controller (Deployments and the scheduler) on `controller-manager`; the cloud on
//! `cloud`; the user's scripted client on `user`; a kubelet per node. The controllers
//! under test run as pods of Deployments, seeded already bound to the scenario's node,
//! so a stopped kubelet leaves them running while their replacements start elsewhere,
//! as in the incident.

use crate::format::{Action, MachineApiSpec, MachineApiVariant, Plan, Scenario};
use reconsim_cloud::{Cloud, CloudConfig, JoinPolicy};
use reconsim_machineapi::kinds::{MachineSet, MachineSetSpec};
use reconsim_machineapi::{MachineController, MachineOptions, MachineSetController};
use reconsim_sim::{ProcId, Sim, SimConfig, TraceMode};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::{Container, Images, Kubelet, KubeletConfig};
use reconsim_world::leader::LeaderConfig;
use reconsim_world::lifecycle::NodeLifecycle;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, Deployment, DeploymentSpec, Object, ObjectKey, ObjectMeta, OwnerReference, Pod, PodSpec,
    PodTemplate, TAINT_NOT_READY, TAINT_UNREACHABLE, TaintEffect, Toleration,
};
use reconsim_world::script::{Script, Step};
use reconsim_world::workloads::Workloads;
use reconsim_world::{Endpoints, Proc};
use std::collections::BTreeMap;

/// The namespace of machine-api objects.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// The machine-api Deployments (and images); their first pods are `<name>-0`.
pub const MACHINE_API_PODS: [&str; 2] = ["machineset-controller", "machine-controller"];
/// An image every world with custom controllers has: a container that idles (pods of
/// users' controllers run it, so the kubelet keeps them Running).
pub const PAUSE_IMAGE: &str = "pause";
/// The label that ties Machines to their MachineSet.
pub const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

/// A built world, ready to run.
pub struct World {
    pub sim: Sim<Proc>,
    pub apiserver: ProcId,
    pub cloud: ProcId,
}

/// Build the world of `scenario` for `seed` with fault `plan`.
pub fn build(scenario: &Scenario, seed: u64, plan: Plan, trace: TraceMode) -> World {
    let mut config = SimConfig::new(seed);
    config.trace = trace;
    config.net.latency_ms_min = scenario.net.latency_ms.lo;
    config.net.latency_ms_max = scenario.net.latency_ms.hi;
    let mut sim: Sim<Proc> = Sim::new(config, plan);
    for h in scenario.hosts() {
        sim.add_host(&h);
    }
    let host = |sim: &Sim<Proc>, name: &str| sim.host_by_name(name).expect("added above");
    // The API server is process 0 and the cloud process 1: both are known before spawn.
    let endpoints = Endpoints {
        apiserver: ProcId(0),
    };
    let cloud = ProcId(1);
    let mut server = ApiServer::new(Default::default());
    let controllers = &scenario.controllers;
    let mut images = match &controllers.machine_api {
        Some(ma) => {
            seed_machine_api(&mut server, ma);
            machine_api_images(ma, cloud)
        }
        None => Images::default(),
    };
    if let Some(k) = &controllers.kcp {
        k.seed(&mut server);
        images = k.images(images);
    }
    if let Some(m) = &controllers.mco {
        m.seed(&mut server);
        images = m.images(images);
    }
    if !controllers.custom.is_empty() {
        crate::extension::seed(scenario, &mut server);
        images = images.with(PAUSE_IMAGE, Container::image(None));
    }
    let apiserver = sim.spawn(host(&sim, "api"), "apiserver", Proc::ApiServer(server));
    let c = &scenario.cloud;
    let cloud_config = CloudConfig {
        boot_ms_min: c.boot_ms.lo,
        boot_ms_max: c.boot_ms.hi,
        describe_lag_ms_min: c.describe_lag_ms.lo,
        describe_lag_ms_max: c.describe_lag_ms.hi,
        join_ms_min: c.join_ms.lo,
        join_ms_max: c.join_ms.hi,
        terminate_ms: c.terminate_ms,
        terminate_ms_max: c.terminate_ms_max,
        join: if c.join {
            JoinPolicy::Always
        } else {
            JoinPolicy::Never
        },
        ..CloudConfig::default()
    };
    let spawned = sim.spawn(
        host(&sim, "cloud"),
        "cloud",
        Proc::Component(Box::new(Cloud::new(
            cloud_config,
            endpoints,
            images.clone(),
        ))),
    );
    assert_eq!((apiserver, spawned), (endpoints.apiserver, cloud));
    let cm = host(&sim, "controller-manager");
    sim.spawn(
        cm,
        "node-lifecycle",
        Proc::Lifecycle(NodeLifecycle::new(Default::default(), endpoints)),
    );
    sim.spawn(
        cm,
        "workloads",
        Proc::Workloads(Workloads::new(Default::default(), endpoints)),
    );
    for (node, role) in scenario
        .topology
        .control_plane_nodes
        .iter()
        .map(|n| (n, "master"))
        .chain(scenario.topology.worker_nodes.iter().map(|n| (n, "worker")))
    {
        let config = KubeletConfig {
            node_name: node.clone(),
            provider_id: None,
            labels: BTreeMap::from([(format!("node-role.kubernetes.io/{role}"), String::new())]),
        };
        sim.spawn(
            host(&sim, node),
            &format!("kubelet/{node}"),
            Proc::Kubelet(Kubelet::new(config, endpoints, images.clone())),
        );
    }
    if let Some(k) = &controllers.kcp {
        k.spawn(&mut sim, endpoints, cloud);
    }
    if let Some(m) = &controllers.mco {
        m.spawn(&mut sim, endpoints);
    }
    crate::extension::spawn(scenario, &mut sim, endpoints);
    let steps = scenario
        .workload
        .iter()
        .map(|a| Step {
            at_ms: a.at_ms,
            op: action_op(scenario, &a.action),
        })
        .collect();
    sim.spawn(
        host(&sim, "user"),
        "user",
        Proc::Script(Script::new(apiserver, steps)),
    );
    World {
        sim,
        apiserver,
        cloud,
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

fn action_op(scenario: &Scenario, action: &Action) -> ApiOp {
    match action {
        Action::ScaleMachineSet {
            machine_set,
            replicas,
        } => ApiOp::Patch {
            key: ObjectKey::new(MachineSet::KIND, MACHINE_API_NAMESPACE, machine_set),
            ops: vec![PatchOp::Spec(Body::new(MachineSet {
                spec: machine_set_spec(machine_set, *replicas),
                status: Default::default(),
            }))],
            resource_version: None,
        },
        Action::ScaleKcp { .. } | Action::UpgradeKcp { .. } => {
            let index = scenario
                .workload
                .iter()
                .position(|w| std::ptr::eq(&w.action, action))
                .expect("an action of the scenario's workload");
            scenario
                .controllers
                .kcp
                .as_ref()
                .expect("validated: KCP actions need controllers.kcp")
                .action_op(scenario, index)
        }
        Action::CreateMachineConfig {
            name,
            pool,
            content,
        } => ApiOp::Create(Box::new(reconsim_mco::model::source_object(
            name,
            pool,
            content.clone(),
        ))),
        Action::Custom { controller, params } => {
            crate::extension::action_op(scenario, controller, params).expect("validated action")
        }
    }
}

/// The MachineSets, and the controllers' Deployments with their first pods already bound
/// to the scenario's node.
fn seed_machine_api(server: &mut ApiServer, ma: &MachineApiSpec) {
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
fn machine_api_images(ma: &MachineApiSpec, cloud: ProcId) -> Images {
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
    Images::default()
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
