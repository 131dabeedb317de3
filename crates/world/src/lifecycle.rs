//! The node lifecycle controller: marks silent nodes Unknown, taints them, and evicts
//! the pods that do not tolerate the taint. One process in the control plane.
//!
//! Rules (docs/semantics.md section 5):
//! - Health (5.2): every `monitor_period_ms` (node-monitor-period, 5 s) it checks each
//!   Node. It keeps, per node, a probe time on ITS OWN clock, set whenever it observes the
//!   node Lease's renewTime change or the Ready condition change (and when it first sees
//!   the node). If `now > probe + grace_period_ms` (node-monitor-grace-period, 40 s, 5.3)
//!   and Ready is not already Unknown, it sets Ready=Unknown ("Kubelet stopped posting
//!   node status"). Only changes of renewTime matter, never its value, so clock skew
//!   between kubelet and controller is harmless (as in 1.4).
//! - Taints (5.4): a node whose Ready is Unknown carries `node.kubernetes.io/unreachable`
//!   NoExecute, one whose Ready is False carries `node.kubernetes.io/not-ready` NoExecute,
//!   with `timeAdded` = the controller's now; a Ready node carries neither. The kubelet
//!   sets Ready back to True when it returns; the controller then removes the taint.
//!   Status and taints are written in one patch, conditional on the cached
//!   resourceVersion (a conflict is retried at the next period).
//! - Taint-based eviction (5.5, 5.6): a pod bound to a node with a NoExecute taint it does
//!   not tolerate is evicted at once; one that tolerates every such taint for
//!   tolerationSeconds is evicted when the shortest runs out, counted from the taint's
//!   timeAdded; a toleration without seconds tolerates forever. Eviction is an ordinary
//!   (graceful) Delete: the API server marks the pod and it stays Terminating until its
//!   kubelet confirms. The API server's DefaultTolerationSeconds admission (5.9) gives
//!   every new pod 300 s for not-ready and unreachable unless it says otherwise; a pod
//!   with tolerationSeconds 0 (or a seeded pod without the toleration) goes at once.
//! - Pod GC of orphans (not in semantics.md; KK `pkg/controller/podgc`): a pod bound to a
//!   Node that no longer exists is force-deleted (grace 0) after `orphan_quarantine_ms`,
//!   since no kubelet will ever confirm it (5.6: "the Node object is deleted").
//!
//! Not modelled: the eviction rate limits (0.1 node/s, zone disruption modes), the
//! startup grace period, Memory/Disk/PID pressure conditions.

use crate::api::{ApiOp, ApiRequest, PatchOp};
use crate::component::{Component, Endpoints, UNREAD, WorldCtx};
use crate::informer::{Cache, Informer};
use crate::kubelet::NODE_LEASE_NAMESPACE;
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::{
    Body, ConditionStatus, Node, Object, ObjectKey, TAINT_NOT_READY, TAINT_UNREACHABLE, Taint,
    TaintEffect, Toleration, Uid,
};
use crate::object::{Lease, Pod, Resource};
use reconsim_sim::{ProcId, SimTime, TimerId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The process name (on the control plane's `controller-manager` host).
pub const NAME: &str = "node-lifecycle";

pub use crate::timer::LifecycleTimer as Timer;

/// The controller's durations (docs/semantics.md 5.2-5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// node-monitor-period.
    pub monitor_period_ms: u64,
    /// node-monitor-grace-period (40 s; 50 s from Kubernetes 1.32).
    pub grace_period_ms: u64,
    /// How long a pod bound to a vanished Node waits before it is force-deleted.
    pub orphan_quarantine_ms: u64,
    /// After this long without the pod getting its deletionTimestamp, an eviction is sent
    /// again (the first was lost).
    pub eviction_retry_ms: u64,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            monitor_period_ms: 5_000,
            grace_period_ms: 40_000,
            orphan_quarantine_ms: 40_000,
            eviction_retry_ms: 10_000,
        }
    }
}

/// What the controller remembers of one node, on its own clock.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeHealth {
    probe: SimTime,
    renew_time: Option<SimTime>,
    ready: ConditionStatus,
    /// Its node Lease's key, made once (every pass reads the Lease).
    lease: ObjectKey,
}

/// The NoExecute taint a node's Ready condition wants, and those it drops.
fn no_execute_taints(ready: ConditionStatus) -> (Option<&'static str>, [&'static str; 2]) {
    match ready {
        ConditionStatus::True => (None, [TAINT_UNREACHABLE, TAINT_NOT_READY]),
        ConditionStatus::Unknown => (Some(TAINT_UNREACHABLE), [TAINT_NOT_READY, TAINT_NOT_READY]),
        ConditionStatus::False => (
            Some(TAINT_NOT_READY),
            [TAINT_UNREACHABLE, TAINT_UNREACHABLE],
        ),
    }
}

/// Whether `taints` already are what Ready `ready` asks: none it drops, the one it wants.
fn taints_follow(taints: &[Taint], ready: ConditionStatus) -> bool {
    let (want, drop) = no_execute_taints(ready);
    let no_execute = |t: &&Taint| t.effect == TaintEffect::NoExecute;
    !taints
        .iter()
        .filter(no_execute)
        .any(|t| drop.contains(&t.key.as_str()))
        && want.is_none_or(|k| taints.iter().filter(no_execute).any(|t| t.key == k))
}

/// The renewTime of the Lease under `key` in `cache`.
fn renew_time_of(cache: &Cache, key: &ObjectKey) -> Option<SimTime> {
    cache
        .get(key)
        .and_then(|l| l.typed::<Lease>())
        .and_then(|l| l.renew_time)
}

#[derive(Debug)]
pub struct NodeLifecycle {
    pub config: LifecycleConfig,
    endpoints: Endpoints,
    informer: Informer,
    ids: ReqIds,
    health: BTreeMap<String, NodeHealth>,
    /// Evictions sent: pod key -> (uid, when).
    evicted: BTreeMap<ObjectKey, (Uid, SimTime)>,
    /// Pods whose Node is gone, since when.
    orphans: BTreeMap<ObjectKey, SimTime>,
    evict_timer: Option<(SimTime, TimerId)>,
    evictions: u64,
    /// `health` may lag the cache: changes came while the informer was not synced, or
    /// the records were lost in a crash. The monitor tick then re-reads every node;
    /// otherwise each change was observed when it came, and a re-read finds nothing new.
    stale: bool,
    /// Until this instant the monitor tick's passes would write nothing: no node can go
    /// silent, no toleration or quarantine runs out and no eviction is due a retry, and
    /// nothing they read changed since they last ran (a Node or Pod change, or any pass
    /// run off the tick, resets it to zero). The tick skips them while it holds.
    quiet_until: SimTime,
}

impl NodeLifecycle {
    pub fn new(config: LifecycleConfig, endpoints: Endpoints) -> Self {
        NodeLifecycle {
            config,
            endpoints,
            informer: Informer::new(
                1,
                &[Node::KIND, Lease::KIND, Pod::KIND],
                endpoints.apiserver,
            ),
            ids: ReqIds::new(tags::LIFECYCLE),
            health: BTreeMap::new(),
            evicted: BTreeMap::new(),
            orphans: BTreeMap::new(),
            evict_timer: None,
            evictions: 0,
            stale: true,
            quiet_until: SimTime::ZERO,
        }
    }

    /// Evictions sent so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }
}

/// The node lifecycle controller as a process of the world.
impl Component for NodeLifecycle {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.endpoints.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        // The informer starts cold: nothing is known until it lists.
        self.stale = true;
        self.quiet_until = SimTime::ZERO;
        self.informer.start(ctx);
        ctx.set_timer(
            self.config.monitor_period_ms,
            Msg::Timer(AnyTimer::Lifecycle(Timer::Monitor)),
        );
    }

    fn on_crash(&mut self) {
        self.health.clear();
        self.evicted.clear();
        self.orphans.clear();
        self.evict_timer = None;
        self.stale = true;
        self.quiet_until = SimTime::ZERO;
    }

    // Responses to our writes are not needed: the next period re-reads the cache.
    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let mut changes = Vec::new();
        if !self.informer.handle(&msg, ctx, &mut changes) || changes.is_empty() {
            return;
        }
        if !self.informer.synced() {
            self.stale = true;
        } else {
            self.observe_changes(&changes, ctx.now());
            // Evictions depend on Nodes (taints) and Pods only; a node Lease renewal,
            // most of the traffic, cannot make one due (the monitor tick re-checks).
            if changes
                .iter()
                .any(|o| o.kind() == Node::KIND || o.kind() == Pod::KIND)
            {
                self.quiet_until = SimTime::ZERO;
                let _ = self.evict(ctx);
            }
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        match t {
            AnyTimer::Informer(t) => {
                self.informer.on_timer(&t, ctx);
            }
            AnyTimer::Lifecycle(Timer::Monitor) => {
                if self.informer.synced() {
                    if self.stale {
                        self.observe(ctx.now());
                    }
                    if ctx.now() >= self.quiet_until {
                        let monitor = self.monitor(ctx);
                        let evict = self.evict(ctx);
                        self.quiet_until =
                            monitor.zip(evict).map_or(SimTime::ZERO, |(m, e)| m.min(e));
                    }
                }
                ctx.set_timer(
                    self.config.monitor_period_ms,
                    Msg::Timer(AnyTimer::Lifecycle(Timer::Monitor)),
                );
            }
            AnyTimer::Lifecycle(Timer::Evict) => {
                self.evict_timer = None;
                if self.informer.synced() {
                    self.quiet_until = SimTime::ZERO;
                    let _ = self.evict(ctx);
                }
            }
            _ => {}
        }
    }

    /// Its taints and evictions are writes to the API server.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl NodeLifecycle {
    fn api(&mut self, ctx: &mut WorldCtx<'_>, op: ApiOp) {
        let id = self.ids.issue();
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
    }

    /// Update the probe times from the cache: a changed lease renewTime or Ready.
    /// [`Self::observe`] for just the changed objects: a node Lease renewal (most of
    /// the traffic) updates its node's record; anything else re-reads everything.
    fn observe_changes(&mut self, changes: &[Arc<Object>], now: SimTime) {
        let cache = self.informer.cache();
        for o in changes {
            // A renewal of a known node's Lease that the cache holds as it came: its
            // entry's Lease key is this object's (no key made per event).
            let renewal = o.kind() == Lease::KIND && o.meta.namespace == NODE_LEASE_NAMESPACE;
            let known = renewal
                .then(|| self.health.get_mut(o.meta.name.as_str()))
                .flatten()
                .filter(|h| cache.get(&h.lease).is_some_and(|c| Arc::ptr_eq(c, o)));
            let Some(h) = known else {
                if o.kind() == Lease::KIND && o.meta.namespace != NODE_LEASE_NAMESPACE {
                    continue; // Leader election leases say nothing of node health.
                }
                if o.kind() == Lease::KIND || o.kind() == Node::KIND {
                    self.observe(now);
                    return;
                }
                continue;
            };
            let renew_time = o.typed::<Lease>().and_then(|l| l.renew_time);
            if h.renew_time != renew_time {
                h.probe = now;
                h.renew_time = renew_time;
            }
        }
    }

    /// Re-read every node's record from the cache: after it, none lags.
    fn observe(&mut self, now: SimTime) {
        self.stale = false;
        self.quiet_until = SimTime::ZERO;
        let cache = self.informer.cache();
        let mut nodes = 0;
        for node in cache.list(Node::KIND) {
            let Some(n) = node.typed::<Node>() else {
                continue;
            };
            nodes += 1;
            let ready = n.status.ready;
            match self.health.get_mut(node.meta.name.as_str()) {
                Some(h) => {
                    let renew_time = renew_time_of(cache, &h.lease);
                    if h.renew_time != renew_time || h.ready != ready {
                        h.probe = now;
                        h.renew_time = renew_time;
                        h.ready = ready;
                    }
                }
                None => {
                    let lease = ObjectKey::new(Lease::KIND, NODE_LEASE_NAMESPACE, &node.meta.name);
                    let renew_time = renew_time_of(cache, &lease);
                    self.health.insert(
                        node.meta.name.clone(),
                        NodeHealth {
                            probe: now,
                            renew_time,
                            ready,
                            lease,
                        },
                    );
                }
            }
        }
        // Every node listed has its entry now: more entries means a node went.
        if self.health.len() != nodes {
            let listed: BTreeSet<&str> = cache
                .list(Node::KIND)
                .filter(|o| o.typed::<Node>().is_some())
                .map(|o| o.meta.name.as_str())
                .collect();
            self.health.retain(|name, _| listed.contains(name.as_str()));
        }
    }

    /// The node-monitor pass: Ready=Unknown for silent nodes; taints follow Ready. `None`
    /// if it wrote, else the first instant a node could go silent.
    fn monitor(&mut self, ctx: &mut WorldCtx<'_>) -> Option<SimTime> {
        let now = ctx.now();
        let mut quiet_until = Some(SimTime::MAX);
        let nodes: Vec<Arc<Object>> = self.informer.cache().list(Node::KIND).cloned().collect();
        for node in nodes {
            let Some(n) = node.typed::<Node>() else {
                continue;
            };
            let Some(h) = self.health.get(&node.meta.name) else {
                continue;
            };
            let silent = now.since(h.probe) > self.config.grace_period_ms
                && n.status.ready != ConditionStatus::Unknown;
            if !silent && taints_follow(&n.spec.taints, n.status.ready) {
                // Nothing to write: no node copied.
                if n.status.ready != ConditionStatus::Unknown {
                    let goes_silent = h.probe.plus_ms(self.config.grace_period_ms).plus_ms(1);
                    quiet_until = quiet_until.map(|q| q.min(goes_silent));
                }
                continue;
            }
            let mut next: Node = n.clone();
            if silent {
                ctx.note(|| {
                    format!(
                        "lifecycle: node {} stopped posting status: Ready=Unknown",
                        node.meta.name
                    )
                });
                next.status.ready = ConditionStatus::Unknown;
                next.status.ready_since = Some(now);
            }
            let (want, drop) = no_execute_taints(next.status.ready);
            next.spec.taints.retain(|t| {
                !(t.effect == TaintEffect::NoExecute && drop.contains(&t.key.as_str()))
            });
            if let Some(key) = want
                && !next
                    .spec
                    .taints
                    .iter()
                    .any(|t| t.key == key && t.effect == TaintEffect::NoExecute)
            {
                next.spec.taints.push(Taint {
                    key: key.to_string(),
                    effect: TaintEffect::NoExecute,
                    time_added: Some(now),
                });
            }
            // Written (or, if nothing changed, looked at again next tick).
            quiet_until = None;
            if next == *n {
                continue;
            }
            let mut ops = Vec::with_capacity(2);
            if next.status != n.status {
                ops.push(PatchOp::Status(Body::new(next.clone())));
            }
            if next.spec != n.spec {
                ops.push(PatchOp::Spec(Body::new(next)));
            }
            self.api(
                ctx,
                ApiOp::Patch {
                    key: node.key(),
                    ops,
                    resource_version: Some(node.meta.resource_version),
                },
            );
        }
        quiet_until
    }

    /// Taint-based eviction and orphan GC over every bound pod; arms the timer for the
    /// next toleration to run out. `None` if it deleted, else the first instant a pass
    /// could: a toleration or quarantine runs out, or an eviction is due a retry.
    fn evict(&mut self, ctx: &mut WorldCtx<'_>) -> Option<SimTime> {
        let now = ctx.now();
        let mut next_deadline: Option<SimTime> = None;
        let mut next_retry = SimTime::MAX;
        let mut deletes: Vec<(ObjectKey, Uid, Option<u64>)> = Vec::new();
        let cache = self.informer.cache();
        // Nodes in name order (cluster-scoped keys order by name): looked up by a pod's
        // nodeName without making a key.
        let nodes: Vec<&Arc<Object>> = cache.list(Node::KIND).collect();
        let node_named = |name: &str| {
            nodes
                .binary_search_by(|n| n.meta.name.as_str().cmp(name))
                .ok()
                .map(|i| nodes[i])
        };
        let mut orphans_now = Vec::new();
        for pod in cache.list(Pod::KIND) {
            let Some(p) = pod.typed::<Pod>() else {
                continue;
            };
            let Some(node_name) = p.spec.node_name.as_deref() else {
                continue;
            };
            let Some(node) = node_named(node_name) else {
                let key = pod.key();
                // Bound to a vanished node: only a force delete removes it.
                let since = *self.orphans.get(&key).unwrap_or(&now);
                orphans_now.push((key.clone(), since));
                let due = since.plus_ms(self.config.orphan_quarantine_ms);
                if due <= now {
                    deletes.push((key, pod.meta.uid, Some(0)));
                } else {
                    next_deadline = Some(next_deadline.map_or(due, |d| d.min(due)));
                }
                continue;
            };
            if pod.meta.is_deleting() {
                continue;
            }
            let Some(n) = node.typed::<Node>() else {
                continue;
            };
            let Some(due) = eviction_time(&n.spec.taints, &p.spec.tolerations) else {
                continue;
            };
            if due > now {
                next_deadline = Some(next_deadline.map_or(due, |d| d.min(due)));
                continue;
            }
            let key = pod.key();
            let retry = self.config.eviction_retry_ms;
            match self.evicted.get(&key) {
                Some((uid, at)) if *uid == pod.meta.uid && now.since(*at) < retry => {
                    next_retry = next_retry.min(at.plus_ms(retry));
                }
                _ => deletes.push((key, pod.meta.uid, None)),
            }
        }
        self.orphans = orphans_now.into_iter().collect();
        // Forget evictions of pods that are gone or marked.
        self.evicted.retain(|k, (uid, _)| {
            cache
                .get(k)
                .is_some_and(|o| o.meta.uid == *uid && !o.meta.is_deleting())
        });
        let quiet_until = deletes
            .is_empty()
            .then(|| next_deadline.unwrap_or(SimTime::MAX).min(next_retry));
        for (key, uid, grace) in deletes {
            ctx.note(|| format!("lifecycle: evicting pod {key}"));
            if grace.is_none() {
                self.evicted.insert(key.clone(), (uid, now));
                self.evictions += 1;
            }
            self.api(
                ctx,
                ApiOp::Delete {
                    key,
                    uid: Some(uid),
                    grace_period_seconds: grace,
                    options: Default::default(),
                },
            );
        }
        if let Some(due) = next_deadline {
            let armed = self.evict_timer.is_some_and(|(at, _)| at <= due);
            if !armed {
                if let Some((_, old)) = self.evict_timer.take() {
                    ctx.cancel_timer(old);
                }
                let id = ctx.set_timer(
                    due.since(now),
                    Msg::Timer(AnyTimer::Lifecycle(Timer::Evict)),
                );
                self.evict_timer = Some((due, id));
            }
        }
        quiet_until
    }
}

/// When a pod with `tolerations` must leave a node with `taints`: the time of a
/// NoExecute taint it does not tolerate; else the earliest `timeAdded + tolerationSeconds`
/// over the matching tolerations (as the taint manager's `getMinTolerationTime`, but
/// counted from the taint's timeAdded); `None` if it tolerates them all forever.
pub fn eviction_time(taints: &[Taint], tolerations: &[Toleration]) -> Option<SimTime> {
    let mut due: Option<SimTime> = None;
    let mut earliest = |t: SimTime| due = Some(due.map_or(t, |d: SimTime| d.min(t)));
    for taint in taints.iter().filter(|t| t.effect == TaintEffect::NoExecute) {
        let added = taint.time_added.unwrap_or(SimTime::ZERO);
        let mut matched = false;
        for t in tolerations
            .iter()
            .filter(|t| t.key == taint.key && t.effect == TaintEffect::NoExecute)
        {
            matched = true;
            if let Some(s) = t.toleration_seconds {
                earliest(added.plus_ms(s.saturating_mul(1000)));
            }
        }
        if !matched {
            earliest(added);
        }
    }
    due
}
