//! A kube-rs program as a scenario's `custom` controller, in one call: each of the
//! entry's pods runs the user's `main` with a client of the simulated API server, the
//! world's cloud reachable through the program's [`crate::Handle`], the container
//! exiting through its kubelet when `main` returns (a Deployment's restart, with the
//! kubelet's backoff).

use crate::{Kinds, KubeBridge, program, wire, write};
use reconsim_scenario::extension::{Custom, Manifests, Params};
use reconsim_world::api::ApiOp;
use reconsim_world::kubelet::ContainerEnv;
use reconsim_world::object::{Kind, Object, ObjectKey};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// The name a program finds the world's cloud under:
/// `Handle::current().service(CLOUD)`.
pub const CLOUD: &str = "cloud";

/// The controller `name` whose pods run `main(params, container, client)`: the user's
/// program over `kinds`, made again at every start of a container (a restart runs it
/// anew). Its entries' `objects` and its `create`, `patch` and `delete` actions are
/// manifests of `kinds`. The program reaches the world's cloud as the service [`CLOUD`]
/// and each of the user's own services (`Extensions::service`) by its name.
/// `container` says which pod it is (`pod_name`: a replica's identity, as a
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
    let manifests = kinds.clone();
    Custom::program(name, move |p: &P, env, services| {
        let (main, container, params) = (main.clone(), env.clone(), p.clone());
        let bridge = KubeBridge::new(
            env.endpoints.apiserver,
            kinds.clone(),
            program(move |client| main(&params, &container, client)),
        )
        .service(CLOUD, services.cloud);
        // The user's own services (`Extensions::service`), by their names.
        let bridge = services
            .named
            .iter()
            .fold(bridge, |b, (name, process)| b.service(name, *process));
        bridge.in_container(env.kubelet).boxed()
    })
    .manifests(manifests)
}

/// Manifests as the API server reads a client's JSON of its served kinds.
impl Manifests for Kinds {
    fn kind(&self, api_version: &str, kind: &str) -> Option<Kind> {
        self.all()
            .map(|s| s.kind)
            .find(|k| k.as_str() == kind && k.api_version() == api_version)
    }

    fn object(&self, manifest: &Value) -> Result<Object, String> {
        let kind = manifest["apiVersion"]
            .as_str()
            .zip(manifest["kind"].as_str())
            .and_then(|(v, k)| Manifests::kind(self, v, k))
            .ok_or("a served kind")?;
        let served = self.served(kind).ok_or("a served kind")?;
        self.decodes(kind, manifest)
            .map_err(|why| format!("a {kind} as its type reads it: {why}"))?;
        let namespace = manifest["metadata"]["namespace"].as_str().unwrap_or("");
        // As a create would store it.
        let mut created = manifest.clone();
        served.prepare_for_create(&mut created);
        let parsed = wire::from_json(&created, served, namespace).map_err(|r| r.message)?;
        if parsed.resource_version.is_some() || parsed.uid.is_some() {
            // Both are the server's: a create with a resourceVersion is refused
            // (apiserver storage/etcd3/store.go, Create: "resourceVersion should not be
            // set on objects to be created") and a uid is replaced by a new one
            // (FillObjectMetaSystemFields); a seed that names either says something
            // false of the world.
            return Err("no metadata.resourceVersion or metadata.uid: the server sets them".into());
        }
        Ok(parsed.object)
    }

    fn schema(&self, kind: Kind) -> Option<std::sync::Arc<Value>> {
        crate::schema::of(kind)
    }

    fn merge_patch(&self, key: ObjectKey, patch: &Value) -> ApiOp {
        let served = self
            .served(key.kind)
            .expect("Manifests::kind found the key's kind among the served");
        write::merge(served, key, patch)
    }
}
