//! PodSet: a ReplicaSet-like controller written against reconsim's public API, with a
//! real bug and its real fix. The guide, docs/guide/writing-a-reconciler.md, walks
//! through this file and `harness.rs` (its registration); `main.rs` turns both into a
//! CLI, tests/example_podset.rs fuzzes it.
//!
//! A PodSet keeps `replicas` Pods. It is a kind of its own (`example.reconsim.dev/v1`
//! PodSet), declared below as any family declares its kinds: a plain-data body with a
//! spec, a status and a [`Resource`] impl. Its Pods are real Pods: the scheduler binds them,
//! kubelets run them (the `pause` image), the node lifecycle controller evicts them from
//! unreachable nodes. The Deployment controller ignores them (they are not owned by a
//! Deployment).
//!
//! One reconcile of a PodSet (kubernetes/kubernetes pkg/controller/replicaset/
//! replica_set.go @003e86297d, `syncReplicaSet` and `manageReplicas`, cut down: no
//! adoption, no slow-start batches, one request per step):
//! 1. from the informer cache: the PodSet and the Pods it controls that are active
//!    (not deleting, not Succeeded or Failed: `FilterActivePods`);
//! 2. too few: create the missing Pods, generateName `<podset>-`; too many: delete the
//!    newest;
//! 3. write status.replicas when it changed.
//!
//! The bug (variant `no-expectations`): step 1 trusts the cache. The cache lags the API
//! server, and it can lag this controller's own writes: when a watch broke (a partition)
//! the informer relists, and a Pod created just after the server answered the list is
//! in neither the list nor the cache until the new watch opens and replays it. A
//! reconcile that runs in between (the relist's own changes wake one) counts that Pod
//! as missing and creates it again.
//!
//! The fix (variant `expectations`): Kubernetes' controller expectations
//! (kubernetes/kubernetes pkg/controller/controller_utils.go @00bdb3fade,
//! `ControllerExpectations`, `ExpectationsTimeout = 5 * time.Minute`): before creating
//! Pods, expect their adds; a PodSet is not synced again until its expectations are met
//! or 5 minutes old. controller-runtime gives a reconciler no informer event hook, so the
//! adds are expected by the names the create answers gave and observed at the start of
//! each reconcile, when the cache shows those Pods (counting "Pods the cache shows for the
//! first time" instead would take the Pods a relist brings back for new ones); deletes
//! are expected by name too (`UIDTrackingControllerExpectations`). A create or delete that
//! fails, a timeout included, is expected no more and ends the reconcile in error, as
//! `manageReplicas` does ("the informer won't observe this pod"); a timed-out create whose
//! Pod was made after all can still be counted twice, in Kubernetes as here. A reconcile
//! skipped for expectations requeues itself at their expiry (the real controller is woken
//! by its informers' resync).

use reconsim::scenario::build::PAUSE_IMAGE;
use reconsim::sim::SimTime;
use reconsim::world::manager::Reconciler;
use reconsim::world::object::{
    Kind, KindInfo, Object, ObjectMeta, OwnerReference, Pod, PodPhase, PodSpec, Resource, Uid,
};
use reconsim::world::runtime::{
    Action, Api, Client, Controller, DeleteParams, PatchParams, PostParams,
};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The controller's name: its registration, its pods, its traces.
pub const NAME: &str = "podset-controller";
/// The label a PodSet selects its Pods by.
pub const LABEL: &str = "podset";
/// ExpectationsTimeout (controller_utils.go): 5 minutes.
pub const EXPECTATIONS_TIMEOUT_MS: u64 = 300_000;

// ----- the variants ---------------------------------------------------------------------

/// Which controller runs: the bug or the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Counts Pods from the cache at every reconcile.
    NoExpectations,
    /// Waits for the cache to show its own creates and deletes (or for 5 minutes).
    Expectations,
}

// ----- the PodSet object ----------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PodSetSpec {
    pub replicas: u32,
    /// The labels of its Pods (matchLabels).
    pub selector: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PodSetStatus {
    pub replicas: u32,
}

/// `example.reconsim.dev/v1` PodSet: spec and a status subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PodSet {
    pub spec: PodSetSpec,
    pub status: PodSetStatus,
}

impl Resource for PodSet {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "example.reconsim.dev",
        "v1",
        "PodSet",
        "podsets",
    ));
    reconsim::world::status_subresource!();
}

/// A PodSet's spec: `replicas` Pods labelled `podset: <name>`.
pub fn spec(name: &str, replicas: u32) -> PodSetSpec {
    PodSetSpec {
        replicas,
        selector: BTreeMap::from([(LABEL.to_string(), name.to_string())]),
    }
}

/// FilterActivePods: not deleting, not Succeeded or Failed.
pub fn is_active(p: &Object) -> bool {
    !p.meta.is_deleting()
        && p.typed::<Pod>()
            .is_some_and(|x| !matches!(x.status.phase, PodPhase::Succeeded | PodPhase::Failed))
}

/// Its `spec.replicas`.
pub fn replicas(podset: &Object) -> u32 {
    podset.typed::<PodSet>().map_or(0, |m| m.spec.replicas)
}
// ----- the controller -------------------------------------------------------------------

/// ControlleeExpectations of one PodSet: adds still to observe, deletes (by Pod name)
/// still to observe, and when they were set.
#[derive(Clone, Debug, Default)]
struct Expectations {
    /// Pods created (by the names their create answers gave) the cache has not shown.
    adds: BTreeSet<String>,
    deletes: BTreeSet<String>,
    since: SimTime,
}

impl Expectations {
    fn fulfilled(&self) -> bool {
        self.adds.is_empty() && self.deletes.is_empty()
    }
}

/// The controller's context: its client and its memory, per PodSet uid. A crash loses
/// all of it (the manager makes a fresh context).
pub struct Ctx {
    client: Client,
    variant: Variant,
    /// Per PodSet: its expectations (variant `expectations`).
    expectations: RefCell<BTreeMap<Uid, Expectations>>,
}

impl Ctx {
    /// ExpectDeletions, and ExpectCreations before the creates (their names come with
    /// their answers: [`Ctx::created`]); variant `expectations` only.
    fn expect(&self, podset: Uid, deletes: BTreeSet<String>) {
        if self.variant == Variant::Expectations {
            let since = self.client.now();
            let e = Expectations {
                adds: BTreeSet::new(),
                deletes,
                since,
            };
            self.expectations.borrow_mut().insert(podset, e);
        }
    }

    /// A create's answer: expect the cache to show this Pod.
    fn created(&self, podset: Uid, name: &str) {
        if let Some(e) = self.expectations.borrow_mut().get_mut(&podset) {
            e.adds.insert(name.to_string());
        }
    }

    /// DeletionObserved of a delete that failed: the informer will not see its effect
    /// (a failed create is simply never expected).
    fn failed(&self, podset: Uid, victim: &str) {
        if let Some(e) = self.expectations.borrow_mut().get_mut(&podset) {
            e.deletes.remove(victim);
        }
    }
}

/// A failed reconcile: what failed (its status was written all the same).
#[derive(Debug)]
pub struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// One reconcile of a PodSet: read the cache, observe, decide, act, write status. An
/// error is returned after the status write, as manageReplicas's is.
pub async fn reconcile(podset: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, Failed> {
    let uid = podset.meta.uid;
    let ns = &podset.meta.namespace;
    let pods = ctx.client.store::<Pod>().owned_by(ns, uid);
    let active: Vec<&Arc<Object>> = pods.iter().filter(|p| is_active(p)).collect();
    if let Some(wait_ms) = unsatisfied(&ctx, uid, &pods) {
        // SatisfiedExpectations is false: do not act on this cache.
        return Ok(Action::requeue(Duration::from_millis(wait_ms)));
    }
    if podset.meta.is_deleting() {
        return Ok(Action::await_change());
    }
    let want = replicas(&podset);
    let count = active.len() as u32;
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let mut error = None;
    if count < want {
        ctx.expect(uid, BTreeSet::new());
        for _ in count..want {
            match api.create(&PostParams::default(), pod_for(&podset)).await {
                Ok(pod) => ctx.created(uid, &pod.meta.name),
                Err(e) => {
                    error = Some(format!("creating a Pod: {e}"));
                    break;
                }
            }
        }
    } else if count > want {
        let victims = victims(active, (count - want) as usize);
        let names = victims.iter().map(|p| p.meta.name.clone()).collect();
        ctx.expect(uid, names);
        for pod in victims {
            let params = DeleteParams {
                uid: Some(pod.meta.uid),
                ..Default::default()
            };
            match api.delete(&pod.meta.name, &params).await {
                Ok(_) => {}
                Err(e) if e.code() == Some(404) => {}
                Err(e) => {
                    ctx.failed(uid, &pod.meta.name);
                    error = Some(format!("deleting Pod {}: {e}", pod.meta.name));
                    break;
                }
            }
        }
    }
    // status.replicas = active Pods counted at the start.
    let current = podset.typed::<PodSet>().map(|m| m.status.replicas);
    if current != Some(count) {
        let podsets: Api<PodSet> = Api::namespaced(ctx.client.clone(), ns);
        let status = PodSet {
            status: PodSetStatus { replicas: count },
            ..Default::default()
        };
        let params = PatchParams::default();
        if let Err(e) = podsets
            .patch_status(&podset.meta.name, &params, status)
            .await
        {
            error.get_or_insert(format!("writing status: {e}"));
        }
    }
    match error {
        Some(e) => Err(Failed(e)),
        None => Ok(Action::await_change()),
    }
}

/// After a failure, retry in 5 s (the status was written).
pub fn error_policy(_: Arc<Object>, _: &Failed, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Variant `expectations`: observe the adds and deletes the cache shows; while they are
/// unmet and younger than 5 minutes, how long to wait.
fn unsatisfied(ctx: &Ctx, uid: Uid, pods: &[Arc<Object>]) -> Option<u64> {
    if ctx.variant != Variant::Expectations {
        return None;
    }
    let mut all = ctx.expectations.borrow_mut();
    let e = all.get_mut(&uid)?;
    // CreationObserved for each created Pod the cache shows;
    // DeletionObserved for each expected victim now deleting or gone.
    e.adds.retain(|n| !pods.iter().any(|p| &p.meta.name == n));
    e.deletes.retain(|n| {
        pods.iter()
            .any(|p| &p.meta.name == n && !p.meta.is_deleting())
    });
    let age_ms = ctx.client.now().since(e.since);
    if !e.fulfilled() && age_ms < EXPECTATIONS_TIMEOUT_MS {
        return Some(EXPECTATIONS_TIMEOUT_MS - age_ms);
    }
    all.remove(&uid);
    None
}

/// getPodsToDelete, cut down: unscheduled first, then not running, then newest.
fn victims(mut active: Vec<&Arc<Object>>, n: usize) -> Vec<&Arc<Object>> {
    active.sort_by_key(|p| {
        let pod = p.typed::<Pod>().expect("a Pod");
        (
            pod.spec.node_name.is_some(),
            pod.status.phase == PodPhase::Running,
            std::cmp::Reverse(p.meta.creation_timestamp),
            p.meta.name.clone(),
        )
    });
    active.truncate(n);
    active
}

/// A new Pod of `podset`: generateName `<podset>-`, its label, its controller reference.
fn pod_for(podset: &Object) -> Object {
    let name = &podset.meta.name;
    let mut meta = ObjectMeta::named(&podset.meta.namespace, "");
    meta.generate_name = Some(format!("{name}-"));
    meta.labels = BTreeMap::from([(LABEL.to_string(), name.clone())]);
    meta.owner_references = vec![OwnerReference {
        kind: PodSet::KIND,
        name: name.clone(),
        uid: podset.meta.uid,
        controller: Some(true),
        block_owner_deletion: None,
    }];
    let pod = Pod {
        spec: PodSpec {
            node_name: None,
            image: PAUSE_IMAGE.to_string(),
            ..Default::default()
        },
        status: Default::default(),
    };
    Object::new(meta, pod)
}

/// The controller: For(PodSet), Owns(Pod), with its variant's context.
pub fn controller(variant: Variant) -> Box<dyn Reconciler> {
    Controller::new::<PodSet>(NAME)
        .owns::<Pod>()
        .run(reconcile, error_policy, move |client| Ctx {
            client,
            variant,
            expectations: RefCell::default(),
        })
}
