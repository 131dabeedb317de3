//! An operator's workloads live (`Extensions::image`): a kube-rs program creates a Pod,
//! the world's scheduler binds it to a worker node, and that node's kubelet runs the
//! image the binary registered, itself a kube-rs program, as the pod's container:
//! - the Pod is bound and Running, its container a process on the node it is bound to,
//!   and the workload's own write (a ConfigMap naming its pod and node) is in the API
//!   server; every seed run twice gives one trace hash;
//! - a Pod of an image no one registered ends Failed, and no container runs for it;
//! - a Deployment's pod of a registered image, its node cut off from the API server, is
//!   evicted once its 300 s toleration runs out and its replacement runs the image on
//!   the other worker (the old container, unreachable, runs on).

use reconsim::check::{Check, View, Violation};
use reconsim::scenario::build::World;
use reconsim::scenario::extension::Extensions;
use reconsim::scenario::faults::generate;
use reconsim::scenario::runner::{Outcome, run_world};
use reconsim::scenario::{Plan, Scenario};
use reconsim::sim::{ProcState, TraceMode};
use reconsim::world::object::ObjectKey;
use reconsim_kube::kinds::kind_of;
use reconsim_kube::{Kinds, KubeBridge};
use serde::Deserialize;
use serde_json::{Value, json};

/// The operator and its workload, written as kube-rs users write them: no reconsim
/// import.
mod user {
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
    use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::Client;
    use kube::api::{Api, ObjectMeta, PostParams};

    /// The workload's Pod, or its Deployment.
    pub const WORKER: &str = "worker";

    /// The ConfigMap the workload of pod `pod` writes when it runs.
    pub fn ran(pod: &str) -> String {
        format!("{pod}-ran")
    }

    /// Whether a create landed, or had landed before (a restarted program's second try).
    fn created<T>(r: Result<T, kube::Error>) -> bool {
        match r {
            Ok(_) => true,
            Err(kube::Error::Api(e)) => e.code == 409,
            Err(_) => false,
        }
    }

    /// The operator: create its workload, a Pod that runs `image` (or, given `replicas`,
    /// a Deployment of such pods), then keep running. On an error it returns, and is
    /// restarted after the kubelet's back-off.
    pub async fn operator(
        client: Client,
        image: String,
        replicas: Option<i32>,
        delete_after_s: Option<u64>,
    ) {
        let spec = PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some(image),
                ..Default::default()
            }],
            ..Default::default()
        };
        let pp = PostParams::default();
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let done = match replicas {
            None => {
                let pod = Pod {
                    metadata: ObjectMeta {
                        name: Some(WORKER.into()),
                        ..Default::default()
                    },
                    spec: Some(spec),
                    ..Default::default()
                };
                created(pods.create(&pp, &pod).await)
            }
            Some(replicas) => {
                let deployments: Api<Deployment> = Api::default_namespaced(client);
                let labels = Some([("app".to_string(), WORKER.to_string())].into());
                let deployment = Deployment {
                    metadata: ObjectMeta {
                        name: Some(WORKER.into()),
                        ..Default::default()
                    },
                    spec: Some(DeploymentSpec {
                        replicas: Some(replicas),
                        selector: LabelSelector {
                            match_labels: labels.clone(),
                            ..Default::default()
                        },
                        template: PodTemplateSpec {
                            metadata: Some(ObjectMeta {
                                labels,
                                ..Default::default()
                            }),
                            spec: Some(spec),
                        },
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                created(deployments.create(&pp, &deployment).await)
            }
        };
        if !done {
            return;
        }
        if let Some(s) = delete_after_s {
            tokio::time::sleep(std::time::Duration::from_secs(s)).await;
            let _ = pods.delete(WORKER, &Default::default()).await;
        }
        std::future::pending::<()>().await;
    }

    /// A workload that does nothing and returns: its container exits at once.
    pub async fn exits(_client: Client) {}

    /// The workload: say that it ran, in which pod and on which node (what the downward
    /// API tells a real container), then keep running.
    pub async fn worker(client: Client, namespace: String, pod: String, node: String) {
        let cms: Api<ConfigMap> = Api::namespaced(client, &namespace);
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(ran(&pod));
        cm.data = Some([("pod".to_string(), pod), ("node".to_string(), node)].into());
        if created(cms.create(&PostParams::default(), &cm).await) {
            std::future::pending::<()>().await;
        }
    }
}

use k8s_openapi::api::core::v1::{ConfigMap, Pod};

const OPERATOR: &str = "operator";
const WORKER_IMAGE: &str = "worker:v1";
const EXITS_IMAGE: &str = "exits:v1";
const NO_FAILED_POD: &str = "no_failed_pod";
const WORKERS: [&str; 2] = ["worker-0", "worker-1"];

/// `controllers.custom[].params` of the operator: the image its Pod runs, and the
/// replicas of a Deployment instead, if any.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    image: String,
    #[serde(default)]
    replicas: Option<i32>,
    /// The operator deletes its Pod this long after creating it.
    #[serde(default)]
    delete_after_s: Option<u64>,
}

/// `no_failed_pod`: no Pod is ever Failed (an unknown image fails its pod).
#[derive(Clone, Debug, Default)]
struct NoFailedPod;

impl Check for NoFailedPod {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let failed = view.api.list(kind_of::<Pod>()).find(|o| {
            reconsim_kube::wire::decode::<Pod>(o)
                .and_then(|p| p.status?.phase)
                .is_some_and(|phase| phase == "Failed")
        })?;
        Some(Violation {
            invariant: NO_FAILED_POD.into(),
            time: view.now,
            message: format!("Pod {} is Failed", failed.meta.name),
            objects: vec![format!("Pod {}", failed.meta.name)],
        })
    }
}

fn extensions() -> Extensions {
    Extensions::new()
        .controller(reconsim_kube::custom(
            OPERATOR,
            Kinds::new(),
            |p: &Params, _, client| {
                user::operator(client, p.image.clone(), p.replicas, p.delete_after_s)
            },
        ))
        .image(WORKER_IMAGE, |env, _services| {
            let (namespace, pod, node) = (
                env.namespace.clone(),
                env.pod_name.clone(),
                env.node_name.clone(),
            );
            let program = reconsim_kube::program(move |client| {
                user::worker(client, namespace.clone(), pod.clone(), node.clone())
            });
            KubeBridge::new(env.endpoints.apiserver, Kinds::new(), program)
                .in_container(env.kubelet)
                .boxed()
        })
        .image(EXITS_IMAGE, |env, _services| {
            let program = reconsim_kube::program(user::exits);
            KubeBridge::new(env.endpoints.apiserver, Kinds::new(), program)
                .in_container(env.kubelet)
                .boxed()
        })
        .invariant(NO_FAILED_POD, || Box::new(NoFailedPod))
        .host(reconsim_kube::intercept::host)
}

/// A cluster of one control-plane node and two workers, the operator on the control
/// plane with these params, running for `duration_ms`.
fn scenario(params: Value, duration_ms: u64) -> Scenario {
    let doc = json!({
        "name": "kube-pods",
        "description": "an operator's Pod runs a registered image",
        "expect": "clean",
        "seeds": 8,
        "duration_ms": duration_ms,
        "net": { "latency_ms": [1, 10] },
        "topology": { "control_plane_nodes": ["master-0"], "worker_nodes": WORKERS },
        "controllers": { "custom": [
            { "name": OPERATOR, "node": "master-0", "params": params }
        ] },
        "invariants": [NO_FAILED_POD],
    });
    let families = reconsim::families::builtin().with(extensions());
    Scenario::from_value("kube_pods", "", &doc, &families).expect("the scenario loads")
}

fn run(s: &Scenario, seed: u64) -> (Outcome, World) {
    run_world(s, seed, generate(s, seed), TraceMode::Hash)
}

/// Every Pod as the operator's client reads it, with its name, by name.
/// The Pods the operator made (not its own, `operator-0`, its entry's Deployment's).
fn pods(world: &World) -> Vec<(String, Pod)> {
    world
        .api()
        .list(kind_of::<Pod>())
        .filter(|o| !o.meta.name.starts_with(&format!("{OPERATOR}-")))
        .map(|o| {
            let pod = reconsim_kube::wire::decode(o).expect("a Pod");
            (o.meta.name.clone(), pod)
        })
        .collect()
}

/// The node a Pod is bound to, if it is.
fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref()?.node_name.clone()
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// The data of the ConfigMap the workload of `pod` wrote, if it did.
fn ran(world: &World, pod: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let key = ObjectKey::new(kind_of::<ConfigMap>(), "default", &user::ran(pod));
    let cm: ConfigMap = reconsim_kube::wire::decode(world.api().get(&key)?)?;
    Some(cm.data.unwrap_or_default())
}

/// The node a process runs on.
fn host_of<'w>(world: &'w World, process: &str) -> Option<&'w str> {
    let p = world.sim.proc_by_name(process)?;
    Some(world.sim.host_name(world.sim.proc_host(p)))
}

#[test]
fn a_pod_a_kube_rs_program_creates_runs_the_registered_image_on_its_node() {
    let s = scenario(json!({ "image": WORKER_IMAGE }), 60_000);
    for seed in 0..s.seeds {
        let (outcome, world) = run(&s, seed);
        assert_eq!(outcome.violation, None, "seed {seed}");
        let pods = pods(&world);
        let [(name, pod)] = &pods[..] else {
            panic!("seed {seed}: one Pod, not {}", pods.len())
        };
        assert_eq!(name, user::WORKER);
        let node = node_of(pod).expect("bound to a node");
        assert!(WORKERS.contains(&node.as_str()), "seed {seed}: on {node}");
        assert_eq!(phase(pod), Some("Running"), "seed {seed}");
        // Its container is a process on the node's host, the image's program.
        assert_eq!(host_of(&world, user::WORKER), Some(node.as_str()));
        let p = world.sim.proc_by_name(user::WORKER).expect("the container");
        assert!(world.sim.actor(p).component::<KubeBridge>().is_some());
        // And the program ran: its ConfigMap `worker-ran` names its pod and the node.
        let data = ran(&world, user::WORKER).expect("the workload's ConfigMap");
        assert_eq!(data.get("pod").map(String::as_str), Some(user::WORKER));
        assert_eq!(data.get("node"), Some(&node), "seed {seed}");
        // Determinism: the same seed again, the same trace.
        let (again, _) = run(&s, seed);
        assert_eq!(again.trace_hash, outcome.trace_hash, "seed {seed}");
    }
}

#[test]
fn a_pod_of_an_image_no_one_registered_fails() {
    let s = scenario(json!({ "image": "missing:v1" }), 60_000);
    let (outcome, world) = run(&s, 0);
    let v = outcome.violation.expect("the Pod fails");
    assert_eq!(v.invariant, NO_FAILED_POD);
    assert_eq!(v.message, "Pod worker is Failed");
    let pods = pods(&world);
    let [(_, pod)] = &pods[..] else {
        panic!("one Pod, not {}", pods.len())
    };
    assert!(node_of(pod).is_some(), "bound");
    assert_eq!(phase(pod), Some("Failed"));
    assert_eq!(host_of(&world, user::WORKER), None, "no container");
    assert_eq!(ran(&world, user::WORKER), None, "nothing ran");
}

#[test]
fn a_deployments_pod_moves_to_the_other_worker_when_its_node_is_cut_off() {
    let s = scenario(json!({ "image": WORKER_IMAGE, "replicas": 1 }), 900_000);
    let seed = 0;
    // Where the pod lands without faults.
    let (_, world) = run_world(&s, seed, Plan::default(), TraceMode::Hash);
    let before = pods(&world);
    let [(first, pod)] = &before[..] else {
        panic!("one Pod, not {}", before.len())
    };
    let lost = node_of(pod).expect("bound");
    assert_eq!(phase(pod), Some("Running"));
    // Its node cut off from the API server from 30 s on: Unknown 40 s later, tainted
    // unreachable, the pod evicted when its 300 s toleration runs out.
    let plan: Plan = serde_json::from_value(json!([{ "at_ms": 30000, "fault": {
        "kind": "partition", "hosts_a": [lost], "hosts_b": ["api"], "mode": "drop" } }]))
    .expect("a plan");
    let (outcome, world) = run_world(&s, seed, plan.clone(), TraceMode::Hash);
    assert_eq!(outcome.violation, None);
    let after = pods(&world);
    let (old, new): (Vec<_>, Vec<_>) = after.iter().partition(|(name, _)| name == first);
    let [(_, old)] = &old[..] else {
        panic!("the first Pod is still there, Terminating")
    };
    assert_eq!(node_of(old).as_deref(), Some(lost.as_str()));
    let [(replacement, new)] = &new[..] else {
        panic!("one replacement, not {}", new.len())
    };
    let other = node_of(new).expect("the replacement is bound");
    assert_ne!(other, lost);
    assert_eq!(phase(new), Some("Running"));
    assert_eq!(host_of(&world, replacement), Some(other.as_str()));
    let data = ran(&world, replacement).expect("the replacement's workload ran");
    assert_eq!(data.get("node"), Some(&other));
    // The first pod's container, on the unreachable node, runs on: no one can stop it.
    assert_eq!(host_of(&world, first), Some(lost.as_str()));
    let Some(deleting) = world
        .api()
        .get(&ObjectKey::new(kind_of::<Pod>(), "default", first))
        .and_then(|o| o.meta.deletion_timestamp)
    else {
        panic!("the first Pod is Terminating")
    };
    assert!(
        deleting.as_ms() >= 30_000 + 40_000 + 300_000,
        "{deleting:?}"
    );
    let (again, _) = run_world(&s, seed, plan, TraceMode::Hash);
    assert_eq!(again.trace_hash, outcome.trace_hash);
}

#[test]
fn a_program_that_returns_is_its_containers_exit_and_the_kubelet_restarts_it() {
    // CrashLoopBackOff: restarts 10 s, then 20 s, then 40 s after each exit, so by
    // 100 s three restarts (at about 10, 30 and 70 s), counted in the pod's status.
    let s = scenario(json!({ "image": EXITS_IMAGE }), 100_000);
    let (outcome, world) = run(&s, 0);
    assert_eq!(outcome.violation, None);
    let key = ObjectKey::new(kind_of::<Pod>(), "default", user::WORKER);
    let pod = world.api().get(&key).expect("the Pod");
    let pod = pod
        .typed::<reconsim::world::object::Pod>()
        .expect("a world Pod");
    assert_eq!(pod.status.restart_count, 3, "{:?}", pod.status);
    let pods = pods(&world);
    let status = pods[0].1.status.as_ref().expect("a status");
    let restarts = status
        .container_statuses
        .as_ref()
        .map(|c| c[0].restart_count);
    assert_eq!(restarts, Some(3), "what kube-rs code reads: {status:?}");
}

#[test]
fn sigterm_ends_a_pods_program_at_once() {
    // The operator deletes its Pod at 20 s: the kubelet sends SIGTERM, the program (no
    // signal handler) ends, and the kubelet confirms the deletion well inside the 30 s
    // grace period.
    let s = scenario(
        json!({ "image": WORKER_IMAGE, "delete_after_s": 20 }),
        40_000,
    );
    let (outcome, world) = run(&s, 0);
    assert_eq!(outcome.violation, None);
    assert!(pods(&world).is_empty(), "the Pod is gone by 40 s");
    let p = world
        .sim
        .proc_by_name(user::WORKER)
        .expect("the container's process");
    assert_eq!(
        world.sim.proc_state(p),
        ProcState::Stopped,
        "its container stopped"
    );
}
