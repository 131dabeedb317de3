//! The machine-api Machine controller with its AWS actuator, as in OpenShift release-4.5
//! (SEED-FACTS.md section 1: openshift/machine-api-operator
//! pkg/controller/machine/controller.go; openshift/cluster-api-provider-aws
//! pkg/actuators/machine/{reconciler,instances,utils}.go).
//!
//! One reconcile of a Machine:
//! - no finalizer yet: add it (Update) and end; the write brings the next reconcile;
//! - being deleted: look the instances up, terminate what was found, look again; while
//!   one exists requeue after 20 s; then remove the finalizer;
//! - phase Failed: nothing;
//! - an instance exists: record providerID/instanceId if they changed (a merge patch,
//!   no resourceVersion precondition); requeue after 20 s while it is pending;
//! - none exists but providerID is set: within 20 s of the last status update it may be
//!   AWS's eventual consistency, so requeue after 20 s; after that the machine is Failed
//!   ("Can't find created instance");
//! - none exists: phase Provisioning, RunInstances tagged `Name=<machine>` (no client
//!   token: none in any release), record providerID and instanceId, requeue after 30 s.
//!
//! The lookup: by providerStatus.instanceId when set (falling back to the tag lookup when
//! the id is not found yet), else DescribeInstances by tag `Name=<machine>` and the
//! cluster's owned tag in states pending, running, stopping, stopped, shutting-down. So
//! once instanceId is set, deletion terminates that instance only, and a second instance
//! with the same Name tag leaks.
//!
//! [`MachineOptions::idempotent_create`] is the variant this project adds to answer the
//! incident's open question (docs/seeds/machine-api.md): RunInstances with the Machine's
//! uid as client token, and no create while instanceId is already recorded.

use crate::kinds::{Machine, MachineFields};
use reconsim_cloud::{CloudOp, CloudResult, Instance, InstanceState};
use reconsim_sim::ProcId;
use reconsim_world::api::{ApiOk, ApiOp, PatchOp};
use reconsim_world::manager::{Answer, Call, ReconcileCtx, Reconciler, Step, enqueue_for};
use reconsim_world::object::Resource;
use reconsim_world::object::{Kind, Object, ObjectKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const FINALIZER: &str = "machine.machine.openshift.io";
/// The tag every instance of the cluster carries (`kubernetes.io/cluster/<infra-id>`).
pub const CLUSTER_TAG: &str = "kubernetes.io/cluster/reconsim";
pub const NAME_TAG: &str = "Name";
/// requeueAfterSeconds of the AWS actuator.
pub const REQUEUE_AFTER_MS: u64 = 20_000;
/// The machine controller's requeue after a create.
pub const REQUEUE_AFTER_CREATE_MS: u64 = 30_000;
pub const ZONE: &str = "us-east-1a";

/// Behaviour switches of the machine controller (variants are parameters, not copies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineOptions {
    /// Use the Machine's uid as RunInstances client token and never create while an
    /// instanceId is recorded.
    #[serde(default)]
    pub idempotent_create: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Lookup {
    /// Describe by the recorded id.
    #[default]
    ById,
    /// Describe by tags.
    ByTag,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Idle,
    AddFinalizer,
    /// Looking instances up before terminating them.
    DeleteLookup(Lookup),
    Terminate,
    /// Looking up again: does any still exist?
    DeleteExists(Lookup),
    RemoveFinalizer,
    Exists(Lookup),
    /// Recording the found instance; then `then`.
    RecordFound {
        requeue: bool,
    },
    MarkFailed,
    MarkProvisioning,
    Create,
    RecordCreated,
}

/// The Machine controller with the AWS actuator.
#[derive(Clone, Debug)]
pub struct MachineController {
    options: MachineOptions,
    /// The cloud API it calls.
    cloud: ProcId,
    phase: Phase,
    machine: Option<Arc<Object>>,
}

impl MachineController {
    pub fn new(options: MachineOptions, cloud: ProcId) -> Self {
        MachineController {
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

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        self.phase = Phase::Idle;
        let Some(m) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        self.machine = Some(m.clone());
        if !m.meta.is_deleting() && !m.meta.has_finalizer(FINALIZER) {
            let mut next = (*m).clone();
            next.meta.finalizers.push(FINALIZER.into());
            self.phase = Phase::AddFinalizer;
            return Step::Call(Call::Api(ApiOp::Update {
                object: Box::new(next),
                precondition: true,
            }));
        }
        if m.meta.is_deleting() {
            if !m.meta.has_finalizer(FINALIZER) {
                return Step::done();
            }
            return self.lookup(Phase::DeleteLookup);
        }
        if status(&m).phase.as_deref() == Some("Failed") {
            return Step::done();
        }
        self.lookup(Phase::Exists)
    }

    /// Start an instance lookup whose answer continues in `phase(lookup)`.
    fn lookup(&mut self, phase: fn(Lookup) -> Phase) -> Step {
        let recorded = status(self.machine()).instance_id.clone();
        match recorded {
            Some(id) => {
                self.phase = phase(Lookup::ById);
                self.cloud_call(CloudOp::DescribeInstances {
                    ids: vec![id],
                    tag_filters: BTreeMap::new(),
                    states: live_states(),
                })
            }
            None => self.lookup_by_tag(phase),
        }
    }

    fn lookup_by_tag(&mut self, phase: fn(Lookup) -> Phase) -> Step {
        self.phase = phase(Lookup::ByTag);
        self.cloud_call(CloudOp::DescribeInstances {
            ids: vec![],
            tag_filters: instance_tags(&self.machine().meta.name),
            states: live_states(),
        })
    }

    fn patch(&mut self, phase: Phase, op: PatchOp) -> Step {
        self.phase = phase;
        Step::Call(Call::Api(ApiOp::Patch {
            key: self.machine().key(),
            ops: vec![op],
            resource_version: None,
        }))
    }

    /// The machine-api merge patch of the provider fields and status.
    fn fields(
        &self,
        ctx: &ReconcileCtx<'_>,
        instance: Option<&Instance>,
        phase: Option<&str>,
        error: Option<&str>,
    ) -> PatchOp {
        PatchOp::from(MachineFields {
            provider_id: instance.map(provider_id),
            instance_id: instance.map(|i| i.id.clone()),
            phase: phase.map(str::to_string),
            error_message: error.map(str::to_string),
            last_updated: Some(ctx.now),
        })
    }

    /// An instance exists: record it, requeue while it is pending.
    fn found(&mut self, ctx: &ReconcileCtx<'_>, instances: &[Instance]) -> Step {
        let newest = newest_running(instances);
        let pending = newest.state == InstanceState::Pending;
        let st = status(self.machine());
        if st.instance_id.as_deref() == Some(&newest.id)
            && self
                .machine()
                .typed::<Machine>()
                .expect("a Machine")
                .spec
                .provider_id
                .as_deref()
                == Some(&provider_id(newest))
        {
            return if pending {
                Step::requeue_after(REQUEUE_AFTER_MS)
            } else {
                Step::done()
            };
        }
        let op = self.fields(ctx, Some(newest), Some("Provisioned"), None);
        self.patch(Phase::RecordFound { requeue: pending }, op)
    }

    /// No instance: grace period, Failed, or create.
    fn missing(&mut self, ctx: &ReconcileCtx<'_>) -> Step {
        let m = self.machine();
        let st = status(m);
        let provider_set = m
            .typed::<Machine>()
            .expect("a Machine")
            .spec
            .provider_id
            .is_some();
        if provider_set {
            let fresh = st
                .last_updated
                .is_none_or(|t| t.plus_ms(REQUEUE_AFTER_MS) > ctx.now);
            if fresh {
                // "Possible eventual-consistency discrepancy; returning an error to requeue"
                return Step::requeue_after(REQUEUE_AFTER_MS);
            }
            let op = self.fields(
                ctx,
                None,
                Some("Failed"),
                Some("Can't find created instance."),
            );
            return self.patch(Phase::MarkFailed, op);
        }
        if self.options.idempotent_create && st.instance_id.is_some() {
            return Step::Error("instanceId is set: not creating again".into());
        }
        if st.phase.as_deref() != Some("Provisioning") {
            let op = self.fields(ctx, None, Some("Provisioning"), None);
            return self.patch(Phase::MarkProvisioning, op);
        }
        self.create()
    }

    fn create(&mut self) -> Step {
        self.phase = Phase::Create;
        let m = self.machine();
        let client_token = self
            .options
            .idempotent_create
            .then(|| format!("{}", m.meta.uid.0));
        self.cloud_call(CloudOp::RunInstances {
            tags: instance_tags(&m.meta.name),
            client_token,
        })
    }
}

impl Reconciler for MachineController {
    fn name(&self) -> &str {
        "machine-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![Machine::KIND]
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
            // Lookups: by id first, falling back to tags when the id is unknown (yet).
            (Phase::DeleteLookup(Lookup::ById), Answer::Service(Err(_))) => {
                self.lookup_by_tag(Phase::DeleteLookup)
            }
            (Phase::DeleteExists(Lookup::ById), Answer::Service(Err(_))) => {
                self.lookup_by_tag(Phase::DeleteExists)
            }
            (Phase::Exists(Lookup::ById), Answer::Service(Err(_))) => {
                self.lookup_by_tag(Phase::Exists)
            }
            (Phase::DeleteLookup(_), Answer::Service(Ok(found))) => {
                if found.is_empty() {
                    return self.lookup(Phase::DeleteExists);
                }
                self.phase = Phase::Terminate;
                self.cloud_call(CloudOp::TerminateInstances {
                    ids: found.iter().map(|i| i.id.clone()).collect(),
                })
            }
            (Phase::Terminate, Answer::Service(Ok(_))) => self.lookup(Phase::DeleteExists),
            (Phase::DeleteExists(_), Answer::Service(Ok(found))) => {
                if !found.is_empty() {
                    // "can't proceed deleting machine while cloud instance is being terminated"
                    return Step::requeue_after(REQUEUE_AFTER_MS);
                }
                self.phase = Phase::RemoveFinalizer;
                let mut next = self.machine().clone();
                next.meta.finalizers.retain(|f| f != FINALIZER);
                Step::Call(Call::Api(ApiOp::Update {
                    object: Box::new(next),
                    precondition: true,
                }))
            }
            (Phase::RemoveFinalizer, Answer::Api(Ok(_))) => Step::done(),
            (Phase::Exists(_), Answer::Service(Ok(found))) => {
                if found.is_empty() {
                    self.missing(ctx)
                } else {
                    self.found(ctx, &found)
                }
            }
            (Phase::RecordFound { requeue }, Answer::Api(Ok(_))) => {
                if requeue {
                    Step::requeue_after(REQUEUE_AFTER_MS)
                } else {
                    Step::done()
                }
            }
            (Phase::MarkFailed, Answer::Api(Ok(_))) => Step::done(),
            (Phase::MarkProvisioning, Answer::Api(Ok(ApiOk::Object(m)))) => {
                self.machine = Some(m);
                self.create()
            }
            (Phase::Create, Answer::Service(Ok(instances))) if !instances.is_empty() => {
                let op = self.fields(ctx, Some(&instances[0]), None, None);
                self.patch(Phase::RecordCreated, op)
            }
            (Phase::RecordCreated, Answer::Api(Ok(_))) => {
                Step::requeue_after(REQUEUE_AFTER_CREATE_MS)
            }
            (phase, reply) => Step::Error(format!("{phase:?} failed: {reply:?}")),
        }
    }

    fn reset(&mut self) {
        *self = MachineController::new(self.options, self.cloud);
    }
}

fn status(m: &Object) -> &crate::kinds::MachineStatus {
    &m.typed::<Machine>().expect("a Machine").status
}

/// The states the actuator's lookup asks for: everything but terminated.
fn live_states() -> Vec<InstanceState> {
    vec![
        InstanceState::Pending,
        InstanceState::Running,
        InstanceState::Stopping,
        InstanceState::Stopped,
        InstanceState::ShuttingDown,
    ]
}

/// The tags a machine's instance carries, which are also its lookup filter.
pub fn instance_tags(machine: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_TAG.to_string(), machine.to_string()),
        (CLUSTER_TAG.to_string(), "owned".to_string()),
    ])
}

pub fn provider_id(i: &Instance) -> String {
    format!("aws:///{ZONE}/{}", i.id)
}

/// The newest running instance, else the newest (sortInstances: by launch time, newest
/// first; ties by id).
fn newest_running(instances: &[Instance]) -> &Instance {
    let newest = |a: &&Instance, b: &&Instance| (a.launch_time, &a.id).cmp(&(b.launch_time, &b.id));
    instances
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .max_by(newest)
        .or_else(|| instances.iter().max_by(newest))
        .expect("called with at least one instance")
}
