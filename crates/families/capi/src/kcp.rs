//! The Cluster API KubeadmControlPlane controller before and after its v0.3.4 fix (seed
//! incident 2; SEED-FACTS.md section 2: kubernetes-sigs/cluster-api at the parent of
//! 8bbdd95a72 (v0.3.3) and at 8bbdd95a72, files controlplane/kubeadm/controllers/
//! {controller,upgrade,scale}.go and controlplane/kubeadm/internal/{control_plane,
//! cluster,workload_cluster_etcd}.go).
//!
//! One reconcile of a KubeadmControlPlane, an async function in kube-runtime's shape
//! ([`controller`], over `reconsim_world::runtime`; every call is an await, and nothing
//! else is):
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
//! controller-runtime turns into `AddRateLimited` (semantics 2.4; here
//! `Action::rate_limited`): a requeue after the per-item backoff, 5 ms doubling while
//! requeues follow each other. An error ([`KcpError`]) requeues with the same backoff.
//! Status writes, certificates, the kubeadm and kubelet ConfigMap updates of
//! upgradeControlPlane and the static-pod Gets of ControlPlaneIsHealthy are not
//! modelled: none of them decides what the controller creates or deletes.

use crate::etcd::{EtcdCallResult, EtcdClient, EtcdError, EtcdOk};
use crate::kinds::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, is_control_plane_node, machine_version, node_ref,
    owned_machines,
};
use crate::kinds::{KubeadmControlPlane, KubeadmControlPlaneSpec};
use crate::kinds::{Machine, MachineSpec};
use reconsim_sim::ProcId;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::{Body, Object, ObjectMeta, OwnerReference, TaintEffect};
use reconsim_world::object::{Node, Resource};
use reconsim_world::runtime::{
    Action, Api, Client, Controller, DeleteParams, Error, ListParams, PostParams,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

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
    /// kubernetes-sigs/cluster-api PR #3002 (26f5c70e0a, in v0.3.6): initializeControlPlane
    /// first reads the owned Machines uncached and refuses to initialize again when it
    /// finds one ("to make sure that the controller cache is not misbehaving and we end up
    /// initializing the cluster more than once"). Without it, a reconcile requeued 5 ms
    /// after the first create reads a cache that may not have it yet
    /// (docs/semantics.md 3.19) and creates a second first Machine.
    pub init_reads_uncached: bool,
}
/// The KCP controller's own errors (upstream's names where it has them), and the
/// requests that failed under it, each with the step that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KcpError {
    /// selectMachineForScaleDown found no Machine to delete.
    NoMachineToDelete,
    /// Removing the etcd member would leave the control plane below its minimum
    /// (kubeadm's `ErrControlPlaneMinNodes`).
    ControlPlaneMinNodes,
    /// A request of the step `during` got no answer it could use (an API error, a
    /// timeout).
    Request { during: &'static str, error: Error },
    /// The etcd model refused the step `during`.
    Etcd {
        during: &'static str,
        error: EtcdError,
    },
    /// initializeControlPlane's uncached read found owned Machines already (PR #3002).
    AlreadyInitialized { machines: usize },
}

impl std::fmt::Display for KcpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KcpError::NoMachineToDelete => {
                f.write_str("failed to pick control plane Machine to delete")
            }
            KcpError::ControlPlaneMinNodes => f.write_str("ErrControlPlaneMinNodes"),
            KcpError::Request { during, error } => write!(f, "{during}: {error}"),
            KcpError::Etcd { during, error } => write!(f, "{during}: {error}"),
            KcpError::AlreadyInitialized { machines } => write!(
                f,
                "control plane has already been initialized, found {machines} owned machine for cluster {}/{CLUSTER_NAME}: controller cache or management cluster is misbehaving",
                crate::section::KCP_NAMESPACE
            ),
        }
    }
}

impl std::error::Error for KcpError {}

/// The failure of a request of the step `during`, as a [`KcpError`].
fn request(during: &'static str) -> impl FnOnce(Error) -> KcpError {
    move |error| KcpError::Request { during, error }
}

/// An etcd call of the step `during` that must succeed.
fn etcd_ok(during: &'static str, answer: EtcdCallResult) -> Result<EtcdOk, KcpError> {
    match answer {
        Ok(Ok(ok)) => Ok(ok),
        Ok(Err(error)) => Err(KcpError::Etcd { during, error }),
        Err(error) => Err(KcpError::Request { during, error }),
    }
}

/// The controller's context: its client, its variant, the workload cluster's Nodes and
/// etcd. It keeps nothing between reconciles.
pub struct KcpCtx {
    client: Client,
    options: KcpOptions,
    /// The workload cluster's Nodes; its client is uncached: a List is a consistent read.
    nodes: Api<Node>,
    etcd: EtcdClient,
}

/// The KubeadmControlPlane controller (For(KubeadmControlPlane), Owns(Machine)), calling
/// the etcd model `etcd` of the workload cluster.
pub fn controller(options: KcpOptions, etcd: ProcId) -> Box<dyn Reconciler> {
    Controller::new::<KubeadmControlPlane>("kcp-controller")
        .owns::<Machine>()
        .run(reconcile, error_policy, move |client: Client| KcpCtx {
            nodes: Api::all(client.clone()),
            etcd: EtcdClient::new(client.clone(), etcd),
            client,
            options,
        })
}

/// An error requeues with the work queue's backoff, as controller-runtime's does.
fn error_policy(_: Arc<Object>, _: &KcpError, _: Arc<KcpCtx>) -> Action {
    Action::rate_limited()
}

/// One reconcile of a KubeadmControlPlane (the module's doc lists the steps).
async fn reconcile(kcp: Arc<Object>, ctx: Arc<KcpCtx>) -> Result<Action, KcpError> {
    if kcp.meta.is_deleting() {
        return Ok(Action::await_change());
    }
    let spec = &kcp
        .typed::<KubeadmControlPlane>()
        .expect("a KubeadmControlPlane")
        .spec;
    let machines = owned_machines(ctx.client.store::<Machine>().state().iter(), kcp.meta.uid);
    let pass = Pass {
        ctx: &ctx,
        kcp: &kcp,
        spec,
        machines,
    };
    pass.run().await
}

/// What reconcileHealth guards.
enum Then {
    ScaleUp,
    ScaleDown(Vec<Arc<Object>>),
}

/// One reconcile in progress: the KCP and the owned Machines as the cache showed them
/// when it started (the snapshot every decision but the health checks reads).
struct Pass<'a> {
    ctx: &'a KcpCtx,
    kcp: &'a Object,
    spec: &'a KubeadmControlPlaneSpec,
    machines: Vec<Arc<Object>>,
}

impl Pass<'_> {
    async fn run(&self) -> Result<Action, KcpError> {
        let version = self.spec.version.as_str();
        let need: Vec<Arc<Object>> = self
            .machines
            .iter()
            .filter(|m| machine_version(m) != Some(version))
            .cloned()
            .collect();
        if !need.is_empty() {
            // upgradeControlPlane: GetWorkloadCluster first.
            self.connect().await;
            if self.ctx.options.scale_by_machine_count {
                // The workload client is still built (for the kubeadm ConfigMap updates);
                // the decision no longer needs a call.
                return self.upgrade_by_count(need).await;
            }
            // ClusterStatus: the live List of Nodes.
            let items = self.list_nodes().await.map_err(request("cluster status"))?;
            let nodes = node_names(&items);
            let replicas = self.spec.replicas as usize;
            self.ctx.client.note(|| {
                let deleting = need.iter().filter(|m| m.meta.is_deleting()).count();
                format!(
                    "upgrade: {} Machines need it ({deleting} deleting); ClusterStatus: {} control-plane Nodes, replicas {replicas}: scale {}",
                    need.len(),
                    nodes.len(),
                    if nodes.len() <= replicas { "up" } else { "down" }
                )
            });
            return if nodes.len() <= replicas {
                // "scaleUp ensures that we don't continue scaling up while waiting
                // for Machines to have NodeRefs"
                self.health(Then::ScaleUp).await
            } else {
                self.scale_down(need).await
            };
        }
        let replicas = self.spec.replicas as usize;
        let n = self.machines.len();
        if n == 0 && replicas > 0 {
            // initializeControlPlane: no health check for the first machine.
            if self.ctx.options.init_reads_uncached {
                let live = self
                    .machines_api(&self.kcp.meta.namespace)
                    .list(&ListParams::default())
                    .await
                    .map_err(request("initializeControlPlane: uncached read"))?;
                let machines = owned_machines(live.iter(), self.kcp.meta.uid).len();
                if machines > 0 {
                    return Err(KcpError::AlreadyInitialized { machines });
                }
            }
            return self.create().await;
        }
        if n < replicas {
            return self.health(Then::ScaleUp).await;
        }
        if n > replicas {
            return self.scale_down(self.machines.clone()).await;
        }
        Ok(Action::await_change())
    }

    /// GetWorkloadCluster: a new client ([`KcpOptions::workload_client_ms_min`]).
    async fn connect(&self) {
        let (lo, hi) = (
            self.ctx.options.workload_client_ms_min,
            self.ctx.options.workload_client_ms_max,
        );
        if hi == 0 {
            return;
        }
        let ms = if hi <= lo {
            lo
        } else {
            lo + self.ctx.client.random(rand::Rng::next_u64) % (hi - lo + 1)
        };
        self.ctx.client.sleep(ms).await;
    }

    /// A live List of the workload cluster's Nodes.
    async fn list_nodes(&self) -> Result<Vec<Arc<Object>>, Error> {
        self.ctx.nodes.list(&ListParams::default()).await
    }

    fn machines_api(&self, namespace: &str) -> Api<Machine> {
        Api::namespaced(self.ctx.client.clone(), namespace)
    }

    /// upgradeControlPlane by the snapshot's Machine count
    /// ([`KcpOptions::scale_by_machine_count`]): fewer than replicas + 1 -> scale up.
    async fn upgrade_by_count(&self, need: Vec<Arc<Object>>) -> Result<Action, KcpError> {
        let replicas = self.spec.replicas as usize;
        let n = self.machines.len();
        self.ctx.client.note(|| {
            format!(
                "upgrade: {} Machines need it; {n} Machines, replicas {replicas}: scale {}",
                need.len(),
                if n < replicas + 1 { "up" } else { "down" }
            )
        });
        if n < replicas + 1 {
            self.health(Then::ScaleUp).await
        } else {
            self.scale_down(need).await
        }
    }

    async fn scale_down(&self, candidates: Vec<Arc<Object>>) -> Result<Action, KcpError> {
        if self.ctx.options.scale_down_checks_deleting_first {
            // v0.3.3: GetWorkloadCluster, then the early deleting check.
            self.connect().await;
            if self.machines.iter().any(|m| m.meta.is_deleting()) {
                self.ctx
                    .client
                    .note(|| "scale down: a Machine is deleting: requeue".to_string());
                return Ok(Action::requeue(ms(DELETE_REQUEUE_MS)));
            }
        }
        self.health(Then::ScaleDown(candidates)).await
    }

    /// reconcileHealth: ControlPlaneIsHealthy, EtcdIsHealthy (ReconcileEtcdMembers if
    /// not), then what it guards.
    async fn health(&self, then: Then) -> Result<Action, KcpError> {
        let (nodes, healthy) = self.control_plane_check().await?;
        if !healthy {
            self.ctx
                .client
                .note(|| format!("control plane unhealthy ({} Nodes)", nodes.len()));
            return Ok(Action::requeue(ms(HEALTH_REQUEUE_MS)));
        }
        self.ctx.client.note(|| {
            format!(
                "control plane healthy: {} Nodes, Machines re-read from the cache match",
                nodes.len()
            )
        });
        // TargetClusterEtcdIsHealthy: its own GetWorkloadCluster.
        self.connect().await;
        if !self.etcd_healthy(&nodes).await {
            // Unhealthy etcd: ReconcileEtcdMembers (its own GetWorkloadCluster), then wait.
            self.connect().await;
            self.reconcile_etcd_members().await;
            return Ok(Action::requeue(ms(HEALTH_REQUEUE_MS)));
        }
        self.healthy(then).await
    }

    /// ControlPlaneIsHealthy from scratch: its own GetWorkloadCluster, the live List of
    /// Nodes, none with a NoExecute taint (checkNodeNoExecuteCondition: an unreachable
    /// node fails it), and the Machines' Nodes exactly those. The live Nodes' names, and
    /// whether the control plane passed.
    async fn control_plane_check(&self) -> Result<(BTreeSet<String>, bool), KcpError> {
        self.connect().await;
        let items = self
            .list_nodes()
            .await
            .map_err(request("control plane health"))?;
        let nodes = node_names(&items);
        let healthy = !any_no_execute(&items) && self.control_plane_healthy(&nodes);
        Ok((nodes, healthy))
    }

    /// ControlPlaneIsHealthy, given the live Nodes; the Machines come from the cache now.
    fn control_plane_healthy(&self, nodes: &BTreeSet<String>) -> bool {
        let machines = owned_machines(
            self.ctx.client.store::<Machine>().state().iter(),
            self.kcp.meta.uid,
        );
        machines
            .iter()
            .all(|m| node_ref(m).is_some_and(|n| nodes.contains(n)))
            && machines.len() == nodes.len()
    }

    /// EtcdIsHealthy: a MemberList through each Node's member, in name order. A Node
    /// whose member is not up is skipped (its etcd pod is not ready); healthy iff every
    /// answer agrees and there are as many members as answering Nodes.
    async fn etcd_healthy(&self, nodes: &BTreeSet<String>) -> bool {
        let mut answered = 0;
        let mut members: Option<Vec<String>> = None;
        let mut failed = false;
        for via in nodes {
            match self.ctx.etcd.member_list(via.clone()).await {
                Ok(Ok(EtcdOk::Members { names, .. })) => {
                    answered += 1;
                    match &members {
                        None => members = Some(names),
                        Some(known) if *known != names => failed = true,
                        Some(_) => {}
                    }
                }
                // The etcd pod of this node is not ready: not expected to answer.
                Ok(Err(EtcdError::Unavailable)) => {}
                _ => failed = true,
            }
        }
        let known = members.as_ref().map_or(0, Vec::len);
        !failed && answered == known
    }

    /// ReconcileEtcdMembers: the live List of Nodes, a MemberList through the first
    /// Node whose member answers, then remove every member (and its ClusterStatus
    /// endpoint) whose Node is absent. Best effort: errors are logged and it goes on.
    async fn reconcile_etcd_members(&self) {
        let Ok(items) = self.list_nodes().await else {
            return;
        };
        let nodes = node_names(&items);
        for via in &nodes {
            let Ok(Ok(EtcdOk::Members { names, .. })) =
                self.ctx.etcd.member_list(via.clone()).await
            else {
                continue;
            };
            for name in names.into_iter().filter(|m| !nodes.contains(m)) {
                let _ = self.ctx.etcd.remove_member(name.clone()).await;
                let _ = self.ctx.etcd.remove_endpoint(name).await;
            }
            return;
        }
    }

    /// The end of reconcileHealth: healthy.
    async fn healthy(&self, then: Then) -> Result<Action, KcpError> {
        if self.ctx.options.wait_for_deletion && self.machines.iter().any(|m| m.meta.is_deleting())
        {
            // reconcileHealth's deleteRequeueAfter error becomes the caller's
            // healthCheckFailedRequeueAfter (scale.go, scaleUp/scaleDownControlPlane).
            self.ctx
                .client
                .note(|| "reconcileHealth: a Machine is deleting: requeue".to_string());
            return Ok(Action::requeue(ms(HEALTH_REQUEUE_MS)));
        }
        match then {
            Then::ScaleUp => self.create().await,
            Then::ScaleDown(candidates) => self.pick_and_remove(&candidates).await,
        }
    }

    /// Create a Machine (generateName `<kcp>-`, the KCP's version, the failure domain
    /// with the fewest machines); success requeues rate-limited (`Result{Requeue: true}`).
    async fn create(&self) -> Result<Action, KcpError> {
        let kcp = self.kcp;
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
            controller: Some(true),
            block_owner_deletion: None,
        }];
        // NextFailureDomainForScaleUp: the domain with the fewest machines.
        let failure_domain = self
            .spec
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
                version: Some(self.spec.version.clone()),
                failure_domain,
            },
            status: Default::default(),
        };
        self.machines_api(&kcp.meta.namespace)
            .create(
                &PostParams::default(),
                Object::new(meta, Body::new(machine)),
            )
            .await
            .map_err(request("create machine"))?;
        Ok(Action::rate_limited())
    }

    /// selectMachineForScaleDown, ForwardEtcdLeadership to the newest machine,
    /// RemoveEtcdMemberForMachine, TargetClusterControlPlaneIsHealthy,
    /// RemoveMachineFromKubeadmConfigMap, then delete the Machine; success requeues
    /// rate-limited.
    async fn pick_and_remove(&self, candidates: &[Arc<Object>]) -> Result<Action, KcpError> {
        let Some(victim) = select_for_scale_down(candidates) else {
            return Err(KcpError::NoMachineToDelete);
        };
        if !self.ctx.options.scale_down_checks_deleting_first {
            // v0.3.4's GetWorkloadCluster after reconcileHealth (v0.3.3 built the
            // workload client before the early check).
            self.connect().await;
        }
        let leaving = node_ref(&victim).map(str::to_string);
        // Without a node for the Machine, ForwardEtcdLeadership and
        // RemoveEtcdMemberForMachine return at once. The health check still runs.
        if let Some(leaving) = &leaving {
            let newest = self.machines.last().expect("a candidate exists");
            let candidate = node_ref(newest).map(str::to_string);
            let forward = self
                .ctx
                .etcd
                .forward_leadership(leaving.clone(), candidate)
                .await;
            etcd_ok("failed to move leadership", forward)?;
            // RemoveEtcdMemberForMachine: the live List of Nodes.
            let items = self
                .list_nodes()
                .await
                .map_err(request("remove etcd member"))?;
            if node_names(&items).len() < 2 {
                return Err(KcpError::ControlPlaneMinNodes);
            }
            let removed = self.ctx.etcd.remove_member(leaving.clone()).await;
            etcd_ok("failed to remove etcd member", removed)?;
        }
        // TargetClusterControlPlaneIsHealthy before removing the Machine.
        let (nodes, healthy) = self.control_plane_check().await?;
        if !healthy {
            self.ctx.client.note(|| {
                format!(
                    "scale down: control plane unhealthy after the member removal ({} Nodes): {} kept",
                    nodes.len(),
                    victim.meta.name
                )
            });
            return Ok(Action::requeue(ms(HEALTH_REQUEUE_MS)));
        }
        if let Some(name) = leaving {
            let removed = self.ctx.etcd.remove_endpoint(name).await;
            etcd_ok("failed to update kubeadm config", removed)?;
        }
        self.machines_api(&victim.meta.namespace)
            .delete(&victim.meta.name, &DeleteParams::default())
            .await
            .map_err(request("delete machine"))?;
        Ok(Action::rate_limited())
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// The names of the workload control-plane Nodes (by kubeadm's label) of a List answer.
fn node_names(items: &[Arc<Object>]) -> BTreeSet<String> {
    items
        .iter()
        .filter(|n| is_control_plane_node(n))
        .map(|n| n.meta.name.clone())
        .collect()
}

/// Whether a control-plane Node of a List answer carries a NoExecute taint.
fn any_no_execute(items: &[Arc<Object>]) -> bool {
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
