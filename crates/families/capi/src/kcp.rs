//! The Cluster API KubeadmControlPlane controller before and after its v0.3.4 fix (seed
//! incident 2; SEED-FACTS.md section 2: kubernetes-sigs/cluster-api at the parent of
//! 8bbdd95a72 (v0.3.3) and at 8bbdd95a72, files controlplane/kubeadm/controllers/
//! {controller,upgrade,scale}.go and controlplane/kubeadm/internal/{control_plane,
//! cluster,workload_cluster_etcd}.go).
//!
//! One reconcile of a KubeadmControlPlane, as a step machine (every call is an await):
//! 1. from the cache: the owned Machines S (deleting ones included) and
//!    MachinesNeedingUpgrade: those of S whose spec.version differs from the KCP's
//!    (deleting ones included, unchanged by the fix);
//! 2. some need an upgrade -> upgradeControlPlane: ClusterStatus counts the workload's
//!    control-plane Nodes (kubeadm's `node-role.kubernetes.io/master` label, see
//!    [`crate::kinds`]) with a live List (not the cache); nodes <= replicas ->
//!    scale up, else scale down among the machines needing the upgrade;
//! 3. otherwise by count: none -> initialize (create the first Machine); fewer than
//!    replicas -> scale up; more -> scale down among S;
//! - scale up: reconcileHealth, then create a Machine (generateName `<kcp>-`, the KCP's
//!   version, the failure domain with the fewest machines). No check for deleting
//!   machines of its own;
//! - scale down, v0.3.3 ([`KcpOptions::scale_down_checks_deleting_first`]):
//!   GetWorkloadCluster, then any machine of S deleting -> requeue after 30 s, then
//!   reconcileHealth; v0.3.4 (PR #2958 dropped that early check): reconcileHealth, then
//!   GetWorkloadCluster. Then both: pick the oldest machine of the failure domain with
//!   the most machines among the candidates; ForwardEtcdLeadership to the newest machine
//!   of S (its NodeRef is dereferenced: a missing one is the upstream panic, which the
//!   model sends to the etcd model as `candidate: None` so the checker records it, and
//!   then fails the reconcile instead of crashing); RemoveEtcdMemberForMachine (live List
//!   of Nodes; refused with fewer than 2); TargetClusterControlPlaneIsHealthy again (its
//!   own GetWorkloadCluster, live List of Nodes, Machines re-read from the cache;
//!   unhealthy -> requeue after 20 s with the member already removed and the Machine
//!   kept); RemoveMachineFromKubeadmConfigMap; delete the Machine. A victim without a
//!   NodeRef skips the forward, the member removal and the ConfigMap update (each
//!   returns early upstream) but not the health check;
//! - reconcileHealth: ControlPlaneIsHealthy (live List of the Nodes, none with a NoExecute
//!   taint (checkNodeNoExecuteCondition), then the owned Machines read again from the
//!   cache, which moved on during the await: every machine has a NodeRef naming a listed
//!   Node and #Nodes == #Machines), then EtcdIsHealthy (a
//!   MemberList through each Node's member; a Node whose member is not up is skipped,
//!   as its etcd pod is not ready; healthy iff every answer agrees and there are as many
//!   members as answering Nodes). Unhealthy control plane -> requeue after 20 s;
//!   unhealthy etcd -> ReconcileEtcdMembers (remove every member, and its ClusterStatus
//!   endpoint, whose Node is absent) and requeue after 20 s.
//!   [`KcpOptions::wait_for_deletion`] (v0.3.4, PR #2958) ends it with "any machine of S
//!   deleting -> requeue", so scale up and scale down both wait. reconcileHealth returns
//!   deleteRequeueAfter (30 s) there, but both callers replace any error of it with
//!   healthCheckFailedRequeueAfter, so the wait is 20 s (docs/semantics.md 7.7).
//!
//! A successful create or delete ends with `Result{Requeue: true}`, which
//! controller-runtime turns into `AddRateLimited` (semantics 2.4): a requeue after the
//! per-item backoff, 5 ms doubling while requeues follow each other. Status writes, certificates, the kubeadm and kubelet ConfigMap
//! updates of upgradeControlPlane and the static-pod Gets of ControlPlaneIsHealthy are
//! not modelled: none of them decides what the controller creates or deletes.

use crate::etcd::{EtcdError, EtcdOk, EtcdOp, EtcdResult};
use crate::kinds::KubeadmControlPlane;
use crate::kinds::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, is_control_plane_node, machine_version, node_ref,
    owned_machines,
};
use crate::kinds::{Machine, MachineSpec};
use reconsim_sim::ProcId;
use reconsim_world::api::{ApiOk, ApiOp};
use reconsim_world::manager::{
    Answer, Call, ReconcileCtx, Reconciler, Step, enqueue_for, enqueue_owner,
};
use reconsim_world::object::{
    Body, Kind, Object, ObjectKey, ObjectMeta, OwnerReference, TaintEffect,
};
use reconsim_world::object::{Node, Resource};
use reconsim_world::reconcile_error::Unexpected;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// deleteRequeueAfter.
pub const DELETE_REQUEUE_MS: u64 = 30_000;
/// healthCheckFailedRequeueAfter.
pub const HEALTH_REQUEUE_MS: u64 = 20_000;
/// The Cluster the KCP belongs to (the value of the cluster-name label).
pub const CLUSTER_NAME: &str = "workload";

/// Behaviour switches (the variant is a parameter, not a copy) and timing. The KCP half
/// of PR #2958 is `wait_for_deletion: true` with `scale_down_checks_deleting_first:
/// false`; v0.3.3 is the opposite (docs/semantics.md 7.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KcpOptions {
    /// v0.3.4: reconcileHealth ends with "any owned machine of the snapshot deleting ->
    /// error", which scale up and scale down turn into a requeue after 20 s.
    pub wait_for_deletion: bool,
    /// v0.3.3: scaleDownControlPlane builds its workload client, then requeues after 30 s
    /// while any owned machine of the snapshot is deleting, and only then runs
    /// reconcileHealth; the forward and the member removal reuse that client. PR #2958
    /// removed the check and runs reconcileHealth first, then builds the client.
    pub scale_down_checks_deleting_first: bool,
    /// upgradeControlPlane decides on the Machines of the reconcile's snapshot (fewer than
    /// replicas + 1: scale up) instead of a live count of control-plane Nodes, as later
    /// releases do (kubernetes-sigs/cluster-api controlplane/kubeadm/internal/controllers/
    /// upgrade.go at a5ce7cf0c0: `controlPlane.Machines.Len() < replicas + maxSurge`).
    pub scale_by_machine_count: bool,
    /// How long GetWorkloadCluster takes, drawn per call in `[min, max]` ms: v0.3.3 and
    /// v0.3.4 build a new client of the workload cluster each time (reading the
    /// kubeconfig secret, TLS, API discovery), before ClusterStatus, before each health
    /// check and before a scale down. 0: instantaneous.
    pub workload_client_ms_min: u64,
    pub workload_client_ms_max: u64,
}

/// The KCP controller's own errors (upstream's names where it has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KcpError {
    /// selectMachineForScaleDown found no Machine to delete.
    NoMachineToDelete,
    /// Removing the etcd member would leave the control plane below its minimum
    /// (kubeadm's `ErrControlPlaneMinNodes`).
    ControlPlaneMinNodes,
}

impl std::fmt::Display for KcpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KcpError::NoMachineToDelete => "failed to pick control plane Machine to delete",
            KcpError::ControlPlaneMinNodes => "ErrControlPlaneMinNodes",
        })
    }
}

impl std::error::Error for KcpError {}

/// What reconcileHealth guards.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Then {
    ScaleUp,
    ScaleDown { candidates: Vec<Arc<Object>> },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Idle,
    /// GetWorkloadCluster is building a client; then the call of the inner phase.
    Connecting(Box<Phase>),
    /// upgradeControlPlane's ClusterStatus: the live List of Nodes.
    UpgradeNodes {
        need: Vec<Arc<Object>>,
    },
    /// upgradeControlPlane deciding on the snapshot (after its workload client).
    UpgradeByCount {
        need: Vec<Arc<Object>>,
    },
    /// ControlPlaneIsHealthy: the live List of Nodes.
    HealthNodes {
        then: Then,
    },
    /// EtcdIsHealthy: MemberList through `nodes[next]`.
    EtcdHealth {
        then: Then,
        nodes: Vec<String>,
        next: usize,
        answered: usize,
        members: Option<Vec<String>>,
        failed: bool,
    },
    /// ReconcileEtcdMembers: the live List of Nodes.
    ReconcileNodes,
    /// ReconcileEtcdMembers: MemberList through `nodes[next]`.
    ReconcileList {
        nodes: Vec<String>,
        next: usize,
    },
    /// ReconcileEtcdMembers: remove `stale[next]` (member, then endpoint).
    ReconcileRemove {
        stale: Vec<String>,
        next: usize,
        endpoint: bool,
    },
    /// v0.3.3's scale down, after its workload client: the early deleting check.
    ScaleDownEarly {
        candidates: Vec<Arc<Object>>,
    },
    Create,
    Forward {
        victim: Arc<Object>,
    },
    /// RemoveEtcdMemberForMachine: the live List of Nodes.
    RemoveMemberNodes {
        victim: Arc<Object>,
    },
    RemoveMember {
        victim: Arc<Object>,
    },
    /// scaleDownControlPlane's TargetClusterControlPlaneIsHealthy after the member
    /// removal: the live List of Nodes.
    RemovedHealthNodes {
        victim: Arc<Object>,
    },
    RemoveEndpoint {
        victim: Arc<Object>,
    },
    Delete,
}

/// The KubeadmControlPlane controller.
#[derive(Clone, Debug)]
pub struct KcpController {
    options: KcpOptions,
    /// The etcd model of the workload cluster.
    etcd: ProcId,
    phase: Phase,
    kcp: Option<Arc<Object>>,
    /// The owned Machines as the cache showed them when the reconcile started.
    machines: Vec<Arc<Object>>,
}

impl KcpController {
    pub fn new(options: KcpOptions, etcd: ProcId) -> Self {
        KcpController {
            options,
            etcd,
            phase: Phase::Idle,
            kcp: None,
            machines: Vec::new(),
        }
    }

    fn kcp(&self) -> &Object {
        self.kcp.as_ref().expect("set at reconcile start")
    }

    fn spec(&self) -> &crate::kinds::KubeadmControlPlaneSpec {
        &self
            .kcp()
            .typed::<KubeadmControlPlane>()
            .expect("a KubeadmControlPlane")
            .spec
    }

    fn list_nodes(&mut self, phase: Phase) -> Step {
        self.phase = phase;
        Step::Call(Call::Api(ApiOp::List {
            kind: Node::KIND,
            namespace: None,
            // The workload cluster's client is uncached: a consistent read.
            from_watch_cache: false,
        }))
    }

    /// GetWorkloadCluster (a new client, [`KcpOptions::workload_client_ms_min`]), then the
    /// call of `phase`.
    fn connect(&mut self, ctx: &mut ReconcileCtx<'_>, phase: Phase) -> Step {
        let (lo, hi) = (
            self.options.workload_client_ms_min,
            self.options.workload_client_ms_max,
        );
        if hi == 0 {
            return self.issue(ctx, phase);
        }
        let ms = if hi <= lo {
            lo
        } else {
            lo + rand::Rng::next_u64(ctx.rng) % (hi - lo + 1)
        };
        self.phase = Phase::Connecting(Box::new(phase));
        Step::Sleep { ms }
    }

    /// upgradeControlPlane by the snapshot's Machine count
    /// ([`KcpOptions::scale_by_machine_count`]): fewer than replicas + 1 -> scale up.
    fn upgrade_by_count(&mut self, ctx: &mut ReconcileCtx<'_>, need: Vec<Arc<Object>>) -> Step {
        let replicas = self.spec().replicas as usize;
        let n = self.machines.len();
        ctx.note(|| {
            format!(
                "upgrade: {} Machines need it; {n} Machines, replicas {replicas}: scale {}",
                need.len(),
                if n < replicas + 1 { "up" } else { "down" }
            )
        });
        if n < replicas + 1 {
            self.health(ctx, Then::ScaleUp)
        } else {
            self.scale_down(ctx, need)
        }
    }

    /// The call a phase waits on.
    fn issue(&mut self, ctx: &mut ReconcileCtx<'_>, phase: Phase) -> Step {
        match phase {
            Phase::UpgradeByCount { need } => self.upgrade_by_count(ctx, need),
            Phase::ScaleDownEarly { candidates } => {
                if self.machines.iter().any(|m| m.meta.is_deleting()) {
                    ctx.note(|| "scale down: a Machine is deleting: requeue".to_string());
                    return Step::requeue_after(DELETE_REQUEUE_MS);
                }
                self.health(ctx, Then::ScaleDown { candidates })
            }
            Phase::EtcdHealth { .. } => self.etcd_health_next(ctx, phase),
            Phase::Forward { victim } => self.forward(ctx, victim),
            other => self.list_nodes(other),
        }
    }

    fn etcd_call(&mut self, phase: Phase, op: EtcdOp) -> Step {
        self.phase = phase;
        Step::Call(Call::service(self.etcd, op))
    }

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        self.phase = Phase::Idle;
        let Some(kcp) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        if kcp.meta.is_deleting() {
            return Step::done();
        }
        self.machines = owned_machines(ctx.cache.list(Machine::KIND), kcp.meta.uid);
        self.kcp = Some(kcp);
        let version = self.spec().version.clone();
        let need: Vec<Arc<Object>> = self
            .machines
            .iter()
            .filter(|m| machine_version(m) != Some(version.as_str()))
            .cloned()
            .collect();
        if !need.is_empty() {
            if self.options.scale_by_machine_count {
                // The workload client is still built (for the kubeadm ConfigMap updates);
                // the decision no longer needs a call.
                return self.connect(ctx, Phase::UpgradeByCount { need });
            }
            return self.connect(ctx, Phase::UpgradeNodes { need });
        }
        let replicas = self.spec().replicas as usize;
        let n = self.machines.len();
        if n == 0 && replicas > 0 {
            // initializeControlPlane: no health check for the first machine.
            return self.create();
        }
        if n < replicas {
            return self.health(ctx, Then::ScaleUp);
        }
        if n > replicas {
            let candidates = self.machines.clone();
            return self.scale_down(ctx, candidates);
        }
        Step::done()
    }

    fn scale_down(&mut self, ctx: &mut ReconcileCtx<'_>, candidates: Vec<Arc<Object>>) -> Step {
        if self.options.scale_down_checks_deleting_first {
            return self.connect(ctx, Phase::ScaleDownEarly { candidates });
        }
        self.health(ctx, Then::ScaleDown { candidates })
    }

    fn health(&mut self, ctx: &mut ReconcileCtx<'_>, then: Then) -> Step {
        self.connect(ctx, Phase::HealthNodes { then })
    }

    /// ControlPlaneIsHealthy, given the live Nodes; the Machines come from the cache now.
    fn control_plane_healthy(&self, ctx: &ReconcileCtx<'_>, nodes: &BTreeSet<String>) -> bool {
        let machines = owned_machines(ctx.cache.list(Machine::KIND), self.kcp().meta.uid);
        machines
            .iter()
            .all(|m| node_ref(m).is_some_and(|n| nodes.contains(n)))
            && machines.len() == nodes.len()
    }

    /// The end of reconcileHealth: healthy.
    fn healthy(&mut self, ctx: &mut ReconcileCtx<'_>, then: Then) -> Step {
        if self.options.wait_for_deletion && self.machines.iter().any(|m| m.meta.is_deleting()) {
            // reconcileHealth's deleteRequeueAfter error becomes the caller's
            // healthCheckFailedRequeueAfter (scale.go, scaleUp/scaleDownControlPlane).
            ctx.note(|| "reconcileHealth: a Machine is deleting: requeue".to_string());
            return Step::requeue_after(HEALTH_REQUEUE_MS);
        }
        match then {
            Then::ScaleUp => self.create(),
            Then::ScaleDown { candidates } => self.pick_and_forward(ctx, candidates),
        }
    }

    fn create(&mut self) -> Step {
        let kcp = self.kcp().clone();
        let spec = self.spec().clone();
        let mut meta = ObjectMeta::named(&kcp.meta.namespace, "");
        meta.generate_name = Some(format!("{}-", kcp.meta.name));
        meta.labels = BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_string(), CLUSTER_NAME.to_string()),
            (CONTROL_PLANE_LABEL.to_string(), String::new()),
        ]);
        meta.owner_references = vec![OwnerReference {
            kind: KubeadmControlPlane::KIND,
            name: kcp.meta.name.clone(),
            uid: kcp.meta.uid,
            controller: true,
        }];
        // NextFailureDomainForScaleUp: the domain with the fewest machines.
        let failure_domain = spec
            .failure_domains
            .iter()
            .min_by_key(|fd| {
                self.machines
                    .iter()
                    .filter(|m| failure_domain(m) == Some(fd.as_str()))
                    .count()
            })
            .cloned();
        let machine = Machine {
            spec: MachineSpec {
                provider_id: None,
                version: Some(spec.version.clone()),
                failure_domain,
            },
            status: Default::default(),
        };
        self.phase = Phase::Create;
        Step::Call(Call::Api(ApiOp::Create(Box::new(Object::new(
            meta,
            Body::new(machine),
        )))))
    }

    /// selectMachineForScaleDown, then ForwardEtcdLeadership to the newest machine.
    fn pick_and_forward(
        &mut self,
        ctx: &mut ReconcileCtx<'_>,
        candidates: Vec<Arc<Object>>,
    ) -> Step {
        let Some(victim) = select_for_scale_down(&candidates) else {
            return Step::error(KcpError::NoMachineToDelete);
        };
        if self.options.scale_down_checks_deleting_first {
            // v0.3.3 built the workload client before the early check.
            return self.forward(ctx, victim);
        }
        // v0.3.4's GetWorkloadCluster after reconcileHealth, then ForwardEtcdLeadership.
        self.connect(ctx, Phase::Forward { victim })
    }

    fn forward(&mut self, ctx: &mut ReconcileCtx<'_>, victim: Arc<Object>) -> Step {
        let Some(leaving) = node_ref(&victim).map(str::to_string) else {
            // ForwardEtcdLeadership and RemoveEtcdMemberForMachine return at once: no
            // node for the Machine. The health check still runs.
            return self.connect(ctx, Phase::RemovedHealthNodes { victim });
        };
        let newest = self.machines.last().expect("a candidate exists");
        let candidate = node_ref(newest).map(str::to_string);
        self.etcd_call(
            Phase::Forward { victim },
            EtcdOp::ForwardLeadership { leaving, candidate },
        )
    }

    fn delete(&mut self, victim: &Object) -> Step {
        self.phase = Phase::Delete;
        Step::Call(Call::Api(ApiOp::Delete {
            key: victim.key(),
            uid: None,
            grace_period_seconds: None,
        }))
    }

    fn etcd_health_next(&mut self, ctx: &mut ReconcileCtx<'_>, phase: Phase) -> Step {
        let Phase::EtcdHealth {
            then,
            nodes,
            next,
            answered,
            members,
            failed,
        } = phase
        else {
            unreachable!("called in EtcdHealth")
        };
        if next < nodes.len() {
            let via = nodes[next].clone();
            return self.etcd_call(
                Phase::EtcdHealth {
                    then,
                    nodes,
                    next,
                    answered,
                    members,
                    failed,
                },
                EtcdOp::MemberList { via },
            );
        }
        let known = members.as_ref().map_or(0, Vec::len);
        if !failed && answered == known {
            return self.healthy(ctx, then);
        }
        // Unhealthy etcd: ReconcileEtcdMembers (its own GetWorkloadCluster), then wait.
        self.connect(ctx, Phase::ReconcileNodes)
    }

    fn reconcile_remove_next(&mut self, stale: Vec<String>, next: usize, endpoint: bool) -> Step {
        if next >= stale.len() {
            return Step::requeue_after(HEALTH_REQUEUE_MS);
        }
        let name = stale[next].clone();
        let op = if endpoint {
            EtcdOp::RemoveEndpoint { name }
        } else {
            EtcdOp::RemoveMember { name }
        };
        self.etcd_call(
            Phase::ReconcileRemove {
                stale,
                next,
                endpoint,
            },
            op,
        )
    }
}

/// The names of the workload control-plane Nodes (by kubeadm's label) of a List answer.
fn node_names(reply: &Answer<EtcdResult>) -> Option<BTreeSet<String>> {
    match reply {
        Answer::Api(Ok(ApiOk::List { items, .. })) => Some(
            items
                .iter()
                .filter(|n| is_control_plane_node(n))
                .map(|n| n.meta.name.clone())
                .collect(),
        ),
        _ => None,
    }
}

/// Whether a control-plane Node of a List answer carries a NoExecute taint.
fn any_no_execute(reply: &Answer<EtcdResult>) -> bool {
    let Answer::Api(Ok(ApiOk::List { items, .. })) = reply else {
        return false;
    };
    items.iter().filter(|n| is_control_plane_node(n)).any(|n| {
        n.typed::<Node>().is_some_and(|x| {
            x.spec
                .taints
                .iter()
                .any(|t| t.effect == TaintEffect::NoExecute)
        })
    })
}

fn failure_domain(m: &Object) -> Option<&str> {
    m.typed::<Machine>()
        .and_then(|x| x.spec.failure_domain.as_deref())
}

/// MachineInFailureDomainWithMostMachines: the oldest machine of the failure domain with
/// the most machines among `candidates` (oldest first already).
pub fn select_for_scale_down(candidates: &[Arc<Object>]) -> Option<Arc<Object>> {
    let mut counts: BTreeMap<Option<&str>, usize> = BTreeMap::new();
    for m in candidates {
        *counts.entry(failure_domain(m)).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    let fd = counts
        .iter()
        .find(|(_, c)| **c == most)
        .map(|(fd, _)| *fd)?;
    candidates.iter().find(|m| failure_domain(m) == fd).cloned()
}

impl Reconciler for KcpController {
    fn name(&self) -> &str {
        "kcp-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![KubeadmControlPlane::KIND, Machine::KIND]
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        enqueue_for(object, KubeadmControlPlane::KIND, keys);
        enqueue_owner(object, KubeadmControlPlane::KIND, keys);
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Some(reply) = ctx.reply.take() else {
            return self.start(ctx);
        };
        let reply = reply.answer::<EtcdResult>();
        match std::mem::take(&mut self.phase) {
            // Never waits on a reply: the decision is taken when the client is built.
            Phase::Idle | Phase::UpgradeByCount { .. } | Phase::ScaleDownEarly { .. } => {
                Step::protocol("reply without a reconcile in progress")
            }
            Phase::Connecting(next) => match reply {
                Answer::Woke => self.issue(ctx, *next),
                other => Step::error(Unexpected::new("while connecting", &other)),
            },
            Phase::UpgradeNodes { need } => {
                let Some(nodes) = node_names(&reply) else {
                    return Step::error(Unexpected::new("cluster status", &reply));
                };
                let replicas = self.spec().replicas as usize;
                ctx.note(|| {
                    let deleting = need.iter().filter(|m| m.meta.is_deleting()).count();
                    format!(
                        "upgrade: {} Machines need it ({deleting} deleting); ClusterStatus: {} control-plane Nodes, replicas {replicas}: scale {}",
                        need.len(),
                        nodes.len(),
                        if nodes.len() <= replicas { "up" } else { "down" }
                    )
                });
                if nodes.len() <= replicas {
                    // "scaleUp ensures that we don't continue scaling up while waiting
                    // for Machines to have NodeRefs"
                    self.health(ctx, Then::ScaleUp)
                } else {
                    self.scale_down(ctx, need)
                }
            }
            Phase::HealthNodes { then } => {
                let Some(nodes) = node_names(&reply) else {
                    return Step::error(Unexpected::new("control plane health", &reply));
                };
                // checkNodeNoExecuteCondition: a node with a NoExecute taint (e.g.
                // unreachable) fails the check.
                if any_no_execute(&reply) || !self.control_plane_healthy(ctx, &nodes) {
                    ctx.note(|| format!("control plane unhealthy ({} Nodes)", nodes.len()));
                    return Step::requeue_after(HEALTH_REQUEUE_MS);
                }
                ctx.note(|| {
                    format!(
                        "control plane healthy: {} Nodes, Machines re-read from the cache match",
                        nodes.len()
                    )
                });
                let phase = Phase::EtcdHealth {
                    then,
                    nodes: nodes.into_iter().collect(),
                    next: 0,
                    answered: 0,
                    members: None,
                    failed: false,
                };
                // TargetClusterEtcdIsHealthy: its own GetWorkloadCluster.
                self.connect(ctx, phase)
            }
            Phase::EtcdHealth {
                then,
                nodes,
                next,
                mut answered,
                mut members,
                mut failed,
            } => {
                match reply {
                    Answer::Service(Ok(EtcdOk::Members { names, .. })) => {
                        answered += 1;
                        match &members {
                            None => members = Some(names),
                            Some(known) if *known != names => failed = true,
                            Some(_) => {}
                        }
                    }
                    // The etcd pod of this node is not ready: not expected to answer.
                    Answer::Service(Err(EtcdError::Unavailable)) => {}
                    _ => failed = true,
                }
                self.etcd_health_next(
                    ctx,
                    Phase::EtcdHealth {
                        then,
                        nodes,
                        next: next + 1,
                        answered,
                        members,
                        failed,
                    },
                )
            }
            Phase::ReconcileNodes => {
                let Some(nodes) = node_names(&reply) else {
                    return Step::requeue_after(HEALTH_REQUEUE_MS);
                };
                let nodes: Vec<String> = nodes.into_iter().collect();
                if nodes.is_empty() {
                    return Step::requeue_after(HEALTH_REQUEUE_MS);
                }
                let via = nodes[0].clone();
                self.etcd_call(
                    Phase::ReconcileList { nodes, next: 0 },
                    EtcdOp::MemberList { via },
                )
            }
            Phase::ReconcileList { nodes, next } => match reply {
                Answer::Service(Ok(EtcdOk::Members { names, .. })) => {
                    let stale: Vec<String> =
                        names.into_iter().filter(|m| !nodes.contains(m)).collect();
                    self.reconcile_remove_next(stale, 0, false)
                }
                _ if next + 1 < nodes.len() => {
                    let via = nodes[next + 1].clone();
                    self.etcd_call(
                        Phase::ReconcileList {
                            nodes,
                            next: next + 1,
                        },
                        EtcdOp::MemberList { via },
                    )
                }
                _ => Step::requeue_after(HEALTH_REQUEUE_MS),
            },
            Phase::ReconcileRemove {
                stale,
                next,
                endpoint,
            } => {
                // Errors are logged and the loop goes on (best effort).
                if endpoint {
                    self.reconcile_remove_next(stale, next + 1, false)
                } else {
                    self.reconcile_remove_next(stale, next, true)
                }
            }
            Phase::Create => match reply {
                Answer::Api(Ok(_)) => Step::RateLimited,
                other => Step::error(Unexpected::new("create machine", &other)),
            },
            Phase::Forward { victim } => match reply {
                Answer::Service(Ok(_)) => self.list_nodes(Phase::RemoveMemberNodes { victim }),
                other => Step::error(Unexpected::new("failed to move leadership", &other)),
            },
            Phase::RemoveMemberNodes { victim } => {
                let Some(nodes) = node_names(&reply) else {
                    return Step::error(Unexpected::new("remove etcd member", &reply));
                };
                if nodes.len() < 2 {
                    return Step::error(KcpError::ControlPlaneMinNodes);
                }
                let name = node_ref(&victim).expect("checked").to_string();
                self.etcd_call(
                    Phase::RemoveMember { victim },
                    EtcdOp::RemoveMember { name },
                )
            }
            Phase::RemoveMember { victim } => match reply {
                // TargetClusterControlPlaneIsHealthy before removing the Machine.
                Answer::Service(Ok(_)) => self.connect(ctx, Phase::RemovedHealthNodes { victim }),
                other => Step::error(Unexpected::new("failed to remove etcd member", &other)),
            },
            Phase::RemovedHealthNodes { victim } => {
                let Some(nodes) = node_names(&reply) else {
                    return Step::error(Unexpected::new("control plane health", &reply));
                };
                if any_no_execute(&reply) || !self.control_plane_healthy(ctx, &nodes) {
                    ctx.note(|| {
                        format!(
                            "scale down: control plane unhealthy after the member removal ({} Nodes): {} kept",
                            nodes.len(),
                            victim.meta.name
                        )
                    });
                    return Step::requeue_after(HEALTH_REQUEUE_MS);
                }
                match node_ref(&victim).map(str::to_string) {
                    Some(name) => self.etcd_call(
                        Phase::RemoveEndpoint { victim },
                        EtcdOp::RemoveEndpoint { name },
                    ),
                    None => self.delete(&victim),
                }
            }
            Phase::RemoveEndpoint { victim } => match reply {
                Answer::Service(Ok(_)) => self.delete(&victim),
                other => Step::error(Unexpected::new("failed to update kubeadm config", &other)),
            },
            Phase::Delete => match reply {
                Answer::Api(Ok(_)) => Step::RateLimited,
                other => Step::error(Unexpected::new("delete machine", &other)),
            },
        }
    }

    fn reset(&mut self) {
        *self = KcpController::new(self.options, self.etcd);
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
