//! The StepSet controller (`controller.rs`, real kube-rs code) registered with
//! reconsim: its program as a scenario's `custom` entry (its StepSets are manifests in
//! the scenario file, their schema the CRD's), its invariant and its desired state. The
//! one file naming reconsim.

use super::controller::{self, Observed, StepSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use reconsim::check::{View, replicas::AtMostReplicas};
use reconsim::scenario::extension::Extensions;
use reconsim_kube::{Kinds, check};

/// The controller's name: its registration, its pods, its traces.
pub const NAME: &str = "stepset-controller";
/// The invariant this file registers.
pub const MAX_CONFIGMAPS: &str = "stepset_max_configmaps";

/// The kinds the controller's client speaks: its CRD and core/v1 ConfigMaps.
pub fn kinds() -> Kinds {
    Kinds::new().crd::<StepSet>().core::<ConfigMap>()
}

/// `controllers.custom[].params`: which generation the status says was carried out,
/// `latest` (the bug) or `acted-on` (the fix).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub variant: Observed,
}

/// `stepset_max_configmaps`: a ConfigMap never appears while its StepSet already has
/// `replicas` of them (in a run with user operations: the most it has asked for).
pub fn max_configmaps() -> AtMostReplicas {
    check::at_most_replicas::<StepSet, ConfigMap>(MAX_CONFIGMAPS, |s| s.spec.replicas)
}

/// The desired state, Acto's consistency oracle for a StepSet: each one has `replicas`
/// ConfigMaps, and its status says so of the generation it holds.
pub fn converged(view: &View<'_>) -> Result<(), String> {
    max_configmaps().converged(view)?;
    let wrong = check::objects::<StepSet>(view).find(|s| {
        let status = s.status.clone().unwrap_or_default();
        status.replicas != s.spec.replicas || status.observed_generation != s.metadata.generation
    });
    wrong.map_or(Ok(()), |s| {
        Err(format!(
            "StepSet {} (generation {:?}) has {:?}",
            s.name_any(),
            s.metadata.generation,
            s.status
        ))
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
