//! The invariant every ReplicaSet-like controller owes: an owner never gains a child
//! while it already has as many live children as it asks for.
//!
//! Judged when a child is first seen in the API server (right after the write that made
//! it): the owner's live children, the new one included, must not exceed its replicas.
//! A scale-down leaves an owner briefly with more live children than replicas; that is
//! not a violation, only a create on top of it is (so a scenario scales down only when
//! no create can be in flight). Children are those whose controller reference names the
//! owner's uid, in its namespace, as the garbage collector and `ownerReferences` see it.

use crate::{Check, View, Violation};
use reconsim_world::object::{Kind, Object, Uid};
use std::collections::BTreeSet;
use std::sync::Arc;

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
#[derive(Clone, Debug)]
pub struct AtMostReplicas {
    invariant: Arc<str>,
    owner: Kind,
    child: Kind,
    replicas: fn(&Object) -> u32,
    live: fn(&Object) -> bool,
    /// How the message names what it counted (`active Pods`); default `<Child>s`.
    counted: Arc<str>,
    /// Children already judged, by uid.
    seen: BTreeSet<Uid>,
}

impl AtMostReplicas {
    /// Invariant `invariant`: each `owner` object has at most `replicas(owner)` live
    /// `child` objects (live: not being deleted, unless [`AtMostReplicas::live`] says).
    pub fn new(invariant: &str, owner: Kind, child: Kind, replicas: fn(&Object) -> u32) -> Self {
        AtMostReplicas {
            invariant: invariant.into(),
            owner,
            child,
            replicas,
            live: |o| !o.meta.is_deleting(),
            counted: format!("{child}s").into(),
            seen: BTreeSet::new(),
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
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        for owner in view.api.list(self.owner) {
            let live: Vec<&Arc<Object>> = controlled(view.api.list(self.child), owner)
                .filter(|c| (self.live)(c))
                .collect();
            let mut fresh = false;
            for c in &live {
                fresh |= self.seen.insert(c.meta.uid);
            }
            let want = (self.replicas)(owner);
            if fresh && live.len() > want as usize {
                let mut objects = vec![format!("{} {}", self.owner, owner.meta.name)];
                objects.extend(
                    live.iter()
                        .map(|c| format!("{} {}", self.child, c.meta.name)),
                );
                return Some(Violation {
                    invariant: self.invariant.to_string(),
                    time: view.now,
                    message: format!(
                        "{} {} has {} {}, replicas is {want}",
                        self.owner,
                        owner.meta.name,
                        live.len(),
                        self.counted
                    ),
                    objects,
                });
            }
        }
        None
    }
}
