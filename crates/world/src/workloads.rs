//! Workloads: the Deployment controller and the scheduler, one control-plane process.
//!
//! Deployment -> ReplicaSet -> Pod is modelled as ONE level: a Deployment owns its pods
//! directly (controller ownerReference to the Deployment) and this controller does what
//! the ReplicaSet controller does for them. No rollouts, no adoption of orphans.
//! - Active pods (docs/semantics.md 5.7, `FilterActivePods`): owned pods without a
//!   deletionTimestamp and not Succeeded/Failed. So the moment an evicted pod is marked
//!   Terminating, a replacement is created, while the old container may still run on an
//!   unreachable node.
//! - Missing pods are created from the template with generateName `<deployment>-`
//!   (the real name is `<deployment>-<rs hash>-<5 chars>`); extra ones are deleted,
//!   unscheduled and pending ones first, then the newest.
//! - Expectations, as the ReplicaSet controller's: after creating or deleting pods, a
//!   Deployment is not synced again until the informer has seen those changes (or
//!   `expectations_timeout_ms`, 5 min, passed: a request may have been lost), so a lagging
//!   cache never doubles the pods.
//! - status.replicas is the number of active pods.
//!
//! Scheduler (docs/semantics.md 3.14, 5.10): each unbound, not deleting, Pending pod is
//! bound to a Node that is Ready=True, schedulable, carries every label of the pod's
//! nodeSelector, and whose NoSchedule and NoExecute taints the pod all tolerates (key and
//! effect match), chosen at random (the process's own stream) among the candidates in
//! name order. The bind goes through the binding subresource ([`ApiOp::Bind`]), which
//! refuses a pod already bound or being deleted. As kube-scheduler's cache does, the pod
//! is *assumed* on its node before the bind is sent and is not scheduled again while
//! assumed: not when the next informer batch still shows it unbound, nor after the bind
//! succeeded until the cache shows it bound. A failed bind forgets the assumption (the
//! pod is retried at the next pass); an unanswered one is forgotten after
//! `bind_timeout_ms`, when the client's connection health check would have failed it
//! (4.3). A pod with no candidate stays Pending and is retried at every change of the
//! cluster and every `resync_ms`.
//!
//! Both work from one informer over Deployments, Pods and Nodes and re-run in full on
//! every batch of changes: clusters in scenarios are small.

use crate::api::{ApiError, ApiOk, ApiOp, ApiRequest, PatchOp};
use crate::component::{Component, Endpoints, UNREAD, WorldCtx};
use crate::informer::Informer;
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use crate::object::{
    Body, ConditionStatus, Deployment, DeploymentStatus, Object, ObjectKey, ObjectMeta,
    OwnerReference, Pod, PodPhase, PodSpec, PodStatus, Uid,
};
use crate::object::{Node, Resource, selector_matches};
use reconsim_sim::{ProcId, SimTime};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::timer::WorkloadsTimer as Timer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadsConfig {
    /// Period of the full pass.
    pub resync_ms: u64,
    /// ReplicaSet controller's ExpectationsTimeout.
    pub expectations_timeout_ms: u64,
    /// At most this many pods created or deleted per Deployment per pass.
    pub burst: u32,
    /// How long an unanswered bind keeps its pod assumed (client-go's HTTP/2 health
    /// check fails a request on a dead connection after about 45 s; semantics 4.3).
    pub bind_timeout_ms: u64,
}

impl Default for WorkloadsConfig {
    fn default() -> Self {
        WorkloadsConfig {
            resync_ms: 5_000,
            expectations_timeout_ms: 300_000,
            burst: 500,
            bind_timeout_ms: 45_000,
        }
    }
}

/// Pod creations and deletions of one Deployment not yet seen in the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Expectations {
    /// Create requests in flight.
    creates: BTreeSet<u64>,
    /// Pods created, not yet in the cache.
    created: BTreeSet<String>,
    /// Pods deleted, still active in the cache.
    deleted: BTreeSet<String>,
    since: SimTime,
}

impl Expectations {
    fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.created.is_empty() && self.deleted.is_empty()
    }
}

/// A pod the scheduler has assumed on a node: its bind is in flight, or succeeded and the
/// cache does not show it yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Assumed {
    /// The pod's key, to look it up in the cache.
    key: ObjectKey,
    sent: SimTime,
    answered: bool,
}

#[derive(Debug)]
pub struct Workloads {
    pub config: WorkloadsConfig,
    endpoints: Endpoints,
    informer: Informer,
    ids: ReqIds,
    expectations: BTreeMap<ObjectKey, Expectations>,
    /// Create request id -> its Deployment.
    create_reqs: BTreeMap<u64, ObjectKey>,
    /// The scheduler's assumed pods, by uid.
    assumed: BTreeMap<Uid, Assumed>,
    /// Bind request id -> its pod.
    bind_reqs: BTreeMap<u64, Uid>,
    binds: u64,
    /// Requests sent so far (creates, deletes, status patches, binds).
    sent: u64,
    /// The last full pass had nothing to do: it sent nothing, expected nothing, assumed
    /// nothing and found no pod it could not place. Until the cache changes (which runs
    /// a pass at once), a pass at the resync would find the same, so it is skipped.
    idle: bool,
}

impl Workloads {
    pub fn new(config: WorkloadsConfig, endpoints: Endpoints) -> Self {
        Workloads {
            config,
            endpoints,
            informer: Informer::new(
                1,
                &[Deployment::KIND, Pod::KIND, Node::KIND],
                endpoints.apiserver,
            ),
            ids: ReqIds::new(tags::WORKLOADS),
            expectations: BTreeMap::new(),
            create_reqs: BTreeMap::new(),
            assumed: BTreeMap::new(),
            bind_reqs: BTreeMap::new(),
            binds: 0,
            sent: 0,
            idle: false,
        }
    }

    /// Bind requests sent so far.
    pub fn binds(&self) -> u64 {
        self.binds
    }
}

/// The Deployment controller and scheduler as a process of the world.
impl Component for Workloads {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.endpoints.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.informer.start(ctx);
        ctx.set_timer(
            self.config.resync_ms,
            Msg::Timer(AnyTimer::Workloads(Timer::Resync)),
        );
    }

    fn on_crash(&mut self) {
        self.expectations.clear();
        self.create_reqs.clear();
        self.assumed.clear();
        self.bind_reqs.clear();
        self.idle = false;
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let mut changes = Vec::new();
        if self.informer.handle(&msg, ctx, &mut changes) {
            if !changes.is_empty() {
                self.pass(ctx);
            }
            return;
        }
        if let Msg::ApiResp(resp) = &msg
            && let Some(uid) = self.bind_reqs.remove(&resp.id)
        {
            self.idle = false;
            match &resp.result {
                Ok(_) => {
                    if let Some(a) = self.assumed.get_mut(&uid) {
                        a.answered = true;
                    }
                }
                Err(e) => {
                    // ForgetPod: the pod is scheduled afresh at the next pass.
                    self.assumed.remove(&uid);
                    ctx.note(|| format!("workloads: bind of pod {uid:?} failed: {e:?}"));
                }
            }
            return;
        }
        if let Msg::ApiResp(resp) = msg
            && let Some(deploy) = self.create_reqs.remove(&resp.id)
            && let Some(e) = self.expectations.get_mut(&deploy)
        {
            self.idle = false;
            e.creates.remove(&resp.id);
            if let Ok(ApiOk::Object(pod)) = &resp.result
                && self.informer.cache().get(&pod.key()).is_none()
            {
                e.created.insert(pod.meta.name.clone());
            }
            if let Err(ApiError::AlreadyExists | ApiError::Invalid(_)) = resp.result {
                // Retried at the next pass (a change or the resync), never at once.
                ctx.note(|| format!("workloads: pod create for {deploy} failed"));
            }
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        match t {
            AnyTimer::Informer(t) => {
                self.informer.on_timer(&t, ctx);
            }
            AnyTimer::Workloads(Timer::Resync) => {
                if !self.idle {
                    self.pass(ctx);
                }
                ctx.set_timer(
                    self.config.resync_ms,
                    Msg::Timer(AnyTimer::Workloads(Timer::Resync)),
                );
            }
            _ => {}
        }
    }

    /// Its pods and binds are writes to the API server.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Workloads {
    fn api(&mut self, ctx: &mut WorldCtx<'_>, op: ApiOp) -> u64 {
        self.sent += 1;
        let id = self.ids.issue();
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
        id
    }

    /// One full pass: every Deployment, then the scheduler.
    fn pass(&mut self, ctx: &mut WorldCtx<'_>) {
        if !self.informer.synced() {
            return;
        }
        let sent = self.sent;
        let deployments: Vec<Arc<Object>> = self
            .informer
            .cache()
            .list(Deployment::KIND)
            .cloned()
            .collect();
        self.expectations
            .retain(|k, _| deployments.iter().any(|d| d.is(k)));
        for d in &deployments {
            self.sync_deployment(d, ctx);
        }
        let unschedulable = self.schedule(ctx);
        self.idle = self.sent == sent
            && self.expectations.is_empty()
            && self.assumed.is_empty()
            && !unschedulable;
    }

    fn sync_deployment(&mut self, d: &Arc<Object>, ctx: &mut WorldCtx<'_>) {
        let Some(spec) = d.typed::<Deployment>().map(|x| &x.spec) else {
            return;
        };
        let key = d.key();
        let now = ctx.now();
        let cache = self.informer.cache();
        let owned: Vec<&Arc<Object>> = cache
            .list(Pod::KIND)
            .filter(|p| p.meta.namespace == d.meta.namespace)
            .filter(|p| p.meta.controller_ref().is_some_and(|r| r.uid == d.meta.uid))
            .collect();
        let active: Vec<&Arc<Object>> = owned.iter().copied().filter(|p| is_active(p)).collect();
        // Settle expectations against what the cache shows now.
        if let Some(e) = self.expectations.get_mut(&key) {
            e.created
                .retain(|n| !owned.iter().any(|p| &p.meta.name == n));
            e.deleted
                .retain(|n| active.iter().any(|p| &p.meta.name == n));
            let expired = now.since(e.since) >= self.config.expectations_timeout_ms;
            if expired || e.is_empty() {
                for id in &e.creates {
                    self.create_reqs.remove(id);
                }
                self.expectations.remove(&key);
            } else {
                return;
            }
        }
        if d.meta.is_deleting() {
            return;
        }
        let want = spec.replicas as usize;
        let have = active.len();
        let status_replicas = have as u32;
        let mut e = Expectations {
            since: now,
            ..Default::default()
        };
        if have < want {
            let n = (want - have).min(self.config.burst as usize);
            let template = spec.template.clone();
            for _ in 0..n {
                let mut meta = ObjectMeta::named(&d.meta.namespace, "");
                meta.generate_name = Some(format!("{}-", d.meta.name));
                meta.labels = template.labels.clone();
                meta.owner_references = vec![OwnerReference {
                    kind: Deployment::KIND,
                    name: d.meta.name.clone(),
                    uid: d.meta.uid,
                    controller: Some(true),
                    block_owner_deletion: None,
                }];
                let pod = Pod {
                    spec: PodSpec {
                        node_name: None,
                        ..template.spec.clone()
                    },
                    status: PodStatus::default(),
                };
                let id = self.api(
                    ctx,
                    ApiOp::Create(Box::new(Object::new(meta, Body::new(pod)))),
                );
                e.creates.insert(id);
                self.create_reqs.insert(id, key.clone());
            }
            ctx.note(|| format!("workloads: {key}: {have} active of {want}, creating {n}"));
        } else if have > want {
            let mut victims: Vec<&Arc<Object>> = active.clone();
            // Unscheduled first, then Pending, then the newest (ReplicaSet's ranking, cut down).
            victims.sort_by_key(|p| {
                let pod = p.typed::<Pod>().expect("a Pod");
                (
                    pod.spec.node_name.is_some(),
                    pod.status.phase == PodPhase::Running,
                    std::cmp::Reverse(p.meta.creation_timestamp),
                    p.meta.name.clone(),
                )
            });
            let n = (have - want).min(self.config.burst as usize);
            let doomed: Vec<(ObjectKey, Uid, String)> = victims[..n]
                .iter()
                .map(|p| (p.key(), p.meta.uid, p.meta.name.clone()))
                .collect();
            ctx.note(|| format!("workloads: {key}: {have} active of {want}, deleting {n}"));
            for (pkey, uid, name) in doomed {
                self.api(
                    ctx,
                    ApiOp::Delete {
                        key: pkey,
                        uid: Some(uid),
                        grace_period_seconds: None,
                        options: Default::default(),
                    },
                );
                e.deleted.insert(name);
            }
        }
        if !e.is_empty() {
            self.expectations.insert(key.clone(), e);
        }
        let current = d.typed::<Deployment>().map(|x| x.status.replicas);
        if current != Some(status_replicas) {
            let status = Deployment {
                status: DeploymentStatus {
                    replicas: status_replicas,
                    ..Default::default()
                },
                ..Default::default()
            };
            self.api(
                ctx,
                ApiOp::Patch {
                    key,
                    ops: vec![PatchOp::Status(Body::new(status))],
                    resource_version: None,
                },
            );
        }
    }

    /// Bind every unbound pending pod not already assumed to a random feasible node.
    /// Whether a pending pod had no feasible node.
    fn schedule(&mut self, ctx: &mut WorldCtx<'_>) -> bool {
        let now = ctx.now();
        let timeout_ms = self.config.bind_timeout_ms;
        let cache = self.informer.cache();
        // An assumption ends when the cache shows the pod bound or gone (the informer's
        // event confirms it), or when its bind went unanswered too long.
        self.assumed.retain(|uid, a| {
            let unbound = cache.get(&a.key).is_some_and(|p| {
                p.meta.uid == *uid && p.typed::<Pod>().is_some_and(|x| x.spec.node_name.is_none())
            });
            unbound && (a.answered || now.since(a.sent) < timeout_ms)
        });
        let assumed = &self.assumed;
        self.bind_reqs.retain(|_, uid| assumed.contains_key(uid));
        let pending: Vec<Arc<Object>> = cache
            .list(Pod::KIND)
            .filter(|p| {
                p.typed::<Pod>().is_some_and(|x| {
                    x.spec.node_name.is_none() && x.status.phase == PodPhase::Pending
                }) && !p.meta.is_deleting()
                    && !self.assumed.contains_key(&p.meta.uid)
            })
            .cloned()
            .collect();
        if pending.is_empty() {
            return false;
        }
        let mut unschedulable = false;
        let nodes: Vec<Arc<Object>> = cache.list(Node::KIND).cloned().collect();
        for pod in pending {
            let spec = &pod.typed::<Pod>().expect("a Pod").spec;
            let candidates: Vec<&Arc<Object>> =
                nodes.iter().filter(|n| feasible(n, spec)).collect();
            if candidates.is_empty() {
                ctx.note(|| format!("workloads: pod {} unschedulable", pod.key()));
                unschedulable = true;
                continue;
            }
            let i = ctx.draw_ms(0, candidates.len() as u64 - 1) as usize;
            let node = candidates[i].meta.name.clone();
            ctx.note(|| format!("workloads: binding pod {} to {node}", pod.key()));
            self.binds += 1;
            let id = self.api(
                ctx,
                ApiOp::Bind {
                    key: pod.key(),
                    uid: Some(pod.meta.uid),
                    node_name: node,
                },
            );
            self.assumed.insert(
                pod.meta.uid,
                Assumed {
                    key: pod.key(),
                    sent: now,
                    answered: false,
                },
            );
            self.bind_reqs.insert(id, pod.meta.uid);
        }
        unschedulable
    }
}

/// FilterActivePods: not terminating, not Succeeded/Failed.
fn is_active(p: &Object) -> bool {
    !p.meta.is_deleting()
        && p.typed::<Pod>()
            .is_some_and(|x| !matches!(x.status.phase, PodPhase::Succeeded | PodPhase::Failed))
}

/// Whether a pod with `spec` may be bound to `node`: Ready=True, schedulable, carrying
/// every label of the pod's nodeSelector, and every NoSchedule/NoExecute taint tolerated.
pub fn feasible(node: &Object, spec: &PodSpec) -> bool {
    let Some(n) = node.typed::<Node>() else {
        return false;
    };
    n.status.ready == ConditionStatus::True
        && !n.spec.unschedulable
        && !node.meta.is_deleting()
        && selector_matches(&spec.node_selector, &node.meta.labels)
        && n.spec.taints.iter().all(|t| {
            // Both effects there are (NoSchedule, NoExecute) keep a pod off the node.
            spec.tolerations
                .iter()
                .any(|tol| tol.key == t.key && tol.effect == t.effect)
        })
}
