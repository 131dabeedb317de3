//! The machine-api MachineSet controller, as in OpenShift release-4.5 and 4.6 (the same
//! code in both; SEED-FACTS.md section 1, openshift/machine-api-operator
//! pkg/controller/machineset/controller.go and delete_policy.go).
//!
//! One reconcile of a MachineSet, step by step:
//! 1. from the cache: the Machines of its namespace that match its selector, are not
//!    being deleted and are not controlled by another owner; orphans among them are
//!    adopted (Update with a controller reference; a failure skips that machine);
//! 2. diff = count - replicas. Too few: create -diff Machines one after another
//!    (generateName `<machineset>-`, the template's labels, a controller reference), then
//!    poll the cache every 100 ms for up to 10 s until each shows up. Too many: delete
//!    diff Machines by the delete policy (Random: annotated or failed first, then those
//!    without a node), then poll until each is gone or marked;
//! 3. write status.replicas if it changed.
//!
//! It keeps no expectations of what it created: a second controller with a staler cache
//! counts again, which is how two controllers over-provision.

use crate::kinds::Machine;
use crate::kinds::{MachineSet, MachineSetStatus};
use reconsim_sim::SimTime;
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp};
use reconsim_world::informer::Cache;
use reconsim_world::manager::{
    Call, ReconcileCtx, Reconciler, Reply, Step, enqueue_for, enqueue_owner,
};
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, Kind, Object, ObjectKey, ObjectMeta, OwnerReference, selector_matches,
};
use std::sync::Arc;

/// How often the cache is polled after creating or deleting (stateConfirmationInterval).
pub const STATE_CONFIRMATION_INTERVAL_MS: u64 = 100;
/// How long the cache is polled (stateConfirmationTimeout).
pub const STATE_CONFIRMATION_TIMEOUT_MS: u64 = 10_000;
/// The annotation that marks a machine for deletion first.
pub const DELETE_MACHINE_ANNOTATION: &str = "machine.openshift.io/delete-machine";

#[derive(Clone, Debug, Default)]
enum Phase {
    #[default]
    Idle,
    /// Adopting `orphans[next]`; `machines` are the names counted so far.
    Adopting {
        orphans: Vec<Arc<Object>>,
        next: usize,
    },
    /// `left` creates to go; `created` are the names the server gave.
    Creating { left: u32 },
    /// Deleting `victims[next]`.
    Deleting {
        victims: Vec<ObjectKey>,
        next: usize,
    },
    /// Polling the cache for `created`/`deleted` to show; gives up at `deadline`.
    Confirming { deadline: SimTime },
    /// Writing status; `error` is the sync error to report after.
    Status,
}

/// The MachineSet controller.
#[derive(Clone, Debug, Default)]
pub struct MachineSetController {
    phase: Phase,
    /// The MachineSet being reconciled (as the cache showed it at the start).
    ms: Option<Arc<Object>>,
    /// Machines counted by this reconcile.
    machines: Vec<Arc<Object>>,
    created: Vec<String>,
    deleted: Vec<ObjectKey>,
    error: Option<String>,
}

impl MachineSetController {
    pub fn new() -> Self {
        Self::default()
    }

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        *self = Self::default();
        let Some(ms) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        if ms.meta.is_deleting() {
            return Step::done();
        }
        let spec = &ms.typed::<MachineSet>().expect("a MachineSet key").spec;
        let mut orphans = Vec::new();
        for m in ctx.cache.list(Machine::KIND) {
            if m.meta.namespace != ms.meta.namespace || exclude(&ms, m, &spec.selector) {
                continue;
            }
            if m.meta.controller_ref().is_none() {
                orphans.push(m.clone());
            } else {
                self.machines.push(m.clone());
            }
        }
        self.ms = Some(ms);
        if orphans.is_empty() {
            return self.sync(ctx);
        }
        self.phase = Phase::Adopting { orphans, next: 0 };
        self.adopt_next()
    }

    fn adopt_next(&mut self) -> Step {
        let Phase::Adopting { orphans, next } = &self.phase else {
            unreachable!()
        };
        let ms = self.ms.as_ref().expect("set at start");
        let mut m = (*orphans[*next]).clone();
        m.meta.owner_references.push(controller_ref(ms));
        Step::Call(Call::Api(ApiOp::Update {
            object: Box::new(m),
            precondition: true,
        }))
    }

    /// syncReplicas: create or delete towards `replicas`.
    fn sync(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        // The real controller sorts by name before counting.
        self.machines.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        let ms = self.ms.clone().expect("set at start");
        let spec = &ms.typed::<MachineSet>().expect("a MachineSet").spec;
        let count = self.machines.len() as i64;
        let diff = count - i64::from(spec.replicas);
        if diff < 0 {
            self.phase = Phase::Creating {
                left: diff.unsigned_abs() as u32,
            };
            return self.create_next();
        }
        if diff > 0 {
            let victims = pick_victims(&self.machines, diff as usize);
            self.phase = Phase::Deleting { victims, next: 0 };
            return self.delete_next();
        }
        let _ = ctx;
        self.write_status()
    }

    fn create_next(&mut self) -> Step {
        let ms = self.ms.as_ref().expect("set at start");
        let spec = &ms.typed::<MachineSet>().expect("a MachineSet").spec;
        let mut meta = ObjectMeta::named(&ms.meta.namespace, "");
        meta.generate_name = Some(format!("{}-", ms.meta.name));
        meta.labels = spec.template_labels.clone();
        meta.owner_references = vec![controller_ref(ms)];
        Step::Call(Call::Api(ApiOp::Create(Box::new(Object::new(
            meta,
            Body::new(Machine::default()),
        )))))
    }

    fn delete_next(&mut self) -> Step {
        let Phase::Deleting { victims, next } = &self.phase else {
            unreachable!()
        };
        Step::Call(Call::Api(ApiOp::Delete {
            key: victims[*next].clone(),
            uid: None,
            grace_period_seconds: None,
        }))
    }

    /// Poll the cache: done when every created machine is there and every deleted one
    /// is gone or marked.
    fn confirm(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Phase::Confirming { deadline } = self.phase else {
            unreachable!()
        };
        let ns = &self.ms.as_ref().expect("set").meta.namespace;
        let created_seen = self.created.iter().all(|n| {
            ctx.cache
                .get(&ObjectKey::new(Machine::KIND, ns, n))
                .is_some()
        });
        let deleted_seen = self
            .deleted
            .iter()
            .all(|k| ctx.cache.get(k).is_none_or(|m| m.meta.is_deleting()));
        if created_seen && deleted_seen {
            return self.write_status();
        }
        if ctx.now >= deadline {
            self.error = Some(if created_seen {
                "failed waiting for machine object to be deleted".into()
            } else {
                "failed waiting for machine object to be created".into()
            });
            return self.write_status();
        }
        Step::Sleep {
            ms: STATE_CONFIRMATION_INTERVAL_MS,
        }
    }

    fn write_status(&mut self) -> Step {
        let ms = self.ms.as_ref().expect("set");
        let replicas = self.machines.len() as u32;
        if ms
            .typed::<MachineSet>()
            .expect("a MachineSet")
            .status
            .replicas
            == replicas
        {
            return self.finish();
        }
        self.phase = Phase::Status;
        Step::Call(Call::Api(ApiOp::Patch {
            key: ms.key(),
            ops: vec![PatchOp::Status(Body::new(MachineSet {
                spec: Default::default(),
                status: MachineSetStatus { replicas },
            }))],
            resource_version: None,
        }))
    }

    fn finish(&mut self) -> Step {
        self.phase = Phase::Idle;
        match self.error.take() {
            Some(e) => Step::Error(e),
            None => Step::done(),
        }
    }
}

impl Reconciler for MachineSetController {
    fn name(&self) -> &str {
        "machineset-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![MachineSet::KIND, Machine::KIND]
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        enqueue_for(object, MachineSet::KIND, keys);
        enqueue_owner(object, MachineSet::KIND, keys);
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Some(reply) = ctx.reply.take() else {
            return self.start(ctx);
        };
        match std::mem::take(&mut self.phase) {
            Phase::Idle => Step::Error("reply without a reconcile in progress".into()),
            Phase::Adopting { orphans, next } => {
                if let Reply::Api(Ok(ApiOk::Object(m))) = reply {
                    self.machines.push(m);
                }
                if next + 1 < orphans.len() {
                    self.phase = Phase::Adopting {
                        orphans,
                        next: next + 1,
                    };
                    return self.adopt_next();
                }
                self.sync(ctx)
            }
            Phase::Creating { left } => {
                match reply {
                    Reply::Api(Ok(ApiOk::Object(m))) => self.created.push(m.meta.name.clone()),
                    other => self.error = Some(format!("unable to create Machine: {other:?}")),
                }
                if left > 1 {
                    self.phase = Phase::Creating { left: left - 1 };
                    return self.create_next();
                }
                if self.error.is_some() {
                    return self.write_status();
                }
                self.phase = Phase::Confirming {
                    deadline: ctx.now.plus_ms(STATE_CONFIRMATION_TIMEOUT_MS),
                };
                self.confirm(ctx)
            }
            Phase::Deleting { victims, next } => {
                match reply {
                    Reply::Api(Ok(_)) | Reply::Api(Err(ApiError::NotFound)) => {
                        self.deleted.push(victims[next].clone())
                    }
                    other => self.error = Some(format!("unable to delete Machine: {other:?}")),
                }
                if next + 1 < victims.len() {
                    self.phase = Phase::Deleting {
                        victims,
                        next: next + 1,
                    };
                    return self.delete_next();
                }
                if self.error.is_some() {
                    return self.write_status();
                }
                self.phase = Phase::Confirming {
                    deadline: ctx.now.plus_ms(STATE_CONFIRMATION_TIMEOUT_MS),
                };
                self.confirm(ctx)
            }
            phase @ Phase::Confirming { .. } => {
                self.phase = phase;
                self.confirm(ctx)
            }
            Phase::Status => {
                if !matches!(reply, Reply::Api(Ok(_))) {
                    self.error
                        .get_or_insert_with(|| format!("failed to update status: {reply:?}"));
                }
                self.finish()
            }
        }
    }

    fn reset(&mut self) {
        *self = Self::default();
    }
}

/// shouldExcludeMachine: controlled by another owner, being deleted, or not matching.
fn exclude(ms: &Object, m: &Object, selector: &std::collections::BTreeMap<String, String>) -> bool {
    if m.meta
        .controller_ref()
        .is_some_and(|r| r.uid != ms.meta.uid)
    {
        return true;
    }
    m.meta.is_deleting() || !selector_matches(selector, &m.meta.labels)
}

fn controller_ref(ms: &Object) -> OwnerReference {
    OwnerReference {
        kind: MachineSet::KIND,
        name: ms.meta.name.clone(),
        uid: ms.meta.uid,
        controller: true,
    }
}

/// getMachinesToDeletePrioritized with the Random policy: marked for deletion first,
/// then failed, then those without a node; ties keep name order.
fn pick_victims(machines: &[Arc<Object>], n: usize) -> Vec<ObjectKey> {
    let priority = |m: &Object| -> u32 {
        let status = &m.typed::<Machine>().expect("a Machine").status;
        if m.meta.is_deleting() {
            100
        } else if m.meta.annotations.contains_key(DELETE_MACHINE_ANNOTATION)
            || status.error_message.is_some()
        {
            50
        } else if status.node_ref.is_none() {
            40
        } else {
            20
        }
    };
    let mut sorted: Vec<&Arc<Object>> = machines.iter().collect();
    sorted.sort_by_key(|m| std::cmp::Reverse(priority(m)));
    sorted.into_iter().take(n).map(|m| m.key()).collect()
}

/// For tests and checkers: the machines a MachineSet counts in `cache`.
pub fn counted_machines<'a>(
    cache: &'a Cache,
    ms: &'a Object,
) -> impl Iterator<Item = &'a Arc<Object>> {
    let selector = &ms
        .typed::<MachineSet>()
        .expect("a MachineSet")
        .spec
        .selector;
    cache
        .list(Machine::KIND)
        .filter(move |m| m.meta.namespace == ms.meta.namespace && !exclude(ms, m, selector))
}
