//! Building a world from a scenario: hosts, the cluster's processes, its first objects,
//! the controllers under test as pods, and the user's script.
//!
//! Layout: the API server on host `api`; the node lifecycle controller, the workloads
//! controller (Deployments and the scheduler) and the cloud node lifecycle controller
//! (Nodes of gone instances) on `controller-manager`; the cloud on
//! `cloud`; the user's scripted client on `user`; a kubelet per node. Each family's
//! section ([`reconsim_family::FamilySection`]) then adds its objects, its pods' images
//! and its processes, in the registry's order ([`Scenario::sections`]).

use crate::format::{Plan, Scenario};
use reconsim_cloud::{Cloud, CloudConfig, JoinPolicy, node_lifecycle};
use reconsim_family::{ServiceProcess, Services};
use reconsim_sim::{ProcId, Sim, SimConfig, TraceMode};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::kubelet::{Images, Kubelet, KubeletConfig};
use reconsim_world::lifecycle::NodeLifecycle;
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::{TAINT_MASTER, Taint, TaintEffect};
use reconsim_world::script::{Script, Step};
use reconsim_world::watch_cache::DelayRange;
use reconsim_world::workloads::Workloads;
use reconsim_world::{Endpoints, Proc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An image every world with custom controllers has: a container that idles (pods of
/// users' controllers run it, so the kubelet keeps them Running).
pub const PAUSE_IMAGE: &str = "pause";

/// A built world, ready to run.
pub struct World {
    pub sim: Sim<Proc>,
    pub apiserver: ProcId,
    pub cloud: ProcId,
}

impl World {
    /// The API server's state: what a test or a checker reads of the world at the end.
    pub fn api(&self) -> &ApiServer {
        let Some(api) = self.sim.actor(self.apiserver).component::<ApiServer>() else {
            unreachable!("the world's API server process runs the API server")
        };
        api
    }
}

/// Build the world of `scenario` for `seed` with fault `plan`.
pub fn build(scenario: &Scenario, seed: u64, plan: Plan, trace: TraceMode) -> World {
    build_recording(scenario, seed, plan, trace, false)
}

/// [`build`], keeping the run's decision points if `record` (a search's reference run).
pub fn build_recording(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    record: bool,
) -> World {
    build_keeping(
        scenario,
        seed,
        plan,
        trace,
        Keep {
            decisions: record,
            signature: false,
        },
    )
}

/// What a run keeps of its steps besides its trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Every decision point (`world.sim.decisions()`): a search's reference run.
    pub decisions: bool,
    /// The abstract signature (`world.sim.signature()`): a combined campaign's run.
    pub signature: bool,
}

/// [`build`], keeping what `keep` asks of the run's steps.
pub fn build_keeping(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    keep: Keep,
) -> World {
    let mut config = SimConfig::new(seed);
    config.trace = trace;
    config.record_decisions = keep.decisions;
    config.record_signature = keep.signature;
    config.net.latency_ms_min = scenario.net.latency_ms.lo;
    config.net.latency_ms_max = scenario.net.latency_ms.hi;
    let operations = scenario.operations_played(&plan);
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
    // The sections' own services come next (2, 3, ...), so every image knows them.
    let own: Vec<ServiceProcess> = scenario.sections().flat_map(|s| s.services()).collect();
    let named = own
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), ProcId(2 + i as u32)))
        .collect();
    let services = Services {
        endpoints,
        cloud,
        named: Arc::new(named),
    };
    let defaults = ApiServerConfig::default();
    let mut server = ApiServer::new(ApiServerConfig {
        watch_delay_ms: match scenario.apiserver.watch_delay_ms {
            Some(r) => Some(DelayRange {
                lo_ms: r.lo,
                hi_ms: r.hi,
            }),
            None => defaults.watch_delay_ms,
        },
        ..defaults
    });
    let mut images = Images::default();
    for section in scenario.sections() {
        section.seed(&mut server);
        images = section.images(images, &services);
    }
    let apiserver = sim.spawn(host(&sim, "api"), "apiserver", Proc::new(server));
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
        tls_bootstrap: scenario
            .sections()
            .any(|section| section.approves_node_certificates()),
        subnet_size: c.subnet_size.unwrap_or(reconsim_cloud::SUBNET_SIZE_MAX),
        ..CloudConfig::default()
    };
    let spawned = sim.spawn(
        host(&sim, "cloud"),
        "cloud",
        Proc::new(Cloud::new(cloud_config, endpoints, images.clone())),
    );
    assert_eq!((apiserver, spawned), (endpoints.apiserver, cloud));
    for s in &own {
        let process = sim.spawn(
            host(&sim, &s.name),
            &s.name,
            Proc::from((s.make)(&services)),
        );
        assert_eq!(services.service(&s.name), Some(process));
    }
    let cm = host(&sim, "controller-manager");
    sim.spawn(
        cm,
        reconsim_world::lifecycle::NAME,
        Proc::new(NodeLifecycle::new(Default::default(), endpoints)),
    );
    sim.spawn(
        cm,
        "workloads",
        Proc::new(Workloads::new(Default::default(), endpoints)),
    );
    if scenario.cloud.node_lifecycle {
        // The cloud provider's half of kube-controller-manager: Nodes of gone instances go.
        let config = ManagerConfig {
            identity: node_lifecycle::NAME.to_string(),
            ..Default::default()
        };
        sim.spawn(
            cm,
            node_lifecycle::NAME,
            Proc::new(Manager::new(
                config,
                endpoints,
                vec![node_lifecycle::controller(cloud)],
            )),
        );
    }
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
            // Control-plane nodes keep ordinary pods off (OpenShift's masters and
            // kubeadm's control plane carry this taint; docs/semantics.md 5.10).
            taints: if role == "master" {
                vec![Taint {
                    key: TAINT_MASTER.to_string(),
                    effect: TaintEffect::NoSchedule,
                    time_added: None,
                }]
            } else {
                Vec::new()
            },
            // Installed with the cluster: their certificates were approved then.
            tls_bootstrap: false,
        };
        sim.spawn(
            host(&sim, node),
            &format!("kubelet/{node}"),
            Proc::new(Kubelet::new(config, endpoints, images.clone())),
        );
    }
    for section in scenario.sections() {
        section.spawn(&mut sim, &services);
    }
    let ops = scenario.workload_ops().expect("validated workload");
    let steps = scenario
        .workload
        .iter()
        .zip(ops)
        .map(|(a, op)| Step { at_ms: a.at_ms, op })
        .collect();
    sim.spawn(
        host(&sim, "user"),
        "user",
        Proc::new(Script::new(apiserver, steps).operations(operations)),
    );
    World {
        sim,
        apiserver,
        cloud,
    }
}
