//! The ConfigSet controller (`controller.rs`, real kube-rs code) registered with
//! reconsim: the controller as a scenario's `custom` entry, its ConfigSets as seed
//! objects, scaling and deleting them as workload actions, its invariant and its
//! desired state. This file is the only one that imports reconsim.

use crate::controller::{self, ConfigSet, ConfigSetSpec, Ctx, LABEL, Read};
use k8s_openapi::api::core::v1::ConfigMap;
use reconsim::check::View;
use reconsim::check::replicas::{AtMostReplicas, controlled};
use reconsim::family::ParamError;
use reconsim::family::params::NamespacedName;
use reconsim::scenario::extension::{Custom, Extensions};
use reconsim::world::api::ApiOp;
use reconsim::world::object::{Object, ObjectKey, Uid};
use reconsim_kube::kinds::{Kinds, kind_of};
use reconsim_kube::wire;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The controller's name: its registration, its process, its traces.
pub const NAME: &str = "configset-controller";
/// The invariant this file registers.
pub const MAX_CONFIGMAPS: &str = "configset_max_configmaps";

/// The kinds the controller's client speaks: its CRD (with the status subresource the
/// CRD declares) and core/v1 ConfigMaps.
pub fn kinds() -> Kinds {
    Kinds::new().crd::<ConfigSet>().core::<ConfigMap>()
}

/// `controllers.custom[].params` of a `configset-controller` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub variant: Variant,
    /// The ConfigSets in the API server at t = 0.
    pub configsets: Vec<ConfigSetParams>,
}

/// Which list the controller makes: the bug or the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// `ListParams::match_any()`: from the watch cache.
    WatchCache,
    /// `ListParams::default()`: a consistent read.
    Consistent,
}

/// A ConfigSet at t = 0.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSetParams {
    /// `web`, or `namespace/web`.
    pub name: NamespacedName,
    pub replicas: u32,
}

/// A `custom` workload action's `params`: scale a ConfigSet, or delete it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionParams {
    pub configset: NamespacedName,
    /// The new `spec.replicas`; absent: delete the ConfigSet.
    #[serde(default)]
    pub replicas: Option<u32>,
}

fn read(variant: Variant) -> Read {
    match variant {
        Variant::WatchCache => Read::WatchCache,
        Variant::Consistent => Read::Consistent,
    }
}

/// The same `reconcile` and `error_policy` under reconsim's manager instead of
/// kube-runtime's (the reconcile-only path: one reconcile at a time, client-go's
/// connections), kept to compare the two paths.
#[allow(dead_code)] // Used by tests/example_configset.rs, not by the example binary.
pub fn reconciler(variant: Variant) -> Box<dyn reconsim::world::manager::Reconciler> {
    let read = read(variant);
    reconsim_kube::Controller::<ConfigSet>::new(NAME, kinds())
        .owns::<ConfigMap>()
        .run(
            controller::reconcile,
            controller::error_policy,
            move |client| Ctx { client, read },
        )
}

fn seed(p: &ConfigSetParams) -> Result<Object, ParamError> {
    let mut cs = ConfigSet::new(
        &p.name.name,
        ConfigSetSpec {
            replicas: p.replicas,
        },
    );
    cs.metadata.namespace = Some(p.name.namespace.clone());
    kinds()
        .object(&cs)
        .map_err(|e| ParamError::at(".configsets", e.to_string()))
}

/// The ConfigMaps `cs` controls that are not being deleted.
fn active(view: &View<'_>, cs: &Object) -> usize {
    controlled(view.api.list(kind_of::<ConfigMap>()), cs)
        .filter(|cm| !cm.meta.is_deleting())
        .count()
}

fn replicas(cs: &Object) -> u32 {
    wire::decode::<ConfigSet>(cs).map_or(0, |c| c.spec.replicas)
}

/// `configset_max_configmaps`: a ConfigMap never appears while its ConfigSet already has
/// `replicas` of them, judged when a ConfigMap is first seen in the API server
/// (reconsim's ready checker; a scale-down's moment of too many is not a violation).
pub fn max_configmaps() -> AtMostReplicas {
    let kind = kind_of::<ConfigSet>();
    AtMostReplicas::new(MAX_CONFIGMAPS, kind, kind_of::<ConfigMap>(), replicas)
}

/// The desired state: every ConfigSet has exactly `replicas` ConfigMaps and says so in
/// its status; the ConfigMaps of a deleted ConfigSet are gone (the garbage collector).
pub fn converged(view: &View<'_>) -> Result<(), String> {
    let sets: Vec<&Arc<Object>> = view.api.list(kind_of::<ConfigSet>()).collect();
    for cs in &sets {
        let have = active(view, cs);
        let Some(c) = wire::decode::<ConfigSet>(cs) else {
            return Err(format!("ConfigSet {} does not decode", cs.meta.name));
        };
        if have != c.spec.replicas as usize {
            return Err(format!(
                "ConfigSet {} has {have} ConfigMaps, replicas is {}",
                cs.meta.name, c.spec.replicas
            ));
        }
        if c.status.as_ref().map(|s| s.replicas) != Some(c.spec.replicas) {
            return Err(format!(
                "ConfigSet {} says status.replicas {:?}, replicas is {}",
                cs.meta.name,
                c.status.map(|s| s.replicas),
                c.spec.replicas
            ));
        }
    }
    let owners: BTreeSet<Uid> = sets.iter().map(|cs| cs.meta.uid).collect();
    if let Some(orphan) = view.api.list(kind_of::<ConfigMap>()).find(|cm| {
        cm.meta.labels.contains_key(LABEL)
            && cm
                .meta
                .controller_ref()
                .is_some_and(|r| !owners.contains(&r.uid))
    }) {
        return Err(format!(
            "ConfigMap {} outlived its ConfigSet (not collected)",
            orphan.meta.name
        ));
    }
    Ok(())
}

/// Everything this file adds to reconsim, by name: the controller as its program.
pub fn extensions() -> Extensions {
    // The user's program (`controller::run`, kube-runtime's own `Controller` and all)
    // with a client of the simulated API server, run anew on every start of its pod.
    let program = reconsim_kube::custom(NAME, kinds(), |p: &Params, _, client| {
        controller::run(client, read(p.variant))
    });
    Extensions::new()
        .controller(hooks(program))
        .invariant(MAX_CONFIGMAPS, || Box::new(max_configmaps()))
        .host(reconsim_kube::intercept::host)
}

/// The same, the controller's `reconcile` under reconsim's manager ([`reconciler`]).
#[allow(dead_code)] // Used by tests/example_configset.rs, not by the example binary.
pub fn extensions_reconcile_only() -> Extensions {
    let reconcilers = Custom::reconcilers(NAME, |p: &Params| vec![reconciler(p.variant)]);
    Extensions::new()
        .controller(hooks(reconcilers))
        .invariant(MAX_CONFIGMAPS, || Box::new(max_configmaps()))
}

/// The entry's objects, actions and desired state, on either path.
fn hooks(controller: Custom<Params>) -> Custom<Params> {
    controller
        .objects(|p| p.configsets.iter().map(seed).collect())
        .action(|p, a: &ActionParams| {
            let Some(cs) = p.configsets.iter().find(|cs| cs.name == a.configset) else {
                return Err(ParamError::at(
                    ".configset",
                    format!("one of the entry's configsets, not `{}`", a.configset),
                ));
            };
            let kind = kind_of::<ConfigSet>();
            let key = ObjectKey::new(kind, &cs.name.namespace, &cs.name.name);
            Ok(match a.replicas {
                Some(n) => reconsim_kube::write::merge(
                    kinds().served(kind).expect("served"),
                    key,
                    &json!({ "spec": { "replicas": n } }),
                ),
                None => ApiOp::Delete {
                    key,
                    uid: None,
                    grace_period_seconds: None,
                },
            })
        })
        .convergence(converged)
}
