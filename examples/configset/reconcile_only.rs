//! The same `reconcile` and `error_policy` under reconsim's manager instead of
//! kube-runtime's `Controller` (one reconcile at a time, client-go's connections): the
//! example's tests and its benchmark compare the two paths. Not in the example binary.

use super::controller::{self, ConfigSet, Ctx};
use super::harness::{self, NAME, Params, kinds};
use k8s_openapi::api::core::v1::ConfigMap;
use reconsim::scenario::extension::{Custom, Extensions};
use reconsim::world::manager::Reconciler;

/// The controller's reconcile under reconsim's manager, reading as `params` say.
pub fn reconciler(params: &Params) -> Box<dyn Reconciler> {
    let read = params.variant;
    reconsim_kube::Controller::<ConfigSet>::new(NAME, kinds())
        .owns::<ConfigMap>()
        .run(
            controller::reconcile,
            controller::error_policy,
            move |client| Ctx { client, read },
        )
}

/// The harness's registration with [`reconciler`] in place of the program.
pub fn extensions() -> Extensions {
    let controller = Custom::reconcilers(NAME, |p: &Params| vec![reconciler(p)])
        .manifests(kinds())
        .convergence(harness::converged);
    Extensions::new()
        .controller(controller)
        .invariant(harness::MAX_CONFIGMAPS, || {
            Box::new(harness::max_configmaps())
        })
}
