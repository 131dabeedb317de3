//! The ConfigSet controller (`controller.rs`, real kube-rs code) registered with
//! reconsim: its program as a scenario's `custom` entry (its ConfigSets are manifests in
//! the scenario file), its invariant and its desired state. The one file naming reconsim.

use super::controller::{self, ConfigSet, Read};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use reconsim::check::{View, replicas::AtMostReplicas};
use reconsim::scenario::extension::Extensions;
use reconsim_kube::{Kinds, check};

/// The controller's name: its registration, its pods, its traces.
pub const NAME: &str = "configset-controller";
/// The invariant this file registers.
pub const MAX_CONFIGMAPS: &str = "configset_max_configmaps";

/// The kinds the controller's client speaks: its CRD and core/v1 ConfigMaps.
pub fn kinds() -> Kinds {
    Kinds::new().crd::<ConfigSet>().core::<ConfigMap>()
}

/// `controllers.custom[].params`: how it counts, `watch-cache` (the bug), `consistent`
/// (the fix) or `status` (a second bug).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub variant: Read,
}

/// `configset_max_configmaps`: a ConfigMap never appears while its ConfigSet already has
/// `replicas` of them (judged when the ConfigMap is first seen in the API server).
pub fn max_configmaps() -> AtMostReplicas {
    check::at_most_replicas::<ConfigSet, ConfigMap>(MAX_CONFIGMAPS, |cs| cs.spec.replicas)
}

/// The desired state: each ConfigSet has `replicas` ConfigMaps and says so in its status;
/// a deleted one's are gone (the garbage collector).
pub fn converged(view: &View<'_>) -> Result<(), String> {
    max_configmaps().converged(view)?;
    let wrong = check::objects::<ConfigSet>(view)
        .find(|c| c.status.as_ref().map(|s| s.replicas) != Some(c.spec.replicas));
    wrong.map_or(Ok(()), |c| {
        Err(format!("ConfigSet {} has {:?}", c.name_any(), c.status))
    })
}

/// Everything this file adds to reconsim: the user's program (`controller::run`,
/// kube-runtime's own `Controller` and all), run anew on every start of its pod.
pub fn extensions() -> Extensions {
    let program = reconsim_kube::custom(NAME, kinds(), |p: &Params, _, client| {
        controller::run(client, p.variant)
    });
    Extensions::new()
        .controller(program.convergence(converged))
        .invariant(MAX_CONFIGMAPS, || Box::new(max_configmaps()))
        .host(reconsim_kube::intercept::host)
}
