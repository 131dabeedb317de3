//! The allocator (`allocator.rs`, real kube-rs code with a crates.io leader-election
//! crate) registered with reconsim: its `custom` entry's pods the replicas, each
//! running the program anew on every start; and the invariant that no ID is handed out twice.
//! This file is the only one that imports reconsim.

use super::allocator::{self, BLOCK, GRANT_LABEL, Write};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use reconsim::check::{Check, Reads, View, Violation};
use reconsim::scenario::extension::Extensions;
use reconsim::world::object::Uid;
use reconsim_kube::kinds::{Kinds, kind_of};
use reconsim_kube::wire;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The controller's registration.
pub const NAME: &str = "allocator";
/// The invariant this file registers.
pub const GRANTS_DISJOINT: &str = "allocator_grants_disjoint";

/// The kinds the allocator's client speaks: ConfigMaps and the Lease.
pub fn kinds() -> Kinds {
    Kinds::new().core::<ConfigMap>().core::<Lease>()
}

/// `controllers.custom[].params` of the `allocator` entry (every replica's).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub variant: Variant,
}

/// How a round claims its block: the bug or the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    Blind,
    Reserved,
}

/// `allocator_grants_disjoint`: no two grants' blocks overlap (no ID is handed out
/// twice). Judged when a grant first appears in the API server.
#[derive(Clone, Debug, Default)]
pub struct GrantsDisjoint {
    /// Block start -> the first grant of it seen (its name and holder).
    starts: BTreeMap<u64, (String, String)>,
    /// The grants judged already (a grant is never changed, so once is enough).
    judged: BTreeSet<Uid>,
}

impl Check for GrantsDisjoint {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        for cm in view.api.list(kind_of::<ConfigMap>()) {
            if !cm.meta.labels.contains_key(GRANT_LABEL) || !self.judged.insert(cm.meta.uid) {
                continue;
            }
            let Some(decoded) = wire::decode::<ConfigMap>(cm) else {
                continue;
            };
            let data = decoded.data.unwrap_or_default();
            let Some(start) = data.get("start").and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            let holder = data.get("holder").cloned().unwrap_or_default();
            // Blocks start at multiples of BLOCK, so two overlap exactly when their
            // starts are equal.
            let start = start - start % BLOCK;
            match self.starts.get(&start) {
                None => {
                    self.starts.insert(start, (cm.meta.name.clone(), holder));
                }
                Some((name, first)) => {
                    return Some(Violation {
                        invariant: GRANTS_DISJOINT.into(),
                        time: view.now,
                        message: format!(
                            "IDs {start}..{} were handed out twice: by {first} ({name}) and by {holder} ({})",
                            start + BLOCK,
                            cm.meta.name
                        ),
                        objects: vec![
                            format!("ConfigMap {name}"),
                            format!("ConfigMap {}", cm.meta.name),
                        ],
                    });
                }
            }
        }
        None
    }

    /// Grants are ConfigMaps: a step that wrote none (a Lease renewal, a read) cannot
    /// add one, so the check is asked only after a ConfigMap write.
    fn reads(&self) -> Reads {
        Reads::kinds([kind_of::<ConfigMap>()])
    }
}

/// Everything this file adds to reconsim, by name.
pub fn extensions() -> Extensions {
    Extensions::new()
        .controller(reconsim_kube::custom(
            NAME,
            kinds(),
            |p: &Params, pod, client| {
                let write = match p.variant {
                    Variant::Blind => Write::Blind,
                    Variant::Reserved => Write::Reserved,
                };
                // The pod's name is the replica's identity in the election.
                let identity = pod.pod_name.clone();
                async move {
                    // An error ends the program, and its pod's container restarts it.
                    if let Err(e) = allocator::run(client, identity, write).await {
                        tracing::error!(error = %e, "allocator exited");
                    }
                }
            },
        ))
        .invariant(GRANTS_DISJOINT, || Box::new(GrantsDisjoint::default()))
        .host(reconsim_kube::intercept::host)
}
