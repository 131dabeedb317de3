//! The Cluster API Machine controller for control-plane machines, with a cloud
//! infrastructure provider folded in (seed incident 2; SEED-FACTS.md section 2,
//! kubernetes-sigs/cluster-api controllers/machine_controller.go at the parent of
//! 8bbdd95a72 (v0.3.3) and at 8bbdd95a72 (v0.3.4)).
//!
//! One reconcile of a Machine:
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
use reconsim_cloud::{CloudOp, CloudResult, InstanceState};
use reconsim_sim::ProcId;
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp};
use reconsim_world::manager::{Answer, Call, ReconcileCtx, Reconciler, Step, enqueue_for};
use reconsim_world::object::{Kind, Object, ObjectKey};
use reconsim_world::object::{Node, Resource};
use reconsim_world::reconcile_error::Unexpected;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

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

#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Idle,
    AddFinalizer,
    /// Deleting: looking the instance up; `node_allowed` decided at the start.
    DeleteLookup {
        node_allowed: bool,
    },
    Terminate,
    DeleteNode,
    RemoveFinalizer,
    MarkProvisioning,
    Create,
    RecordCreated,
    RecordNodeRef,
}

/// The Cluster API Machine controller (control-plane machines).
#[derive(Clone, Debug)]
pub struct CapiMachineController {
    options: CapiMachineOptions,
    /// The cloud API it calls.
    cloud: ProcId,
    phase: Phase,
    machine: Option<Arc<Object>>,
}

impl CapiMachineController {
    pub fn new(options: CapiMachineOptions, cloud: ProcId) -> Self {
        CapiMachineController {
            options,
            cloud,
            phase: Phase::default(),
            machine: None,
        }
    }

    fn cloud_call(&self, op: CloudOp) -> Step {
        Step::Call(Call::service(self.cloud, op))
    }

    fn machine(&self) -> &Object {
        self.machine.as_ref().expect("set at reconcile start")
    }

    fn update(&mut self, phase: Phase, object: Object) -> Step {
        self.phase = phase;
        Step::Call(Call::Api(ApiOp::Update {
            object: Box::new(object),
            precondition: true,
        }))
    }

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        self.phase = Phase::Idle;
        let Some(m) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        self.machine = Some(m.clone());
        if m.meta.is_deleting() {
            if !m.meta.has_finalizer(FINALIZER) {
                return Step::done();
            }
            let node_allowed = self.delete_node_allowed(ctx, &m);
            return self.lookup(Phase::DeleteLookup { node_allowed });
        }
        if !m.meta.has_finalizer(FINALIZER) {
            let mut next = (*m).clone();
            next.meta.finalizers.push(FINALIZER.into());
            return self.update(Phase::AddFinalizer, next);
        }
        let machine = m.typed::<Machine>().expect("a Machine key");
        if machine.status.instance_id.is_none() {
            let ops = vec![PatchOp::from(MachineFields {
                provider_id: None,
                instance_id: None,
                phase: Some("Provisioning".into()),
                last_updated: Some(ctx.now),
            })];
            self.phase = Phase::MarkProvisioning;
            return Step::Call(Call::Api(ApiOp::Patch {
                key: m.key(),
                ops,
                resource_version: None,
            }));
        }
        if machine.status.node_ref.is_some() {
            return Step::done();
        }
        let pid = machine.spec.provider_id.as_deref();
        let node = ctx.cache.list(Node::KIND).find(|n| {
            is_workload_node(n)
                && n.typed::<Node>()
                    .and_then(|x| x.spec.provider_id.as_deref())
                    == pid
        });
        let Some(node) = node else {
            return Step::requeue_after(REQUEUE_NODE_REF_MS);
        };
        let mut next = (*m).clone();
        let status = &mut next.typed_mut::<Machine>().expect("a Machine").status;
        status.node_ref = Some(node.meta.name.clone());
        status.phase = Some("Running".into());
        status.last_updated = Some(ctx.now);
        self.update(Phase::RecordNodeRef, next)
    }

    /// isDeleteNodeAllowed, from the cache.
    fn delete_node_allowed(&self, ctx: &ReconcileCtx<'_>, m: &Object) -> bool {
        let active = ctx
            .cache
            .list(Machine::KIND)
            .filter(|o| {
                !o.meta.is_deleting()
                    && o.meta.namespace == m.meta.namespace
                    && o.meta.labels.contains_key(CONTROL_PLANE_LABEL)
            })
            .count();
        let is_cp = m.meta.labels.contains_key(CONTROL_PLANE_LABEL);
        match active {
            0 => false,
            1 if is_cp && self.options.refuse_last_control_plane_node => false,
            _ => true,
        }
    }

    fn lookup(&mut self, phase: Phase) -> Step {
        let status = &self.machine().typed::<Machine>().expect("a Machine").status;
        let ids: Vec<String> = status.instance_id.iter().cloned().collect();
        self.phase = phase;
        let op = if ids.is_empty() {
            CloudOp::DescribeInstances {
                ids,
                tag_filters: instance_tags(&self.machine().meta.name),
                states: Vec::new(),
            }
        } else {
            CloudOp::DescribeInstances {
                ids,
                tag_filters: BTreeMap::new(),
                states: Vec::new(),
            }
        };
        self.cloud_call(op)
    }

    fn after_infra_gone(&mut self, node_allowed: bool) -> Step {
        let m = self.machine().clone();
        let node = m.typed::<Machine>().and_then(|x| x.status.node_ref.clone());
        match node {
            Some(name) if node_allowed => {
                self.phase = Phase::DeleteNode;
                Step::Call(Call::Api(ApiOp::Delete {
                    key: ObjectKey::new(Node::KIND, "", &name),
                    uid: None,
                    grace_period_seconds: None,
                }))
            }
            _ => self.remove_finalizer(),
        }
    }

    fn remove_finalizer(&mut self) -> Step {
        let mut next = self.machine().clone();
        next.meta.finalizers.retain(|f| f != FINALIZER);
        self.update(Phase::RemoveFinalizer, next)
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

impl Reconciler for CapiMachineController {
    fn name(&self) -> &str {
        "capi-machine-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![Machine::KIND, Node::KIND]
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        enqueue_for(object, Machine::KIND, keys);
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Some(reply) = ctx.reply.take() else {
            return self.start(ctx);
        };
        let phase = std::mem::take(&mut self.phase);
        match (phase, reply.answer::<CloudResult>()) {
            (Phase::AddFinalizer, Answer::Api(Ok(_))) => Step::done(),
            (Phase::DeleteLookup { node_allowed }, Answer::Service(found)) => {
                // Not visible (yet, or any more): look again later.
                let Ok(list) = found else {
                    return Step::requeue_after(REQUEUE_INFRA_MS);
                };
                // TerminateInstanceAndWait: the infrastructure is gone once terminated.
                let live: Vec<_> = list
                    .into_iter()
                    .filter(|i| i.state != InstanceState::Terminated)
                    .collect();
                if live.is_empty() {
                    return self.after_infra_gone(node_allowed);
                }
                let ids: Vec<String> = live
                    .iter()
                    .filter(|i| i.state != InstanceState::ShuttingDown)
                    .map(|i| i.id.clone())
                    .collect();
                if ids.is_empty() {
                    return Step::requeue_after(REQUEUE_INFRA_MS);
                }
                self.phase = Phase::Terminate;
                self.cloud_call(CloudOp::TerminateInstances { ids })
            }
            (Phase::Terminate, Answer::Service(Ok(_))) => Step::requeue_after(REQUEUE_INFRA_MS),
            (Phase::DeleteNode, Answer::Api(Ok(_) | Err(ApiError::NotFound))) => {
                self.remove_finalizer()
            }
            (Phase::RemoveFinalizer, Answer::Api(Ok(_))) => Step::done(),
            (Phase::MarkProvisioning, Answer::Api(Ok(ApiOk::Object(m)))) => {
                self.machine = Some(m);
                self.phase = Phase::Create;
                let m = self.machine();
                self.cloud_call(CloudOp::RunInstances {
                    tags: instance_tags(&m.meta.name),
                    client_token: Some(format!("{}", m.meta.uid.0)),
                })
            }
            (Phase::Create, Answer::Service(Ok(instances))) if !instances.is_empty() => {
                let i = &instances[0];
                self.phase = Phase::RecordCreated;
                Step::Call(Call::Api(ApiOp::Patch {
                    key: self.machine().key(),
                    ops: vec![PatchOp::from(MachineFields {
                        provider_id: Some(i.provider_id()),
                        instance_id: Some(i.id.clone()),
                        phase: None,
                        last_updated: Some(ctx.now),
                    })],
                    resource_version: None,
                }))
            }
            (Phase::RecordCreated, Answer::Api(Ok(_))) => Step::requeue_after(REQUEUE_INFRA_MS),
            (Phase::RecordNodeRef, Answer::Api(Ok(_))) => Step::done(),
            (phase, reply) => Step::error(Unexpected::new(format!("{phase:?} failed"), &reply)),
        }
    }

    fn reset(&mut self) {
        *self = CapiMachineController::new(self.options, self.cloud);
    }
}
