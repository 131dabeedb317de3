//! REST to the API server's operations and back, as kube's typed `Api<K>` speaks it,
//! for every kind the world serves ([`Kinds`]): core paths (`/api/v1/...`) and group
//! paths (`/apis/{group}/{version}/...`), namespaced and cluster-scoped, and the status
//! subresource. Served: create (POST), get (GET), list (GET of the collection, in a
//! namespace or all, with label and field selectors, in pages; `resourceVersion=0`
//! reads the watch cache), watch (`?watch=true`, with a timeout, bookmarks and
//! streaming lists), replace (PUT), JSON merge patch and JSON
//! patch (PATCH), delete (DELETE, with uid and resourceVersion preconditions and a
//! propagation policy). Every other request is
//! answered, not dropped: a Status naming what reconsim does not serve, so a user's code
//! fails loudly (docs/kube.md).

use crate::kinds::{Kinds, Served};
use crate::page::{self, Page};
use crate::text;
use crate::wire;
use crate::write::{Change, Part, Write};
use reconsim_world::api::{
    ApiError, ApiOk, ApiOp, DeleteOptions, EventType, PatchOp, Propagation, WatchEvent,
    WatchOptions, WholePatch,
};
use reconsim_world::object::{Kind, Object, ObjectKey};
use serde_json::{Value, json};
/// How the answer to a routed operation is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The object, 201.
    Created,
    /// The object, 200.
    Object,
    /// The kind's list, filtered by the selectors, one page of it.
    List {
        kind: Kind,
        selector: Selector,
        page: Page,
    },
    /// 200: the object if only marked (finalizers left), else a Success Status.
    Deleted,
    /// A watch: 200 and a stream of event lines, those in the namespace (all if
    /// `None`) that the selectors take.
    Watch {
        kind: Kind,
        namespace: Option<String>,
        selector: Selector,
        /// A streaming list: its first bookmark ends the initial events.
        initial_events: bool,
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

pub use crate::selector::Selector;

/// A request in words, for full traces and `explain`: the method, the path and its
/// query percent-decoded (`labelSelector=configset=db`), and for a create the name it
/// asks for (`db-*` for a `generateName` of `db-`), so a line names its objects.
pub fn summary(method: &http::Method, uri: &str, body: &[u8]) -> String {
    let (path, q) = uri.split_once('?').unwrap_or((uri, ""));
    let mut line = format!("{method} {path}");
    let params: Vec<String> = form_urlencoded::parse(q.as_bytes())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !params.is_empty() {
        line.push('?');
        line.push_str(&params.join("&"));
    }
    if method == http::Method::POST
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
    {
        let meta = &v["metadata"];
        if let Some(name) = meta["name"].as_str() {
            line.push_str(&format!(": {name}"));
        } else if let Some(prefix) = meta["generateName"].as_str() {
            line.push_str(&format!(": {prefix}*"));
        }
    }
    line
}

/// The value of query parameter `name`, percent-decoded.
fn query(uri: &str, name: &str) -> Option<String> {
    let q = uri.split_once('?')?.1;
    // The first pair whose decoded key is `name`, as `form_urlencoded::parse` finds it,
    // decoding only a key that has something to decode, and only the pair found: a
    // request is asked for up to a dozen parameters (issue 33).
    q.split('&').filter(|p| !p.is_empty()).find_map(|pair| {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        if key != name && !key.bytes().any(|b| b == b'%' || b == b'+') {
            return None;
        }
        let (k, v) = form_urlencoded::parse(pair.as_bytes()).next()?;
        (k == name).then(|| v.into_owned())
    })
}

/// What a path names: a served kind, the namespace (none: cluster-scoped, or every
/// namespace of a collection), the object's name, and whether it is `/status`.
struct Target<'a> {
    served: Served,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    status: bool,
}

fn target<'a>(path: &'a str, kinds: &Kinds) -> Result<Target<'a>, Refusal> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => {
            return Err(refuse(
                404,
                "NotFound",
                format!("{path}: not an API path (/api/v1/... or /apis/{{group}}/{{version}}/...)"),
            ));
        }
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => {
            return Err(refuse(
                404,
                "NotFound",
                format!("{path}: the server could not find the requested resource"),
            ));
        }
    };
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let Some(served) = kinds.at(group, version, plural) else {
        let known: Vec<String> = kinds
            .all()
            .map(|s| {
                let i = s.kind.info();
                format!("{} ({})", i.plural, s.kind.api_version())
            })
            .collect();
        return Err(refuse(
            404,
            "NotFound",
            format!(
                "the world serves no {plural} in {gv}; it serves: {} (register a kind with Kinds::with, docs/kube.md)",
                known.join(", ")
            ),
        ));
    };
    if !served.kind.namespaced() && namespace.is_some() {
        return Err(refuse(
            404,
            "NotFound",
            format!(
                "{} is cluster-scoped: no namespace in its path",
                served.kind
            ),
        ));
    }
    if served.kind.namespaced() && namespace.is_none() && name.is_some() {
        return Err(refuse(
            404,
            "NotFound",
            format!(
                "{} is namespaced: its objects' paths name a namespace",
                served.kind
            ),
        ));
    }
    let status = match sub {
        None => false,
        Some("status") if served.status_subresource => true,
        // A CSR's approval is its status conditions, written through their own
        // subresource (kube's `Api::patch_approval`).
        Some("approval")
            if served.kind
                == <reconsim_world::object::CertificateSigningRequest as reconsim_world::object::Resource>::KIND =>
        {
            true
        }
        Some("status") => {
            return Err(refuse(
                404,
                "NotFound",
                format!("{} has no status subresource", served.kind),
            ));
        }
        Some(other) => {
            return Err(refuse(
                405,
                "MethodNotAllowed",
                format!("reconsim does not serve the {other} subresource yet (docs/kube.md)"),
            ));
        }
    };
    Ok(Target {
        served,
        namespace,
        name,
        status,
    })
}

fn json_body(body: &[u8], what: &str) -> Result<Value, Refusal> {
    serde_json::from_slice(body).map_err(|e| refuse(400, "BadRequest", format!("{what}: {e}")))
}

fn rv_param(uri: &str) -> Result<Option<u64>, Refusal> {
    match query(uri, "resourceVersion").as_deref() {
        None | Some("") => Ok(None),
        Some(rv) => rv.parse::<u64>().map(Some).map_err(|_| {
            refuse(
                422,
                "Invalid",
                format!("resourceVersion: {rv:?} is not one this server wrote"),
            )
        }),
    }
}

impl From<wire::Rejected> for Refusal {
    fn from(r: wire::Rejected) -> Refusal {
        refuse(r.code, r.reason, r.message)
    }
}

/// Route one request of the client.
/// An apply config the server takes for `kind`'s object `name`: an object naming the
/// kind (apiVersion and kind are required) and, if it names one, the path's object.
fn apply_config(v: &Value, kind: Kind, name: &str) -> Result<(), Refusal> {
    if !v.is_object() {
        return Err(refuse(
            400,
            "BadRequest",
            "an apply config is a JSON object".into(),
        ));
    }
    let api_version = kind.api_version();
    if v["apiVersion"].as_str() != Some(api_version.as_str())
        || v["kind"].as_str() != Some(kind.as_str())
    {
        return Err(refuse(
            400,
            "BadRequest",
            format!(
                "an apply config names its kind: apiVersion {api_version:?} and kind {:?}, not {} and {}",
                kind.as_str(),
                v["apiVersion"],
                v["kind"]
            ),
        ));
    }
    match v["metadata"]["name"].as_str() {
        Some(named) if named != name => Err(refuse(
            400,
            "BadRequest",
            format!("the name of the object ({named}) does not match the name on the URL ({name})"),
        )),
        _ => Ok(()),
    }
}

pub fn route(
    method: &http::Method,
    uri: &str,
    content_type: Option<&str>,
    body: &[u8],
    kinds: &Kinds,
) -> Routed {
    match route_or_refuse(method, uri, content_type, body, kinds) {
        Ok(r) => r,
        Err(r) => r.into(),
    }
}

fn route_or_refuse(
    method: &http::Method,
    uri: &str,
    content_type: Option<&str>,
    body: &[u8],
    kinds: &Kinds,
) -> Result<Routed, Refusal> {
    let path = uri.split('?').next().unwrap_or(uri);
    let t = target(path, kinds)?;
    let kind = t.served.kind;
    let ns = t.namespace.unwrap_or("");
    let op = |op, shape| Ok(Routed::Op { op, shape });
    let key = |name: &str| ObjectKey::new(kind, ns, name);
    // Who the write is recorded under (crate::managed): the request's fieldManager, else
    // its User-Agent's prefix, and kube-client sends no User-Agent.
    let manager = query(uri, "fieldManager").unwrap_or_default();
    let write = |part, change| {
        vec![PatchOp::Object(WholePatch::new(Write {
            part,
            change,
            status_subresource: t.served.status_subresource,
            manager: manager.clone(),
        }))]
    };
    let part = if t.status { Part::Status } else { Part::Object };
    match (method, t.name) {
        (&http::Method::POST, None) => {
            if kind.namespaced() && t.namespace.is_none() {
                return Err(refuse(
                    404,
                    "NotFound",
                    format!("{kind} is namespaced: create it in a namespace's path"),
                ));
            }
            let mut v = json_body(body, &format!("a {kind}'s JSON"))?;
            t.served.prepare_for_create(&mut v);
            if let Some(other) = v["metadata"]["namespace"].as_str()
                && !other.is_empty()
                && other != ns
            {
                return Err(refuse(
                    400,
                    "BadRequest",
                    format!(
                        "the namespace of the provided object ({other}) does not match the namespace sent on the request ({ns})"
                    ),
                ));
            }
            // The name is the world's API server's to validate, after admission and name
            // generation as the real one does (reconsim_world::names, semantics 4.18).
            // A custom resource's schema prunes, defaults and validates it (semantics 4.17).
            if let Some(schema) = crate::schema::of(kind) {
                let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
                crate::schema::admit(&mut v, &schema, None, kind, &name)
                    .map_err(|why| refuse(422, "Invalid", why))?;
            }
            let mut parsed = wire::from_json(&v, t.served, ns)?;
            // The storage refuses a create that names a resourceVersion (apiserver
            // storage/etcd3/store.go, Create: ErrResourceVersionSetOnCreate), a plain
            // error the handler answers 500 with no reason (docs/semantics.md 4.11).
            if parsed.resource_version.is_some_and(|rv| rv != 0) {
                return Err(refuse(
                    500,
                    "",
                    "resourceVersion should not be set on objects to be created".into(),
                ));
            }
            // A create is an update from nothing: its manager owns every field it set.
            let mut managed = crate::managed::ManagedFields::default();
            managed.update(
                &manager,
                &json!({}),
                &v,
                crate::managed::Reach::Object {
                    status_subresource: t.served.status_subresource,
                },
                &crate::list_types::Schema::of(kind),
            );
            crate::managed::set(&mut parsed.object, managed);
            op(ApiOp::Create(Box::new(parsed.object)), Shape::Created)
        }
        // Unset: a consistent read of the store. Any other version goes to the watch
        // cache as the real cacher's `Get` does: "0" (kube's `GetParams::any()`) takes
        // it as it is, lagging or not; N wants it at N or later (docs/semantics.md 3.15).
        (&http::Method::GET, Some(name)) => {
            let get = match rv_param(uri)? {
                None => ApiOp::Get(key(name)),
                Some(not_older_than) => ApiOp::GetCached {
                    key: key(name),
                    not_older_than,
                },
            };
            op(get, Shape::Object)
        }
        (&http::Method::GET, None) => {
            let label_text = query(uri, "labelSelector").unwrap_or_default();
            let selector = Selector::parse(&label_text).ok_or_else(|| {
                if label_text.contains('<') || label_text.contains('>') {
                    refuse(
                        405,
                        "MethodNotAllowed",
                        "reconsim does not serve the numeric label selectors < and > yet (docs/kube.md)"
                            .into(),
                    )
                } else {
                    refuse(
                        400,
                        "BadRequest",
                        format!("unable to parse requirement: {label_text:?}"),
                    )
                }
            })?;
            let selector = selector
                .with_fields(&query(uri, "fieldSelector").unwrap_or_default(), kind)
                .map_err(|r| refuse(r.code, "BadRequest", r.message))?;
            let namespace = t.namespace.map(str::to_string);
            let rv = rv_param(uri)?;
            if query(uri, "watch").is_some_and(|w| w == "true" || w == "1") {
                let flag = |name: &str| query(uri, name).is_some_and(|v| v == "true" || v == "1");
                let timeout_ms = match query(uri, "timeoutSeconds").as_deref() {
                    None | Some("") => None,
                    Some(t) => Some(
                        t.parse::<u64>().map_err(|_| {
                            refuse(
                                400,
                                "BadRequest",
                                format!("timeoutSeconds: {t:?} is not a whole number of seconds"),
                            )
                        })? * 1_000,
                    ),
                };
                let options = WatchOptions {
                    timeout_ms,
                    bookmarks: flag("allowWatchBookmarks"),
                    send_initial_events: flag("sendInitialEvents"),
                };
                // A streaming list (`sendInitialEvents`, kube-runtime's
                // `streaming_lists()`): the current state as ADDED events, then a
                // bookmark that says they are over (semantics 3.18). The real server
                // insists on bookmarks and `resourceVersionMatch=NotOlderThan` with it.
                let initial_events = options.send_initial_events;
                if initial_events {
                    // As apimachinery's ValidateListOptions words it.
                    let mut why = Vec::new();
                    if query(uri, "resourceVersionMatch").as_deref() != Some("NotOlderThan") {
                        why.push("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
                    }
                    if !options.bookmarks {
                        why.push("allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true");
                    }
                    if !why.is_empty() {
                        return Err(refuse(422, "Invalid", why.join(", ")));
                    }
                }
                // From the resourceVersion given, exclusive; none and "0" start from
                // the current state, an ADDED event per object (semantics 3.17).
                let watch = match rv {
                    _ if initial_events => ApiOp::WatchState {
                        stream: 0,
                        kinds: vec![kind],
                        options,
                    },
                    None | Some(0) => ApiOp::WatchState {
                        // The bridge numbers its streams.
                        stream: 0,
                        kinds: vec![kind],
                        options,
                    },
                    Some(from_rv) => ApiOp::Watch {
                        stream: 0,
                        kinds: vec![kind],
                        from_rv,
                        options,
                    },
                };
                return op(
                    watch,
                    Shape::Watch {
                        kind,
                        namespace,
                        selector,
                        initial_events,
                    },
                );
            }
            // `limit` and `continue` (semantics 4.16): a page of at most `limit` items,
            // and a token for the next, served at the first page's resourceVersion.
            let limit = match query(uri, "limit").as_deref() {
                None | Some("") => None,
                Some(l) => match l.parse::<i64>() {
                    Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    Ok(_) => None,
                    Err(_) => {
                        return Err(refuse(
                            400,
                            "BadRequest",
                            format!("limit: {l:?} is not a whole number"),
                        ));
                    }
                },
            };
            // A list served from the store's history at `resource_version`: a continued
            // page (after its last key) or an exact list.
            let list_at = |resource_version, after| {
                op(
                    ApiOp::ListAt {
                        kind,
                        namespace: namespace.clone(),
                        resource_version,
                    },
                    Shape::List {
                        kind,
                        selector: selector.clone(),
                        page: Page { limit, after },
                    },
                )
            };
            if let Some(token) = query(uri, "continue").filter(|c| !c.is_empty()) {
                if rv.is_some() {
                    return Err(refuse(
                        400,
                        "BadRequest",
                        "specifying resource version is not allowed when using continue".into(),
                    ));
                }
                let (resource_version, after) =
                    page::decode(&token).map_err(|why| refuse(400, "BadRequest", why))?;
                return list_at(resource_version, Some(after));
            }
            // "Exact" (`resourceVersionMatch=Exact`, or a `limit` with a version other
            // than 0 and no match, the legacy case): the data as of that version, from
            // the store's history, stamped with it; 410 once the history no longer
            // reaches it (website api-concepts, "Semantics for get and list"; apiserver
            // `storage/etcd3/store.go`, `GetList` at `withRev`; docs/semantics.md 4.16).
            let version_match = query(uri, "resourceVersionMatch").unwrap_or_default();
            let exact = match (version_match.as_str(), rv) {
                // As apimachinery's ValidateListOptions words it.
                ("Exact", None | Some(0)) => {
                    let why = if rv.is_none() {
                        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    } else {
                        "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                    };
                    return Err(refuse(422, "Invalid", why.into()));
                }
                ("Exact", Some(at)) => Some(at),
                ("", Some(at)) if at != 0 && limit.is_some() => Some(at),
                _ => None,
            };
            if let Some(resource_version) = exact {
                return list_at(resource_version, None);
            }
            // resourceVersion=0 (kube's `ListParams::match_any`) lets the server answer
            // from its watch cache, which can lag the store (docs/semantics.md 3.15),
            // whole: the watch cache takes no `limit`. None is a consistent read. A
            // not-older-than version other than 0 is served as a consistent read, which
            // is at least as new.
            let from_watch_cache = rv == Some(0);
            op(
                ApiOp::List {
                    kind,
                    namespace,
                    from_watch_cache,
                },
                Shape::List {
                    kind,
                    selector,
                    page: Page {
                        limit: limit.filter(|_| !from_watch_cache),
                        after: None,
                    },
                },
            )
        }
        (&http::Method::PUT, Some(name)) => {
            let v = json_body(body, &format!("a {kind}'s JSON"))?;
            let named = v["metadata"]["name"].as_str().unwrap_or("");
            if named != name {
                return Err(refuse(
                    400,
                    "BadRequest",
                    format!("the name in the body ({named:?}) is not the path's ({name})"),
                ));
            }
            // Checked here, so the server's patch parses what it is given.
            let parsed = wire::from_json(&v, t.served, ns)?;
            // A custom resource's strategy allows no unconditional update
            // (apiextensions-apiserver's customResourceStrategy.AllowUnconditionalUpdate is
            // false; registry/generic/registry/store.go, Update): a PUT without a
            // resourceVersion is Invalid. The built-in kinds served here allow it
            // (docs/semantics.md 4.11).
            if t.served.custom_resource() && parsed.resource_version.is_none_or(|rv| rv == 0) {
                let info = kind.info();
                return Err(refuse(
                    422,
                    "Invalid",
                    format!(
                        "{}.{} {name:?} is invalid: metadata.resourceVersion: Invalid value: \
                         0x0: must be specified for an update",
                        info.plural, info.group
                    ),
                ));
            }
            op(
                ApiOp::Patch {
                    key: key(name),
                    ops: write(part, Change::Replace(crate::doc::canonical(&v))),
                    resource_version: None,
                },
                Shape::Object,
            )
        }
        (&http::Method::PATCH, Some(name)) => {
            let change = match content_type.map(|c| c.split(';').next().unwrap_or(c).trim()) {
                Some("application/merge-patch+json") => {
                    let v = json_body(body, "a merge patch")?;
                    if !v.is_object() {
                        return Err(refuse(
                            400,
                            "BadRequest",
                            "a merge patch is a JSON object".into(),
                        ));
                    }
                    Change::Merge(crate::doc::canonical(&v))
                }
                Some("application/json-patch+json") => {
                    let v = json_body(body, "a JSON patch")?;
                    serde_json::from_value::<json_patch::Patch>(v.clone())
                        .map_err(|e| refuse(400, "BadRequest", format!("a JSON patch: {e}")))?;
                    Change::Json(crate::doc::canonical(&v))
                }
                Some("application/strategic-merge-patch+json") if t.served.strategic_merge => {
                    let v = json_body(body, "a strategic merge patch")?;
                    if !v.is_object() {
                        return Err(refuse(
                            400,
                            "BadRequest",
                            "a strategic merge patch is a JSON object".into(),
                        ));
                    }
                    Change::Strategic(crate::doc::canonical(&v))
                }
                Some("application/apply-patch+yaml") => {
                    // kube sends its apply configs as JSON, which is YAML; reconsim reads
                    // JSON only.
                    let v = json_body(body, "a server-side apply config (as JSON)")?;
                    apply_config(&v, kind, name)?;
                    if manager.is_empty() {
                        return Err(refuse(
                            400,
                            "BadRequest",
                            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                        ));
                    }
                    Change::Apply {
                        config: crate::doc::canonical(&v),
                        force: query(uri, "force").is_some_and(|f| f == "true"),
                    }
                }
                other => {
                    // As kube-apiserver answers a patch type a resource does not take
                    // (strategic merge of a custom resource among them).
                    return Err(refuse(
                        415,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format ({}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
                            other.unwrap_or("no content type"),
                            if t.served.strategic_merge {
                                ", application/strategic-merge-patch+json"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
            };
            op(
                ApiOp::Patch {
                    key: key(name),
                    ops: write(part, change),
                    resource_version: None,
                },
                Shape::Object,
            )
        }
        (&http::Method::DELETE, Some(name)) if !t.status => {
            // DeleteParams: preconditions (uid, resourceVersion), gracePeriodSeconds and
            // the propagation policy (docs/semantics.md 3.8).
            let params: Value = if body.is_empty() {
                json!({})
            } else {
                json_body(body, "DeleteOptions")?
            };
            let propagation = match (
                params["propagationPolicy"].as_str(),
                params["orphanDependents"].as_bool(),
            ) {
                (Some(policy), Some(_)) => {
                    // As apimachinery's ValidateDeleteOptions answers.
                    return Err(refuse(
                        422,
                        "Invalid",
                        format!(
                            "propagationPolicy: Invalid value: {policy:?}: orphanDependents and deletionPropagation cannot be both set"
                        ),
                    ));
                }
                (None, None) => None,
                (None, Some(true)) | (Some("Orphan"), None) => Some(Propagation::Orphan),
                (None, Some(false)) | (Some("Background"), None) => Some(Propagation::Background),
                (Some("Foreground"), None) => Some(Propagation::Foreground),
                (Some(other), None) => {
                    return Err(refuse(
                        422,
                        "Invalid",
                        format!(
                            "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                        ),
                    ));
                }
            };
            // A resourceVersion that is not one of the server's never matches: 409, as the
            // real server's string comparison answers.
            let resource_version = params["preconditions"]["resourceVersion"]
                .as_str()
                .map(|rv| rv.parse::<u64>().unwrap_or(u64::MAX));
            let uid = params["preconditions"]["uid"].as_str().map(wire::parse_uid);
            op(
                ApiOp::Delete {
                    key: key(name),
                    uid,
                    grace_period_seconds: params["gracePeriodSeconds"].as_u64(),
                    options: Box::new(DeleteOptions {
                        resource_version,
                        propagation,
                    }),
                },
                Shape::Deleted,
            )
        }
        _ => Ok(unsupported(method, uri)),
    }
}

/// One watch event as its line on the stream, if the watch's namespace and selector
/// take it. As the API server's watch cache converts it (apiserver
/// `storage/cacher/cache_watcher.go`, `convertToWatchEvent`; docs/semantics.md 3.16):
/// the object before the write and after it are each matched; a change that makes the
/// object match is ADDED, one that makes it stop matching is DELETED with its previous
/// content at the write's resourceVersion, and a deletion is DELETED if the object
/// matched before it.
pub fn event_line(
    ev: &WatchEvent,
    namespace: Option<&str>,
    selector: &Selector,
) -> Option<Vec<u8>> {
    let passes = |o: &Object| {
        namespace.is_none_or(|ns| ns == o.meta.namespace) && selector.matches_object(o)
    };
    let now = ev.event != EventType::Deleted && passes(&ev.object);
    // A deletion's object is the last state, which the watch matches as it did before.
    let before = match (ev.event, &ev.prev) {
        (EventType::Deleted, _) => passes(&ev.object),
        (_, Some(prev)) => passes(prev),
        (_, None) => false,
    };
    // `{"object":..,"type":..}`: the keys in serde_json's order, the object written
    // straight from the store (text.rs).
    let mut line = b"{\"object\":".to_vec();
    let kind = match (now, before) {
        (true, false) => {
            text::write_object(&ev.object, &mut line)?;
            "ADDED"
        }
        (true, true) => {
            text::write_object(&ev.object, &mut line)?;
            "MODIFIED"
        }
        (false, true) => {
            match (ev.event, &ev.prev) {
                (EventType::Modified, Some(prev)) => {
                    let mut gone = (**prev).clone();
                    gone.meta.resource_version = ev.object.meta.resource_version;
                    text::write_object(&gone, &mut line)?;
                }
                _ => text::write_object(&ev.object, &mut line)?,
            }
            "DELETED"
        }
        (false, false) => return None,
    };
    line.extend_from_slice(b",\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\"}\n");
    Some(line)
}

/// A bookmark's line: the kind and the resourceVersion alone, as the watch cache writes
/// it (apiserver `storage/cacher`, `getBookmarkEvent`); the one that ends a streaming
/// list's initial events carries the `k8s.io/initial-events-end` annotation.
pub fn bookmark_line(kind: Kind, resource_version: u64, initial_events_end: bool) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({
        "apiVersion": kind.api_version(),
        "kind": kind.as_str(),
        "metadata": metadata,
    });
    let mut line = serde_json::to_vec(&json!({"type": "BOOKMARK", "object": object}))
        .expect("JSON values serialize");
    line.push(b'\n');
    line
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

fn internal(what: String) -> (u16, Value) {
    (
        500,
        status(500, "InternalError", &format!("reconsim: {what}")),
    )
}

/// What an answer tells the timeline beyond its request: how many items a list found
/// (one page of it, as the client reads it), or why the request failed; `None` for a
/// success that says no more.
pub fn outcome(shape: &Shape, result: &Result<ApiOk, ApiError>) -> Option<String> {
    match (shape, result) {
        (
            Shape::List { selector, page, .. },
            Ok(ApiOk::List {
                items,
                resource_version,
            }),
        ) => {
            let n = crate::page::select(items, selector, page, *resource_version)
                .items
                .len();
            Some(format!("{n} item{}", if n == 1 { "" } else { "s" }))
        }
        (_, Ok(_)) => None,
        (_, Err(e)) => Some(format!("{e:?}")),
    }
}

/// The answer to a routed operation as its status and JSON text: [`answer`]'s, with an
/// object and a list's items written straight from the store ([`text`]).
pub fn answer_text(result: &Result<ApiOk, ApiError>, shape: &Shape) -> (u16, Vec<u8>) {
    match (result, shape) {
        (Ok(ApiOk::Object(o)), _) => match text::object(o) {
            Some(body) => (if *shape == Shape::Created { 201 } else { 200 }, body),
            None => json_text(internal(format!("{} is not served on the wire", o.kind()))),
        },
        (
            Ok(ApiOk::List {
                items,
                resource_version,
            }),
            Shape::List {
                kind,
                selector,
                page,
            },
        ) => {
            let selected = page::select(items, selector, page, *resource_version);
            let metadata = list_metadata(&selected, *resource_version);
            // In key order: "apiVersion" < "items" < "kind" < "metadata".
            let mut body = b"{\"apiVersion\":".to_vec();
            serde_json::to_writer(&mut body, &kind.api_version()).expect("JSON text writes");
            body.extend_from_slice(b",\"items\":[");
            let mut first = true;
            for o in &selected.items {
                let mark = body.len();
                if !first {
                    body.push(b',');
                }
                if text::write_object(o, &mut body).is_some() {
                    first = false;
                } else {
                    // Not served: left out, as `answer` leaves it out.
                    body.truncate(mark);
                }
            }
            body.extend_from_slice(b"],\"kind\":");
            serde_json::to_writer(&mut body, &format!("{kind}List")).expect("JSON text writes");
            body.extend_from_slice(b",\"metadata\":");
            serde_json::to_writer(&mut body, &metadata).expect("JSON values write");
            body.push(b'}');
            (200, body)
        }
        _ => json_text(answer(result, shape)),
    }
}

/// A list's `metadata`: its resourceVersion, and the next page's token and how many
/// items remain after this page, if any.
fn list_metadata(selected: &page::Selected<'_>, resource_version: u64) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if let Some(token) = &selected.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(n) = selected.remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    metadata
}

fn json_text((status, body): (u16, Value)) -> (u16, Vec<u8>) {
    (
        status,
        serde_json::to_vec(&body).expect("JSON values serialize"),
    )
}

/// The answer to a routed operation.
pub fn answer(result: &Result<ApiOk, ApiError>, shape: &Shape) -> (u16, Value) {
    match (result, shape) {
        (Ok(ApiOk::Object(o)), _) => match wire::to_json(o) {
            Some(v) => (if *shape == Shape::Created { 201 } else { 200 }, v),
            None => internal(format!("{} is not served on the wire", o.kind())),
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
            Shape::List {
                kind,
                selector,
                page,
            },
        ) => {
            let selected = page::select(items, selector, page, *resource_version);
            let items: Vec<Value> = selected
                .items
                .iter()
                .filter_map(|o| wire::to_json(o))
                .collect();
            let metadata = list_metadata(&selected, *resource_version);
            (
                200,
                json!({
                    "apiVersion": kind.api_version(),
                    "kind": format!("{kind}List"),
                    "metadata": metadata,
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
        // A continue token whose resourceVersion the history no longer reaches, as the
        // etcd store answers it (storage/etcd3/store.go, `GetList`).
        (
            Err(ApiError::Gone),
            Shape::List {
                page: Page { after: Some(_), .. },
                ..
            },
        ) => (
            410,
            status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ),
        ),
        // An exact list at a version the history no longer reaches (etcd3/errors.go,
        // `interpretListError`: ErrCompacted).
        (Err(ApiError::Gone), Shape::List { .. }) => (
            410,
            status(
                410,
                "Expired",
                "The resourceVersion for the provided list is too old.",
            ),
        ),
        (Err(ApiError::Gone), _) => (410, status(410, "Expired", "too old resource version")),
        (Err(ApiError::Invalid(why)), _) => (422, status(422, "Invalid", why)),
        (Err(ApiError::ApplyConflict(why)), _) => (409, status(409, "Conflict", why)),
        // As the NamespaceLifecycle admission plugin answers (semantics 4.13).
        (Err(ApiError::NamespaceNotFound(ns)), _) => {
            let mut body = status(404, "NotFound", &format!("namespaces {ns:?} not found"));
            body["details"] = json!({"name": ns, "kind": "namespaces"});
            (404, body)
        }
        // The same plugin's answer for a namespace being terminated, with its cause
        // (`NamespaceTerminatingCause`).
        (
            Err(
                e @ ApiError::NamespaceTerminating {
                    namespace, name, ..
                },
            ),
            _,
        ) => {
            let message = e.forbidden();
            let mut body = status(403, "Forbidden", &message);
            body["details"] = json!({
                "name": name,
                "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {namespace} is being terminated"),
                    "field": "metadata.namespace",
                }],
            });
            (403, body)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_decodes_the_query_and_names_what_a_create_makes() {
        let body = br#"{"metadata":{"generateName":"db-","namespace":"default"}}"#;
        assert_eq!(
            summary(
                &http::Method::POST,
                "/api/v1/namespaces/default/configmaps?",
                body
            ),
            "POST /api/v1/namespaces/default/configmaps: db-*"
        );
        assert_eq!(
            summary(
                &http::Method::GET,
                "/api/v1/configmaps?labelSelector=configset%3Ddb&resourceVersion=0",
                b""
            ),
            "GET /api/v1/configmaps?labelSelector=configset=db&resourceVersion=0"
        );
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
        // A key is decoded too, and the first of two pairs with one key wins.
        assert_eq!(query("/x?a=1&w%61tch=1&watch=2", "watch"), Some("1".into()));
        assert_eq!(query("/x?&&limit=5&", "limit"), Some("5".into()));
        assert_eq!(query("/x?a+b=c+d", "a b"), Some("c d".into()));
        assert_eq!(query("/x?watch", "watch"), Some("".into()));
        assert_eq!(query("/x?watchx=1", "watch"), None);
    }
}
