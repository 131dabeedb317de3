//! REST to the API server's operations and back, as kube's typed `Api<K>` speaks it.
//! Served for core/v1 ConfigMaps: create (POST), get (GET), list (GET of the collection,
//! in a namespace or all, with an equality-based `labelSelector`), replace (PUT, with
//! its resourceVersion as a precondition), delete (DELETE, with a uid precondition),
//! and a JSON merge patch of labels, annotations and data. Every other request is
//! answered, not dropped: 405 with a Status naming what reconsim does not serve yet, so
//! a user's code fails loudly (docs/kube.md).

use crate::kinds::{ConfigMap, ConfigMapData};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, EventType, MergePatch, PatchOp, WatchEvent};
use reconsim_world::object::{Object, ObjectKey, ObjectMeta, Resource, Uid};
use serde_json::json;
use std::collections::BTreeMap;

/// How the answer to a routed operation is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The object, 201.
    Created,
    /// The object, 200.
    Object,
    /// The kind's list, filtered by the label selector.
    List(Selector),
    /// 200: the object if only marked (finalizers left), else a Success Status.
    Deleted,
    /// A watch: 200 and a stream of event lines, those in the namespace (all if
    /// `None`) whose labels match.
    Watch {
        namespace: Option<String>,
        selector: Selector,
    },
}

/// What a request asks: an operation for the API server, or an answer at once.
pub enum Routed {
    Op {
        op: ApiOp,
        shape: Shape,
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

/// A request answered at once with a Status.
pub struct Refusal {
    status: u16,
    body: serde_json::Value,
}

impl From<Refusal> for Routed {
    fn from(r: Refusal) -> Routed {
        Routed::Answer {
            status: r.status,
            body: r.body,
        }
    }
}

fn refuse(code: u16, reason: &str, message: String) -> Refusal {
    Refusal {
        status: code,
        body: status(code, reason, &message),
    }
}

fn unsupported(method: &http::Method, uri: &str) -> Routed {
    refuse(
        405,
        "MethodNotAllowed",
        format!("reconsim does not serve {method} {uri} yet (docs/kube.md)"),
    )
    .into()
}

/// An equality-based label selector: `a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-joined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<(String, Requirement)>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String),
    NotEquals(String),
    Exists,
    Absent,
}

impl Selector {
    /// `None` for a set-based selector (`in`, `notin`), which is not served yet.
    pub fn parse(text: &str) -> Option<Selector> {
        let mut out = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let req = if let Some((k, v)) = term.split_once("!=") {
                (k.trim(), Requirement::NotEquals(v.trim().into()))
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k.trim(), Requirement::Equals(v.trim().into()))
            } else if let Some(k) = term.strip_prefix('!') {
                (k.trim(), Requirement::Absent)
            } else if term.contains(' ') || term.contains('(') {
                return None;
            } else {
                (term, Requirement::Exists)
            };
            out.push((req.0.to_string(), req.1));
        }
        Some(Selector(out))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(k, r)| match r {
            Requirement::Equals(v) => labels.get(k) == Some(v),
            Requirement::NotEquals(v) => labels.get(k) != Some(v),
            Requirement::Exists => labels.contains_key(k),
            Requirement::Absent => !labels.contains_key(k),
        })
    }
}

/// The value of query parameter `name`, percent-decoded.
fn query(uri: &str, name: &str) -> Option<String> {
    let q = uri.split_once('?')?.1;
    form_urlencoded::parse(q.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A ConfigMap as the world stores it, from the wire; its resourceVersion if it had one.
fn from_wire(ns: &str, body: &[u8]) -> Result<(Object, Option<u64>), Refusal> {
    let wire: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_slice(body)
        .map_err(|e| refuse(400, "BadRequest", format!("a ConfigMap's JSON: {e}")))?;
    let rv = match wire.metadata.resource_version.as_deref() {
        None | Some("") => None,
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            refuse(
                422,
                "Invalid",
                format!("metadata.resourceVersion: {rv:?} is not one this server wrote"),
            )
        })?),
    };
    let meta = ObjectMeta {
        name: wire.metadata.name.clone().unwrap_or_default(),
        namespace: ns.to_string(),
        generate_name: wire.metadata.generate_name.clone(),
        labels: wire.metadata.labels.clone().unwrap_or_default(),
        annotations: wire.metadata.annotations.clone().unwrap_or_default(),
        finalizers: wire.metadata.finalizers.clone().unwrap_or_default(),
        resource_version: rv.unwrap_or(0),
        ..Default::default()
    };
    Ok((Object::new(meta, ConfigMap::from_wire(&wire)), rv))
}

/// A JSON merge patch of a ConfigMap as field-level changes: labels, annotations and
/// data; `metadata.resourceVersion` makes it conditional.
fn merge_patch(body: &[u8]) -> Result<(Vec<PatchOp>, Option<u64>), Refusal> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| refuse(400, "BadRequest", format!("a merge patch's JSON: {e}")))?;
    let Some(top) = v.as_object() else {
        return Err(refuse(
            400,
            "BadRequest",
            "a merge patch is a JSON object".into(),
        ));
    };
    let mut ops = Vec::new();
    let mut rv = None;
    let strings =
        |v: &serde_json::Value, path: &str| -> Result<Vec<(String, Option<String>)>, Refusal> {
            let Some(m) = v.as_object() else {
                return Err(refuse(
                    422,
                    "Invalid",
                    format!("{path}: expected an object"),
                ));
            };
            m.iter()
                .map(|(k, v)| match v {
                    serde_json::Value::Null => Ok((k.clone(), None)),
                    serde_json::Value::String(s) => Ok((k.clone(), Some(s.clone()))),
                    _ => Err(refuse(
                        422,
                        "Invalid",
                        format!("{path}.{k}: expected a string or null"),
                    )),
                })
                .collect()
        };
    for (field, value) in top {
        match field.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let Some(meta) = value.as_object() else {
                    return Err(refuse(
                        422,
                        "Invalid",
                        "metadata: expected an object".into(),
                    ));
                };
                for (m, v) in meta {
                    match m.as_str() {
                        "labels" => ops.extend(
                            strings(v, "metadata.labels")?
                                .into_iter()
                                .map(|(k, v)| PatchOp::SetLabel(k, v)),
                        ),
                        "annotations" => ops.extend(
                            strings(v, "metadata.annotations")?
                                .into_iter()
                                .map(|(k, v)| PatchOp::SetAnnotation(k, v)),
                        ),
                        "resourceVersion" => {
                            rv = v.as_str().and_then(|s| s.parse::<u64>().ok());
                        }
                        "name" | "namespace" => {}
                        other => {
                            return Err(refuse(
                                405,
                                "MethodNotAllowed",
                                format!(
                                    "reconsim does not merge-patch metadata.{other} yet (docs/kube.md)"
                                ),
                            ));
                        }
                    }
                }
            }
            "data" => ops.push(PatchOp::Merge(MergePatch::new(ConfigMapData(
                strings(value, "data")?.into_iter().collect(),
            )))),
            other => {
                return Err(refuse(
                    405,
                    "MethodNotAllowed",
                    format!(
                        "reconsim does not merge-patch {other} of a ConfigMap yet (docs/kube.md)"
                    ),
                ));
            }
        }
    }
    Ok((ops, rv))
}

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        kind: ConfigMap::KIND,
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

/// Route one request of the client.
pub fn route(method: &http::Method, uri: &str, content_type: Option<&str>, body: &[u8]) -> Routed {
    let path = uri.split('?').next().unwrap_or(uri);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let op = |op, shape| Routed::Op { op, shape };
    let selector = || match query(uri, "labelSelector") {
        None => Some(Selector::default()),
        Some(s) => Selector::parse(&s),
    };
    match (method, parts.as_slice()) {
        (&http::Method::POST, ["api", "v1", "namespaces", ns, "configmaps"]) => {
            match from_wire(ns, body) {
                Ok((o, _)) => op(ApiOp::Create(Box::new(o)), Shape::Created),
                Err(r) => r.into(),
            }
        }
        (&http::Method::GET, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            op(ApiOp::Get(key(ns, name)), Shape::Object)
        }
        (&http::Method::GET, ["api", "v1", "namespaces", ns, "configmaps"])
        | (&http::Method::GET, ["api", "v1", ns @ "configmaps"]) => {
            let Some(sel) = selector() else {
                return refuse(
                    405,
                    "MethodNotAllowed",
                    "reconsim serves equality-based label selectors only yet (docs/kube.md)".into(),
                )
                .into();
            };
            let namespace = (*ns != "configmaps").then(|| ns.to_string());
            if query(uri, "watch").is_some_and(|w| w == "true" || w == "1") {
                // From the resourceVersion given, exclusive ("" and "0": from the
                // start of the server's history, which replays what it holds).
                let from_rv = match query(uri, "resourceVersion").as_deref() {
                    None | Some("") | Some("0") => 0,
                    Some(rv) => match rv.parse::<u64>() {
                        Ok(rv) => rv,
                        Err(_) => {
                            return refuse(
                                422,
                                "Invalid",
                                format!("resourceVersion: {rv:?} is not one this server wrote"),
                            )
                            .into();
                        }
                    },
                };
                return op(
                    ApiOp::Watch {
                        // The bridge numbers its streams.
                        stream: 0,
                        kinds: vec![ConfigMap::KIND],
                        from_rv,
                    },
                    Shape::Watch {
                        namespace,
                        selector: sel,
                    },
                );
            }
            op(
                ApiOp::List {
                    kind: ConfigMap::KIND,
                    namespace,
                    from_watch_cache: false,
                },
                Shape::List(sel),
            )
        }
        (&http::Method::PUT, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            match from_wire(ns, body) {
                Ok((o, _)) if o.meta.name != *name => refuse(
                    400,
                    "BadRequest",
                    format!(
                        "the name in the body ({}) is not the path's ({name})",
                        o.meta.name
                    ),
                )
                .into(),
                Ok((o, rv)) => op(
                    ApiOp::Update {
                        object: Box::new(o),
                        precondition: rv.is_some(),
                    },
                    Shape::Object,
                ),
                Err(r) => r.into(),
            }
        }
        (&http::Method::DELETE, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            // DeleteParams: a uid precondition is the only one served.
            let uid = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["preconditions"]["uid"].as_str().map(str::to_string))
                .and_then(|u| parse_uid(&u));
            op(
                ApiOp::Delete {
                    key: key(ns, name),
                    uid,
                    grace_period_seconds: None,
                },
                Shape::Deleted,
            )
        }
        (&http::Method::PATCH, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            if content_type != Some("application/merge-patch+json") {
                return refuse(
                    405,
                    "MethodNotAllowed",
                    format!(
                        "reconsim serves JSON merge patches only yet, not {} (docs/kube.md)",
                        content_type.unwrap_or("no content type")
                    ),
                )
                .into();
            }
            match merge_patch(body) {
                Ok((ops, resource_version)) => op(
                    ApiOp::Patch {
                        key: key(ns, name),
                        ops,
                        resource_version,
                    },
                    Shape::Object,
                ),
                Err(r) => r.into(),
            }
        }
        _ => unsupported(method, uri),
    }
}

/// One watch event as its line on the stream, if the watch's namespace and selector
/// take it.
pub fn event_line(
    ev: &WatchEvent,
    namespace: Option<&str>,
    selector: &Selector,
) -> Option<Vec<u8>> {
    if namespace.is_some_and(|ns| ns != ev.object.meta.namespace)
        || !selector.matches(&ev.object.meta.labels)
    {
        return None;
    }
    let kind = match ev.event {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
    };
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object_json(&ev.object)?}))
        .expect("JSON values serialize");
    line.push(b'\n');
    Some(line)
}

/// The line a watch from a compacted resourceVersion gets, as the API server sends it:
/// an ERROR event with a 410 Status, then the end of the stream.
pub fn gone_line() -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "type": "ERROR",
        "object": status(410, "Expired", "too old resource version"),
    }))
    .expect("JSON values serialize");
    line.push(b'\n');
    line
}

/// A uid as Kubernetes writes one (a UUID), from the world's counter.
fn uid(u: u64) -> String {
    format!("00000000-0000-4000-8000-{u:012x}")
}

fn parse_uid(s: &str) -> Option<Uid> {
    let tail = s.strip_prefix("00000000-0000-4000-8000-")?;
    u64::from_str_radix(tail, 16).ok().map(Uid)
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

fn internal(what: String) -> (u16, serde_json::Value) {
    (
        500,
        status(500, "InternalError", &format!("reconsim: {what}")),
    )
}

/// The answer to a routed operation.
pub fn answer(result: &Result<ApiOk, ApiError>, shape: &Shape) -> (u16, serde_json::Value) {
    match (result, shape) {
        (Ok(ApiOk::Object(o)), _) => match object_json(o) {
            Some(v) => (if *shape == Shape::Created { 201 } else { 200 }, v),
            None => internal("an object of a kind without JSON".into()),
        },
        (Ok(ApiOk::Deleted), Shape::Deleted) => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
        ),
        (
            Ok(ApiOk::List {
                items,
                resource_version,
            }),
            Shape::List(sel),
        ) => {
            let items: Vec<serde_json::Value> = items
                .iter()
                .filter(|o| sel.matches(&o.meta.labels))
                .filter_map(|o| object_json(o))
                .collect();
            (
                200,
                json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": resource_version.to_string()},
                    "items": items,
                }),
            )
        }
        (Ok(other), _) => internal(format!(
            "an answer the REST layer does not speak: {other:?}"
        )),
        (Err(ApiError::NotFound), _) => (404, status(404, "NotFound", "not found")),
        (Err(ApiError::AlreadyExists), _) => (409, status(409, "AlreadyExists", "already exists")),
        (Err(ApiError::Conflict), _) => (
            409,
            status(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            ),
        ),
        (Err(ApiError::Gone), _) => (410, status(410, "Expired", "too old resource version")),
        (Err(ApiError::Invalid(why)), _) => (422, status(422, "Invalid", why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equality_based_selectors_match_as_the_api_server_does() {
        let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "front")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let m = |s: &str| Selector::parse(s).unwrap().matches(&labels);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(m("app!=db"));
        assert!(m("!owner"));
        assert!(!m("app=db"));
        assert!(!m("tier,owner"));
        assert!(m(""));
        assert!(Selector::parse("app in (web,db)").is_none());
    }

    #[test]
    fn query_parameters_are_percent_decoded() {
        assert_eq!(
            query(
                "/api/v1/configmaps?labelSelector=app%3Dweb%2Ctier",
                "labelSelector"
            ),
            Some("app=web,tier".into())
        );
        assert_eq!(query("/x?a=1&watch=true", "watch"), Some("true".into()));
        assert_eq!(query("/x", "watch"), None);
    }
}
