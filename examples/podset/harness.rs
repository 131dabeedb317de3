//! The PodSet controller (`controller.rs`) registered with reconsim: its PodSets as seed
//! objects, scaling them as workload actions, its invariant and its desired state.

use super::controller::{NAME, PodSet, Variant, controller, is_active, replicas, spec};
use reconsim::check::View;
use reconsim::check::replicas::AtMostReplicas;
use reconsim::family::ParamError;
use reconsim::family::params::NamespacedName;
use reconsim::scenario::extension::{Custom, Extensions};
use reconsim::world::api::{ApiOp, PatchOp};
use reconsim::world::object::{Body, Object, ObjectKey, ObjectMeta, Pod, PodPhase, Resource};
use serde::Deserialize;

/// The invariant this file registers.
pub const MAX_PODS: &str = "podset_max_pods";

/// `controllers.custom[].params` of a `podset-controller` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub variant: Variant,
    /// The PodSets in the API server at t = 0.
    pub podsets: Vec<PodSetParams>,
}

/// A PodSet at t = 0.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSetParams {
    /// `web`, or `namespace/web`.
    pub name: NamespacedName,
    pub replicas: u32,
}

/// A `custom` workload action's `params`: scale a PodSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleParams {
    pub podset: NamespacedName,
    pub replicas: u32,
}

/// The PodSet object `p` as the API server holds it at t = 0.
pub fn podset_object(p: &PodSetParams) -> Object {
    Object::new(
        ObjectMeta::named(&p.name.namespace, &p.name.name),
        PodSet {
            spec: spec(&p.name.name, p.replicas),
            status: Default::default(),
        },
    )
}

/// `podset_max_pods`: a Pod never appears while its PodSet already has `replicas` active
/// Pods, judged when a Pod is first seen in the API server (reconsim's ready checker;
/// a scale-down's moment of too many is not a violation, only a create on top of it).
pub fn max_pods() -> AtMostReplicas {
    AtMostReplicas::new(MAX_PODS, PodSet::KIND, Pod::KIND, replicas)
        .live(is_active)
        .counted_as("active Pods")
}

/// The desired state: every PodSet has exactly `replicas` active Pods, all Running.
pub fn converged(view: &View<'_>) -> Result<(), String> {
    let running = |p: &Object| {
        p.typed::<Pod>()
            .is_some_and(|x| x.status.phase == PodPhase::Running)
    };
    max_pods().ready(running).converged(view)
}

/// Everything this file adds to reconsim, by name.
pub fn extensions() -> Extensions {
    let podset = Custom::reconcilers(NAME, |p: &Params| vec![controller(p.variant)])
        .objects(|p| Ok(p.podsets.iter().map(podset_object).collect()))
        .action(|p, a: &ScaleParams| {
            let Some(ps) = p.podsets.iter().find(|ps| ps.name == a.podset) else {
                return Err(ParamError::at(
                    ".podset",
                    format!("one of the entry's podsets, not `{}`", a.podset),
                ));
            };
            Ok(ApiOp::Patch {
                key: ObjectKey::new(PodSet::KIND, &ps.name.namespace, &ps.name.name),
                ops: vec![PatchOp::Spec(Body::new(PodSet {
                    spec: spec(&ps.name.name, a.replicas),
                    status: Default::default(),
                }))],
                resource_version: None,
            })
        })
        .convergence(converged);
    Extensions::new()
        .controller(podset)
        .invariant(MAX_PODS, || Box::new(max_pods()))
}
