//! REST to the API server's operations and back, as kube's typed `Api<K>` speaks it.
//! The spike covers core/v1 ConfigMaps: create (POST to the collection) and get (GET of
//! one). Every other request is answered, not dropped: 405 with a Status naming what
//! reconsim does not serve yet, so a user's code fails loudly (docs/kube.md).

use crate::kinds::ConfigMap;
use reconsim_world::api::{ApiError, ApiOk, ApiOp};
use reconsim_world::object::{Object, ObjectKey, ObjectMeta, Resource};
use serde_json::json;

/// What a request asks: an operation for the API server, or an answer at once.
pub enum Routed {
    Op {
        op: ApiOp,
        created: bool,
    },
    Answer {
        status: u16,
        body: serde_json::Value,
    },
}

/// A Kubernetes `Status` object, as the API server answers a failure.
pub fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    })
}

fn unsupported(method: &http::Method, uri: &str) -> Routed {
    Routed::Answer {
        status: 405,
        body: status(
            405,
            "MethodNotAllowed",
            &format!("reconsim does not serve {method} {uri} yet (docs/kube.md)"),
        ),
    }
}

fn bad_request(message: String) -> Routed {
    Routed::Answer {
        status: 400,
        body: status(400, "BadRequest", &message),
    }
}

/// Route one request of the client.
pub fn route(method: &http::Method, uri: &str, body: &[u8]) -> Routed {
    let path = uri.split('?').next().unwrap_or(uri);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (&http::Method::POST, ["api", "v1", "namespaces", ns, "configmaps"]) => {
            let wire: k8s_openapi::api::core::v1::ConfigMap = match serde_json::from_slice(body) {
                Ok(cm) => cm,
                Err(e) => return bad_request(format!("a ConfigMap's JSON: {e}")),
            };
            let meta = ObjectMeta {
                name: wire.metadata.name.clone().unwrap_or_default(),
                namespace: (*ns).to_string(),
                generate_name: wire.metadata.generate_name.clone(),
                labels: wire.metadata.labels.clone().unwrap_or_default(),
                annotations: wire.metadata.annotations.clone().unwrap_or_default(),
                finalizers: wire.metadata.finalizers.clone().unwrap_or_default(),
                ..Default::default()
            };
            Routed::Op {
                op: ApiOp::Create(Box::new(Object::new(meta, ConfigMap::from_wire(&wire)))),
                created: true,
            }
        }
        (&http::Method::GET, ["api", "v1", "namespaces", ns, "configmaps", name]) => Routed::Op {
            op: ApiOp::Get(ObjectKey {
                kind: ConfigMap::KIND,
                namespace: (*ns).to_string(),
                name: (*name).to_string(),
            }),
            created: false,
        },
        _ => unsupported(method, uri),
    }
}

/// A uid as Kubernetes writes one (a UUID), from the world's counter.
fn uid(u: u64) -> String {
    format!("00000000-0000-4000-8000-{u:012x}")
}

fn metadata(meta: &ObjectMeta) -> serde_json::Value {
    let mut m = json!({
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": uid(meta.uid.0),
        "resourceVersion": meta.resource_version.to_string(),
    });
    if !meta.labels.is_empty() {
        m["labels"] = json!(meta.labels);
    }
    if !meta.annotations.is_empty() {
        m["annotations"] = json!(meta.annotations);
    }
    if !meta.finalizers.is_empty() {
        m["finalizers"] = json!(meta.finalizers);
    }
    m
}

/// The JSON of a stored object, `None` for a kind the REST layer does not speak.
pub fn object_json(o: &Object) -> Option<serde_json::Value> {
    let cm = o.typed::<ConfigMap>()?;
    let mut v = serde_json::to_value(cm.to_wire()).expect("a ConfigMap serializes");
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("ConfigMap");
    v["metadata"] = metadata(&o.meta);
    Some(v)
}

/// The answer to a routed operation.
pub fn answer(result: &Result<ApiOk, ApiError>, created: bool) -> (u16, serde_json::Value) {
    match result {
        Ok(ApiOk::Object(o)) => match object_json(o) {
            Some(v) => (if created { 201 } else { 200 }, v),
            None => (
                500,
                status(
                    500,
                    "InternalError",
                    "reconsim: an object of a kind without JSON",
                ),
            ),
        },
        Ok(other) => (
            500,
            status(
                500,
                "InternalError",
                &format!("reconsim: an answer the REST layer does not speak: {other:?}"),
            ),
        ),
        Err(ApiError::NotFound) => (404, status(404, "NotFound", "not found")),
        Err(ApiError::AlreadyExists) => (409, status(409, "AlreadyExists", "already exists")),
        Err(ApiError::Conflict) => (
            409,
            status(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            ),
        ),
        Err(ApiError::Gone) => (410, status(410, "Expired", "too old resource version")),
        Err(ApiError::Invalid(why)) => (422, status(422, "Invalid", why)),
    }
}
