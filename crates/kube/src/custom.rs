//! A kube-rs program as a scenario's `custom` controller, in one call: each of the
//! entry's pods runs the user's `main` with a client of the simulated API server, the
//! world's cloud reachable through the program's [`crate::Handle`], the container
//! exiting through its kubelet when `main` returns (a Deployment's restart, with the
//! kubelet's backoff).

use crate::{Kinds, KubeBridge, program};
use reconsim_scenario::extension::{Custom, Params};
use reconsim_world::kubelet::ContainerEnv;
use std::future::Future;
use std::sync::Arc;

/// The name a program finds the world's cloud under:
/// `Handle::current().service(CLOUD)`.
pub const CLOUD: &str = "cloud";

/// The controller `name` whose pods run `main(params, container, client)`: the user's
/// program over `kinds`, made again at every start of a container (a restart runs it
/// anew). `container` says which pod it is (`pod_name`: a replica's identity, as a
/// Deployment's pod reads its own name from the downward API).
///
/// ```
/// use reconsim_kube::Kinds;
///
/// #[derive(Clone, serde::Deserialize)]
/// struct Params {
///     greeting: String,
/// }
///
/// // A program that lists ConfigMaps once and exits; its container restarts it.
/// let _ = reconsim_kube::custom("lister", Kinds::new(), |p: &Params, pod, client| {
///     let (greeting, pod) = (p.greeting.clone(), pod.pod_name.clone());
///     async move {
///         let api = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::default_namespaced(client);
///         let _ = api.list(&Default::default()).await;
///         println!("{greeting} from {pod}");
///     }
/// });
/// ```
pub fn custom<P, F, Fut>(name: &str, kinds: Kinds, main: F) -> Custom<P>
where
    P: Params + Clone,
    F: Fn(&P, &ContainerEnv, kube::Client) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let main = Arc::new(main);
    Custom::program(name, move |p: &P, env, services| {
        let (main, container, params) = (main.clone(), env.clone(), p.clone());
        KubeBridge::new(
            env.endpoints.apiserver,
            kinds.clone(),
            program(move |client| main(&params, &container, client)),
        )
        .service(CLOUD, services.cloud)
        .in_container(env.kubelet)
        .boxed()
    })
}
