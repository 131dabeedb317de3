//! Checkers and desired states over kube-rs types: what a harness reads of the world as
//! the controller's own types, decoded from the API server's objects as a client would
//! get them.

use crate::kinds::kind_of;
use crate::wire;
use reconsim_check::View;
use reconsim_check::replicas::AtMostReplicas;
use serde::de::DeserializeOwned;

/// Every `K` the API server holds, decoded (an object that does not decode as a `K` is
/// left out).
pub fn objects<'a, K>(view: &View<'a>) -> impl Iterator<Item = K> + 'a
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + 'static,
    K::Scope: 'static,
{
    view.api
        .list(kind_of::<K>())
        .filter_map(|o| wire::decode::<K>(o))
}

/// [`AtMostReplicas`] from owners `O` to children `C`: at most `replicas(owner)` live
/// children per owner (an owner that does not decode asks for none).
///
/// ```
/// use k8s_openapi::api::apps::v1::ReplicaSet;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let check = reconsim_kube::check::at_most_replicas::<ReplicaSet, Pod>("rs_max_pods", |rs| {
///     rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) as u32
/// });
/// # let _ = check;
/// ```
pub fn at_most_replicas<O, C>(
    invariant: &str,
    replicas: impl Fn(&O) -> u32 + Send + Sync + 'static,
) -> AtMostReplicas
where
    O: kube::Resource<DynamicType = ()> + DeserializeOwned + 'static,
    O::Scope: 'static,
    C: kube::Resource<DynamicType = ()>,
    C::Scope: 'static,
{
    AtMostReplicas::new(invariant, kind_of::<O>(), kind_of::<C>(), move |o| {
        wire::decode::<O>(o).map_or(0, |o| replicas(&o))
    })
}
