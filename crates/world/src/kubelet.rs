//! The kubelet: a node's agent. One process per node, on the node's host.
//!
//! What it does (numbers and sources: docs/semantics.md section 5):
//! - TLS bootstrap (5.12), when [`KubeletConfig::tls_bootstrap`]: before anything else a
//!   kubelet without a client certificate creates a CertificateSigningRequest for
//!   `system:node:<name>` and waits for its approval, polling it every 5 s, with a new
//!   CSR every 15 minutes while none is approved; nothing else runs meanwhile (no Node,
//!   no heartbeat, no pods). The certificate is on disk: a restarted kubelet keeps it.
//! - Registration: on start it creates its Node (providerID, labels, Ready=True). If the
//!   Node already exists (a restarted kubelet, or a new machine under a terminated one's
//!   reused name, docs/semantics.md 6.8) it takes it as its own, whatever its
//!   providerID: the real `tryRegisterWithAPIServer` neither compares nor rewrites it. It
//!   never re-creates a Node deleted later: the real kubelet registers once per process
//!   start.
//! - Heartbeats (5.1): it creates, then renews, its node Lease in `kube-node-lease`
//!   (name = node name, leaseDurationSeconds 40) every 10 s (0.25 x 40 s, with client-go's
//!   JitterUntil factor 0.04); a failed renew is retried with backoff 200 ms doubling to
//!   7 s. Every nodeStatusUpdateFrequency (10 s) it reads its Node and, if the Ready
//!   condition is not True (the node lifecycle controller marked it Unknown while the
//!   kubelet was silent), sets it back to True.
//! - Pods: it watches Pods (an embedded [`Informer`]) and runs those bound to its node
//!   (`spec.nodeName`). A pod not yet running gets a container: a new kernel process on
//!   the node's host, built by the pod's image from [`Images`], named `<pod>`; its status
//!   becomes Running. An unknown image makes the pod Failed (a simplification: the real
//!   kubelet reports ImagePullBackOff and keeps the pod Pending).
//! - Deletion (3.6, 5.6, 5.11): a pod with a deletionTimestamp has its container sent
//!   SIGTERM ([`Msg::Terminate`]); the container is killed if it has not exited within
//!   the pod's deletionGracePeriodSeconds (30 s by default: a paused process cannot
//!   exit). Once no container runs, the kubelet confirms with a zero-grace Delete, which
//!   removes the pod. A pod removed from the API while its container runs (force delete)
//!   has it stopped at once.
//! - Restarts: a container that exits sends [`Msg::ContainerExited`]; the kubelet restarts
//!   it after the CrashLoopBackOff delay, 10 s doubling to 300 s, reset once a container
//!   ran 10 min (Kubernetes pod-lifecycle docs, "Container restart policy"; not in
//!   semantics.md), as process `<pod>#<restartCount>`, restartCount + 1 in the pod status.
//! - [`WorldFault::KubeletStop`] (5.8): the kubelet does nothing at all — no heartbeats, no
//!   pod handling, messages and timers ignored — but its containers, separate processes,
//!   keep running, and a pod evicted meanwhile stays Terminating. When the fault reverts
//!   it comes back as a restarted kubelet: it relists, heartbeats, and reconciles every
//!   pod (stopping the containers of pods deleted meanwhile).
//!
//! The container runtime (containerd) is a separate daemon in reality, so the record of
//! running containers ([`Kubelet::containers`]) survives a kubelet crash and a
//! KubeletStop; exits reported while the kubelet is stopped are recorded there and acted
//! on when it comes back (the real kubelet's PLEG relist finds them). An exit reported
//! while the kubelet process is crashed is lost (the kernel drops the message).
//!
//! [`Container`] is a plain workload process for images that need no logic: it idles,
//! or exits after a set time (a crash-looping container).

use crate::api::{ApiError, ApiOk, ApiOp, ApiRequest, PatchOp};
use crate::apiserver::POD_GRACE_PERIOD_SECONDS_DEFAULT;
use crate::component::{Component, Endpoints, Proc, UNREAD, WorldCtx};
use crate::fault::WorldFault;
use crate::informer::Informer;
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::Resource;
use crate::object::{
    Body, CertificateSigningRequest, ConditionStatus, CsrSpec, CsrStatus, Lease, NODE_BOOTSTRAPPER,
    Node, NodeSpec, NodeStatus, Object, ObjectKey, ObjectMeta, Pod, PodPhase, PodStatus, Taint,
    Uid,
};
use reconsim_sim::{HostId, ProcId, SimTime, TimerId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

pub use crate::timer::KubeletTimer as Timer;

/// What a container process is told when its kubelet starts it.
#[derive(Clone, Debug)]
pub struct ContainerEnv {
    pub pod_name: String,
    pub namespace: String,
    pub node_name: String,
    pub host: HostId,
    /// The kernel process name: `<pod>` (with `#<restart>` after restarts).
    pub process_name: String,
    pub endpoints: Endpoints,
    /// The kubelet that started the container: where it reports its exit
    /// ([`Msg::ContainerExited`]).
    pub kubelet: ProcId,
}

/// Builds a container's process from its environment.
pub type ImageFn = dyn Fn(&ContainerEnv) -> Proc + Send + Sync;

/// The images a kubelet can run, by `PodSpec::image` name.
#[derive(Clone, Default)]
pub struct Images(pub Arc<BTreeMap<String, Arc<ImageFn>>>);

impl Images {
    /// These images plus `name`, built by `image`.
    pub fn with(
        self,
        name: &str,
        image: impl Fn(&ContainerEnv) -> Proc + Send + Sync + 'static,
    ) -> Self {
        let mut map = (*self.0).clone();
        map.insert(name.to_string(), Arc::new(image));
        Images(Arc::new(map))
    }
}

impl std::fmt::Debug for Images {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

#[derive(Clone, Debug, Default)]
pub struct KubeletConfig {
    pub node_name: String,
    pub provider_id: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// The taints the Node registers with (`--register-with-taints`).
    pub taints: Vec<Taint>,
    /// Start without a client certificate: get one approved first (TLS bootstrap).
    pub tls_bootstrap: bool,
}

/// How often a bootstrapping kubelet looks at its CSR.
pub const CSR_POLL_MS: u64 = 5_000;
/// How long a bootstrapping kubelet waits on one CSR before it makes a new one (field
/// reports show a new pending CSR about every 15 minutes; semantics 5.12).
pub const CSR_RENEW_MS: u64 = 900_000;

/// The kubelet's durations (docs/semantics.md 5.1 unless noted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubeletTiming {
    /// nodeLeaseDurationSeconds.
    pub lease_duration_s: u32,
    /// Lease renew interval (0.25 x the lease duration).
    pub lease_renew_interval_ms: u64,
    /// Extra random delay of each renew, up to this (client-go JitterUntil, factor 0.04).
    pub lease_renew_jitter_ms: u64,
    /// Renew retry backoff bounds.
    pub lease_retry_ms_min: u64,
    pub lease_retry_ms_max: u64,
    /// nodeStatusUpdateFrequency: how often the kubelet checks its Node and its pods.
    pub sync_interval_ms: u64,
    /// CrashLoopBackOff: first delay, cap, and how long a container must run for the
    /// delay to start over.
    pub restart_backoff_ms_min: u64,
    pub restart_backoff_ms_max: u64,
    pub restart_backoff_reset_ms: u64,
}

impl Default for KubeletTiming {
    fn default() -> Self {
        KubeletTiming {
            lease_duration_s: 40,
            lease_renew_interval_ms: 10_000,
            lease_renew_jitter_ms: 400,
            lease_retry_ms_min: 200,
            lease_retry_ms_max: 7_000,
            sync_interval_ms: 10_000,
            restart_backoff_ms_min: 10_000,
            restart_backoff_ms_max: 300_000,
            restart_backoff_reset_ms: 600_000,
        }
    }
}

/// A container the runtime runs (or ran) for one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerRecord {
    pub pod_uid: Uid,
    /// The running process; `None` while the container is exited (in back-off).
    pub proc: Option<ProcId>,
    /// The pod's restart count this container incarnation reports.
    pub restarts: u32,
    /// When the current (or last) process started, on the kubelet's clock.
    pub started: SimTime,
    /// The next back-off delay.
    pub backoff_ms: u64,
    /// The pending restart timer, if armed.
    pub restart_timer: Option<TimerId>,
    /// Set once SIGTERM was sent: when the grace period ends (kubelet's clock) and the
    /// kubelet life that armed the kill timer.
    pub terminating: Option<Termination>,
}

/// A container told to exit, killed at `kill_at` if it is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Termination {
    pub kill_at: SimTime,
    epoch: u32,
}

/// An in-flight request of the kubelet and what its answer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    CsrCreate,
    CsrGet,
    Register,
    GetNode,
    LeaseGet,
    LeaseCreate,
    LeaseUpdate,
}

#[derive(Debug)]
pub struct Kubelet {
    pub config: KubeletConfig,
    pub endpoints: Endpoints,
    pub images: Images,
    pub timing: KubeletTiming,
    /// The container runtime's record, by (namespace, pod name): survives kubelet
    /// restarts and stops.
    pub containers: BTreeMap<(String, String), ContainerRecord>,
    /// Whether a KubeletStop fault is active.
    stopped: bool,
    /// Bumped at every (re)start: timers of an earlier life are ignored.
    epoch: u32,
    informer: Informer,
    informer_id: u32,
    /// The informer has synced since the last (re)start and every pod was reconciled.
    initial_sync_done: bool,
    ids: ReqIds,
    node_req: Option<(u64, Req)>,
    lease_req: Option<(u64, Req)>,
    registered: bool,
    node_uid: Option<Uid>,
    /// The Lease as last read or written.
    lease: Option<Arc<Object>>,
    lease_backoff_ms: u64,
    heartbeats: u64,
    /// The client certificate was issued (TLS bootstrap done, or not needed).
    certified: bool,
    /// While bootstrapping: the CSR waited on (its name once created) and since when.
    csr: Option<(Option<String>, SimTime)>,
    /// CSRs created so far.
    csrs: u64,
}

/// Informer ids cycle through this many values so that a restarted kubelet's informer
/// ignores everything meant for the previous one.
const INFORMER_IDS: u32 = 32;

impl Kubelet {
    pub fn new(config: KubeletConfig, endpoints: Endpoints, images: Images) -> Self {
        Kubelet {
            endpoints,
            images,
            timing: KubeletTiming::default(),
            containers: BTreeMap::new(),
            stopped: false,
            epoch: 0,
            informer: Informer::new(1, &[Pod::KIND], endpoints.apiserver),
            informer_id: 1,
            initial_sync_done: false,
            ids: ReqIds::new(tags::KUBELET),
            node_req: None,
            lease_req: None,
            registered: false,
            node_uid: None,
            lease: None,
            lease_backoff_ms: KubeletTiming::default().lease_retry_ms_min,
            heartbeats: 0,
            certified: !config.tls_bootstrap,
            csr: None,
            csrs: 0,
            config,
        }
    }

    /// Whether a KubeletStop fault holds the kubelet.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Successful Lease writes so far.
    pub fn heartbeats(&self) -> u64 {
        self.heartbeats
    }

    /// Whether the kubelet holds its client certificate.
    pub fn certified(&self) -> bool {
        self.certified
    }

    /// Certificate signing requests created so far.
    pub fn csrs(&self) -> u64 {
        self.csrs
    }

    pub fn node_name(&self) -> &str {
        &self.config.node_name
    }

    /// Start as a fresh kubelet process: register, heartbeat, relist, reconcile.
    fn boot(&mut self, ctx: &mut WorldCtx<'_>) {
        self.epoch += 1;
        if self.epoch > 1 {
            // Close the previous life's watch stream (an Informer uses `id * 16 + i`).
            let stream = self.informer_id * 16;
            let id = self.ids.issue();
            self.api(ctx, id, ApiOp::Unwatch { stream });
        }
        if !self.certified {
            // TLS bootstrap first: a new CSR (each start makes its own).
            self.csr = Some((None, ctx.now()));
            self.poll_csr(ctx);
            return;
        }
        self.start_node(ctx);
    }

    /// The bootstrap step: make the CSR (or a new one, when the last waited too long),
    /// or look at it; and come back in [`CSR_POLL_MS`].
    fn poll_csr(&mut self, ctx: &mut WorldCtx<'_>) {
        let Some((name, since)) = self.csr.clone() else {
            return;
        };
        let now = ctx.now();
        let id = self.ids.issue();
        let creating = matches!(self.node_req, Some((_, Req::CsrCreate)));
        match name {
            // The create's answer is on its way (or lost: retried after the client's
            // dead-connection bound).
            None if creating && now.since(since) < crate::informer::REQUEST_TIMEOUT_MS => {}
            Some(name) if now.since(since) < CSR_RENEW_MS => {
                self.node_req = Some((id, Req::CsrGet));
                let key = ObjectKey::new(CertificateSigningRequest::KIND, "", &name);
                self.api(ctx, id, ApiOp::Get(key));
            }
            _ => {
                self.csr = Some((None, now));
                self.csrs += 1;
                let mut meta = ObjectMeta::named("", "");
                meta.generate_name = Some("csr-".into());
                let csr = CertificateSigningRequest {
                    spec: CsrSpec {
                        username: NODE_BOOTSTRAPPER.to_string(),
                        node_name: self.config.node_name.clone(),
                        ..Default::default()
                    },
                    status: CsrStatus::default(),
                };
                ctx.note(|| {
                    format!(
                        "kubelet: requesting a client certificate for {}",
                        self.config.node_name
                    )
                });
                self.node_req = Some((id, Req::CsrCreate));
                self.api(
                    ctx,
                    id,
                    ApiOp::Create(Box::new(Object::new(meta, Body::new(csr)))),
                );
            }
        }
        let epoch = self.epoch;
        ctx.set_timer(
            CSR_POLL_MS,
            Msg::Timer(AnyTimer::Kubelet(Timer::CsrPoll { epoch })),
        );
    }

    /// Certified: register, heartbeat, relist, reconcile.
    fn start_node(&mut self, ctx: &mut WorldCtx<'_>) {
        self.informer_id = 1 + self.epoch % INFORMER_IDS;
        self.informer = Informer::new(self.informer_id, &[Pod::KIND], self.endpoints.apiserver);
        self.initial_sync_done = false;
        self.informer.start(ctx);
        self.lease_backoff_ms = self.timing.lease_retry_ms_min;
        self.register(ctx);
        self.renew_lease(ctx);
        let epoch = self.epoch;
        let jitter = ctx.draw_ms(0, self.timing.lease_renew_jitter_ms);
        ctx.set_timer(
            self.timing.lease_renew_interval_ms + jitter,
            Msg::Timer(AnyTimer::Kubelet(Timer::RenewLease { epoch })),
        );
        ctx.set_timer(
            self.timing.sync_interval_ms,
            Msg::Timer(AnyTimer::Kubelet(Timer::Sync { epoch })),
        );
    }
}

/// The kubelet as a process of the world.
impl Component for Kubelet {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.endpoints.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        if !self.stopped {
            self.boot(ctx);
        }
    }

    fn on_crash(&mut self) {
        // The kubelet's memory is gone; the runtime's record is not, but the restart
        // timers died with the process.
        for c in self.containers.values_mut() {
            c.restart_timer = None;
        }
        self.node_req = None;
        self.lease_req = None;
        self.registered = false;
        self.lease = None;
        self.csr = None;
    }

    fn on_fault(&mut self, f: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        if *f != WorldFault::KubeletStop {
            return;
        }
        if active && !self.stopped {
            self.stopped = true;
            self.on_crash();
            self.epoch += 1;
        } else if !active && self.stopped {
            self.stopped = false;
            self.boot(ctx);
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        if let Msg::ContainerExited = msg {
            // The runtime sees the exit even while the kubelet is stopped.
            self.container_exited(from, ctx);
            return;
        }
        if self.stopped {
            return;
        }
        let mut changes = Vec::new();
        if self.informer.handle(&msg, ctx, &mut changes) {
            self.on_changes(&changes, ctx);
            return;
        }
        if let Msg::ApiResp(resp) = msg {
            if self.node_req.is_some_and(|(id, _)| id == resp.id) {
                let (_, req) = self.node_req.take().expect("checked");
                self.on_node_resp(req, resp.result, ctx);
            } else if self.lease_req.is_some_and(|(id, _)| id == resp.id) {
                let (_, req) = self.lease_req.take().expect("checked");
                self.on_lease_resp(req, resp.result, ctx);
            }
            // Anything else is a fire-and-forget write (pod status, delete confirmation);
            // the periodic sync repairs whatever did not land.
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        if self.stopped {
            return;
        }
        let t = match t {
            AnyTimer::Kubelet(t) => t,
            AnyTimer::Informer(t) => {
                self.informer.on_timer(&t, ctx);
                return;
            }
            _ => return,
        };
        let current = self.epoch;
        match t {
            Timer::RenewLease { epoch } if epoch == current => {
                self.renew_lease(ctx);
                let jitter = ctx.draw_ms(0, self.timing.lease_renew_jitter_ms);
                ctx.set_timer(
                    self.timing.lease_renew_interval_ms + jitter,
                    Msg::Timer(AnyTimer::Kubelet(Timer::RenewLease { epoch })),
                );
            }
            Timer::RetryLease { epoch } if epoch == current => self.renew_lease(ctx),
            Timer::CsrPoll { epoch } if epoch == current && !self.certified => self.poll_csr(ctx),
            Timer::Sync { epoch } if epoch == current => {
                self.sync(ctx);
                ctx.set_timer(
                    self.timing.sync_interval_ms,
                    Msg::Timer(AnyTimer::Kubelet(Timer::Sync { epoch })),
                );
            }
            Timer::Restart {
                epoch,
                namespace,
                name,
                uid,
            } if epoch == current => self.restart(namespace, name, uid, ctx),
            Timer::Kill {
                epoch,
                namespace,
                name,
                uid,
            } if epoch == current => self.kill_after_grace((namespace, name), uid, ctx),
            _ => {}
        }
    }

    /// Its pods' state is in the API server's store.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Kubelet {
    fn api(&mut self, ctx: &mut WorldCtx<'_>, id: u64, op: ApiOp) {
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
    }

    // ----- node registration and status ---------------------------------------------

    fn node_key(&self) -> ObjectKey {
        ObjectKey::new(Node::KIND, "", &self.config.node_name)
    }

    fn register(&mut self, ctx: &mut WorldCtx<'_>) {
        let mut meta = ObjectMeta::named("", &self.config.node_name);
        meta.labels = self.config.labels.clone();
        let node = Node {
            spec: NodeSpec {
                provider_id: self.config.provider_id.clone(),
                taints: self.config.taints.clone(),
                ..Default::default()
            },
            status: NodeStatus {
                ready: ConditionStatus::True,
                ready_since: Some(ctx.now()),
                ..Default::default()
            },
        };
        let id = self.ids.issue();
        self.node_req = Some((id, Req::Register));
        self.api(
            ctx,
            id,
            ApiOp::Create(Box::new(Object::new(meta, Body::new(node)))),
        );
    }

    fn on_node_resp(&mut self, req: Req, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        match (req, result) {
            (Req::CsrCreate, Ok(ApiOk::Object(csr))) => {
                if let Some((name, _)) = &mut self.csr {
                    *name = Some(csr.meta.name.clone());
                }
            }
            (Req::CsrGet, Ok(ApiOk::Object(csr))) => {
                let approved = csr
                    .typed::<CertificateSigningRequest>()
                    .is_some_and(|c| c.status.approved);
                if approved && !self.certified {
                    ctx.note(|| format!("kubelet: certificate {} approved", csr.meta.name));
                    self.certified = true;
                    self.csr = None;
                    self.start_node(ctx);
                }
            }
            (Req::CsrGet, Err(ApiError::NotFound)) => {
                // Deleted: a new one at the next poll.
                self.csr = self.csr.take().map(|(_, since)| (None, since));
            }
            (Req::CsrCreate | Req::CsrGet, _) => {}
            (Req::Register, Ok(ApiOk::Object(node))) => {
                self.registered = true;
                self.node_uid = Some(node.meta.uid);
            }
            (Req::Register, Err(ApiError::AlreadyExists)) => {
                // A restarted kubelet keeps its Node; the status check fixes Ready.
                self.registered = true;
                self.check_node(ctx);
            }
            (Req::GetNode, Ok(ApiOk::Object(node))) => {
                self.node_uid = Some(node.meta.uid);
                let ready = node.typed::<Node>().map(|n| n.status.ready);
                if ready.is_some_and(|r| r != ConditionStatus::True) {
                    let status = Node {
                        spec: NodeSpec::default(),
                        status: NodeStatus {
                            ready: ConditionStatus::True,
                            ready_since: Some(ctx.now()),
                            ..Default::default()
                        },
                    };
                    let id = self.ids.issue();
                    let key = self.node_key();
                    ctx.note(|| "kubelet: node is not Ready, setting Ready=True".into());
                    self.api(
                        ctx,
                        id,
                        ApiOp::Patch {
                            key,
                            ops: vec![PatchOp::Status(Body::new(status))],
                            resource_version: None,
                        },
                    );
                }
            }
            // Registration failed or got lost: the next sync retries. A Node deleted
            // later is not re-created (the real kubelet registers once per start).
            _ => {}
        }
    }

    fn check_node(&mut self, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.node_req = Some((id, Req::GetNode));
        let key = self.node_key();
        self.api(ctx, id, ApiOp::Get(key));
    }

    /// nodeStatusUpdateFrequency: make sure the Node is registered and Ready; house-keep
    /// pods (the status manager and the pod workers' periodic sync).
    fn sync(&mut self, ctx: &mut WorldCtx<'_>) {
        if self.registered {
            self.check_node(ctx);
        } else {
            self.register(ctx);
        }
        self.sync_all_pods(ctx);
    }

    // ----- the node Lease -------------------------------------------------------------

    fn lease_key(&self) -> ObjectKey {
        ObjectKey::new(Lease::KIND, NODE_LEASE_NAMESPACE, &self.config.node_name)
    }

    fn renew_lease(&mut self, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        match &self.lease {
            Some(current) => {
                let mut next = (**current).clone();
                if let Some(l) = next.typed_mut::<Lease>() {
                    l.holder_identity = Some(self.config.node_name.clone());
                    l.lease_duration_seconds = self.timing.lease_duration_s;
                    l.renew_time = Some(ctx.now());
                }
                self.set_node_owner(&mut next.meta);
                self.lease_req = Some((id, Req::LeaseUpdate));
                self.api(
                    ctx,
                    id,
                    ApiOp::Update {
                        object: Box::new(next),
                        precondition: true,
                    },
                );
            }
            None => {
                self.lease_req = Some((id, Req::LeaseGet));
                let key = self.lease_key();
                self.api(ctx, id, ApiOp::Get(key));
            }
        }
    }

    fn set_node_owner(&self, meta: &mut ObjectMeta) {
        if let Some(uid) = self.node_uid {
            meta.set_only_owner(Node::KIND, &self.config.node_name, uid);
        }
    }

    fn on_lease_resp(&mut self, req: Req, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        match (req, result) {
            (Req::LeaseGet, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.renew_lease(ctx);
            }
            (Req::LeaseGet, Err(ApiError::NotFound)) => {
                let now = ctx.now();
                let mut meta = ObjectMeta::named(NODE_LEASE_NAMESPACE, &self.config.node_name);
                self.set_node_owner(&mut meta);
                let lease = Lease {
                    holder_identity: Some(self.config.node_name.clone()),
                    lease_duration_seconds: self.timing.lease_duration_s,
                    acquire_time: Some(now),
                    renew_time: Some(now),
                    lease_transitions: 0,
                    ..Default::default()
                };
                let id = self.ids.issue();
                self.lease_req = Some((id, Req::LeaseCreate));
                self.api(
                    ctx,
                    id,
                    ApiOp::Create(Box::new(Object::new(meta, Body::new(lease)))),
                );
            }
            (Req::LeaseCreate | Req::LeaseUpdate, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.heartbeats += 1;
                self.lease_backoff_ms = self.timing.lease_retry_ms_min;
            }
            _ => {
                // Conflict, AlreadyExists, NotFound...: read it again after a backoff.
                self.lease = None;
                let delay = self.lease_backoff_ms;
                self.lease_backoff_ms = (delay * 2).min(self.timing.lease_retry_ms_max);
                let epoch = self.epoch;
                ctx.set_timer(
                    delay,
                    Msg::Timer(AnyTimer::Kubelet(Timer::RetryLease { epoch })),
                );
            }
        }
    }

    // ----- pods -----------------------------------------------------------------------

    fn on_changes(&mut self, changes: &[Arc<Object>], ctx: &mut WorldCtx<'_>) {
        if !self.informer.synced() {
            return;
        }
        if !self.initial_sync_done {
            self.initial_sync_done = true;
            self.sync_all_pods(ctx);
            return;
        }
        let mut keys: Vec<(String, String)> = changes
            .iter()
            .filter(|o| o.kind() == Pod::KIND)
            .map(|o| (o.meta.namespace.clone(), o.meta.name.clone()))
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            self.sync_pod(&key, ctx);
        }
    }

    /// Reconcile every pod bound here and every container the runtime knows.
    fn sync_all_pods(&mut self, ctx: &mut WorldCtx<'_>) {
        if !self.informer.synced() {
            return;
        }
        let mut keys: Vec<(String, String)> = self.containers.keys().cloned().collect();
        keys.extend(
            self.informer
                .cache()
                .list(Pod::KIND)
                .filter(|o| self.bound_here(o))
                .map(|o| (o.meta.namespace.clone(), o.meta.name.clone())),
        );
        keys.sort();
        keys.dedup();
        for key in keys {
            self.sync_pod(&key, ctx);
        }
    }

    fn bound_here(&self, o: &Object) -> bool {
        o.typed::<Pod>()
            .and_then(|p| p.spec.node_name.as_deref())
            .is_some_and(|n| n == self.config.node_name)
    }

    /// Bring one pod's container in line with the pod as cached.
    fn sync_pod(&mut self, key: &(String, String), ctx: &mut WorldCtx<'_>) {
        let okey = ObjectKey::new(Pod::KIND, &key.0, &key.1);
        let pod = self
            .informer
            .cache()
            .get(&okey)
            .filter(|o| self.bound_here(o))
            .cloned();
        let Some(pod) = pod else {
            // Gone from the API (or never ours): nothing may run for it.
            self.kill(key, ctx);
            return;
        };
        if self
            .containers
            .get(key)
            .is_some_and(|c| c.pod_uid != pod.meta.uid)
        {
            // The name now holds another pod: the old one's container goes.
            self.kill(key, ctx);
        }
        let spec_status = pod.typed::<Pod>().expect("a Pod").status.clone();
        if pod.meta.is_deleting() {
            if self.containers.get(key).is_some_and(|c| c.proc.is_some()) {
                self.terminate(key, &pod, ctx);
                return;
            }
            self.kill(key, ctx);
            ctx.note(|| format!("kubelet: confirming deletion of pod {}/{}", key.0, key.1));
            let id = self.ids.issue();
            self.api(
                ctx,
                id,
                ApiOp::Delete {
                    key: okey,
                    uid: Some(pod.meta.uid),
                    grace_period_seconds: Some(0),
                    options: Default::default(),
                },
            );
            return;
        }
        let Some(c) = self.containers.get(key).cloned() else {
            if matches!(spec_status.phase, PodPhase::Pending | PodPhase::Running) {
                self.start(key, &pod, spec_status.restart_count, ctx);
            }
            return;
        };
        let status_stale =
            spec_status.phase != PodPhase::Running || spec_status.restart_count != c.restarts;
        match c.proc {
            // The status manager: the pod's status must say what runs.
            Some(_) if status_stale => {
                self.patch_status(&okey, PodPhase::Running, c.restarts, ctx);
            }
            Some(_) => {}
            None if c.restart_timer.is_none() => self.arm_restart(key, ctx),
            None => {}
        }
    }

    /// Start the pod's container (first start, or after the kubelet lost track of it).
    fn start(
        &mut self,
        key: &(String, String),
        pod: &Object,
        restarts: u32,
        ctx: &mut WorldCtx<'_>,
    ) {
        let okey = pod.key();
        let image_name = &pod.typed::<Pod>().expect("a Pod").spec.image;
        let Some(image) = self.images.0.get(image_name).cloned() else {
            ctx.note(|| format!("kubelet: pod {okey}: unknown image {image_name}"));
            self.patch_status(&okey, PodPhase::Failed, restarts, ctx);
            return;
        };
        let proc = self.spawn_container(key, &image, restarts, ctx);
        self.containers.insert(
            key.clone(),
            ContainerRecord {
                pod_uid: pod.meta.uid,
                proc: Some(proc),
                restarts,
                started: ctx.now(),
                backoff_ms: self.timing.restart_backoff_ms_min,
                restart_timer: None,
                terminating: None,
            },
        );
        self.patch_status(&okey, PodPhase::Running, restarts, ctx);
    }

    fn spawn_container(
        &mut self,
        key: &(String, String),
        image: &Arc<ImageFn>,
        restarts: u32,
        ctx: &mut WorldCtx<'_>,
    ) -> ProcId {
        let process_name = if restarts == 0 {
            key.1.clone()
        } else {
            format!("{}#{restarts}", key.1)
        };
        let env = ContainerEnv {
            pod_name: key.1.clone(),
            namespace: key.0.clone(),
            node_name: self.config.node_name.clone(),
            host: ctx.host(),
            process_name: process_name.clone(),
            endpoints: self.endpoints,
            kubelet: ctx.me(),
        };
        let proc = image(&env);
        ctx.note(|| format!("kubelet: starting container {process_name}"));
        let host = ctx.host();
        ctx.spawn(host, process_name, proc)
    }

    fn patch_status(
        &mut self,
        key: &ObjectKey,
        phase: PodPhase,
        restarts: u32,
        ctx: &mut WorldCtx<'_>,
    ) {
        let status = Pod {
            status: PodStatus {
                phase,
                restart_count: restarts,
                ..Default::default()
            },
            ..Default::default()
        };
        let id = self.ids.issue();
        self.api(
            ctx,
            id,
            ApiOp::Patch {
                key: key.clone(),
                ops: vec![PatchOp::Status(Body::new(status))],
                resource_version: None,
            },
        );
    }

    /// SIGTERM the running container of a deleting pod, once, and arm the kill at the end
    /// of the grace period (again after a kubelet restart: the old timer died with it).
    fn terminate(&mut self, key: &(String, String), pod: &Object, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        let epoch = self.epoch;
        let grace_ms = pod
            .meta
            .deletion_grace_period_seconds
            .unwrap_or(POD_GRACE_PERIOD_SECONDS_DEFAULT)
            .saturating_mul(1000);
        let c = self.containers.get_mut(key).expect("checked by the caller");
        let proc = c.proc.expect("checked by the caller");
        let kill_at = match c.terminating {
            Some(t) if t.epoch == epoch => return,
            Some(t) => t.kill_at,
            None => {
                ctx.note(|| {
                    format!(
                        "kubelet: SIGTERM to the container of pod {}/{}",
                        key.0, key.1
                    )
                });
                ctx.send(proc, Msg::Terminate);
                now.plus_ms(grace_ms)
            }
        };
        c.terminating = Some(Termination { kill_at, epoch });
        let timer = Timer::Kill {
            epoch,
            namespace: key.0.clone(),
            name: key.1.clone(),
            uid: c.pod_uid,
        };
        ctx.set_timer(kill_at.since(now), Msg::Timer(AnyTimer::Kubelet(timer)));
    }

    /// The grace period of a terminating container is over: SIGKILL, then confirm.
    fn kill_after_grace(&mut self, key: (String, String), uid: Uid, ctx: &mut WorldCtx<'_>) {
        let Some(c) = self.containers.get_mut(&key) else {
            return;
        };
        if c.pod_uid != uid || c.terminating.is_none() {
            return;
        }
        if let Some(p) = c.proc.take() {
            ctx.note(|| {
                format!(
                    "kubelet: grace period over, killing the container of pod {}/{}",
                    key.0, key.1
                )
            });
            ctx.stop(p);
        }
        self.sync_pod(&key, ctx);
    }

    /// Stop a pod's container and forget it.
    fn kill(&mut self, key: &(String, String), ctx: &mut WorldCtx<'_>) {
        let Some(c) = self.containers.remove(key) else {
            return;
        };
        if let Some(p) = c.proc {
            ctx.note(|| format!("kubelet: stopping container of pod {}/{}", key.0, key.1));
            ctx.stop(p);
        }
        if let Some(t) = c.restart_timer {
            ctx.cancel_timer(t);
        }
    }

    fn container_exited(&mut self, from: ProcId, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        let reset_ms = self.timing.restart_backoff_reset_ms;
        let min_ms = self.timing.restart_backoff_ms_min;
        let Some((key, c)) = self
            .containers
            .iter_mut()
            .find(|(_, c)| c.proc == Some(from))
        else {
            return; // A container we already stopped, or not ours.
        };
        c.proc = None;
        if c.terminating.is_some() {
            // Exited on SIGTERM: the deletion can be confirmed (by a running kubelet).
            let key = key.clone();
            if !self.stopped {
                self.sync_pod(&key, ctx);
            }
            return;
        }
        if now.since(c.started) >= reset_ms {
            c.backoff_ms = min_ms;
        }
        let key = key.clone();
        if !self.stopped {
            self.arm_restart(&key, ctx);
        }
    }

    fn arm_restart(&mut self, key: &(String, String), ctx: &mut WorldCtx<'_>) {
        let max_ms = self.timing.restart_backoff_ms_max;
        let epoch = self.epoch;
        let Some(c) = self.containers.get_mut(key) else {
            return;
        };
        let delay = c.backoff_ms;
        c.backoff_ms = (delay * 2).min(max_ms);
        let timer = Timer::Restart {
            epoch,
            namespace: key.0.clone(),
            name: key.1.clone(),
            uid: c.pod_uid,
        };
        c.restart_timer = Some(ctx.set_timer(delay, Msg::Timer(AnyTimer::Kubelet(timer))));
    }

    fn restart(&mut self, namespace: String, name: String, uid: Uid, ctx: &mut WorldCtx<'_>) {
        let key = (namespace, name);
        let Some(c) = self.containers.get_mut(&key) else {
            return;
        };
        c.restart_timer = None;
        if c.pod_uid != uid || c.proc.is_some() {
            return;
        }
        let okey = ObjectKey::new(Pod::KIND, &key.0, &key.1);
        let pod = self.informer.cache().get(&okey).cloned();
        let live = pod
            .as_ref()
            .is_some_and(|p| p.meta.uid == uid && !p.meta.is_deleting() && self.bound_here(p));
        if !live {
            self.sync_pod(&key, ctx);
            return;
        }
        let pod = pod.expect("checked");
        let image_name = &pod.typed::<Pod>().expect("a Pod").spec.image;
        let Some(image) = self.images.0.get(image_name).cloned() else {
            self.kill(&key, ctx);
            self.patch_status(&okey, PodPhase::Failed, 0, ctx);
            return;
        };
        let restarts = self.containers[&key].restarts + 1;
        let proc = self.spawn_container(&key, &image, restarts, ctx);
        let now = ctx.now();
        let c = self.containers.get_mut(&key).expect("checked");
        c.proc = Some(proc);
        c.restarts = restarts;
        c.started = now;
        self.patch_status(&okey, PodPhase::Running, restarts, ctx);
    }
}

/// A workload process with no logic of its own: it idles, or exits `exit_after_ms` after
/// it starts, reporting the exit to its kubelet (a crash-looping container).
#[derive(Clone, Debug)]
pub struct Container {
    pub kubelet: ProcId,
    pub exit_after_ms: Option<u64>,
}

impl Container {
    pub fn new(env: &ContainerEnv, exit_after_ms: Option<u64>) -> Self {
        Container {
            kubelet: env.kubelet,
            exit_after_ms,
        }
    }

    /// An image of such containers.
    pub fn image(
        exit_after_ms: Option<u64>,
    ) -> impl Fn(&ContainerEnv) -> Proc + Send + Sync + 'static {
        move |env| Proc::new(Container::new(env, exit_after_ms))
    }
}

impl Component for Container {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        if let Some(ms) = self.exit_after_ms {
            ctx.set_timer(ms, Msg::Timer(AnyTimer::Kubelet(Timer::ContainerExit)));
        }
    }

    fn on_msg(&mut self, _from: ProcId, _msg: Msg, _ctx: &mut WorldCtx<'_>) {}

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        if t == AnyTimer::Kubelet(Timer::ContainerExit) {
            ctx.send(self.kubelet, Msg::ContainerExited);
            let me = ctx.me();
            ctx.stop(me);
        }
    }

    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
