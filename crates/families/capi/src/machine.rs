//! The Cluster API Machine controller for control-plane machines, with a cloud
//! infrastructure provider folded in (seed incident 2; SEED-FACTS.md section 2,
//! kubernetes-sigs/cluster-api controllers/machine_controller.go at the parent of
//! 8bbdd95a72 (v0.3.3) and at 8bbdd95a72 (v0.3.4)).
//!
//! One reconcile of a Machine, an async function in kube-runtime's shape ([`controller`],
//! over `reconsim_world::runtime`; every call is an await; an error,
//! [`CapiMachineError`], requeues with the work queue's backoff):
//! - no finalizer yet: add it (Update) and end;
//! - being deleted (reconcileDelete):
//!   1. isDeleteNodeAllowed, from the cache: the cluster's control-plane Machines that are
//!      not being deleted (getActiveMachinesInCluster). None: refused
//!      (errNoControlPlaneNodes). Exactly one, and this is a control-plane machine:
//!      refused (errLastControlPlaneNode) — in v0.3.3 only; v0.3.4 removed that case.
//!      A refusal is logged and the deletion goes on without deleting the Node;
//!   2. delete the infrastructure: look the instance up by its recorded id, terminate it
//!      if it is still live, requeue after 10 s until it is gone (the infrastructure
//!      provider's delete; draining is not modelled: no workloads run on these nodes);
//!   3. if allowed, delete the Node (NotFound is fine);
//!   4. remove the finalizer.
//! - no instance yet: RunInstances with the control-plane tags and the Machine's uid as
//!   client token (idempotent, so incident 1's leak cannot confound this one), record
//!   providerID and instanceId (phase Provisioning), requeue after 10 s;
//! - instance recorded but no nodeRef: find the Node whose providerID matches in the
//!   cache; found: record status.nodeRef (phase Running); not found: requeue after 20 s
//!   (reconcileNodeRef's ErrNodeNotFound; v0.3.3 does not watch workload Nodes).
//!
//! Simplifications (documented in docs/seeds/kcp.md): the bootstrap and infrastructure
//! providers are not separate controllers; node draining is skipped.

use crate::etcd::ROLE_TAG;
use crate::kinds::{CONTROL_PLANE_LABEL, is_workload_node};
use crate::kinds::{Machine, MachineFields};
use reconsim_cloud::{CloudError, CloudResult, Ec2, Instance, InstanceState};
use reconsim_sim::ProcId;
use reconsim_world::api::PatchOp;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::{Node, Object, ObjectKey};
use reconsim_world::runtime::{
    Action, Api, Client, Controller, DeleteParams, Error, PatchParams, PostParams,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const FINALIZER: &str = "machine.cluster.x-k8s.io";
/// The tag every instance of the simulated cluster carries.
pub const CLUSTER_TAG: &str = "kubernetes.io/cluster/reconsim";
pub const NAME_TAG: &str = "Name";
/// Requeue while the instance is being created or deleted.
pub const REQUEUE_INFRA_MS: u64 = 10_000;
/// Requeue while the Node has not registered (ErrNodeNotFound).
pub const REQUEUE_NODE_REF_MS: u64 = 20_000;

/// Behaviour switches of the Machine controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CapiMachineOptions {
    /// v0.3.3: refuse to delete the Node when exactly one non-deleting control-plane
    /// Machine is left (errLastControlPlaneNode). Removing it is the Machine-controller
    /// half of PR #2958 (docs/semantics.md 7.6), on its own in `v0.3.3-machine-fix`.
    pub refuse_last_control_plane_node: bool,
}

/// Why a reconcile of a Machine failed: the step, and what its request answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapiMachineError {
    /// A request of the step `during` got no answer it could use (an API error, a
    /// timeout).
    Request { during: &'static str, error: Error },
    /// The cloud refused the step `during`.
    Cloud {
        during: &'static str,
        error: CloudError,
    },
    /// RunInstances answered without an instance.
    NothingLaunched,
}

impl std::fmt::Display for CapiMachineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapiMachineError::Request { during, error } => write!(f, "{during}: {error}"),
            CapiMachineError::Cloud { during, error } => write!(f, "{during}: {error:?}"),
            CapiMachineError::NothingLaunched => f.write_str("RunInstances launched nothing"),
        }
    }
}

impl std::error::Error for CapiMachineError {}

/// The failure of a request of the step `during`, as a [`CapiMachineError`].
fn request(during: &'static str) -> impl FnOnce(Error) -> CapiMachineError {
    move |error| CapiMachineError::Request { during, error }
}

/// A cloud call of the step `during` that must succeed.
fn cloud_ok(
    during: &'static str,
    answer: Result<CloudResult, Error>,
) -> Result<Vec<reconsim_sim::Hashed<Instance>>, CapiMachineError> {
    answer
        .map_err(request(during))?
        .map_err(|error| CapiMachineError::Cloud { during, error })
}

/// The controller's context: its client, its variant, the cloud API it calls. It keeps
/// nothing else between reconciles.
pub struct CapiMachineCtx {
    client: Client,
    options: CapiMachineOptions,
    ec2: Ec2,
}

/// The Cluster API Machine controller for control-plane machines (For(Machine), with
/// the workload cluster's Nodes in its cache), calling the cloud `cloud`.
pub fn controller(options: CapiMachineOptions, cloud: ProcId) -> Box<dyn Reconciler> {
    Controller::new::<Machine>("capi-machine-controller")
        .watches::<Node>(cached_only)
        .run(reconcile, error_policy, move |client: Client| {
            CapiMachineCtx {
                ec2: Ec2::new(client.clone(), cloud),
                client,
                options,
            }
        })
}

/// Nodes are cached for the NodeRef lookup by providerID, but a Node's change reconciles
/// no Machine: v0.3.3 does not watch workload Nodes (reconcileNodeRef requeues).
fn cached_only(_: &Object, _: &mut Vec<ObjectKey>) {}

/// An error requeues with the work queue's backoff, as controller-runtime's does.
fn error_policy(_: Arc<Object>, _: &CapiMachineError, _: Arc<CapiMachineCtx>) -> Action {
    Action::rate_limited()
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// One reconcile of a Machine (the module's doc lists the branches).
async fn reconcile(m: Arc<Object>, ctx: Arc<CapiMachineCtx>) -> Result<Action, CapiMachineError> {
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.meta.namespace);
    let pp = PostParams::default();
    if m.meta.is_deleting() {
        if !m.meta.has_finalizer(FINALIZER) {
            return Ok(Action::await_change());
        }
        return reconcile_delete(&ctx, &machines, &m).await;
    }
    if !m.meta.has_finalizer(FINALIZER) {
        let mut next = (*m).clone();
        next.meta.finalizers.push(FINALIZER.into());
        machines
            .replace(&pp, next)
            .await
            .map_err(request("add the finalizer"))?;
        return Ok(Action::await_change());
    }
    let machine = m.typed::<Machine>().expect("a Machine key");
    if machine.status.instance_id.is_none() {
        return create(&ctx, &machines, &m).await;
    }
    if machine.status.node_ref.is_some() {
        return Ok(Action::await_change());
    }
    // reconcileNodeRef: the Node whose providerID matches, from the cache.
    let pid = machine.spec.provider_id.as_deref();
    let node = ctx.client.store::<Node>().state().into_iter().find(|n| {
        is_workload_node(n)
            && n.typed::<Node>()
                .and_then(|x| x.spec.provider_id.as_deref())
                == pid
    });
    let Some(node) = node else {
        return Ok(Action::requeue(ms(REQUEUE_NODE_REF_MS)));
    };
    let mut next = (*m).clone();
    let status = &mut next.typed_mut::<Machine>().expect("a Machine").status;
    status.node_ref = Some(node.meta.name.clone());
    status.phase = Some("Running".into());
    status.last_updated = Some(ctx.client.now());
    machines
        .replace(&pp, next)
        .await
        .map_err(request("record the NodeRef"))?;
    Ok(Action::await_change())
}

/// No instance yet: phase Provisioning, RunInstances (the Machine's uid as client
/// token), record providerID and instanceId, requeue after 10 s.
async fn create(
    ctx: &CapiMachineCtx,
    machines: &Api<Machine>,
    m: &Object,
) -> Result<Action, CapiMachineError> {
    let pp = PatchParams::default();
    let ops = vec![PatchOp::from(MachineFields {
        provider_id: None,
        instance_id: None,
        phase: Some("Provisioning".into()),
        last_updated: Some(ctx.client.now()),
    })];
    let m = machines
        .patch(&m.meta.name, &pp, ops)
        .await
        .map_err(request("mark the Machine Provisioning"))?;
    let tags = instance_tags(&m.meta.name);
    let client_token = Some(format!("{}", m.meta.uid.0));
    let launched = ctx.ec2.run_instances(tags, client_token).await;
    let instances = cloud_ok("RunInstances", launched)?;
    let Some(i) = instances.first() else {
        return Err(CapiMachineError::NothingLaunched);
    };
    let ops = vec![PatchOp::from(MachineFields {
        provider_id: Some(i.provider_id()),
        instance_id: Some(i.id.clone()),
        phase: None,
        last_updated: Some(ctx.client.now()),
    })];
    machines
        .patch(&m.meta.name, &pp, ops)
        .await
        .map_err(request("record the instance"))?;
    Ok(Action::requeue(ms(REQUEUE_INFRA_MS)))
}

/// reconcileDelete: isDeleteNodeAllowed, the infrastructure's deletion, the Node's,
/// then the finalizer.
async fn reconcile_delete(
    ctx: &CapiMachineCtx,
    machines: &Api<Machine>,
    m: &Object,
) -> Result<Action, CapiMachineError> {
    let node_allowed = delete_node_allowed(ctx, m);
    let found = lookup(ctx, m)
        .await
        .map_err(request("look the instance up"))?;
    // Not visible (yet, or any more): look again later.
    let Ok(found) = found else {
        return Ok(Action::requeue(ms(REQUEUE_INFRA_MS)));
    };
    // TerminateInstanceAndWait: the infrastructure is gone once terminated.
    let live: Vec<&Instance> = found
        .iter()
        .filter(|i| i.state != InstanceState::Terminated)
        .map(|i| &**i)
        .collect();
    if !live.is_empty() {
        let ids: Vec<String> = live
            .iter()
            .filter(|i| i.state != InstanceState::ShuttingDown)
            .map(|i| i.id.clone())
            .collect();
        if !ids.is_empty() {
            let terminated = ctx.ec2.terminate_instances(ids).await;
            cloud_ok("terminate the instance", terminated)?;
        }
        return Ok(Action::requeue(ms(REQUEUE_INFRA_MS)));
    }
    let node = m
        .typed::<Machine>()
        .and_then(|x| x.status.node_ref.as_deref());
    if let Some(name) = node
        && node_allowed
    {
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        match nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if e.code() == Some(404) => {}
            Err(e) => return Err(request("delete the Node")(e)),
        }
    }
    let mut next = m.clone();
    next.meta.finalizers.retain(|f| f != FINALIZER);
    machines
        .replace(&PostParams::default(), next)
        .await
        .map_err(request("remove the finalizer"))?;
    Ok(Action::await_change())
}

/// isDeleteNodeAllowed, from the cache.
fn delete_node_allowed(ctx: &CapiMachineCtx, m: &Object) -> bool {
    let active = ctx
        .client
        .store::<Machine>()
        .state()
        .iter()
        .filter(|o| {
            !o.meta.is_deleting()
                && o.meta.namespace == m.meta.namespace
                && o.meta.labels.contains_key(CONTROL_PLANE_LABEL)
        })
        .count();
    let is_cp = m.meta.labels.contains_key(CONTROL_PLANE_LABEL);
    match active {
        0 => false,
        1 if is_cp && ctx.options.refuse_last_control_plane_node => false,
        _ => true,
    }
}

/// The instance of a Machine: by its recorded instanceId, else by its tags.
async fn lookup(ctx: &CapiMachineCtx, m: &Object) -> Result<CloudResult, Error> {
    let status = &m.typed::<Machine>().expect("a Machine").status;
    match status.instance_id.clone() {
        Some(id) => {
            let by_id = ctx
                .ec2
                .describe_instances(vec![id], BTreeMap::new(), Vec::new());
            by_id.await
        }
        None => {
            let by_tag =
                ctx.ec2
                    .describe_instances(Vec::new(), instance_tags(&m.meta.name), Vec::new());
            by_tag.await
        }
    }
}

/// The tags of a control-plane machine's instance.
pub fn instance_tags(machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_TAG.to_string(), machine.to_string()),
        (CLUSTER_TAG.to_string(), "owned".to_string()),
        (ROLE_TAG.0.to_string(), ROLE_TAG.1.to_string()),
    ])
}
