//! The invariant every ReplicaSet-like controller owes: an owner never gains a child
//! while it already has as many live children as it asks for.
//!
//! Judged when a child is first seen in the API server (right after the write that made
//! it): the owner's live children, the new one included, must not exceed its replicas.
//! A scale-down leaves an owner briefly with more live children than replicas; that is
//! not a violation, only a create on top of it is (so a hand-written workload scales
//! down only when no create can be in flight). Generated user operations
//! (`reconsim_scenario::operations`) scale down at any moment, even before the
//! controller has seen the last scale-up, and a create decided on a larger count lands
//! after: in a run whose plan has them, the bound is the most the owner has ever asked
//! for (the controller acts on one of its specs, never on more than it asked).
//!
//! Children are those whose controller reference names the owner's uid, in its
//! namespace, as the garbage collector and `ownerReferences` see it.
//!
//! The same count gives the controller's desired state ([`AtMostReplicas::converged`]):
//! exactly `replicas` live children per owner, each ready, none outliving its owner.

use crate::{Check, Reads, View, Violation};
use reconsim_world::object::{Kind, Object, Uid};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// What an owner asks for: its `spec.replicas`, read from the stored object.
pub type ReplicasFn = dyn Fn(&Object) -> u32 + Send + Sync;

/// A checker of "at most `replicas` live children per owner".
///
/// ```
/// use reconsim_check::replicas::AtMostReplicas;
/// use reconsim_world::object::{Lease, Object, Pod, Resource};
///
/// // Each Lease asks for one Pod (an owner kind of the user's would read its spec).
/// let check = AtMostReplicas::new("one_pod_per_lease", Lease::KIND, Pod::KIND, |_| 1)
///     .live(|pod: &Object| !pod.meta.is_deleting())
///     .counted_as("live Pods");
/// # let _ = check;
/// ```
#[derive(Clone)]
pub struct AtMostReplicas {
    invariant: Arc<str>,
    owner: Kind,
    child: Kind,
    replicas: Arc<ReplicasFn>,
    live: fn(&Object) -> bool,
    /// Which live children the desired state wants ready (default: all are).
    ready: fn(&Object) -> bool,
    /// How the message names what it counted (`active Pods`); default `<Child>s`.
    counted: Arc<str>,
    /// Children already judged, by uid.
    seen: BTreeSet<Uid>,
    /// In a run with user operations, the most each owner has asked for, by uid.
    most: BTreeMap<Uid, u32>,
    /// Whether the run's plan has user operations (read at the first check).
    operations: Option<bool>,
    /// Each owner's replicas as last read, by uid, with the resourceVersion it was read
    /// at: a version is read once, not at every check (decoding a user's kind to read
    /// it was most of a real-code example's checking; issue 33).
    wants: BTreeMap<Uid, (u64, u32)>,
}

impl AtMostReplicas {
    /// Invariant `invariant`: each `owner` object has at most `replicas(owner)` live
    /// `child` objects (live: not being deleted, unless [`AtMostReplicas::live`] says).
    /// `replicas` reads the object it is given and nothing else: it is called once per
    /// version of an owner.
    pub fn new(
        invariant: &str,
        owner: Kind,
        child: Kind,
        replicas: impl Fn(&Object) -> u32 + Send + Sync + 'static,
    ) -> Self {
        AtMostReplicas {
            invariant: invariant.into(),
            owner,
            child,
            replicas: Arc::new(replicas),
            live: |o| !o.meta.is_deleting(),
            ready: |_| true,
            counted: format!("{child}s").into(),
            seen: BTreeSet::new(),
            most: BTreeMap::new(),
            operations: None,
            wants: BTreeMap::new(),
        }
    }

    /// Which children count (FilterActivePods: not deleting, not Succeeded or Failed).
    pub fn live(mut self, live: fn(&Object) -> bool) -> Self {
        self.live = live;
        self
    }

    /// How the violation's message names the children it counted.
    pub fn counted_as(mut self, noun: &str) -> Self {
        self.counted = noun.into();
        self
    }

    /// What the desired state asks of each live child besides existing (a Pod:
    /// Running).
    pub fn ready(mut self, ready: fn(&Object) -> bool) -> Self {
        self.ready = ready;
        self
    }

    /// The desired state of the same owners and children, for a controller's
    /// convergence hook: every owner has exactly `replicas` live children, each ready,
    /// and no child's controller reference names an owner that is gone (the garbage
    /// collector took them). `Err` says what is missing.
    pub fn converged(&self, view: &View<'_>) -> Result<(), String> {
        let mut owners = BTreeSet::new();
        for owner in view.api.list(self.owner) {
            owners.insert(owner.meta.uid);
            let live: Vec<&Arc<Object>> = controlled(view.api.list(self.child), owner)
                .filter(|c| (self.live)(c))
                .collect();
            let want = (self.replicas)(owner);
            if live.len() != want as usize {
                return Err(format!(
                    "{} {} has {} {}, replicas is {want}",
                    self.owner,
                    owner.meta.name,
                    live.len(),
                    self.counted
                ));
            }
            if let Some(c) = live.iter().find(|c| !(self.ready)(c)) {
                return Err(format!(
                    "{} {} of {} {} is not ready",
                    self.child, c.meta.name, self.owner, owner.meta.name
                ));
            }
        }
        let orphan = view.api.list(self.child).find(|c| {
            c.meta
                .controller_ref()
                .is_some_and(|r| r.kind == self.owner && !owners.contains(&r.uid))
        });
        match orphan {
            Some(c) => Err(format!(
                "{} {} outlived its {} (not collected)",
                self.child, c.meta.name, self.owner
            )),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for AtMostReplicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtMostReplicas")
            .field("invariant", &self.invariant)
            .field("owner", &self.owner)
            .field("child", &self.child)
            .field("seen", &self.seen.len())
            .finish_non_exhaustive()
    }
}

/// The `child` objects `owner` controls among `children`.
pub fn controlled<'a>(
    children: impl Iterator<Item = &'a Arc<Object>>,
    owner: &Object,
) -> impl Iterator<Item = &'a Arc<Object>> {
    let (namespace, uid) = (owner.meta.namespace.clone(), owner.meta.uid);
    children.filter(move |c| {
        c.meta.namespace == namespace && c.meta.controller_ref().is_some_and(|r| r.uid == uid)
    })
}

impl Check for AtMostReplicas {
    fn reads(&self) -> Reads {
        Reads::kinds([self.owner, self.child])
    }

    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let operations = *self.operations.get_or_insert_with(|| {
            view.sim
                .plan()
                .faults
                .iter()
                .any(|f| reconsim_world::fault::is_operation(&f.fault))
        });
        for owner in view.api.list(self.owner) {
            let live: Vec<&Arc<Object>> = controlled(view.api.list(self.child), owner)
                .filter(|c| (self.live)(c))
                .collect();
            let mut fresh = false;
            for c in &live {
                fresh |= self.seen.insert(c.meta.uid);
            }
            let want = match self.wants.get(&owner.meta.uid) {
                Some(&(rv, want)) if rv == owner.meta.resource_version => want,
                _ => {
                    let want = (self.replicas)(owner);
                    let version = (owner.meta.resource_version, want);
                    self.wants.insert(owner.meta.uid, version);
                    want
                }
            };
            let bound = if operations {
                let most = self.most.entry(owner.meta.uid).or_insert(want);
                *most = (*most).max(want);
                *most
            } else {
                want
            };
            if fresh && live.len() > bound as usize {
                let mut objects = vec![format!("{} {}", self.owner, owner.meta.name)];
                objects.extend(
                    live.iter()
                        .map(|c| format!("{} {}", self.child, c.meta.name)),
                );
                return Some(Violation {
                    invariant: self.invariant.to_string(),
                    time: view.now,
                    message: format!(
                        "{} {} has {} {}, replicas is {want}{}",
                        self.owner,
                        owner.meta.name,
                        live.len(),
                        self.counted,
                        if bound > want {
                            format!(", the most it has asked for is {bound}")
                        } else {
                            String::new()
                        }
                    ),
                    objects,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_sim::{FaultPlan, Sim, SimConfig, SimTime};
    use reconsim_world::Proc;
    use reconsim_world::apiserver::ApiServer;
    use reconsim_world::object::{Lease, ObjectMeta, OwnerReference, Pod, Resource};

    /// A Lease that asks for two Pods, and Pods controlled by the uids given.
    fn world(owners: &[u64]) -> ApiServer {
        let mut api = ApiServer::new(Default::default());
        let lease = api.seed_object(Object::new(ObjectMeta::named("ns", "a"), Lease::default()));
        assert_eq!(lease.meta.uid, Uid(1));
        for (i, uid) in owners.iter().enumerate() {
            let mut meta = ObjectMeta::named("ns", &format!("p{i}"));
            meta.owner_references.push(OwnerReference {
                kind: Lease::KIND,
                name: "a".into(),
                uid: Uid(*uid),
                controller: Some(true),
                block_owner_deletion: None,
            });
            api.seed_object(Object::new(meta, Pod::default()));
        }
        api
    }

    fn converged(api: &ApiServer, check: &AtMostReplicas) -> Result<(), String> {
        let sim: Sim<Proc> = Sim::new(SimConfig::new(7), FaultPlan::new(Vec::new()));
        check.converged(&View {
            now: SimTime::ZERO,
            api,
            sim: &sim,
        })
    }

    fn two_pods() -> AtMostReplicas {
        AtMostReplicas::new("two", Lease::KIND, Pod::KIND, |_| 2)
    }

    #[test]
    fn an_owner_is_read_once_per_version() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let reads = Arc::new(AtomicU32::new(0));
        let counted = reads.clone();
        let mut check = AtMostReplicas::new("one", Lease::KIND, Pod::KIND, move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            1
        });
        let api = world(&[1, 1]);
        let sim: Sim<Proc> = Sim::new(SimConfig::new(7), FaultPlan::new(Vec::new()));
        let view = View {
            now: SimTime::ZERO,
            api: &api,
            sim: &sim,
        };
        let first = check
            .check(&view)
            .expect("two Pods of a Lease that asks for one");
        assert_eq!(first.message, "Lease a has 2 Pods, replicas is 1");
        // Judged again with nothing new: no violation, and the Lease is not read again.
        assert!(check.check(&view).is_none());
        assert!(check.check(&view).is_none());
        assert_eq!(reads.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn converged_wants_exactly_replicas_live_children_each_ready_and_no_orphan() {
        assert_eq!(converged(&world(&[1, 1]), &two_pods()), Ok(()));
        assert_eq!(
            converged(&world(&[1]), &two_pods()),
            Err("Lease a has 1 Pods, replicas is 2".into())
        );
        assert_eq!(
            converged(&world(&[1, 1, 1]), &two_pods().counted_as("live Pods")),
            Err("Lease a has 3 live Pods, replicas is 2".into())
        );
        assert_eq!(
            converged(&world(&[1, 1]), &two_pods().ready(|p| p.meta.name != "p1")),
            Err("Pod p1 of Lease a is not ready".into())
        );
        // The third Pod's controller is a Lease that is gone (uid 9).
        assert_eq!(
            converged(&world(&[1, 1, 9]), &two_pods()),
            Err("Pod p2 outlived its Lease (not collected)".into())
        );
    }
}
