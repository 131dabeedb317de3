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
use reconsim_world::informer::Cache;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, Object, ObjectKey, ObjectMeta, OwnerReference, selector_matches,
};
use reconsim_world::runtime::{
    Action, Api, Client, Controller, DeleteParams, PatchParams, PostParams,
};
use std::sync::Arc;

/// How often the cache is polled after creating or deleting (stateConfirmationInterval).
pub const STATE_CONFIRMATION_INTERVAL_MS: u64 = 100;
/// How long the cache is polled (stateConfirmationTimeout).
pub const STATE_CONFIRMATION_TIMEOUT_MS: u64 = 10_000;
/// The annotation that marks a machine for deletion first.
pub const DELETE_MACHINE_ANNOTATION: &str = "machine.openshift.io/delete-machine";

/// A failed reconcile: what failed (the status was written all the same).
#[derive(Debug)]
pub struct SyncError(String);

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyncError {}

/// The MachineSet controller (For(MachineSet), Owns(Machine)). It keeps nothing between
/// reconciles: its context is its client.
pub fn controller() -> Box<dyn Reconciler> {
    Controller::new::<MachineSet>("machineset-controller")
        .owns::<Machine>()
        .run(reconcile, error_policy, |client| client)
}

/// An error requeues with the work queue's backoff, as controller-runtime's does.
fn error_policy(_: Arc<Object>, _: &SyncError, _: Arc<Client>) -> Action {
    Action::rate_limited()
}

/// One reconcile of a MachineSet (the module's doc lists the steps).
async fn reconcile(ms: Arc<Object>, client: Arc<Client>) -> Result<Action, SyncError> {
    if ms.meta.is_deleting() {
        return Ok(Action::await_change());
    }
    let spec = &ms.typed::<MachineSet>().expect("a MachineSet key").spec;
    let ns = &ms.meta.namespace;
    let mut machines = Vec::new();
    let mut orphans = Vec::new();
    for m in client.store::<Machine>().state() {
        if m.meta.namespace != *ns || exclude(&ms, &m, &spec.selector) {
            continue;
        }
        if m.meta.controller_ref().is_none() {
            orphans.push(m);
        } else {
            machines.push(m);
        }
    }
    let api: Api<Machine> = Api::namespaced((*client).clone(), ns);
    let pp = PostParams::default();
    for orphan in orphans {
        // Adopt; a failure skips that machine.
        let mut m = (*orphan).clone();
        m.meta.owner_references.push(controller_ref(&ms));
        if let Ok(adopted) = api.replace(&pp, m).await {
            machines.push(adopted);
        }
    }
    // The real controller sorts by name before counting.
    machines.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    let diff = machines.len() as i64 - i64::from(spec.replicas);
    let mut error = None;
    let (mut created, mut deleted) = (Vec::new(), Vec::new());
    if diff < 0 {
        for _ in 0..diff.unsigned_abs() {
            match api.create(&pp, new_machine(&ms)).await {
                Ok(m) => created.push(m.meta.name.clone()),
                Err(e) => error = Some(format!("unable to create Machine: {e}")),
            }
        }
    } else if diff > 0 {
        for victim in pick_victims(&machines, diff as usize) {
            match api.delete(&victim.name, &DeleteParams::default()).await {
                Ok(_) => deleted.push(victim),
                Err(e) if e.code() == Some(404) => deleted.push(victim),
                Err(e) => error = Some(format!("unable to delete Machine: {e}")),
            }
        }
    }
    if diff != 0 && error.is_none() {
        error = confirm(&client, ns, &created, &deleted).await;
    }
    let replicas = machines.len() as u32;
    if ms
        .typed::<MachineSet>()
        .expect("a MachineSet")
        .status
        .replicas
        != replicas
    {
        let sets: Api<MachineSet> = Api::namespaced((*client).clone(), ns);
        let status = MachineSet {
            spec: Default::default(),
            status: MachineSetStatus { replicas },
        };
        let written = sets
            .patch_status(&ms.meta.name, &PatchParams::default(), status)
            .await;
        if let Err(e) = written {
            error.get_or_insert_with(|| format!("failed to update status: {e}"));
        }
    }
    match error {
        Some(e) => Err(SyncError(e)),
        None => Ok(Action::await_change()),
    }
}

/// waitForMachineCreated / waitForMachineDeleted: poll the cache every 100 ms for up to
/// 10 s until every created Machine shows and every deleted one is gone or marked.
async fn confirm(
    client: &Client,
    ns: &str,
    created: &[String],
    deleted: &[ObjectKey],
) -> Option<String> {
    let deadline = client.now().plus_ms(STATE_CONFIRMATION_TIMEOUT_MS);
    let store = client.store::<Machine>();
    loop {
        let created_seen = created.iter().all(|n| store.get(ns, n).is_some());
        let deleted_seen = deleted.iter().all(|k| {
            store
                .get(&k.namespace, &k.name)
                .is_none_or(|m| m.meta.is_deleting())
        });
        if created_seen && deleted_seen {
            return None;
        }
        if client.now() >= deadline {
            return Some(if created_seen {
                "failed waiting for machine object to be deleted".into()
            } else {
                "failed waiting for machine object to be created".into()
            });
        }
        client.sleep(STATE_CONFIRMATION_INTERVAL_MS).await;
    }
}

/// A new Machine of `ms`: generateName `<machineset>-`, the template's labels, a
/// controller reference.
fn new_machine(ms: &Object) -> Object {
    let spec = &ms.typed::<MachineSet>().expect("a MachineSet").spec;
    let mut meta = ObjectMeta::named(&ms.meta.namespace, "");
    meta.generate_name = Some(format!("{}-", ms.meta.name));
    meta.labels = spec.template_labels.clone();
    meta.owner_references = vec![controller_ref(ms)];
    Object::new(meta, Body::new(Machine::default()))
}

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
        controller: Some(true),
        block_owner_deletion: None,
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
