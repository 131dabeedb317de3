//! Objects named as kubectl names them. A controller whose kinds have a JSON form
//! (reconsim-kube's `Kinds`, which `reconsim_kube::custom` registers) lets its entries
//! seed `objects` as manifests and its `custom` workload actions `create`, `patch`
//! (a JSON merge patch) and `delete` the objects they name, with no hook of the user's.

use reconsim_family::ParamError;
use reconsim_world::api::ApiOp;
use reconsim_world::object::{Kind, Object, ObjectKey};
use serde_json::Value;

/// The namespace of a namespaced object whose manifest names none (kubectl's default).
pub const DEFAULT_NAMESPACE: &str = "default";

/// How a controller's kinds read manifests: the one extension point between the JSON a
/// scenario file holds and the world objects it names.
pub trait Manifests: Send + Sync {
    /// The served kind `kind` of `api_version` (`example.reconsim.dev/v1`, `v1`).
    fn kind(&self, api_version: &str, kind: &str) -> Option<Kind>;
    /// The object `manifest` describes, its namespace set; `Err` says why the API
    /// server would refuse it.
    fn object(&self, manifest: &Value) -> Result<Object, String>;
    /// A JSON merge patch (RFC 7386) of the object at `key`, as a client sends it.
    fn merge_patch(&self, key: ObjectKey, patch: &Value) -> ApiOp;
    /// `kind`'s structural schema (a CRD's `openAPIV3Schema`), if it has one: what
    /// generated operations draw their values from. Default: none.
    fn schema(&self, _kind: Kind) -> Option<std::sync::Arc<Value>> {
        None
    }
}

/// What a workload action does with the object its manifest names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Create,
    Patch,
    Delete,
}

impl Verb {
    /// Its field in a `custom` action: `.create`, `.patch`, `.delete`.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Verb::Create => ".create",
            Verb::Patch => ".patch",
            Verb::Delete => ".delete",
        }
    }
}

fn text<'a>(manifest: &'a Value, pointer: &str, path: &str) -> Result<&'a str, ParamError> {
    match manifest.pointer(pointer) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(ParamError::at(path, "a non-empty string")),
    }
}

/// The served kind and key `manifest` names (errors at `.apiVersion`, `.kind`,
/// `.metadata.name`, `.metadata.namespace`).
pub(crate) fn target(m: &dyn Manifests, manifest: &Value) -> Result<ObjectKey, ParamError> {
    if !manifest.is_object() {
        return Err(ParamError::at(
            "",
            "a manifest: an object with apiVersion, kind and metadata.name",
        ));
    }
    let api_version = text(manifest, "/apiVersion", ".apiVersion")?;
    let kind_name = text(manifest, "/kind", ".kind")?;
    let Some(kind) = m.kind(api_version, kind_name) else {
        return Err(ParamError::at(
            ".kind",
            format!("a kind the controller's client serves, not {api_version} {kind_name}"),
        ));
    };
    let name = text(manifest, "/metadata/name", ".metadata.name")?;
    let namespace = match manifest.pointer("/metadata/namespace") {
        None | Some(Value::Null) if kind.namespaced() => DEFAULT_NAMESPACE,
        None | Some(Value::Null) => "",
        Some(_) if !kind.namespaced() => {
            return Err(ParamError::at(
                ".metadata.namespace",
                format!("no namespace: {kind} is cluster-scoped"),
            ));
        }
        Some(_) => text(manifest, "/metadata/namespace", ".metadata.namespace")?,
    };
    Ok(ObjectKey::new(kind, namespace, name))
}

/// `manifest` with its namespace written out, as the API server would store it.
fn placed(manifest: &Value, key: &ObjectKey) -> Value {
    let mut placed = manifest.clone();
    if !key.namespace.is_empty() {
        placed["metadata"]["namespace"] = Value::String(key.namespace.clone());
    }
    placed
}

/// The object a seed manifest describes.
pub(crate) fn object(m: &dyn Manifests, manifest: &Value) -> Result<Object, ParamError> {
    let key = target(m, manifest)?;
    m.object(&placed(manifest, &key))
        .map_err(|why| ParamError::at("", format!("a manifest the API server takes: {why}")))
}

/// The API call of a `create`, `patch` or `delete` of the object `manifest` names. A
/// patch is the manifest without what names the object (apiVersion, kind, name,
/// namespace): `{"kind": .., "metadata": {"name": "web"}, "spec": {"replicas": 4}}`
/// patches `{"spec": {"replicas": 4}}`, as `kubectl patch --type merge` would.
pub(crate) fn action(m: &dyn Manifests, verb: Verb, manifest: &Value) -> Result<ApiOp, ParamError> {
    let key = target(m, manifest)?;
    Ok(match verb {
        Verb::Create => ApiOp::Create(Box::new(object(m, manifest)?)),
        Verb::Delete => ApiOp::Delete {
            key,
            uid: None,
            grace_period_seconds: None,
            options: Default::default(),
        },
        Verb::Patch => {
            let mut patch = manifest.clone();
            let top = patch.as_object_mut().expect("target checked an object");
            top.remove("apiVersion");
            top.remove("kind");
            if let Some(Value::Object(meta)) = top.get_mut("metadata") {
                meta.remove("name");
                meta.remove("namespace");
                if meta.is_empty() {
                    top.remove("metadata");
                }
            }
            m.merge_patch(key, &patch)
        }
    })
}
