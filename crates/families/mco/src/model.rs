//! machine-config-operator objects and the components that serve configs to booting
//! machines (seed incident 3: openshift/machine-config-operator issue #301, GC tracked in
//! #354, bootstrap fix PR #355; facts in SEED-FACTS.md section 3).
//!
//! Objects:
//! - [`MachineConfig`]: a source config (labelled `machineconfiguration.openshift.io/role`)
//!   or a rendered one, named `rendered-<pool>-<hash>` by [`rendered_name`], a pure
//!   function of the merged content (upstream uses an md5 of the spec; here the
//!   project's documented [`StableHasher`], FNV-1a over 64-bit words, of the content map).
//! - [`MachineConfigPool`]: which nodes and which source configs belong to a pool, and
//!   its target (`status.configuration`, written by the render controller as the 2019
//!   code did with UpdateStatus), with the node controller's machine counts.
//! - Node annotations with the real keys ([`ANNOTATION_CURRENT`], [`ANNOTATION_DESIRED`],
//!   [`ANNOTATION_STATE`]).
//!
//! Components (kernel processes):
//! - [`MachineConfigServer`]: the Machine Config Server. In the cluster it serves a
//!   booting machine the pool's `status.configuration.name`, read live on each request:
//!   a Get of the pool, then a Get of that config, as the 2019 `clusterServer.GetConfig`
//!   did through a typed clientset with no cache (pkg/server/cluster_server.go
//!   @5ea28209; docs/semantics.md 8.1). The answer carries the name that Ignition writes
//!   into node-annotations.json as current = desired, state Done.
//!   With `record_hand_outs` (the in-flight GC this project proposes) it then records
//!   the hand-out on the pool, `machineconfiguration.openshift.io/served-to.<machine>`,
//!   with a patch conditional on the resourceVersion of the pool it read, so the record
//!   is ordered before any change of the target. In bootstrap mode it serves the names
//!   the installer rendered outside the cluster.
//! - [`McoMachine`]: one machine's first boot and its machine-config-daemon. Power on,
//!   fetch the config (retry every 5 s on error, as Ignition retries), reboot, the kubelet
//!   registers the Node after a join delay, the daemon pod starts, loads the served
//!   annotations onto its Node if it has none (loadNodeAnnotations), then reads its
//!   currentConfig, polling every 10 s for up to 5 min before going Degraded (SEED-FACTS
//!   section 3). Afterwards a new desiredConfig on its Node is fetched,
//!   state Working, applied with a reboot (`update_ms`), and after the reboot the daemon
//!   starts again and reads its current and desired configs (the same 5 min rule), then
//!   writes current = desired, state Done. The daemon follows its Node with a watch on
//!   Nodes opened from the version it read (the real daemon's node informer, without the
//!   HTTP/2 health check: machines' links are never cut in these scenarios, and the
//!   pings were most of a run's events).
//! - The machine's kubelet heartbeats from the moment its Node is registered: it creates
//!   its node Lease in `kube-node-lease` (name = node name, leaseDurationSeconds 40,
//!   ownerReference to the Node) and renews it every 10 s plus up to 400 ms of jitter,
//!   retrying a failed write with backoff 200 ms doubling to 7 s, as the core kubelet
//!   (`reconsim_world::kubelet`, docs/semantics.md 5.1, 8.2). Without it the node lifecycle
//!   controller marks every MCO Node Unknown 40 s after it registers and taints it
//!   NoExecute. That is one write per 10 s per machine and nothing else: the kubelet's
//!   10 s Node status sync, which only repairs a Ready condition the lifecycle
//!   controller set while the kubelet was silent, is not modelled, and neither is the
//!   kubelet's silence during an update's reboot (the heartbeat goes on through
//!   `update_ms`, so a node rebooting for a config stays Ready).
//!
//! The GC policies and the render and node controllers live in
//! `crate::controllers`; the checker in `crate::invariants`.

use reconsim_sim::{ProcId, SimTime, StableHasher, TimerId};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest, PatchOp};
use reconsim_world::component::Component;
use reconsim_world::kubelet::{KubeletTiming, NODE_LEASE_NAMESPACE};
use reconsim_world::msg::{Msg, ReqIds, Timer as AnyTimer};
use reconsim_world::object::{
    Body, ConditionStatus, Kind, Lease, Node, NodeStatus, Object, ObjectKey, ObjectMeta,
    OwnerReference, Uid,
};
use reconsim_world::object::{KindInfo, Resource};
use reconsim_world::proc::{Endpoints, WorldCtx};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The node annotation naming the config the node runs.
pub const ANNOTATION_CURRENT: &str = "machineconfiguration.openshift.io/currentConfig";
/// The node annotation naming the config the node should run.
pub const ANNOTATION_DESIRED: &str = "machineconfiguration.openshift.io/desiredConfig";
/// The node annotation with the daemon's state: Done, Working, Degraded.
pub const ANNOTATION_STATE: &str = "machineconfiguration.openshift.io/state";
/// Why the daemon is Degraded.
pub const ANNOTATION_REASON: &str = "machineconfiguration.openshift.io/reason";
/// Rendered configs carry this annotation (`oc adm prune` selects on it).
pub const ANNOTATION_GENERATED_BY: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";
/// Source configs name their pool with this label (the pools' machineConfigSelector).
pub const LABEL_ROLE: &str = "machineconfiguration.openshift.io/role";
/// The in-flight record of a hand-out on the pool: `<prefix><machine>` = config name
/// (this project's proposal; nothing upstream records hand-outs).
pub const ANNOTATION_SERVED_TO_PREFIX: &str = "machineconfiguration.openshift.io/served-to.";
/// Nodes managed by the MCO carry this label (RHCOS); the pools select on it besides
/// the role, so the scenario's infra node (which runs the controllers) is in no pool.
pub const LABEL_OS_ID: &str = "node.openshift.io/os_id";
pub const STATE_DONE: &str = "Done";
pub const STATE_WORKING: &str = "Working";
pub const STATE_DEGRADED: &str = "Degraded";

/// How often the daemon re-reads a missing config, and for how long (SEED-FACTS 3).
pub const DAEMON_POLL_MS: u64 = 10_000;
pub const DAEMON_CONFIG_TIMEOUT_MS: u64 = 300_000;
/// How long Ignition waits before fetching again after a failed fetch (unverified; a
/// few seconds in practice).
pub const FETCH_RETRY_MS: u64 = 5_000;
/// A request unanswered this long failed.
pub const MACHINE_REQUEST_TIMEOUT_MS: u64 = 10_000;

/// A MachineConfig: source or rendered. Has no status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfig {
    /// The merged content, as key -> value pairs (files, osImageURL, ssh keys...).
    pub content: BTreeMap<String, String>,
}

impl Resource for MachineConfig {
    /// A MachineConfig has no status: every change is a spec change.
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
    ));
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolSpec {
    /// spec.nodeSelector (matchLabels).
    pub node_selector: BTreeMap<String, String>,
    /// spec.machineConfigSelector (matchLabels).
    pub machine_config_selector: BTreeMap<String, String>,
    /// spec.configuration.name: the rendered config the pool should run (today's
    /// render controller writes it; the 2019 one wrote only the status).
    pub configuration: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolStatus {
    /// status.configuration.name: the pool's target.
    pub configuration: Option<String>,
    pub machine_count: u32,
    pub updated_machine_count: u32,
    pub degraded_machine_count: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPool {
    pub spec: MachineConfigPoolSpec,
    pub status: MachineConfigPoolStatus,
}

impl Resource for MachineConfigPool {
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigPool",
        "machineconfigpools",
    ));
    reconsim_world::status_subresource!();

    /// What the incident turns on: the pool's rendered config and its machines' progress.
    fn summary(&self) -> Option<String> {
        Some(format!(
            "status.configuration={} updated={}/{}",
            self.status.configuration.as_deref().unwrap_or("-"),
            self.status.updated_machine_count,
            self.status.machine_count
        ))
    }
}

/// The name of the rendered config of `pool` with `content`: `rendered-<pool>-<16 hex>`,
/// the [`StableHasher`] of the content map through its derived `Hash`: the entry count
/// as one word, then per entry in key order the key and the value, each as its bytes
/// (StableHasher::write: 8-byte words, the remainder, the length) and std's 0xff str
/// terminator. Upstream names by an md5 of the spec; only "pure function of content"
/// matters here.
pub fn rendered_name(pool: &str, content: &BTreeMap<String, String>) -> String {
    format!("rendered-{pool}-{:016x}", StableHasher::hash_one(content))
}

/// Merge source configs as MergeMachineConfigs does: in name order, a later config's
/// key overrides an earlier one's.
pub fn merge<'a>(mut configs: Vec<(&'a str, &'a MachineConfig)>) -> BTreeMap<String, String> {
    configs.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = BTreeMap::new();
    for (_, c) in configs {
        for (k, v) in &c.content {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// The label selector a pool uses for its source configs.
pub fn role_selector(pool: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_ROLE.to_string(), pool.to_string())])
}

/// The labels of a node of `pool` (and the pool's node selector).
pub fn node_labels(pool: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("node-role.kubernetes.io/{pool}"), String::new()),
        (LABEL_OS_ID.to_string(), "rhcos".to_string()),
    ])
}

/// A node's (current, desired, state) annotations.
pub fn node_config(node: &Object) -> (Option<&str>, Option<&str>, Option<&str>) {
    let a = &node.meta.annotations;
    (
        a.get(ANNOTATION_CURRENT).map(String::as_str),
        a.get(ANNOTATION_DESIRED).map(String::as_str),
        a.get(ANNOTATION_STATE).map(String::as_str),
    )
}

/// The in-flight records on a pool: (machine, config).
pub fn served_records(pool: &Object) -> impl Iterator<Item = (&str, &str)> {
    pool.meta
        .annotations
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(ANNOTATION_SERVED_TO_PREFIX)?, v.as_str())))
}

/// The request-id tag of Machine Config Servers and booting machines.
pub const MCO_TAG: u16 = 0x0a00;

/// What machines and config servers tell each other (Ignition's HTTPS fetch), as
/// `Msg::Family` payloads.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum McoMsg {
    /// `GET /config/<pool>` from `machine`.
    GetConfig {
        id: u64,
        machine: String,
        pool: String,
    },
    /// The answer: the config's name (its content is what Ignition writes), or why not.
    Config {
        id: u64,
        result: Result<String, String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    /// The server's request `req` for machine-request `id` is abandoned if unanswered.
    ServerRequest {
        req: u64,
    },
    Machine(MachineTimer),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MachineTimer {
    /// Power on, or fetch again.
    Fetch,
    /// Request `req` is overdue.
    Timeout { req: u64 },
    /// The next step of the current phase is due (reboot done, joined, daemon up, retry).
    Next { step: u64 },
    /// The kubelet's periodic node Lease renew.
    RenewLease,
    /// The kubelet retries a failed Lease write.
    RetryLease,
}

// ----- the Machine Config Server ------------------------------------------------------

/// Where a server's answers come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMode {
    /// The bootstrap node's server: the installer's renders, by pool.
    Bootstrap { configs: BTreeMap<String, String> },
    /// The in-cluster server: the pool's target, read live from the API server on each
    /// request (the 2019 `clusterServer.GetConfig`; docs/semantics.md 8.1).
    Cluster { record_hand_outs: bool },
}

/// Which read or write of one `GetConfig` a server request is.
#[derive(Clone, Debug)]
enum Stage {
    /// `MachineConfigPools().Get(pool)`.
    Pool,
    /// `MachineConfigs().Get(status.configuration.name)`, with the pool as read.
    Config { pool: Arc<Object>, name: String },
    /// The hand-out record on the pool (the in-flight GC), conditional on the version read.
    Record { name: String },
}

#[derive(Clone, Debug)]
struct Pending {
    from: ProcId,
    id: u64,
    machine: String,
    stage: Stage,
    /// The request's timeout, cancelled when the answer comes.
    timer: TimerId,
}

/// The Machine Config Server process.
///
/// The in-cluster server holds no cache: like the 2019 code (pkg/server/cluster_server.go
/// @5ea28209, a typed clientset, no lister) each `GET /config/<pool>` is a Get of the pool
/// and then a Get of the config its `status.configuration.name` names, each a consistent
/// read over the network with its latency. A lagging watch cannot make it serve a stale
/// target; a config deleted between the two reads makes the request fail (Ignition
/// retries). The informer-backed server is the 2022 change (4031f6c12), not modelled.
#[derive(Debug)]
pub struct MachineConfigServer {
    mode: ServerMode,
    apiserver: ProcId,
    ids: ReqIds,
    pending: BTreeMap<u64, Pending>,
    /// Every hand-out: (time, machine, config). An observation record for tests.
    pub served: Vec<(SimTime, String, String)>,
    /// API requests sent so far (observation for tests: a cache would send none).
    pub api_requests: u64,
}

/// Bound on the hand-out log (an observation record).
const SERVED_LOG_MAX: usize = 4096;
/// Bound on the server's own requests under way.
const SERVER_PENDING_MAX: usize = 256;

impl MachineConfigServer {
    pub fn new(mode: ServerMode, endpoints: Endpoints) -> Self {
        MachineConfigServer {
            mode,
            apiserver: endpoints.apiserver,
            ids: ReqIds::new(MCO_TAG),
            pending: BTreeMap::new(),
            served: Vec::new(),
            api_requests: 0,
        }
    }

    pub fn mode(&self) -> &ServerMode {
        &self.mode
    }

    fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {
        self.pending.clear();
    }

    fn on_crash(&mut self) {
        self.pending.clear();
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::Family(t) = t else {
            return;
        };
        let Some(&Timer::ServerRequest { req }) = t.typed::<Timer>() else {
            return;
        };
        if let Some(p) = self.pending.remove(&req) {
            let what = match p.stage {
                Stage::Pool => "fetching the pool",
                Stage::Config { .. } => "fetching the config",
                Stage::Record { .. } => "recording the hand-out",
            };
            reply(ctx, p.from, p.id, Err(format!("timed out {what}")));
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::Family(m) => {
                if let Some(McoMsg::GetConfig { id, machine, pool }) = m.typed::<McoMsg>() {
                    self.get_config(from, *id, machine.clone(), pool.clone(), ctx)
                }
            }
            Msg::ApiResp(resp) => {
                let Some(p) = self.pending.remove(&resp.id) else {
                    return;
                };
                ctx.cancel_timer(p.timer);
                self.on_api(p, resp.result, ctx);
            }
            _ => {}
        }
    }

    fn get_config(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        pool: String,
        ctx: &mut WorldCtx<'_>,
    ) {
        if let ServerMode::Bootstrap { configs } = &self.mode {
            match configs.get(&pool) {
                Some(name) => {
                    let name = name.clone();
                    self.hand_out(from, id, machine, name, ctx);
                }
                None => reply(ctx, from, id, Err(format!("no pool {pool}"))),
            }
            return;
        }
        if self.pending.len() >= SERVER_PENDING_MAX {
            return reply(ctx, from, id, Err("busy".into()));
        }
        let key = ObjectKey::new(MachineConfigPool::KIND, "", &pool);
        self.request(from, id, machine, Stage::Pool, ApiOp::Get(key), ctx);
    }

    /// Send `op` to the API server as the `stage` of machine request `id`.
    fn request(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        stage: Stage,
        op: ApiOp,
        ctx: &mut WorldCtx<'_>,
    ) {
        let req = self.ids.issue();
        self.api_requests += 1;
        ctx.send(self.apiserver, Msg::Api(ApiRequest { id: req, op }));
        let timer = ctx.set_timer(
            MACHINE_REQUEST_TIMEOUT_MS,
            Msg::family_timer(Timer::ServerRequest { req }),
        );
        self.pending.insert(
            req,
            Pending {
                from,
                id,
                machine,
                stage,
                timer,
            },
        );
    }

    fn on_api(&mut self, p: Pending, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        let Pending {
            from,
            id,
            machine,
            stage,
            ..
        } = p;
        let record = matches!(
            self.mode,
            ServerMode::Cluster {
                record_hand_outs: true
            }
        );
        match (stage, result) {
            (Stage::Pool, Ok(ApiOk::Object(pool))) => {
                // The 2019 rule: status.configuration.name (the render controller of
                // the time wrote nothing else).
                let Some(name) = pool
                    .typed::<MachineConfigPool>()
                    .and_then(|p| p.status.configuration.clone())
                else {
                    let msg = format!("pool {} has no configuration", pool.meta.name);
                    return reply(ctx, from, id, Err(msg));
                };
                let key = ObjectKey::new(MachineConfig::KIND, "", &name);
                let stage = Stage::Config { pool, name };
                self.request(from, id, machine, stage, ApiOp::Get(key), ctx);
            }
            (Stage::Pool, other) => reply(
                ctx,
                from,
                id,
                Err(format!("could not fetch pool: {other:?}")),
            ),
            (Stage::Config { name, .. }, Ok(_)) if !record => {
                self.hand_out(from, id, machine, name, ctx)
            }
            (Stage::Config { pool, name }, Ok(_)) => {
                // Record first, conditional on the pool version the target was read
                // from: the record lands only if `name` is still the target, before any
                // later change.
                let op = ApiOp::Patch {
                    key: pool.key(),
                    ops: vec![PatchOp::SetAnnotation(
                        format!("{ANNOTATION_SERVED_TO_PREFIX}{machine}"),
                        Some(name.clone()),
                    )],
                    resource_version: Some(pool.meta.resource_version),
                };
                self.request(from, id, machine, Stage::Record { name }, op, ctx);
            }
            (Stage::Config { name, .. }, Err(e)) => reply(
                ctx,
                from,
                id,
                Err(format!("could not fetch config {name}: {e:?}")),
            ),
            (Stage::Record { name }, Ok(_)) => self.hand_out(from, id, machine, name, ctx),
            (Stage::Record { .. }, Err(e)) => {
                reply(ctx, from, id, Err(format!("record failed: {e:?}")))
            }
        }
    }

    fn hand_out(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        name: String,
        ctx: &mut WorldCtx<'_>,
    ) {
        ctx.note(|| format!("mcs: serving {name} to {machine}"));
        if self.served.len() < SERVED_LOG_MAX {
            self.served.push((ctx.now(), machine, name.clone()));
        }
        reply(ctx, from, id, Ok(name));
    }
}

fn reply(ctx: &mut WorldCtx<'_>, to: ProcId, id: u64, result: Result<String, String>) {
    ctx.send(to, Msg::family(McoMsg::Config { id, result }));
}

// ----- a booting machine and its daemon -------------------------------------------------

/// A machine's durations, each drawn uniformly from `[lo, hi]` ms by the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineTiming {
    /// Power-on time (absolute).
    pub boot_at_ms: (u64, u64),
    /// Ignition's first boot: write the config, reboot.
    pub reboot_ms: (u64, u64),
    /// From the reboot to the kubelet's registration.
    pub join_ms: (u64, u64),
    /// From registration to the daemon pod running.
    pub daemon_start_ms: (u64, u64),
    /// An update: drain, write, reboot.
    pub update_ms: (u64, u64),
}

impl Default for MachineTiming {
    fn default() -> Self {
        MachineTiming {
            boot_at_ms: (0, 0),
            reboot_ms: (30_000, 60_000),
            join_ms: (60_000, 180_000),
            daemon_start_ms: (10_000, 60_000),
            update_ms: (120_000, 300_000),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MachineConfigSpec {
    /// The machine's (and its Node's) name.
    pub name: String,
    pub pool: String,
    /// The config server it boots from.
    pub server: ProcId,
    pub timing: MachineTiming,
}

/// What the daemon does once every config of a check is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum After {
    /// Start polling the Node.
    Run,
    /// Write state Working and apply the update.
    Apply,
    /// Write current = desired, state Done.
    Finish,
}

/// Where a machine is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Off,
    Fetching,
    FirstBoot,
    Joining,
    Registering,
    DaemonPending,
    Loading,
    Annotating,
    /// Reading `names` (from `idx`); gives up `DAEMON_CONFIG_TIMEOUT_MS` after `since`.
    Checking {
        names: Vec<String>,
        idx: usize,
        since: SimTime,
        after: After,
    },
    Running,
    Working,
    Applying,
    Finishing,
    Degraded {
        reason: String,
    },
}

/// The kubelet's node Lease request under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeaseReq {
    Get,
    Create,
    Update,
}

/// One machine: Ignition's first boot, the kubelet's registration, the daemon.
#[derive(Debug)]
pub struct McoMachine {
    spec: MachineConfigSpec,
    endpoints: Endpoints,
    ids: ReqIds,
    phase: Phase,
    /// The request under way and its timeout timer.
    req: Option<u64>,
    timeout: Option<TimerId>,
    /// The daemon's view of its Node, kept by a watch on Nodes opened when it starts.
    node: Option<Arc<Object>>,
    watching: bool,
    /// Bumped whenever a step's timer must be forgotten.
    step: u64,
    /// The config the server handed out (what Ignition wrote).
    served: Option<String>,
    /// The daemon wrote the served annotations onto the Node: no longer booting.
    annotated: bool,
    current: Option<String>,
    desired: Option<String>,
    /// When the daemon went Degraded.
    pub degraded_at: Option<SimTime>,
    /// The kubelet's heartbeat: started once the Node is registered.
    heartbeating: bool,
    /// The registered Node's uid (the Lease's owner), if the create answered it.
    node_uid: Option<Uid>,
    /// The node Lease as last read or written, and the Lease request under way.
    lease: Option<Arc<Object>>,
    lease_req: Option<(u64, LeaseReq)>,
    lease_backoff_ms: u64,
    /// Successful Lease writes so far (observation for tests).
    pub heartbeats: u64,
    /// The daemon has reached Running once: from then on the machine is no longer booting.
    has_run: bool,
    /// Reads of its config by the daemon, before it first ran, that the API server answered
    /// NotFound (observation for tests): the report's "secondary masters that were still
    /// booting and expecting to be able to find that MC", counted rather than inferred
    /// from the invariant, which stops at the first violation.
    pub boot_not_found: u64,
    /// When the first of those answers came: tells a bring-up miss from a late joiner's.
    pub first_boot_not_found_at: Option<SimTime>,
}

/// The kubelet's node Lease timing (docs/semantics.md 5.1), shared with the core kubelet.
fn kubelet_timing() -> KubeletTiming {
    KubeletTiming::default()
}

impl McoMachine {
    pub fn new(spec: MachineConfigSpec, endpoints: Endpoints) -> Self {
        McoMachine {
            spec,
            endpoints,
            ids: ReqIds::new(MCO_TAG),
            phase: Phase::Off,
            req: None,
            timeout: None,
            node: None,
            watching: false,
            step: 0,
            served: None,
            annotated: false,
            current: None,
            desired: None,
            degraded_at: None,
            heartbeating: false,
            node_uid: None,
            lease: None,
            lease_req: None,
            lease_backoff_ms: kubelet_timing().lease_retry_ms_min,
            heartbeats: 0,
            has_run: false,
            boot_not_found: 0,
            first_boot_not_found_at: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn pool(&self) -> &str {
        &self.spec.pool
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn served(&self) -> Option<&str> {
        self.served.as_deref()
    }

    /// The config handed to this machine while it is still booting: served, and the
    /// daemon has not yet written it onto the Node.
    pub fn booting_config(&self) -> Option<&str> {
        if self.annotated {
            None
        } else {
            self.served.as_deref()
        }
    }

    /// The daemon has loaded its annotations (the node is MCO-managed).
    pub fn annotated(&self) -> bool {
        self.annotated
    }

    pub fn is_degraded(&self) -> bool {
        matches!(self.phase, Phase::Degraded { .. })
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        // A machine is powered on once; a restart of the process models nothing else.
        if self.phase == Phase::Off {
            let (lo, hi) = self.spec.timing.boot_at_ms;
            let at = ctx.draw_ms(lo, hi);
            let delay = at.saturating_sub(ctx.now().as_ms());
            ctx.set_timer(
                delay,
                Msg::family_timer(Timer::Machine(MachineTimer::Fetch)),
            );
        }
    }

    fn on_crash(&mut self) {
        self.req = None;
        self.timeout = None;
        self.lease_req = None;
        self.lease = None;
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let t = match t {
            AnyTimer::Family(p) => match p.take::<Timer>() {
                Ok(Timer::Machine(t)) => t,
                _ => return,
            },
            _ => return,
        };
        match t {
            MachineTimer::Fetch => {
                if matches!(self.phase, Phase::Off | Phase::Fetching) {
                    self.phase = Phase::Fetching;
                    self.fetch(ctx);
                }
            }
            MachineTimer::Timeout { req } if self.req == Some(req) => {
                self.req = None;
                self.timeout = None;
                self.failed(ctx);
            }
            MachineTimer::Next { step } if step == self.step => self.next(ctx),
            MachineTimer::RenewLease => {
                self.renew_lease(ctx);
                let t = kubelet_timing();
                let jitter = ctx.draw_ms(0, t.lease_renew_jitter_ms);
                ctx.set_timer(
                    t.lease_renew_interval_ms + jitter,
                    Msg::family_timer(Timer::Machine(MachineTimer::RenewLease)),
                );
            }
            MachineTimer::RetryLease => self.renew_lease(ctx),
            _ => {}
        }
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::Watch(ev) => {
                let newer = self
                    .node
                    .as_ref()
                    .is_none_or(|n| n.meta.resource_version < ev.object.meta.resource_version);
                if ev.object.is(&self.node_key()) && newer {
                    self.node = Some(ev.object);
                    if self.phase == Phase::Running {
                        self.look(ctx);
                    }
                }
            }
            Msg::Family(m) => {
                let Some(McoMsg::Config { id, result }) = m.typed::<McoMsg>() else {
                    return;
                };
                if self.req != Some(*id) {
                    return;
                }
                self.answered(ctx);
                match result.clone() {
                    Ok(name) => {
                        ctx.note(|| format!("ignition: got {name}, rebooting"));
                        self.served = Some(name);
                        self.phase = Phase::FirstBoot;
                        let (lo, hi) = self.spec.timing.reboot_ms;
                        self.after(ctx.draw_ms(lo, hi), ctx);
                    }
                    Err(e) => {
                        ctx.note(|| format!("ignition: fetch failed: {e}"));
                        self.failed(ctx);
                    }
                }
            }
            Msg::ApiResp(resp) if self.lease_req.is_some_and(|(id, _)| id == resp.id) => {
                let (_, req) = self.lease_req.take().expect("checked");
                self.on_lease_resp(req, resp.result, ctx);
            }
            Msg::ApiResp(resp) if self.req == Some(resp.id) => {
                self.answered(ctx);
                self.on_api(resp.result, ctx);
            }
            _ => {}
        }
    }

    // ----- steps --------------------------------------------------------------------

    fn node_key(&self) -> ObjectKey {
        ObjectKey::new(Node::KIND, "", &self.spec.name)
    }

    fn fetch(&mut self, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.req = Some(id);
        ctx.send(
            self.spec.server,
            Msg::family(McoMsg::GetConfig {
                id,
                machine: self.spec.name.clone(),
                pool: self.spec.pool.clone(),
            }),
        );
        self.arm_timeout(id, ctx);
    }

    fn call(&mut self, op: ApiOp, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.req = Some(id);
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
        self.arm_timeout(id, ctx);
    }

    /// The request under way got its answer: forget it and its timeout.
    fn answered(&mut self, ctx: &mut WorldCtx<'_>) {
        self.req = None;
        if let Some(t) = self.timeout.take() {
            ctx.cancel_timer(t);
        }
    }

    /// Running: start an update if the cached Node wants another config.
    fn look(&mut self, ctx: &mut WorldCtx<'_>) {
        let desired = self
            .node
            .as_ref()
            .and_then(|n| node_config(n).1.map(str::to_string));
        if let Some(d) = desired
            && Some(&d) != self.current.as_ref()
        {
            ctx.note(|| format!("daemon: update to {d}"));
            self.desired = Some(d.clone());
            self.check(vec![d], After::Apply, ctx);
        }
    }

    fn arm_timeout(&mut self, req: u64, ctx: &mut WorldCtx<'_>) {
        self.timeout = Some(ctx.set_timer(
            MACHINE_REQUEST_TIMEOUT_MS,
            Msg::family_timer(Timer::Machine(MachineTimer::Timeout { req })),
        ));
    }

    /// Run [`Self::next`] after `ms`.
    fn after(&mut self, ms: u64, ctx: &mut WorldCtx<'_>) {
        self.step += 1;
        let step = self.step;
        ctx.set_timer(
            ms,
            Msg::family_timer(Timer::Machine(MachineTimer::Next { step })),
        );
    }

    /// The current step's request failed or got no answer: try it again later.
    fn failed(&mut self, ctx: &mut WorldCtx<'_>) {
        match self.phase {
            Phase::Fetching => {
                ctx.set_timer(
                    FETCH_RETRY_MS,
                    Msg::family_timer(Timer::Machine(MachineTimer::Fetch)),
                );
            }
            Phase::Running | Phase::Degraded { .. } | Phase::Off => {}
            _ => self.after(DAEMON_POLL_MS, ctx),
        }
    }

    /// A timed step is due (or a failed request is retried).
    fn next(&mut self, ctx: &mut WorldCtx<'_>) {
        match self.phase.clone() {
            Phase::FirstBoot => {
                self.phase = Phase::Joining;
                let (lo, hi) = self.spec.timing.join_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            Phase::Joining | Phase::Registering => {
                // The kubelet registers the Node (no annotations yet).
                self.phase = Phase::Registering;
                let mut meta = ObjectMeta::named("", &self.spec.name);
                meta.labels = node_labels(&self.spec.pool);
                let node = Node {
                    spec: Default::default(),
                    status: NodeStatus {
                        ready: ConditionStatus::True,
                        ready_since: Some(ctx.now()),
                        ..Default::default()
                    },
                };
                self.call(
                    ApiOp::Create(Box::new(Object::new(meta, Body::new(node)))),
                    ctx,
                );
            }
            Phase::DaemonPending | Phase::Loading => {
                self.phase = Phase::Loading;
                let key = self.node_key();
                self.call(ApiOp::Get(key), ctx);
            }
            Phase::Annotating => self.annotate(ctx),
            Phase::Checking { names, idx, .. } => {
                let key = ObjectKey::new(MachineConfig::KIND, "", &names[idx]);
                self.call(ApiOp::Get(key), ctx);
            }
            Phase::Working => self.write_state(STATE_WORKING, None, ctx),
            Phase::Applying => {
                // The update's reboot is over: the daemon starts again and reads its
                // current and desired configs.
                let names = [self.current.clone(), self.desired.clone()]
                    .into_iter()
                    .flatten()
                    .collect();
                self.check(names, After::Finish, ctx);
            }
            Phase::Finishing => self.finish(ctx),
            Phase::Running | Phase::Off | Phase::Fetching | Phase::Degraded { .. } => {}
        }
    }

    fn annotate(&mut self, ctx: &mut WorldCtx<'_>) {
        self.phase = Phase::Annotating;
        let name = self.served.clone().expect("served before the daemon runs");
        let key = self.node_key();
        self.call(
            ApiOp::Patch {
                key,
                ops: vec![
                    PatchOp::SetAnnotation(ANNOTATION_CURRENT.into(), Some(name.clone())),
                    PatchOp::SetAnnotation(ANNOTATION_DESIRED.into(), Some(name)),
                    PatchOp::SetAnnotation(ANNOTATION_STATE.into(), Some(STATE_DONE.into())),
                ],
                resource_version: None,
            },
            ctx,
        );
    }

    fn write_state(&mut self, state: &str, reason: Option<String>, ctx: &mut WorldCtx<'_>) {
        let key = self.node_key();
        let mut ops = vec![PatchOp::SetAnnotation(
            ANNOTATION_STATE.into(),
            Some(state.into()),
        )];
        if let Some(r) = reason {
            ops.push(PatchOp::SetAnnotation(ANNOTATION_REASON.into(), Some(r)));
        }
        self.call(
            ApiOp::Patch {
                key,
                ops,
                resource_version: None,
            },
            ctx,
        );
    }

    fn finish(&mut self, ctx: &mut WorldCtx<'_>) {
        self.phase = Phase::Finishing;
        let desired = self
            .desired
            .clone()
            .expect("an update has a desired config");
        let key = self.node_key();
        self.call(
            ApiOp::Patch {
                key,
                ops: vec![
                    PatchOp::SetAnnotation(ANNOTATION_CURRENT.into(), Some(desired)),
                    PatchOp::SetAnnotation(ANNOTATION_STATE.into(), Some(STATE_DONE.into())),
                ],
                resource_version: None,
            },
            ctx,
        );
    }

    fn check(&mut self, names: Vec<String>, after: After, ctx: &mut WorldCtx<'_>) {
        if names.is_empty() {
            return self.proceed(after, ctx);
        }
        self.phase = Phase::Checking {
            names,
            idx: 0,
            since: ctx.now(),
            after,
        };
        self.next(ctx);
    }

    fn proceed(&mut self, after: After, ctx: &mut WorldCtx<'_>) {
        match after {
            After::Run => {
                self.phase = Phase::Running;
                self.has_run = true;
                self.look(ctx);
            }
            After::Apply => {
                self.phase = Phase::Working;
                self.write_state(STATE_WORKING, None, ctx);
            }
            After::Finish => self.finish(ctx),
        }
    }

    fn degrade(&mut self, reason: String, ctx: &mut WorldCtx<'_>) {
        ctx.note(|| format!("daemon: Degraded: {reason}"));
        self.degraded_at = Some(ctx.now());
        self.phase = Phase::Degraded {
            reason: reason.clone(),
        };
        // Fire and forget: the state is also on the process for checkers.
        self.write_state(STATE_DEGRADED, Some(reason), ctx);
    }

    // ----- the kubelet's node Lease ---------------------------------------------------

    /// From the Node's registration on, renew the node Lease every 10 s (+ jitter).
    fn start_heartbeat(&mut self, ctx: &mut WorldCtx<'_>) {
        if self.heartbeating {
            return;
        }
        self.heartbeating = true;
        self.renew_lease(ctx);
        let t = kubelet_timing();
        let jitter = ctx.draw_ms(0, t.lease_renew_jitter_ms);
        ctx.set_timer(
            t.lease_renew_interval_ms + jitter,
            Msg::family_timer(Timer::Machine(MachineTimer::RenewLease)),
        );
    }

    fn lease_key(&self) -> ObjectKey {
        ObjectKey::new(Lease::KIND, NODE_LEASE_NAMESPACE, &self.spec.name)
    }

    fn lease_owner(&self, meta: &mut ObjectMeta) {
        if let Some(uid) = self.node_uid {
            meta.owner_references = vec![OwnerReference {
                kind: Node::KIND,
                name: self.spec.name.clone(),
                uid,
                controller: false,
            }];
        }
    }

    /// One heartbeat: update the Lease last seen (conditional on its version), or read
    /// it if there is none. A request still unanswered is abandoned (its answer is then
    /// ignored; if it landed, the next update is a conflict and a re-read).
    fn renew_lease(&mut self, ctx: &mut WorldCtx<'_>) {
        let (req, op) = match &self.lease {
            Some(current) => {
                let mut next = (**current).clone();
                if let Some(l) = next.typed_mut::<Lease>() {
                    l.holder_identity = Some(self.spec.name.clone());
                    l.lease_duration_seconds = kubelet_timing().lease_duration_s;
                    l.renew_time = Some(ctx.now());
                }
                self.lease_owner(&mut next.meta);
                let op = ApiOp::Update {
                    object: Box::new(next),
                    precondition: true,
                };
                (LeaseReq::Update, op)
            }
            None => (LeaseReq::Get, ApiOp::Get(self.lease_key())),
        };
        self.lease_call(req, op, ctx);
    }

    fn lease_call(&mut self, req: LeaseReq, op: ApiOp, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.lease_req = Some((id, req));
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
    }

    fn on_lease_resp(
        &mut self,
        req: LeaseReq,
        result: Result<ApiOk, ApiError>,
        ctx: &mut WorldCtx<'_>,
    ) {
        let t = kubelet_timing();
        match (req, result) {
            (LeaseReq::Get, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.renew_lease(ctx);
            }
            (LeaseReq::Get, Err(ApiError::NotFound)) => {
                let now = ctx.now();
                let mut meta = ObjectMeta::named(NODE_LEASE_NAMESPACE, &self.spec.name);
                self.lease_owner(&mut meta);
                let lease = Lease {
                    holder_identity: Some(self.spec.name.clone()),
                    lease_duration_seconds: t.lease_duration_s,
                    acquire_time: Some(now),
                    renew_time: Some(now),
                    lease_transitions: 0,
                    ..Default::default()
                };
                let op = ApiOp::Create(Box::new(Object::new(meta, Body::new(lease))));
                self.lease_call(LeaseReq::Create, op, ctx);
            }
            (LeaseReq::Create | LeaseReq::Update, Ok(ApiOk::Object(lease))) => {
                self.lease = Some(lease);
                self.heartbeats += 1;
                self.lease_backoff_ms = t.lease_retry_ms_min;
            }
            _ => {
                // Conflict, AlreadyExists, a timeout...: read it again after a backoff.
                self.lease = None;
                let delay = self.lease_backoff_ms;
                self.lease_backoff_ms = (delay * 2).min(t.lease_retry_ms_max);
                ctx.set_timer(
                    delay,
                    Msg::family_timer(Timer::Machine(MachineTimer::RetryLease)),
                );
            }
        }
    }

    fn on_api(&mut self, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        match (self.phase.clone(), result) {
            (Phase::Registering, result @ (Ok(_) | Err(ApiError::AlreadyExists))) => {
                ctx.note(|| "kubelet: node registered".into());
                if let Ok(ApiOk::Object(node)) = result {
                    self.node_uid = Some(node.meta.uid);
                }
                self.start_heartbeat(ctx);
                self.phase = Phase::DaemonPending;
                let (lo, hi) = self.spec.timing.daemon_start_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            (Phase::Loading, Ok(ApiOk::Object(node))) => {
                if !self.watching {
                    // The daemon's node informer, as a plain watch from what it read.
                    self.watching = true;
                    let id = self.ids.issue();
                    ctx.send(
                        self.endpoints.apiserver,
                        Msg::Api(ApiRequest {
                            id,
                            op: ApiOp::Watch {
                                stream: 0,
                                kinds: vec![Node::KIND],
                                from_rv: node.meta.resource_version,
                            },
                        }),
                    );
                }
                self.node = Some(node.clone());
                let (current, desired, _) = node_config(&node);
                match (current, desired) {
                    (Some(c), Some(d)) => {
                        // Already annotated (a daemon restart): nothing to load.
                        self.current = Some(c.to_string());
                        self.desired = Some(d.to_string());
                        self.annotated = true;
                        let c = c.to_string();
                        self.check(vec![c], After::Run, ctx);
                    }
                    _ => self.annotate(ctx),
                }
            }
            (Phase::Annotating, Ok(_)) => {
                self.annotated = true;
                self.current = self.served.clone();
                self.desired = self.served.clone();
                let c = self.current.clone().expect("served");
                self.check(vec![c], After::Run, ctx);
            }
            (
                Phase::Checking {
                    names,
                    idx,
                    since,
                    after,
                },
                result,
            ) => match result {
                Ok(_) if idx + 1 < names.len() => {
                    self.phase = Phase::Checking {
                        names,
                        idx: idx + 1,
                        since,
                        after,
                    };
                    self.next(ctx);
                }
                Ok(_) => self.proceed(after, ctx),
                Err(e) => {
                    if !self.has_run && e == ApiError::NotFound {
                        self.boot_not_found += 1;
                        self.first_boot_not_found_at.get_or_insert(ctx.now());
                    }
                    if ctx.now().since(since) >= DAEMON_CONFIG_TIMEOUT_MS {
                        let reason = format!(
                            "machineconfig {:?} not found after {} s: {e:?}",
                            names[idx],
                            DAEMON_CONFIG_TIMEOUT_MS / 1000
                        );
                        self.degrade(reason, ctx);
                    } else {
                        self.phase = Phase::Checking {
                            names,
                            idx,
                            since,
                            after,
                        };
                        self.after(DAEMON_POLL_MS, ctx);
                    }
                }
            },
            (Phase::Working, Ok(_)) => {
                self.phase = Phase::Applying;
                let (lo, hi) = self.spec.timing.update_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            (Phase::Finishing, Ok(_)) => {
                self.current = self.desired.clone();
                ctx.note(|| {
                    format!(
                        "daemon: Done at {}",
                        self.current.clone().unwrap_or_default()
                    )
                });
                self.phase = Phase::Running;
                self.has_run = true;
                self.look(ctx);
            }
            (Phase::Degraded { .. }, _) => {}
            // Any other failure: retry the step.
            _ => self.failed(ctx),
        }
    }
}

/// A rendered config object for `pool` with `content`, owned by the pool (uid) as its
/// controller, as the render controller creates it.
pub fn rendered_object(pool: &Object, content: BTreeMap<String, String>) -> Object {
    let mut meta = ObjectMeta::named("", &rendered_name(&pool.meta.name, &content));
    meta.owner_references = vec![reconsim_world::object::OwnerReference {
        kind: MachineConfigPool::KIND,
        name: pool.meta.name.clone(),
        uid: pool.meta.uid,
        controller: true,
    }];
    meta.annotations
        .insert(ANNOTATION_GENERATED_BY.into(), "reconsim".into());
    Object::new(meta, Body::new(MachineConfig { content }))
}

/// A source config of `pool`.
pub fn source_object(name: &str, pool: &str, content: BTreeMap<String, String>) -> Object {
    let mut meta = ObjectMeta::named("", name);
    meta.labels = role_selector(pool);
    Object::new(meta, Body::new(MachineConfig { content }))
}

/// A pool object selecting `node_labels(name)` and `role_selector(name)`.
pub fn pool_object(name: &str) -> Object {
    Object::new(
        ObjectMeta::named("", name),
        Body::new(MachineConfigPool {
            spec: MachineConfigPoolSpec {
                node_selector: node_labels(name),
                machine_config_selector: role_selector(name),
                configuration: None,
            },
            status: Default::default(),
        }),
    )
}

impl Component for MachineConfigServer {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_timer(self, t, ctx)
    }
    fn on_crash(&mut self) {
        MachineConfigServer::on_crash(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Component for McoMachine {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_timer(self, t, ctx)
    }
    fn on_crash(&mut self) {
        McoMachine::on_crash(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
