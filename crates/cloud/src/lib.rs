//! The simulated cloud provider (EC2-like): instances, eventual consistency, node join.
//!
//! Core, not a family: every world runs it as process 1 (the scenario format's `cloud`
//! section and its two faults are top level), and families share it (machine-api and
//! KCP launch through it, a user's program reaches it through `Services::cloud`).
//!
//! One process ([`Cloud`], a [`Component`]) owns every instance ([`node_lifecycle`] is
//! the cluster's controller that deletes the Nodes of gone instances); clients talk to it over
//! the network (a [`CloudOp`] in a `Msg::Request`, the [`CloudResult`] back in a
//! `Msg::Response` to the sender), so every cloud call of a
//! controller is an await point the scheduler can interleave. Real-world rules, from
//! docs/semantics.md section 6:
//! - RunInstances with a `client_token` is idempotent: a retry with the same token and the
//!   same tags returns the first call's instance (whatever its state now, even terminated),
//!   the same token with other tags is `IdempotentParameterMismatch`; a token is remembered
//!   for `client_token_ttl_ms` (24 h) after its instance is terminated. Without a token
//!   every call launches a new instance (6.1).
//! - TerminateInstances is idempotent (6.2): pending/running -> shutting-down, then
//!   terminated after `terminate_ms` (6.4). When shutting-down starts the machine shuts
//!   down: every process on its node's host stops, its kubelet and the containers of its
//!   pods (a controller running there included), see [`Cloud::kubelet`].
//! - Eventual consistency (6.3): a new instance is invisible to DescribeInstances and
//!   TerminateInstances (by id: `InstanceNotFound`, the whole call fails as in EC2; by tag
//!   filter: simply missing) for a seeded delay after launch. AWS publishes no bound, so
//!   the delay is a configuration range; the world fault `CloudDescribeLag` adds to it for
//!   instances launched while the fault is active.
//! - Terminated instances stay visible for `terminated_visible_ms` (about one hour, 6.5),
//!   then vanish (by id: `InstanceNotFound`). Until then they count toward
//!   `max_instances` (6.5: they "count toward instance limits for a while").
//! - Boot and join durations are unverified (6.6), so they are configuration ranges:
//!   pending -> running after `boot_ms_*`; then, if the [`JoinPolicy`] lets the instance
//!   join, after `join_ms_*` (plus any active `NodeJoinDelay` when the countdown starts)
//!   the cloud spawns the node's kubelet on a host named after the instance's private
//!   DNS name, `ip-10-x-y-z`, with providerID `aws:///<zone>/<instance-id>`.
//! - Private addresses (6.8): an instance takes its private IPv4 address, and so its
//!   private DNS name and its Node's name, from the subnet's pool of `subnet_size`
//!   addresses, and releases it when it is terminated; a later launch can get the same
//!   address, so a new machine can come up under a terminated one's Node name. A launch
//!   that finds the pool empty fails with `InsufficientFreeAddressesInSubnet`.
//! - An outside actor (a user in the console, a spot interruption) can terminate an
//!   instance: the world fault `TerminateInstance` does what a TerminateInstances call
//!   would, see [`Cloud::on_fault`].
//!
//! Design: every delay of an instance (boot, visibility lag, join) is drawn from the
//! cloud's own stream at launch, three draws per launch whatever happens later, so
//! timing and faults never shift another instance's draws. The address is not drawn:
//! it is the first free one after the last handed out, wrapping at the subnet's end (a
//! next-fit allocator). That keeps the three draws per launch, makes the address depend
//! only on which instances hold one (never on timing of draws), and with the default,
//! whole-`10.0.0.0/8` subnet gives the k-th launch `ip-10-0-0-k` as before 0.7.0, so no
//! existing scenario reuses a name; EC2 publishes no allocation order (it "selects an
//! available IP address in the subnet's IPv4 range"). Instance ids are
//! `i-` + 17 hex digits of a launch counter: deterministic, and in launch order when
//! sorted. Each instance has at most one pending transition (`next_at`), driven by a
//! timer; stale timers are ignored by checking the state they expect. The cloud's state
//! is the provider's durable database: a crash of the cloud process (an API outage) keeps
//! it, and the restart re-arms every pending transition.
//!
//! [`CloudClient`] is a scripted cloud client (the cloud-side twin of
//! [`reconsim_world::script::Script`]) for tests and scenario user actions.

pub mod node_lifecycle;

use reconsim_sim::{Hashed, ProcId, SimTime};
use reconsim_world::component::{Component, ServiceCaller};
use reconsim_world::fault::WorldFault;
use reconsim_world::kubelet::{Images, Kubelet, KubeletConfig};
use reconsim_world::msg::{Msg, ReqIds, Timer as AnyTimer};
use reconsim_world::proc::{Endpoints, Proc, WorldCtx};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The Node label the kubelet gets for its instance's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The request-id tag of a [`CloudClient`]'s calls.
pub const CLOUD_CLIENT_TAG: u16 = 0x0800;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CloudOp {
    /// Launch one instance with these tags. With a `client_token`, a retry with the same
    /// token returns the instance of the first call instead of launching another.
    RunInstances {
        tags: BTreeMap<String, String>,
        client_token: Option<String>,
    },
    /// Instances by id (if `ids` is not empty), else by tag filter, in any of `states`
    /// (all states if empty). Eventually consistent: a new instance may be missing.
    DescribeInstances {
        ids: Vec<String>,
        tag_filters: BTreeMap<String, String>,
        states: Vec<InstanceState>,
    },
    TerminateInstances {
        ids: Vec<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Instance {
    pub id: String,
    pub tags: BTreeMap<String, String>,
    pub state: InstanceState,
    pub launch_time: SimTime,
    pub client_token: Option<String>,
    /// `ip-10-x-y-z`: also the name of its Node and of the host its kubelet runs on.
    pub private_dns_name: String,
    /// The availability zone, e.g. `us-east-1a`.
    pub zone: String,
}

impl Instance {
    /// The Node name this instance registers as.
    pub fn node_name(&self) -> &str {
        &self.private_dns_name
    }

    /// The Node's `spec.providerID`: `aws:///<zone>/<instance-id>`.
    pub fn provider_id(&self) -> String {
        provider_id(&self.zone, &self.id)
    }
}

/// `aws:///<zone>/<instance-id>`, the providerID format of the AWS cloud provider.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The cloud's answer to a [`CloudOp`]. Instances are shared with the cloud's records
/// (a DescribeInstances answer copies no tag map, and the trace hashes each instance as
/// its digest, computed once: issue 33); an answer is a snapshot, since the cloud copies
/// a record's instance before changing one an answer holds.
pub type CloudResult = Result<Vec<Hashed<Instance>>, CloudError>;

/// A [`CloudClient`]'s record of one answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CloudResponse {
    pub id: u64,
    pub result: CloudResult,
}

/// The cloud's own timer inside a fired one, if it is one.
fn own_timer(t: AnyTimer) -> Option<Timer> {
    match t {
        AnyTimer::Family(p) => p.take::<Timer>().ok(),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CloudError {
    /// The same client token with other parameters.
    IdempotentParameterMismatch,
    /// InvalidInstanceID.NotFound: an id the (eventually consistent) API does not know yet.
    InstanceNotFound(String),
    /// InstanceLimitExceeded: `max_instances` instances (terminated ones included until
    /// they vanish) already exist.
    InstanceLimitExceeded,
    /// InsufficientFreeAddressesInSubnet: every address of the subnet is held by an
    /// instance that is not terminated yet.
    InsufficientFreeAddressesInSubnet,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    /// The instance finished booting: pending -> running.
    Boot(String),
    /// The instance's node joins: spawn its kubelet.
    Join(String),
    /// Shutting-down -> terminated.
    ShutDown(String),
    /// A terminated instance drops out of DescribeInstances.
    Vanish(String),
    /// Forget the instance and its client token.
    Forget(String),
    /// [`CloudClient`]: send step `n`.
    ClientStep(usize),
}

/// Which instances register a Node once running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinPolicy {
    Never,
    Always,
    /// Only instances carrying a tag with this key.
    IfTagged(String),
}

/// The cloud's behaviour. Durations in simulated milliseconds; ranges are inclusive and
/// drawn uniformly from the cloud's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudConfig {
    /// The availability zone every instance is launched in.
    pub zone: String,
    /// pending -> running (6.6: unverified, a scenario parameter).
    pub boot_ms_min: u64,
    pub boot_ms_max: u64,
    /// How long a new instance stays invisible to Describe/Terminate (6.3: no published
    /// bound; AWS advises retrying from "a couple of seconds").
    pub describe_lag_ms_min: u64,
    pub describe_lag_ms_max: u64,
    /// running -> the node's kubelet starts (6.6: unverified).
    pub join_ms_min: u64,
    pub join_ms_max: u64,
    /// shutting-down -> terminated.
    pub terminate_ms: u64,
    /// Upper bound of the shutting-down time when it varies: drawn per instance in
    /// `[terminate_ms, terminate_ms_max]`. `None`: always `terminate_ms`.
    pub terminate_ms_max: Option<u64>,
    /// How long a terminated instance stays visible (6.5: about one hour).
    pub terminated_visible_ms: u64,
    /// How long a client token is remembered after its instance vanishes (6.1: at least
    /// 24 h after termination).
    pub client_token_ttl_ms: u64,
    pub join: JoinPolicy,
    /// Tags whose key starts with this prefix become Node labels, prefix stripped.
    pub node_label_tag_prefix: Option<String>,
    /// Bound on instances that have not vanished yet (InstanceLimitExceeded beyond).
    pub max_instances: usize,
    /// Joining nodes' kubelets need their client certificate approved before they
    /// register (a family runs the approver: OpenShift's cluster-machine-approver).
    pub tls_bootstrap: bool,
    /// How many private addresses the instances' subnet has (6.8): `10.0.0.1` on. An
    /// instance holds one from launch until it is terminated, then a later launch may get
    /// it again, and with it the terminated instance's DNS and Node name. The default,
    /// [`SUBNET_SIZE_MAX`], is never exhausted in practice, so names are not reused.
    pub subnet_size: u32,
}

/// The largest subnet: every address `10.0.0.1` to `10.255.255.254` (a name `ip-10-x-y-z`
/// has three octets to spell it). Larger than a real VPC subnet (at most a /16), so that
/// by default no name is reused, as before 0.7.0.
pub const SUBNET_SIZE_MAX: u32 = (1 << 24) - 2;

/// The private DNS name of the subnet's `n`-th address (from 1): `10.0.0.0` + `n`.
pub fn private_dns_name(n: u32) -> String {
    format!(
        "ip-10-{}-{}-{}",
        (n >> 16) & 0xff,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            zone: "us-east-1a".to_string(),
            boot_ms_min: 10_000,
            boot_ms_max: 30_000,
            describe_lag_ms_min: 1_000,
            describe_lag_ms_max: 5_000,
            join_ms_min: 60_000,
            join_ms_max: 120_000,
            terminate_ms: 30_000,
            terminate_ms_max: None,
            terminated_visible_ms: 3_600_000,
            client_token_ttl_ms: 86_400_000,
            join: JoinPolicy::Always,
            node_label_tag_prefix: None,
            max_instances: 5_000,
            tls_bootstrap: false,
            subnet_size: SUBNET_SIZE_MAX,
        }
    }
}

/// The cloud's ground truth about one instance (what checkers read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceRecord {
    pub instance: Hashed<Instance>,
    /// From this time on DescribeInstances/TerminateInstances see it.
    pub visible_at: SimTime,
    /// Drawn at launch; `None` if the instance never joins.
    pub join_delay_ms: Option<u64>,
    /// When the pending transition of the current state is due.
    pub next_at: Option<SimTime>,
    /// When its kubelet was spawned.
    pub joined_at: Option<SimTime>,
    /// The node's kubelet process, once joined.
    pub kubelet: Option<ProcId>,
    /// Dropped out of DescribeInstances (terminated long enough ago).
    pub vanished: bool,
}

impl InstanceRecord {
    fn visible(&self, now: SimTime) -> bool {
        !self.vanished && now >= self.visible_at
    }
}

/// The cloud provider process.
///
/// Two launches with one client token, a second apart, get one instance (EC2's
/// idempotency, docs/semantics.md 6.1); a launch without one gets another:
///
/// ```
/// use reconsim_cloud::{Cloud, CloudClient, CloudConfig, CloudOp, CloudStep};
/// use reconsim_sim::{FaultPlan, Sim, SimConfig, SimTime};
/// use reconsim_world::kubelet::Images;
/// use reconsim_world::proc::{Endpoints, Proc};
/// use std::collections::BTreeMap;
///
/// let mut sim = Sim::new(SimConfig::new(7), FaultPlan::new(Vec::new()));
/// let host = sim.add_host("cloud");
/// let endpoints = Endpoints { apiserver: reconsim_sim::ProcId(0) };
/// let cloud = Cloud::new(CloudConfig::default(), endpoints, Images::default());
/// let cloud = sim.spawn(host, "cloud", Proc::new(cloud));
/// let launch = |at_ms, token: Option<&str>| CloudStep {
///     at_ms,
///     op: CloudOp::RunInstances {
///         tags: BTreeMap::from([("vm".to_string(), "web".to_string())]),
///         client_token: token.map(str::to_string),
///     },
/// };
/// let steps = vec![launch(0, Some("t-1")), launch(1_000, Some("t-1")), launch(2_000, None)];
/// let client = sim.spawn(host, "client", Proc::new(CloudClient::new(cloud, steps)));
/// sim.run_until(SimTime::from_secs(5));
/// let c = sim.actor(client).component::<CloudClient>().unwrap();
/// let id = |step| c.instances(step)[0].id.clone();
/// assert_eq!(id(0), id(1));
/// assert_ne!(id(0), id(2));
/// ```
#[derive(Debug)]
pub struct Cloud {
    config: CloudConfig,
    endpoints: Endpoints,
    images: Images,
    /// By id; ids sort in launch order.
    records: BTreeMap<String, InstanceRecord>,
    /// Client token -> instance id.
    tokens: BTreeMap<String, String>,
    launched: u64,
    /// The subnet addresses (1 to `subnet_size`) held by instances not yet terminated.
    addresses: BTreeSet<u32>,
    /// The address last handed out: the next launch takes the first free one after it.
    last_address: u32,
    /// Each instance's address, while it holds one.
    address_of: BTreeMap<String, u32>,
    /// Sum of active `CloudDescribeLag` faults.
    describe_lag_extra_ms: u64,
    /// Sum of active `NodeJoinDelay` faults.
    join_extra_ms: u64,
    /// Grows with every step that may change an instance: a launch or termination call,
    /// a timer (boot, join, shutdown, vanish, forget), a fault; DescribeInstances leaves
    /// it ([`Component::changes`]).
    version: u64,
    /// The last DescribeInstances by tags, answered again while it holds.
    described: Option<Described>,
}

/// A DescribeInstances by tags and its answer, which holds while the cloud's `version`
/// is `version` (no instance changed) and before `until`, the next instant an instance
/// becomes visible. The etcd model asks the same every second.
#[derive(Debug)]
struct Described {
    version: u64,
    until: SimTime,
    tag_filters: BTreeMap<String, String>,
    states: Vec<InstanceState>,
    answer: Vec<Hashed<Instance>>,
}

impl Cloud {
    pub fn new(config: CloudConfig, endpoints: Endpoints, images: Images) -> Self {
        Cloud {
            config,
            endpoints,
            images,
            records: BTreeMap::new(),
            tokens: BTreeMap::new(),
            launched: 0,
            addresses: BTreeSet::new(),
            last_address: 0,
            address_of: BTreeMap::new(),
            describe_lag_extra_ms: 0,
            join_extra_ms: 0,
            version: 0,
            described: None,
        }
    }

    pub fn config(&self) -> &CloudConfig {
        &self.config
    }

    // ----- read access for checkers (ground truth, no eventual consistency) -----------

    /// Every instance that has not vanished, in id (= launch) order.
    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.records
            .values()
            .filter(|r| !r.vanished)
            .map(|r| &*r.instance)
    }

    /// An instance that has not vanished.
    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.records
            .get(id)
            .filter(|r| !r.vanished)
            .map(|r| &*r.instance)
    }

    /// The full record of an instance the cloud still remembers (vanished ones included
    /// until their client token expires).
    pub fn record(&self, id: &str) -> Option<&InstanceRecord> {
        self.records.get(id)
    }

    /// The kubelet process of the instance's node, once it joined. A stopped kubelet
    /// stays listed (the kernel keeps stopped processes).
    pub fn kubelet(&self, id: &str) -> Option<ProcId> {
        self.records.get(id).and_then(|r| r.kubelet)
    }

    /// The (non-vanished) instance whose node has this name: the latest launched, since
    /// a name is reused only after its previous holder was terminated (6.8).
    pub fn instance_by_node(&self, node_name: &str) -> Option<&Instance> {
        self.instances()
            .filter(|i| i.private_dns_name == node_name)
            .last()
    }

    /// How many subnet addresses instances hold now (pending, running, shutting down).
    pub fn addresses_in_use(&self) -> usize {
        self.addresses.len()
    }

    /// How many non-vanished instances are in `state`.
    pub fn count(&self, state: InstanceState) -> usize {
        self.instances().filter(|i| i.state == state).count()
    }

    /// Instances that are not terminated (pending, running or shutting down).
    pub fn live_count(&self) -> usize {
        self.instances()
            .filter(|i| i.state != InstanceState::Terminated)
            .count()
    }

    /// How many instances were ever launched.
    pub fn launched(&self) -> u64 {
        self.launched
    }

    // ----- the process ------------------------------------------------------------------

    /// Starts (and restarts after a crash): re-arm every pending transition.
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        for (id, r) in &self.records {
            if let Some(at) = r.next_at {
                ctx.set_timer(
                    at.since(now),
                    Msg::family_timer(transition_timer(r, id.clone())),
                );
            }
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Request { id, body } = msg else {
            return;
        };
        let Ok(op) = body.take::<CloudOp>() else {
            return;
        };
        if !matches!(op, CloudOp::DescribeInstances { .. }) {
            self.version += 1;
        }
        let result = match op {
            CloudOp::RunInstances { tags, client_token } => {
                self.run_instances(tags, client_token, ctx)
            }
            CloudOp::DescribeInstances {
                ids,
                tag_filters,
                states,
            } => self.describe_instances(&ids, &tag_filters, &states, ctx.now()),
            CloudOp::TerminateInstances { ids } => self.terminate_instances(&ids, ctx),
        };
        ctx.send(from, Msg::response(id, result));
    }

    fn on_timer(&mut self, t: Timer, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now();
        match t {
            Timer::Boot(id) => {
                let extra_ms = self.join_extra_ms;
                let Some(r) = self.records.get_mut(&id) else {
                    return;
                };
                if r.instance.state != InstanceState::Pending {
                    return;
                }
                Hashed::make_mut(&mut r.instance).state = InstanceState::Running;
                r.next_at = None;
                if let Some(delay_ms) = r.join_delay_ms {
                    let delay_ms = delay_ms.saturating_add(extra_ms);
                    r.next_at = Some(now.plus_ms(delay_ms));
                    ctx.set_timer(delay_ms, Msg::family_timer(Timer::Join(id)));
                }
            }
            Timer::Join(id) => {
                let Some(r) = self.records.get_mut(&id) else {
                    return;
                };
                if r.instance.state != InstanceState::Running || r.joined_at.is_some() {
                    return;
                }
                r.next_at = None;
                r.joined_at = Some(now);
                let node_name = r.instance.private_dns_name.clone();
                let mut labels = BTreeMap::new();
                labels.insert(ZONE_LABEL.to_string(), r.instance.zone.clone());
                if let Some(prefix) = &self.config.node_label_tag_prefix {
                    for (k, v) in &r.instance.tags {
                        if let Some(key) = k.strip_prefix(prefix.as_str())
                            && !key.is_empty()
                        {
                            labels.insert(key.to_string(), v.clone());
                        }
                    }
                }
                let config = KubeletConfig {
                    node_name: node_name.clone(),
                    provider_id: Some(r.instance.provider_id()),
                    labels,
                    taints: Vec::new(),
                    tls_bootstrap: self.config.tls_bootstrap,
                };
                let kubelet = Kubelet::new(config, self.endpoints, self.images.clone());
                let pid = ctx.spawn_on(
                    node_name.clone(),
                    format!("kubelet/{node_name}"),
                    Proc::new(kubelet),
                );
                r.kubelet = Some(pid);
                ctx.note(|| format!("cloud: {id} joins as node {node_name}"));
            }
            Timer::ShutDown(id) => {
                let Some(r) = self.records.get_mut(&id) else {
                    return;
                };
                if r.instance.state != InstanceState::ShuttingDown {
                    return;
                }
                Hashed::make_mut(&mut r.instance).state = InstanceState::Terminated;
                // Terminated, the instance releases its private address to the subnet.
                if let Some(a) = self.address_of.remove(&id) {
                    self.addresses.remove(&a);
                }
                let after_ms = self.config.terminated_visible_ms;
                r.next_at = Some(now.plus_ms(after_ms));
                ctx.set_timer(after_ms, Msg::family_timer(Timer::Vanish(id)));
            }
            Timer::Vanish(id) => {
                let Some(r) = self.records.get_mut(&id) else {
                    return;
                };
                if r.instance.state != InstanceState::Terminated || r.vanished {
                    return;
                }
                r.vanished = true;
                let after_ms = self.config.client_token_ttl_ms;
                r.next_at = Some(now.plus_ms(after_ms));
                ctx.set_timer(after_ms, Msg::family_timer(Timer::Forget(id)));
            }
            Timer::Forget(id) => {
                if !self.records.get(&id).is_some_and(|r| r.vanished) {
                    return;
                }
                let r = self.records.remove(&id).expect("checked above");
                if let Some(token) = &r.instance.client_token
                    && self.tokens.get(token) == Some(&id)
                {
                    self.tokens.remove(token);
                }
            }
            Timer::ClientStep(_) => {}
        }
    }

    /// The cloud's database is durable: a crash is an API outage, not data loss. Only the
    /// active world faults (conditions of the running process) are forgotten, since their
    /// revert is not delivered to a crashed process.
    fn on_crash(&mut self) {
        self.describe_lag_extra_ms = 0;
        self.join_extra_ms = 0;
    }

    /// The cloud's world faults: the two timing faults add to their delay while active;
    /// `TerminateInstance` terminates its instance when it starts.
    fn on_fault(&mut self, f: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        let (total, by) = match f {
            WorldFault::TerminateInstance { launch, tag } => {
                if active {
                    self.terminate_by_outsider(*launch, tag.as_deref(), ctx);
                }
                return;
            }
            WorldFault::CloudDescribeLag { lag_ms } => (&mut self.describe_lag_extra_ms, *lag_ms),
            WorldFault::NodeJoinDelay { extra_ms } => (&mut self.join_extra_ms, *extra_ms),
            WorldFault::KubeletStop
            | WorldFault::WatchLag { .. }
            | WorldFault::WatchStall { .. }
            | WorldFault::Resync
            | WorldFault::Failpoint { .. }
            | WorldFault::Operation(_) => {
                return;
            }
        };
        *total = if active {
            total.saturating_add(by)
        } else {
            total.saturating_sub(by)
        };
    }

    // ----- the API ----------------------------------------------------------------------

    fn run_instances(
        &mut self,
        tags: BTreeMap<String, String>,
        client_token: Option<String>,
        ctx: &mut WorldCtx<'_>,
    ) -> CloudResult {
        if let Some(token) = &client_token
            && let Some(id) = self.tokens.get(token)
        {
            let r = &self.records[id];
            return if r.instance.tags == tags {
                Ok(vec![r.instance.clone()])
            } else {
                Err(CloudError::IdempotentParameterMismatch)
            };
        }
        if self.instances().count() >= self.config.max_instances {
            return Err(CloudError::InstanceLimitExceeded);
        }
        // Refused before the draws, as the limit is: a refused launch draws nothing.
        let Some(address) = self.free_address() else {
            return Err(CloudError::InsufficientFreeAddressesInSubnet);
        };
        // Three draws per launch, always, so later choices never shift the stream.
        let c = &self.config;
        let (boot_lo, boot_hi) = (c.boot_ms_min, c.boot_ms_max);
        let (lag_lo, lag_hi) = (c.describe_lag_ms_min, c.describe_lag_ms_max);
        let (join_lo, join_hi) = (c.join_ms_min, c.join_ms_max);
        let boot_ms = ctx.draw_ms(boot_lo, boot_hi);
        let lag_ms = ctx.draw_ms(lag_lo, lag_hi);
        let join_ms = ctx.draw_ms(join_lo, join_hi);

        self.launched += 1;
        let n = self.launched;
        let id = format!("i-{n:017x}");
        let joins = match &self.config.join {
            JoinPolicy::Never => false,
            JoinPolicy::Always => true,
            JoinPolicy::IfTagged(key) => tags.contains_key(key),
        };
        let now = ctx.now();
        let instance = Instance {
            id: id.clone(),
            tags,
            state: InstanceState::Pending,
            launch_time: now,
            client_token: client_token.clone(),
            private_dns_name: private_dns_name(address),
            zone: self.config.zone.clone(),
        };
        self.addresses.insert(address);
        self.address_of.insert(id.clone(), address);
        self.last_address = address;
        let instance = Hashed::new(instance);
        let record = InstanceRecord {
            instance: instance.clone(),
            visible_at: now.plus_ms(lag_ms.saturating_add(self.describe_lag_extra_ms)),
            join_delay_ms: joins.then_some(join_ms),
            next_at: Some(now.plus_ms(boot_ms)),
            joined_at: None,
            kubelet: None,
            vanished: false,
        };
        ctx.set_timer(boot_ms, Msg::family_timer(Timer::Boot(id.clone())));
        if let Some(token) = client_token {
            self.tokens.insert(token, id.clone());
        }
        ctx.note(|| format!("cloud: launched {id}"));
        self.records.insert(id, record);
        Ok(vec![instance])
    }

    /// The first free address after the last one handed out, wrapping at the subnet's
    /// end (next fit; why not a draw: the module doc); `None` when all are held.
    fn free_address(&self) -> Option<u32> {
        let size = self.config.subnet_size;
        if self.addresses.len() >= size as usize {
            return None;
        }
        let mut a = self.last_address;
        // At most one more step than there are held addresses.
        loop {
            a = if a >= size { 1 } else { a + 1 };
            if !self.addresses.contains(&a) {
                return Some(a);
            }
        }
    }

    fn describe_instances(
        &mut self,
        ids: &[String],
        tag_filters: &BTreeMap<String, String>,
        states: &[InstanceState],
        now: SimTime,
    ) -> CloudResult {
        let state_ok = |i: &Instance| states.is_empty() || states.contains(&i.state);
        if !ids.is_empty() {
            let found = self.visible_by_ids(ids, now)?;
            return Ok(found.into_iter().filter(|i| state_ok(i)).cloned().collect());
        }
        if let Some(d) = &self.described
            && d.version == self.version
            && now < d.until
            && d.states == states
            && d.tag_filters == *tag_filters
        {
            return Ok(d.answer.clone());
        }
        let until = self
            .records
            .values()
            .filter(|r| !r.vanished && r.visible_at > now)
            .map(|r| r.visible_at)
            .min()
            .unwrap_or(SimTime::MAX);
        let answer: Vec<Hashed<Instance>> = self
            .records
            .values()
            .filter(|r| r.visible(now))
            .map(|r| &r.instance)
            // A scan of the instance's few tags, lengths first, finds a key sooner than
            // the map's search by order.
            .filter(|i| {
                tag_filters
                    .iter()
                    .all(|(k, v)| i.tags.iter().any(|(tk, tv)| tk == k && tv == v))
            })
            .filter(|i| state_ok(i))
            .cloned()
            .collect();
        self.described = Some(Described {
            version: self.version,
            until,
            tag_filters: tag_filters.clone(),
            states: states.to_vec(),
            answer: answer.clone(),
        });
        Ok(answer)
    }

    /// Every id, or `InstanceNotFound` for the first one the API cannot see (EC2 fails
    /// the whole call). Duplicates are answered once.
    fn visible_by_ids(
        &self,
        ids: &[String],
        now: SimTime,
    ) -> Result<Vec<&Hashed<Instance>>, CloudError> {
        let mut out: Vec<&Hashed<Instance>> = Vec::with_capacity(ids.len());
        for id in ids {
            match self.records.get(id) {
                Some(r) if r.visible(now) => {
                    if !out.iter().any(|i| i.id == *id) {
                        out.push(&r.instance);
                    }
                }
                _ => return Err(CloudError::InstanceNotFound(id.clone())),
            }
        }
        Ok(out)
    }

    fn terminate_instances(&mut self, ids: &[String], ctx: &mut WorldCtx<'_>) -> CloudResult {
        let now = ctx.now();
        let targets: Vec<String> = self
            .visible_by_ids(ids, now)?
            .into_iter()
            .map(|i| i.id.clone())
            .collect();
        let mut out = Vec::with_capacity(targets.len());
        for id in targets {
            out.push(self.terminate(&id, ctx));
        }
        Ok(out)
    }

    /// Terminate one known instance (idempotent): a live one goes shutting-down, and its
    /// machine shuts down. Its record's instance as it is now.
    fn terminate(&mut self, id: &str, ctx: &mut WorldCtx<'_>) -> Hashed<Instance> {
        let now = ctx.now();
        let lo = self.config.terminate_ms;
        let hi = self.config.terminate_ms_max.unwrap_or(lo);
        // No draw for a fixed time, so fixed-time worlds keep their histories.
        let terminate_ms = ctx.draw_ms(lo, hi);
        let r = self.records.get_mut(id).expect("a known instance");
        if matches!(
            r.instance.state,
            InstanceState::Pending
                | InstanceState::Running
                | InstanceState::Stopping
                | InstanceState::Stopped
        ) {
            Hashed::make_mut(&mut r.instance).state = InstanceState::ShuttingDown;
            r.next_at = Some(now.plus_ms(terminate_ms));
            ctx.set_timer(
                terminate_ms,
                Msg::family_timer(Timer::ShutDown(id.to_string())),
            );
            // The machine shuts down: its kubelet and every container it runs.
            if let Some(kubelet) = r.kubelet {
                ctx.stop_host_of(kubelet);
            }
            ctx.note(|| format!("cloud: terminating {id}"));
        }
        r.instance.clone()
    }

    /// The `TerminateInstance` fault: an outside actor (who knows the instance's id, so
    /// no visibility lag applies) terminates the `launch`-th launched instance, or the
    /// oldest one not yet terminated, if it carries `tag` (`key=value` or `key`).
    fn terminate_by_outsider(
        &mut self,
        launch: Option<u64>,
        tag: Option<&str>,
        ctx: &mut WorldCtx<'_>,
    ) {
        let tagged = |i: &Instance| match tag {
            None => true,
            Some(t) => match t.split_once('=') {
                Some((k, v)) => i.tags.get(k).is_some_and(|x| x == v),
                None => i.tags.contains_key(t),
            },
        };
        let live = |i: &Instance| {
            !matches!(
                i.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            )
        };
        let target = match launch {
            Some(n) => self
                .instance(&format!("i-{n:017x}"))
                .filter(|i| live(i) && tagged(i)),
            None => self.instances().find(|i| live(i) && tagged(i)),
        }
        .map(|i| i.id.clone());
        match target {
            Some(id) => {
                ctx.note(|| format!("cloud: an outside actor terminates {id}"));
                self.terminate(&id, ctx);
            }
            None => ctx.note(|| "cloud: no instance for the outside termination".into()),
        }
    }
}

/// The timer of the transition pending in `r`'s current state.
fn transition_timer(r: &InstanceRecord, id: String) -> Timer {
    match r.instance.state {
        InstanceState::Pending => Timer::Boot(id),
        InstanceState::Running | InstanceState::Stopping | InstanceState::Stopped => {
            Timer::Join(id)
        }
        InstanceState::ShuttingDown => Timer::ShutDown(id),
        InstanceState::Terminated if r.vanished => Timer::Forget(id),
        InstanceState::Terminated => Timer::Vanish(id),
    }
}

// ----- a scripted client ------------------------------------------------------------------

/// One scripted cloud request.
#[derive(Clone, Debug)]
pub struct CloudStep {
    pub at_ms: u64,
    pub op: CloudOp,
}

/// A scripted cloud client: sends each step at its time (its own clock) and keeps every
/// answer. For tests and for cloud-side user actions in scenarios.
#[derive(Debug)]
pub struct CloudClient {
    cloud: ProcId,
    steps: Vec<CloudStep>,
    ids: ReqIds,
    /// The request id of each sent step (0 = not sent yet).
    sent: Vec<u64>,
    /// Every response, with the step it answers and when it came.
    pub responses: Vec<(usize, SimTime, CloudResponse)>,
}

impl CloudClient {
    pub fn new(cloud: ProcId, steps: Vec<CloudStep>) -> Self {
        let n = steps.len();
        CloudClient {
            cloud,
            steps,
            ids: ReqIds::new(CLOUD_CLIENT_TAG),
            sent: vec![0; n],
            responses: Vec::new(),
        }
    }

    /// The response to step `n`, if it came.
    pub fn response(&self, step: usize) -> Option<&CloudResponse> {
        self.responses
            .iter()
            .find(|(s, _, _)| *s == step)
            .map(|(_, _, r)| r)
    }

    /// The instances step `n` got back; panics if it has no successful answer.
    pub fn instances(&self, step: usize) -> &[Hashed<Instance>] {
        match self.response(step) {
            Some(CloudResponse { result: Ok(v), .. }) => v,
            other => panic!("step {step} has no successful answer: {other:?}"),
        }
    }

    /// Arms every step not yet sent (a restart after a crash does not resend).
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now().as_ms();
        for (i, step) in self.steps.iter().enumerate() {
            if self.sent[i] == 0 {
                ctx.set_timer(
                    step.at_ms.saturating_sub(now),
                    Msg::family_timer(Timer::ClientStep(i)),
                );
            }
        }
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        if let Msg::Response { id, body } = msg
            && let Some(result) = body.typed::<CloudResult>()
            && let Some(step) = self.sent.iter().position(|sent| *sent == id)
        {
            let resp = CloudResponse {
                id,
                result: result.clone(),
            };
            self.responses.push((step, ctx.now(), resp));
        }
    }

    fn on_timer(&mut self, t: Timer, ctx: &mut WorldCtx<'_>) {
        let Timer::ClientStep(i) = t else {
            return;
        };
        if self.sent[i] != 0 {
            return;
        }
        let id = self.ids.issue();
        self.sent[i] = id;
        let op = self.steps[i].op.clone();
        ctx.send(self.cloud, Msg::request(id, op));
    }
}

impl Component for Cloud {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.version += 1;
        Cloud::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        Cloud::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        self.version += 1;
        if let Some(t) = own_timer(t) {
            Cloud::on_timer(self, t, ctx)
        }
    }
    fn on_crash(&mut self) {
        self.version += 1;
        Cloud::on_crash(self)
    }
    fn on_fault(&mut self, f: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        self.version += 1;
        Cloud::on_fault(self, f, active, ctx)
    }
    fn changes(&self) -> Option<u64> {
        Some(self.version)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Component for CloudClient {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        CloudClient::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        CloudClient::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        if let Some(t) = own_timer(t) {
            CloudClient::on_timer(self, t, ctx)
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The world's cloud instances, as a checker reads them (none if the world runs no
/// cloud); `cloud` keeps where the cloud process is between checks.
pub fn instances<'a>(
    view: &reconsim_check::View<'a>,
    cloud: &mut Option<ProcId>,
) -> impl Iterator<Item = &'a Instance> + use<'a> {
    view.find_cached::<Cloud>(cloud)
        .into_iter()
        .flat_map(|c| c.instances())
}

/// The cloud's typed async client, as the AWS SDK is for a real actuator: for
/// reconcilers in kube-runtime's shape (over `reconsim_world::runtime::Client`) and for
/// real kube-rs programs (over reconsim-kube's `Handle`). Each call is one request to
/// the cloud process, an await point, and the cloud's own errors come back as
/// [`CloudError`]s inside `Ok`; `Err` is the caller's (a timeout, a lost connection).
#[derive(Clone, Debug)]
pub struct Ec2<C = reconsim_world::runtime::Client> {
    client: C,
    cloud: ProcId,
}

/// A cloud call's result: the request failed (`Err`, a timeout), or the cloud answered.
pub type Ec2Result<E = reconsim_world::runtime::Error> = Result<CloudResult, E>;

impl<C: ServiceCaller> Ec2<C> {
    /// A client of the cloud process `cloud`, through `client`.
    pub fn new(client: C, cloud: ProcId) -> Self {
        Ec2 { client, cloud }
    }

    async fn call(&self, op: CloudOp) -> Ec2Result<C::Error> {
        self.client.call::<CloudResult>(self.cloud, op).await
    }

    /// RunInstances: one instance with `tags`; with a `client_token`, idempotent.
    pub async fn run_instances(
        &self,
        tags: BTreeMap<String, String>,
        client_token: Option<String>,
    ) -> Ec2Result<C::Error> {
        self.call(CloudOp::RunInstances { tags, client_token })
            .await
    }

    /// DescribeInstances by id (if `ids` is not empty), else by tag filter, in any of
    /// `states` (all if empty). Eventually consistent.
    pub async fn describe_instances(
        &self,
        ids: Vec<String>,
        tag_filters: BTreeMap<String, String>,
        states: Vec<InstanceState>,
    ) -> Ec2Result<C::Error> {
        let op = CloudOp::DescribeInstances {
            ids,
            tag_filters,
            states,
        };
        self.call(op).await
    }

    /// TerminateInstances (idempotent).
    pub async fn terminate_instances(&self, ids: Vec<String>) -> Ec2Result<C::Error> {
        self.call(CloudOp::TerminateInstances { ids }).await
    }
}
