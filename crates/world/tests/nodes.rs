//! Nodes, kubelets and pods: registration and heartbeats, the node lifecycle controller
//! (Unknown, taints, eviction), the Deployment controller and the scheduler, containers
//! as processes (docs/semantics.md section 5).

use reconsim_sim::{Fault, FaultPlan, ProcId, ProcState, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::api::{ApiError, ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::{Container, Images, Kubelet, KubeletConfig, NODE_LEASE_NAMESPACE};
use reconsim_world::lifecycle::{NodeLifecycle, eviction_time};
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, CertificateSigningRequest, ConditionStatus, CsrStatus, Deployment, DeploymentSpec, Lease,
    NODE_BOOTSTRAPPER, Node, NodeSpec, NodeStatus, Object, ObjectKey, ObjectMeta, Pod, PodPhase,
    PodSpec, PodTemplate, TAINT_MASTER, TAINT_NOT_READY, TAINT_UNREACHABLE, Taint, TaintEffect,
    Toleration,
};
use reconsim_world::script::{Script, Step};
use reconsim_world::workloads::Workloads;
use reconsim_world::{Endpoints, Proc, WorldFault};
use std::collections::BTreeMap;
use std::sync::Arc;

const NS: &str = "default";

// ----- the cluster ----------------------------------------------------------------------

struct Cluster {
    sim: Sim<Proc>,
    api: ProcId,
    kubelets: BTreeMap<String, ProcId>,
}

/// Images of the test cluster: `idle` does nothing; `crash` exits 1 s after it starts.
fn images() -> Images {
    Images::default()
        .with("idle", |env| {
            Proc::new(Script::new(env.endpoints.apiserver, vec![]))
        })
        .with("crash", Container::image(Some(1_000)))
}

fn provider_id(node: &str) -> Option<String> {
    Some(format!("aws:///us-east-1a/i-{node}"))
}

/// An API server, the control plane (node lifecycle controller, workloads) on host
/// `control-plane`, a kubelet `kubelet/<node>` on host `<node>` per node, and a user
/// script. `seeded` objects are in the store from the start.
fn cluster(
    nodes: &[&str],
    seeded: Vec<Object>,
    steps: Vec<Step>,
    faults: Vec<TimedFault<WorldFault>>,
) -> Cluster {
    let nodes: Vec<(&str, Vec<Taint>)> = nodes.iter().map(|n| (*n, Vec::new())).collect();
    cluster_with(&nodes, false, seeded, steps, faults)
}

/// [`cluster`] with nodes that register with taints, and that bootstrap TLS first.
fn cluster_with(
    nodes: &[(&str, Vec<Taint>)],
    tls_bootstrap: bool,
    seeded: Vec<Object>,
    steps: Vec<Step>,
    faults: Vec<TimedFault<WorldFault>>,
) -> Cluster {
    let mut sim = Sim::new(SimConfig::new(7), FaultPlan::new(faults));
    let api_host = sim.add_host("apiserver");
    let mut server = ApiServer::new(Default::default());
    for o in seeded {
        server.seed_object(o);
    }
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    // No cloud in these tests.
    let endpoints = Endpoints { apiserver: api };
    let cp = sim.add_host("control-plane");
    sim.spawn(
        cp,
        "node-lifecycle",
        Proc::new(NodeLifecycle::new(Default::default(), endpoints)),
    );
    sim.spawn(
        cp,
        "workloads",
        Proc::new(Workloads::new(Default::default(), endpoints)),
    );
    let mut kubelets = BTreeMap::new();
    for (n, taints) in nodes {
        let n = *n;
        let host = sim.add_host(n);
        let config = KubeletConfig {
            node_name: n.to_string(),
            provider_id: provider_id(n),
            labels: [("kubernetes.io/hostname".to_string(), n.to_string())].into(),
            taints: taints.clone(),
            tls_bootstrap,
        };
        let pid = sim.spawn(
            host,
            &format!("kubelet/{n}"),
            Proc::new(Kubelet::new(config, endpoints, images())),
        );
        kubelets.insert(n.to_string(), pid);
    }
    let user = sim.add_host("user");
    sim.spawn(user, "user", Proc::new(Script::new(api, steps)));
    Cluster { sim, api, kubelets }
}

impl Cluster {
    fn run_to_s(&mut self, s: u64) {
        self.sim.run_until(SimTime::from_secs(s));
    }

    fn run_to_ms(&mut self, ms: u64) {
        self.sim.run_until(SimTime::from_ms(ms));
    }

    fn server(&self) -> &ApiServer {
        let p = self.sim.actor(self.api);
        p.component::<ApiServer>()
            .unwrap_or_else(|| panic!("not the API server: {p:?}"))
    }

    fn kubelet(&self, node: &str) -> &Kubelet {
        let p = self.sim.actor(self.kubelets[node]);
        p.component::<Kubelet>()
            .unwrap_or_else(|| panic!("not a kubelet: {p:?}"))
    }

    fn node_obj(&self, name: &str) -> Option<Arc<Object>> {
        self.server()
            .get(&ObjectKey::new(Node::KIND, "", name))
            .cloned()
    }

    fn node(&self, name: &str) -> Node {
        self.node_obj(name)
            .unwrap_or_else(|| panic!("node {name} missing"))
            .typed::<Node>()
            .cloned()
            .expect("a Node")
    }

    fn lease(&self, node: &str) -> Lease {
        self.server()
            .get(&ObjectKey::new(Lease::KIND, NODE_LEASE_NAMESPACE, node))
            .unwrap_or_else(|| panic!("lease of {node} missing"))
            .typed::<Lease>()
            .cloned()
            .expect("a Lease")
    }

    fn pod_obj(&self, name: &str) -> Option<Arc<Object>> {
        self.server()
            .get(&ObjectKey::new(Pod::KIND, NS, name))
            .cloned()
    }

    fn pod(&self, name: &str) -> Pod {
        self.pod_obj(name)
            .unwrap_or_else(|| panic!("pod {name} missing"))
            .typed::<Pod>()
            .cloned()
            .expect("a Pod")
    }

    /// Pods owned by Deployment `name`, in name order.
    fn pods_of(&self, name: &str) -> Vec<Arc<Object>> {
        self.server()
            .list(Pod::KIND)
            .filter(|p| p.meta.controller_ref().is_some_and(|r| r.name == name))
            .cloned()
            .collect()
    }

    fn workloads(&self) -> &Workloads {
        let p = self.sim.actor(self.proc("workloads").expect("spawned"));
        p.component::<Workloads>()
            .unwrap_or_else(|| panic!("not the workloads controller: {p:?}"))
    }

    fn script(&self) -> &Script {
        let p = self.sim.actor(self.proc("user").expect("spawned"));
        p.component::<Script>()
            .unwrap_or_else(|| panic!("not the user's script: {p:?}"))
    }

    fn proc(&self, name: &str) -> Option<ProcId> {
        self.sim.proc_by_name(name)
    }

    fn proc_running(&self, name: &str) -> bool {
        self.proc(name)
            .is_some_and(|p| self.sim.proc_state(p) == ProcState::Running)
    }
}

// ----- objects ----------------------------------------------------------------------------

fn toleration(key: &str, effect: TaintEffect, seconds: Option<u64>) -> Toleration {
    Toleration {
        key: key.to_string(),
        effect,
        toleration_seconds: seconds,
    }
}

/// What machine-api pods carry: unreachable and not-ready tolerated for 120 s.
fn tolerate_unreachable(seconds: u64) -> Vec<Toleration> {
    vec![
        toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, Some(seconds)),
        toleration(TAINT_NOT_READY, TaintEffect::NoExecute, Some(seconds)),
    ]
}

fn pod(name: &str, image: &str, tolerations: Vec<Toleration>) -> Object {
    Object::new(
        ObjectMeta::named(NS, name),
        Body::new(Pod {
            spec: PodSpec {
                node_name: None,
                image: image.to_string(),
                tolerations,
                ..Default::default()
            },
            ..Default::default()
        }),
    )
}

fn deployment(name: &str, replicas: u32, tolerations: Vec<Toleration>) -> Object {
    let labels: BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    Object::new(
        ObjectMeta::named(NS, name),
        Body::new(Deployment {
            spec: DeploymentSpec {
                replicas,
                selector: labels.clone(),
                template: PodTemplate {
                    labels,
                    spec: PodSpec {
                        node_name: None,
                        image: "idle".to_string(),
                        tolerations,
                        ..Default::default()
                    },
                },
                ..Default::default()
            },
            ..Default::default()
        }),
    )
}

fn step(at_ms: u64, op: ApiOp) -> Step {
    Step { at_ms, op }
}

fn create(at_ms: u64, o: Object) -> Step {
    step(at_ms, ApiOp::Create(Box::new(o)))
}

/// Set a node's spec (as `kubectl cordon` / `kubectl taint` would).
fn set_node_spec(at_ms: u64, node: &str, taints: Vec<Taint>, unschedulable: bool) -> Step {
    let spec = Node {
        spec: NodeSpec {
            provider_id: provider_id(node),
            taints,
            unschedulable,
            ..Default::default()
        },
        ..Default::default()
    };
    step(
        at_ms,
        ApiOp::Patch {
            key: ObjectKey::new(Node::KIND, "", node),
            ops: vec![PatchOp::Spec(Body::new(spec))],
            resource_version: None,
        },
    )
}

fn kubelet_stop(node: &str, at_ms: u64, duration_ms: u64) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms,
        duration_ms: Some(duration_ms),
        fault: Fault::Inject {
            process: format!("kubelet/{node}"),
            fault: WorldFault::KubeletStop,
        },
        on: None,
    }
}

// ----- registration and heartbeats ---------------------------------------------------------

#[test]
fn a_bootstrapping_kubelet_registers_only_once_its_csr_is_approved() {
    let csrs = |c: &Cluster| -> Vec<Arc<Object>> {
        c.server()
            .list(CertificateSigningRequest::KIND)
            .cloned()
            .collect()
    };
    let mut c = cluster_with(&[("w0", vec![])], true, vec![], vec![], vec![]);
    // Unapproved: no Node, no heartbeat, and a new CSR every 15 minutes.
    c.run_to_s(40 * 60);
    assert!(c.node_obj("w0").is_none(), "no Node before approval");
    assert_eq!(c.kubelet("w0").heartbeats(), 0);
    assert_eq!(csrs(&c).len(), 3, "at 0, 15 and 30 minutes");
    let csr = &csrs(&c)[0];
    let spec = &csr.typed::<CertificateSigningRequest>().unwrap().spec;
    assert_eq!(spec.node_name, "w0");
    assert_eq!(spec.username, NODE_BOOTSTRAPPER);
    // Approve the newest (what the kubelet waits on): the node registers within a poll.
    let newest = csrs(&c)
        .into_iter()
        .max_by_key(|o| o.meta.creation_timestamp)
        .unwrap();
    let approve = ApiOp::Patch {
        key: newest.key(),
        ops: vec![PatchOp::Status(Body::new(CertificateSigningRequest {
            status: CsrStatus {
                approved: true,
                ..Default::default()
            },
            ..Default::default()
        }))],
        resource_version: None,
    };
    let steps = vec![step(0, approve)];
    let user = c.sim.host_by_name("user").unwrap();
    c.sim
        .spawn(user, "approver", Proc::new(Script::new(c.api, steps)));
    c.run_to_s(40 * 60 + 10);
    assert!(c.kubelet("w0").certified());
    assert!(c.node_obj("w0").is_some(), "registered once approved");
    c.run_to_s(40 * 60 + 60);
    assert!(c.kubelet("w0").heartbeats() > 0);
    assert_eq!(c.kubelet("w0").csrs(), 3, "no CSR after the approval");
}

#[test]
fn node_registers_and_stays_ready_with_heartbeats() {
    let mut c = cluster(&["w0", "w1"], vec![], vec![], vec![]);
    c.run_to_s(300);
    for n in ["w0", "w1"] {
        let obj = c.node_obj(n).expect("registered");
        let node = obj.typed::<Node>().expect("a Node");
        assert_eq!(node.spec.provider_id, provider_id(n));
        assert_eq!(
            obj.meta
                .labels
                .get("kubernetes.io/hostname")
                .map(String::as_str),
            Some(n)
        );
        assert_eq!(node.status.ready, ConditionStatus::True, "{n} stayed Ready");
        // Ready never changed since registration (no Unknown in between).
        assert!(
            node.status.ready_since.unwrap() < SimTime::from_secs(1),
            "{node:?}"
        );
        assert!(node.spec.taints.is_empty(), "{node:?}");
        let lease = c.lease(n);
        assert_eq!(lease.holder_identity.as_deref(), Some(n));
        assert_eq!(lease.lease_duration_seconds, 40);
        let renewed = lease.renew_time.unwrap();
        assert!(
            renewed >= SimTime::from_ms(289_000),
            "renewed every ~10 s: {renewed}"
        );
        // One create plus a renew every 10-10.4 s.
        let beats = c.kubelet(n).heartbeats();
        assert!((28..=31).contains(&beats), "{beats} heartbeats in 300 s");
    }
}

// ----- a stopped kubelet: Unknown, taint, eviction, replacement --------------------------

/// w0 runs the Deployment's only pod (w1, w2 are cordoned until 30 s); its kubelet stops
/// at 60 s and comes back at 460 s.
fn stopped_kubelet_cluster() -> Cluster {
    let steps = vec![
        set_node_spec(1_000, "w1", vec![], true),
        set_node_spec(1_000, "w2", vec![], true),
        create(2_000, deployment("op", 1, tolerate_unreachable(120))),
        set_node_spec(30_000, "w1", vec![], false),
        set_node_spec(30_000, "w2", vec![], false),
    ];
    cluster(
        &["w0", "w1", "w2"],
        vec![],
        steps,
        vec![kubelet_stop("w0", 60_000, 400_000)],
    )
}

fn unreachable_taint(node: &Node) -> Option<Taint> {
    node.spec
        .taints
        .iter()
        .find(|t| t.key == TAINT_UNREACHABLE && t.effect == TaintEffect::NoExecute)
        .cloned()
}

#[test]
fn silent_node_goes_unknown_and_tainted_after_the_grace_period() {
    let mut c = stopped_kubelet_cluster();
    c.run_to_s(59);
    assert_eq!(c.node("w0").status.ready, ConditionStatus::True);
    // Not before: 29 s after the stop, the last heartbeat is at most ~39.4 s old.
    c.run_to_s(89);
    assert_eq!(
        c.node("w0").status.ready,
        ConditionStatus::True,
        "too early"
    );
    assert!(unreachable_taint(&c.node("w0")).is_none());
    let mut seen = None;
    for s in 90..=106 {
        c.run_to_s(s);
        if c.node("w0").status.ready == ConditionStatus::Unknown {
            seen = Some(s);
            break;
        }
    }
    assert!(seen.is_some(), "w0 never went Unknown");
    let node = c.node("w0");
    let last_beat = c.lease("w0").renew_time.unwrap();
    let unknown_at = node.status.ready_since.unwrap();
    let silence = unknown_at.since(last_beat);
    assert!(
        (40_000..=45_100).contains(&silence),
        "Unknown {silence} ms after the last heartbeat (grace 40 s + monitor period 5 s)"
    );
    let taint = unreachable_taint(&node).expect("unreachable taint with Unknown");
    assert_eq!(taint.time_added, Some(unknown_at));
    // The other nodes are fine.
    for n in ["w1", "w2"] {
        assert_eq!(c.node(n).status.ready, ConditionStatus::True);
        assert!(c.node(n).spec.taints.is_empty());
    }
}

#[test]
fn evicted_pod_is_replaced_on_another_node_while_the_old_container_runs() {
    let mut c = stopped_kubelet_cluster();
    c.run_to_s(50);
    let pods = c.pods_of("op");
    assert_eq!(pods.len(), 1);
    let old = pods[0].meta.name.clone();
    let old_uid = pods[0].meta.uid;
    assert_eq!(c.pod(&old).spec.node_name.as_deref(), Some("w0"));
    assert_eq!(c.pod(&old).status.phase, PodPhase::Running);
    let old_proc = c.proc(&old).expect("the container runs");
    assert_eq!(c.sim.proc_host(old_proc), c.sim.host_by_name("w0").unwrap());
    let node_uid = c.node_obj("w0").unwrap().meta.uid;

    // Wait for the taint, then for the eviction: 120 s after the taint, not before.
    // (The eviction is seen as the pod getting its deletionTimestamp, polled every 100 ms;
    // the timestamp itself is the end of the grace period.)
    let mut taint_at = None;
    let mut evicted_at = None;
    for ms in (60_000..=300_000).step_by(100) {
        c.run_to_ms(ms);
        if taint_at.is_none() {
            taint_at = unreachable_taint(&c.node("w0")).and_then(|t| t.time_added);
        }
        if c.pod_obj(&old).is_some_and(|p| p.meta.is_deleting()) {
            evicted_at = Some(SimTime::from_ms(ms));
            break;
        }
    }
    let taint_at = taint_at.expect("tainted");
    let evicted_at = evicted_at.expect("evicted");
    let waited = evicted_at.since(taint_at);
    assert!(
        (120_000..=120_200).contains(&waited),
        "evicted {waited} ms after the taint"
    );

    // The replacement: a new pod on another Ready node, a new process; the old container
    // still runs on the silent node, and the old pod stays Terminating.
    c.run_to_ms(evicted_at.as_ms() + 5_000);
    let active: Vec<Arc<Object>> = c
        .pods_of("op")
        .into_iter()
        .filter(|p| !p.meta.is_deleting())
        .collect();
    assert_eq!(active.len(), 1, "exactly one replacement");
    let new = active[0].meta.name.clone();
    assert_ne!(new, old);
    let new_pod = c.pod(&new);
    let new_node = new_pod.spec.node_name.clone().expect("scheduled");
    assert!(
        new_node == "w1" || new_node == "w2",
        "scheduled on {new_node}"
    );
    assert_eq!(new_pod.status.phase, PodPhase::Running);
    let new_proc = c.proc(&new).expect("replacement container");
    assert_ne!(new_proc, old_proc);
    assert_eq!(
        c.sim.proc_host(new_proc),
        c.sim.host_by_name(&new_node).unwrap()
    );
    assert_eq!(c.sim.proc_state(new_proc), ProcState::Running);
    assert_eq!(
        c.sim.proc_state(old_proc),
        ProcState::Running,
        "a stopped kubelet kills nothing"
    );

    c.run_to_s(459);
    let stuck = c
        .pod_obj(&old)
        .expect("old pod still there while its kubelet is down");
    assert_eq!(stuck.meta.uid, old_uid);
    assert!(stuck.meta.is_deleting(), "Terminating");
    assert_eq!(c.sim.proc_state(old_proc), ProcState::Running);
    assert!(c.kubelet("w0").is_stopped());

    // The kubelet returns: it kills the old container and confirms the deletion; the
    // node is Ready again, untainted, the same Node object.
    c.run_to_s(475);
    assert!(!c.kubelet("w0").is_stopped());
    assert!(c.pod_obj(&old).is_none(), "old pod removed");
    assert_eq!(c.sim.proc_state(old_proc), ProcState::Stopped);
    assert_eq!(c.sim.proc_state(new_proc), ProcState::Running);
    let node = c.node("w0");
    assert_eq!(node.status.ready, ConditionStatus::True);
    assert!(
        unreachable_taint(&node).is_none(),
        "taint removed: {node:?}"
    );
    assert_eq!(
        c.node_obj("w0").unwrap().meta.uid,
        node_uid,
        "kept, not re-created"
    );
    assert_eq!(c.pods_of("op").len(), 1);
}

#[test]
fn intolerant_pod_is_evicted_as_soon_as_the_node_is_tainted() {
    // tolerationSeconds 0: DefaultTolerationSeconds leaves a pod's own toleration alone.
    let tolerations = vec![
        toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, Some(0)),
        toleration(TAINT_NOT_READY, TaintEffect::NoExecute, Some(0)),
    ];
    let steps = vec![create(1_000, pod("plain", "idle", tolerations))];
    let mut c = cluster(
        &["w0"],
        vec![],
        steps,
        vec![kubelet_stop("w0", 20_000, 200_000)],
    );
    c.run_to_s(15);
    assert_eq!(c.pod("plain").status.phase, PodPhase::Running);
    let mut evicted_at = None;
    for ms in (20_000..=120_000).step_by(100) {
        c.run_to_ms(ms);
        if c.pod_obj("plain").is_some_and(|p| p.meta.is_deleting()) {
            evicted_at = Some(SimTime::from_ms(ms));
            break;
        }
    }
    let evicted_at = evicted_at.expect("evicted");
    let taint = unreachable_taint(&c.node("w0")).expect("tainted");
    assert!(
        evicted_at.since(taint.time_added.unwrap()) <= 100,
        "evicted at once"
    );
    assert!(
        c.pod_obj("plain").is_some(),
        "Terminating while its kubelet is down"
    );
}

#[test]
fn a_pod_created_without_tolerations_is_given_the_default_300_s() {
    let steps = vec![create(1_000, pod("plain", "idle", vec![]))];
    let mut c = cluster(
        &["w0"],
        vec![],
        steps,
        vec![kubelet_stop("w0", 20_000, 600_000)],
    );
    c.run_to_s(15);
    let tolerations = c.pod("plain").spec.tolerations;
    assert_eq!(
        tolerations,
        vec![
            toleration(TAINT_NOT_READY, TaintEffect::NoExecute, Some(300)),
            toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, Some(300)),
        ],
        "DefaultTolerationSeconds admission"
    );
    let mut evicted_at = None;
    for ms in (20_000..=600_000).step_by(500) {
        c.run_to_ms(ms);
        if c.pod_obj("plain").is_some_and(|p| p.meta.is_deleting()) {
            evicted_at = Some(SimTime::from_ms(ms));
            break;
        }
    }
    let evicted_at = evicted_at.expect("evicted");
    let taint = unreachable_taint(&c.node("w0")).expect("tainted");
    let after_ms = evicted_at.since(taint.time_added.unwrap());
    assert!(
        (300_000..=300_000 + 5_500).contains(&after_ms),
        "evicted 300 s after the taint (+ a monitor period), not {after_ms} ms"
    );
}

// ----- pods on healthy nodes ---------------------------------------------------------------

#[test]
fn deleted_pod_on_a_healthy_node_has_its_container_stopped() {
    let steps = vec![
        create(1_000, pod("web", "idle", vec![])),
        step(
            20_000,
            ApiOp::Delete {
                key: ObjectKey::new(Pod::KIND, NS, "web"),
                uid: None,
                grace_period_seconds: None,
                options: Default::default(),
            },
        ),
    ];
    let mut c = cluster(&["w0"], vec![], steps, vec![]);
    c.run_to_s(19);
    assert_eq!(c.pod("web").status.phase, PodPhase::Running);
    assert_eq!(c.pod("web").spec.node_name.as_deref(), Some("w0"));
    assert!(c.proc_running("web"));
    c.run_to_ms(20_100);
    assert!(c.pod_obj("web").is_none(), "kubelet confirmed the deletion");
    assert_eq!(c.sim.proc_state(c.proc("web").unwrap()), ProcState::Stopped);
}

#[test]
fn unknown_image_fails_the_pod() {
    let steps = vec![create(1_000, pod("typo", "no-such-image", vec![]))];
    let mut c = cluster(&["w0"], vec![], steps, vec![]);
    c.run_to_s(10);
    assert_eq!(c.pod("typo").status.phase, PodPhase::Failed);
    assert!(c.proc("typo").is_none());
}

#[test]
fn crash_looping_container_restarts_with_backoff() {
    let steps = vec![create(1_000, pod("crasher", "crash", vec![]))];
    let mut c = cluster(&["w0"], vec![], steps, vec![]);
    // When each incarnation `crasher`, `crasher#1`, ... first appears (100 ms steps).
    let mut starts: Vec<u64> = Vec::new();
    let mut t = 0;
    while t < 1_300_000 {
        t += 100;
        c.run_to_ms(t);
        let name = match starts.len() {
            0 => "crasher".to_string(),
            n => format!("crasher#{n}"),
        };
        if c.proc(&name).is_some() {
            starts.push(t);
        }
    }
    // Each container runs 1 s, then waits 10 s, 20 s, 40 s, ... capped at 300 s.
    let backoffs = [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000];
    assert!(starts.len() > backoffs.len(), "starts: {starts:?}");
    for (i, b) in backoffs.iter().enumerate() {
        let gap = starts[i + 1] - starts[i] - 1_000;
        assert!(
            (*b..=b + 200).contains(&gap),
            "restart {}: waited {gap} ms, want {b} ms (starts {starts:?})",
            i + 1
        );
    }
    let restarts = starts.len() as u32 - 1;
    let p = c.pod("crasher");
    assert_eq!(p.status.restart_count, restarts);
    assert_eq!(p.status.phase, PodPhase::Running);
    // Earlier incarnations are gone.
    assert_eq!(
        c.sim.proc_state(c.proc("crasher#1").unwrap()),
        ProcState::Stopped
    );
}

// ----- Deployments and the scheduler --------------------------------------------------------

#[test]
fn deployment_creates_and_deletes_pods_to_match_replicas() {
    let scale_to_1 = {
        let mut d = deployment("web", 1, vec![]);
        d.meta.name = "web".into();
        step(
            20_000,
            ApiOp::Patch {
                key: ObjectKey::new(Deployment::KIND, NS, "web"),
                ops: vec![PatchOp::Spec(d.body)],
                resource_version: None,
            },
        )
    };
    let steps = vec![create(1_000, deployment("web", 3, vec![])), scale_to_1];
    let mut c = cluster(&["w0", "w1"], vec![], steps, vec![]);
    c.run_to_s(19);
    let pods = c.pods_of("web");
    assert_eq!(pods.len(), 3);
    for p in &pods {
        assert!(
            p.meta.name.starts_with("web-") && p.meta.name.len() == 9,
            "{}",
            p.meta.name
        );
        assert_eq!(p.typed::<Pod>().unwrap().status.phase, PodPhase::Running);
        assert!(c.proc_running(&p.meta.name));
    }
    let d = c
        .server()
        .get(&ObjectKey::new(Deployment::KIND, NS, "web"))
        .unwrap()
        .clone();
    assert_eq!(d.typed::<Deployment>().unwrap().status.replicas, 3);
    c.run_to_s(25);
    let left = c.pods_of("web");
    assert_eq!(left.len(), 1, "scaled down");
    let stopped = pods
        .iter()
        .filter(|p| !c.proc_running(&p.meta.name))
        .count();
    assert_eq!(stopped, 2, "the deleted pods' containers stopped");
    let d = c
        .server()
        .get(&ObjectKey::new(Deployment::KIND, NS, "web"))
        .unwrap()
        .clone();
    assert_eq!(d.typed::<Deployment>().unwrap().status.replicas, 1);
    // And it stays that way.
    c.run_to_s(60);
    assert_eq!(c.pods_of("web").len(), 1);
}

#[test]
fn scheduling_respects_taints_readiness_and_cordons() {
    // `ghost` exists but never was Ready (no kubelet).
    let ghost = Object::new(
        ObjectMeta::named("", "ghost"),
        Body::new(Node {
            spec: NodeSpec::default(),
            status: NodeStatus {
                ready: ConditionStatus::Unknown,
                ready_since: None,
                ..Default::default()
            },
        }),
    );
    let dedicated = Taint {
        key: "dedicated".into(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    };
    let special = Taint {
        key: "special".into(),
        effect: TaintEffect::NoExecute,
        time_added: None,
    };
    let mut steps = vec![
        set_node_spec(500, "tainted", vec![dedicated], false),
        set_node_spec(500, "special", vec![special], false),
        set_node_spec(500, "cordoned", vec![], true),
    ];
    for i in 0..8 {
        steps.push(create(2_000, pod(&format!("plain-{i}"), "idle", vec![])));
        let tol = vec![toleration("dedicated", TaintEffect::NoSchedule, None)];
        steps.push(create(2_000, pod(&format!("tol-{i}"), "idle", tol)));
    }
    let nodes = ["ok", "tainted", "special", "cordoned"];
    let mut c = cluster(&nodes, vec![ghost], steps, vec![]);
    c.run_to_s(20);
    let mut tol_nodes = BTreeMap::<String, usize>::new();
    for i in 0..8 {
        let p = c.pod(&format!("plain-{i}"));
        assert_eq!(p.spec.node_name.as_deref(), Some("ok"), "plain-{i}");
        assert_eq!(p.status.phase, PodPhase::Running);
        let p = c.pod(&format!("tol-{i}"));
        let n = p.spec.node_name.clone().expect("bound");
        *tol_nodes.entry(n).or_default() += 1;
    }
    let names: Vec<&str> = tol_nodes.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["ok", "tainted"],
        "tolerating pods spread over both: {tol_nodes:?}"
    );
}

#[test]
fn unschedulable_pod_stays_pending_until_a_node_is_available() {
    let steps = vec![
        set_node_spec(500, "late", vec![], true),
        create(2_000, pod("waiter", "idle", vec![])),
        set_node_spec(30_000, "late", vec![], false),
    ];
    let mut c = cluster(&["late"], vec![], steps, vec![]);
    c.run_to_s(29);
    let p = c.pod("waiter");
    assert_eq!(p.spec.node_name, None);
    assert_eq!(p.status.phase, PodPhase::Pending);
    assert!(c.proc("waiter").is_none());
    c.run_to_s(32);
    let p = c.pod("waiter");
    assert_eq!(p.spec.node_name.as_deref(), Some("late"));
    assert_eq!(p.status.phase, PodPhase::Running);
    assert!(c.proc_running("waiter"));
}

#[test]
fn node_selector_pins_pods_to_labelled_nodes() {
    let selected = |name: &str, host: &str| {
        let mut o = pod(name, "idle", vec![]);
        o.typed_mut::<Pod>().unwrap().spec.node_selector =
            [("kubernetes.io/hostname".to_string(), host.to_string())].into();
        o
    };
    let mut steps = Vec::new();
    for i in 0..6 {
        steps.push(create(2_000, selected(&format!("on-b-{i}"), "b")));
    }
    steps.push(create(2_000, selected("nowhere", "z")));
    let mut c = cluster(&["a", "b", "c"], vec![], steps, vec![]);
    c.run_to_s(20);
    for i in 0..6 {
        let p = c.pod(&format!("on-b-{i}"));
        assert_eq!(p.spec.node_name.as_deref(), Some("b"), "on-b-{i}");
        assert_eq!(p.status.phase, PodPhase::Running);
    }
    let p = c.pod("nowhere");
    assert_eq!(p.spec.node_name, None, "no node carries the label");
    assert_eq!(p.status.phase, PodPhase::Pending);
}

#[test]
fn a_node_registered_with_a_no_schedule_taint_takes_only_tolerating_pods() {
    let master_taint = || Taint {
        key: TAINT_MASTER.into(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    };
    let mut steps = Vec::new();
    for i in 0..12 {
        steps.push(create(2_000, pod(&format!("plain-{i}"), "idle", vec![])));
        let tol = vec![toleration(TAINT_MASTER, TaintEffect::NoSchedule, None)];
        steps.push(create(2_000, pod(&format!("tol-{i}"), "idle", tol)));
    }
    let mut c = cluster_with(
        &[("master", vec![master_taint()]), ("worker", vec![])],
        false,
        vec![],
        steps,
        vec![],
    );
    c.run_to_s(20);
    assert_eq!(c.node("master").spec.taints, vec![master_taint()]);
    let mut tol_nodes = BTreeMap::<String, usize>::new();
    for i in 0..12 {
        let p = c.pod(&format!("plain-{i}"));
        assert_eq!(p.spec.node_name.as_deref(), Some("worker"), "plain-{i}");
        let n = c.pod(&format!("tol-{i}")).spec.node_name.expect("bound");
        *tol_nodes.entry(n).or_default() += 1;
    }
    assert_eq!(
        tol_nodes.len(),
        2,
        "tolerating pods use both: {tol_nodes:?}"
    );
}

#[test]
fn the_scheduler_binds_each_pod_once_through_a_lagging_cache() {
    let mut steps = Vec::new();
    for i in 0..5 {
        steps.push(create(
            2_000 + 200 * i,
            pod(&format!("p-{i}"), "idle", vec![]),
        ));
    }
    let lag = TimedFault {
        at_ms: 1_500,
        duration_ms: Some(20_000),
        fault: Fault::Inject {
            process: "apiserver".into(),
            fault: WorldFault::WatchLag {
                lag_ms: 3_000,
                of_kind: None,
            },
        },
        on: None,
    };
    let mut c = cluster(&["a", "b"], vec![], steps, vec![lag]);
    c.run_to_s(40);
    for i in 0..5 {
        let p = c.pod(&format!("p-{i}"));
        assert!(p.spec.node_name.is_some(), "p-{i} bound");
        assert_eq!(p.status.phase, PodPhase::Running);
    }
    assert_eq!(
        c.workloads().binds(),
        5,
        "assumed pods are not bound again while the cache lags"
    );
}

#[test]
fn the_binding_subresource_refuses_a_bound_or_deleting_pod() {
    let bind = |at_ms: u64, name: &str, node: &str| {
        step(
            at_ms,
            ApiOp::Bind {
                key: ObjectKey::new(Pod::KIND, NS, name),
                uid: None,
                node_name: node.to_string(),
            },
        )
    };
    // No node carries the label: the scheduler leaves both pods alone.
    let unschedulable = |name: &str| {
        let mut o = pod(name, "idle", vec![]);
        o.typed_mut::<Pod>().unwrap().spec.node_selector = [("none".into(), "".into())].into();
        o
    };
    let mut finalized = unschedulable("held");
    finalized.meta.finalizers = vec!["example.com/hold".into()];
    let steps = vec![
        create(1_000, unschedulable("free")),
        create(1_000, finalized),
        bind(3_000, "free", "a"),
        bind(4_000, "free", "b"),
        step(
            5_000,
            ApiOp::Delete {
                key: ObjectKey::new(Pod::KIND, NS, "held"),
                uid: None,
                grace_period_seconds: None,
                options: Default::default(),
            },
        ),
        bind(6_000, "held", "a"),
    ];
    let mut c = cluster(&["a", "b"], vec![], steps, vec![]);
    c.run_to_s(10);
    assert_eq!(
        c.pod("free").spec.node_name.as_deref(),
        Some("a"),
        "the first bind holds"
    );
    assert_eq!(
        c.pod("held").spec.node_name,
        None,
        "a deleting pod is not bound"
    );
    let results: Vec<_> = [2, 3, 4, 5]
        .map(|n| {
            c.script()
                .response(n)
                .expect("answered")
                .result
                .clone()
                .map(|_| ())
        })
        .to_vec();
    assert_eq!(
        results,
        [
            Ok(()),
            Err(ApiError::Conflict),
            Ok(()),
            Err(ApiError::Conflict)
        ],
        "bind, bind again, delete, bind the deleting pod"
    );
}

#[test]
fn a_deleted_pod_s_paused_container_is_killed_after_the_grace_period() {
    let steps = vec![
        create(1_000, pod("web", "idle", vec![])),
        step(
            20_000,
            ApiOp::Delete {
                key: ObjectKey::new(Pod::KIND, NS, "web"),
                uid: None,
                grace_period_seconds: None,
                options: Default::default(),
            },
        ),
    ];
    // The container is frozen across the delete: it cannot act on SIGTERM.
    let pause = TimedFault {
        at_ms: 15_000,
        duration_ms: Some(60_000),
        fault: Fault::Pause {
            process: "web".into(),
        },
        on: None,
    };
    let mut c = cluster(&["w0"], vec![], steps, vec![pause]);
    c.run_to_ms(20_500);
    let web = c.pod_obj("web").expect("Terminating");
    assert_eq!(web.meta.deletion_grace_period_seconds, Some(30));
    assert_eq!(c.sim.proc_state(c.proc("web").unwrap()), ProcState::Paused);
    c.run_to_ms(49_500);
    assert!(c.pod_obj("web").is_some(), "still within its grace period");
    c.run_to_ms(50_500);
    assert_eq!(c.sim.proc_state(c.proc("web").unwrap()), ProcState::Stopped);
    assert!(c.pod_obj("web").is_none(), "killed, then confirmed");
}

// ----- the eviction rule itself ------------------------------------------------------------

#[test]
fn eviction_time_follows_tolerations() {
    let t = |key: &str, at_s: u64| Taint {
        key: key.into(),
        effect: TaintEffect::NoExecute,
        time_added: Some(SimTime::from_secs(at_s)),
    };
    let taints = [t(TAINT_UNREACHABLE, 100)];
    assert_eq!(
        eviction_time(&taints, &[]),
        Some(SimTime::from_secs(100)),
        "not tolerated"
    );
    assert_eq!(
        eviction_time(&taints, &tolerate_unreachable(120)),
        Some(SimTime::from_secs(220))
    );
    let forever = [toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, None)];
    assert_eq!(eviction_time(&taints, &forever), None);
    // A NoSchedule toleration does not cover a NoExecute taint.
    let wrong = [toleration(TAINT_UNREACHABLE, TaintEffect::NoSchedule, None)];
    assert_eq!(
        eviction_time(&taints, &wrong),
        Some(SimTime::from_secs(100))
    );
    // The shortest matching toleration wins.
    let two = [
        toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, Some(300)),
        toleration(TAINT_UNREACHABLE, TaintEffect::NoExecute, Some(60)),
    ];
    assert_eq!(eviction_time(&taints, &two), Some(SimTime::from_secs(160)));
    assert_eq!(eviction_time(&[], &[]), None);
}

// ----- restarts and determinism --------------------------------------------------------------

#[test]
fn crashed_kubelet_restarts_without_duplicating_containers() {
    let steps = vec![create(1_000, pod("web", "idle", vec![]))];
    let crash = TimedFault {
        at_ms: 30_000,
        duration_ms: Some(5_000),
        fault: Fault::Crash {
            process: "kubelet/w0".into(),
        },
        on: None,
    };
    let mut c = cluster(&["w0"], vec![], steps, vec![crash]);
    c.run_to_s(20);
    let node_uid = c.node_obj("w0").unwrap().meta.uid;
    let web = c.proc("web").expect("running");
    c.run_to_s(120);
    // The runtime kept the container; the restarted kubelet adopted it.
    assert_eq!(c.proc("web"), Some(web));
    assert_eq!(c.sim.proc_state(web), ProcState::Running);
    assert!(c.proc("web#1").is_none());
    assert_eq!(c.node_obj("w0").unwrap().meta.uid, node_uid, "Node kept");
    assert_eq!(c.node("w0").status.ready, ConditionStatus::True);
    assert!(
        c.lease("w0").renew_time.unwrap() >= SimTime::from_secs(109),
        "heartbeats resumed"
    );
}

#[test]
fn same_seed_same_history() {
    let run = || {
        let mut c = stopped_kubelet_cluster();
        c.run_to_s(500);
        (c.sim.trace().hash(), c.sim.trace().events())
    };
    assert_eq!(run(), run());
}
