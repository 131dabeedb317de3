//! The world's own kinds on the wire: Node, Pod, Lease, CertificateSigningRequest and
//! Deployment, which the world's components (kubelet, scheduler, node lifecycle and
//! workload controllers, leader electors) read and write as typed bodies, served to
//! kube-rs code as their k8s-openapi JSON. One object, two faces: a Pod kube-rs code
//! creates is the Pod the scheduler binds and the kubelet runs.
//!
//! The world models a few fields of each kind; the rest of what a client writes is kept
//! as it wrote it ([`Verbatim`], per part: spec, status), so a read gives back every field,
//! as from the real API server. A read starts from that text and writes over it only the
//! modeled fields whose value differs from the text's (a renewTime the world did not
//! change keeps its microseconds); a write reads the modeled fields from the JSON and
//! keeps the JSON. Where the model has no room for a value (a PreferNoSchedule taint, a
//! toleration of every effect), the value stays in the text and the world's components
//! do not see it (docs/kube.md lists each).

use crate::doc::canonical;
use crate::wire::{Rejected, rejected, timestamp};
use base64::Engine;
use reconsim_sim::SimTime;
use reconsim_world::object::{
    Body, CertificateSigningRequest, ConditionStatus, CsrSpec, CsrStatus, Deployment,
    DeploymentSpec, DeploymentStatus, Kind, Lease, Node, NodeSpec, NodeStatus, Pod, PodPhase,
    PodSpec, PodStatus, PodTemplate, Resource, Taint, TaintEffect, Toleration, Verbatim,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

type Fields = Map<String, Value>;

/// How one world kind is written to and read from its JSON (the fields outside
/// metadata).
pub struct Codec {
    pub kind: Kind,
    pub status_subresource: bool,
    /// The JSON fields of a stored body (`None`: a body of another kind).
    pub encode: fn(&Body) -> Option<Fields>,
    /// The body a client's JSON asks for (the object's top-level fields).
    pub decode: fn(&Fields) -> Result<Body, Rejected>,
}

static CODECS: [Codec; 5] = [
    Codec {
        kind: Node::KIND,
        status_subresource: true,
        encode: encode_node,
        decode: decode_node,
    },
    Codec {
        kind: Pod::KIND,
        status_subresource: true,
        encode: encode_pod,
        decode: decode_pod,
    },
    Codec {
        kind: Lease::KIND,
        status_subresource: false,
        encode: encode_lease,
        decode: decode_lease,
    },
    Codec {
        kind: CertificateSigningRequest::KIND,
        status_subresource: true,
        encode: encode_csr,
        decode: decode_csr,
    },
    Codec {
        kind: Deployment::KIND,
        status_subresource: true,
        encode: encode_deployment,
        decode: decode_deployment,
    },
];

/// The codec of `kind`, if it is one of the world's own.
pub fn codec(kind: Kind) -> Option<&'static Codec> {
    CODECS.iter().find(|c| c.kind == kind)
}

/// Every world kind.
pub fn all() -> impl Iterator<Item = &'static Codec> {
    CODECS.iter()
}

// ----- shared pieces ---------------------------------------------------------------------

fn invalid(path: &str, what: &str) -> Rejected {
    rejected(422, "Invalid", format!("{path}: {what}"))
}

/// A part's stored text as fields (empty if none).
fn base(v: &Verbatim) -> Fields {
    v.json()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// `part` of the object's fields (`spec`, `status`): an object, or empty when absent.
fn part(top: &Fields, name: &str) -> Result<Fields, Rejected> {
    match top.get(name) {
        None | Some(Value::Null) => Ok(Fields::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(invalid(name, "expected an object")),
    }
}

/// A part's text, kept as stored. The readers of a part's modeled fields (`lease`,
/// `node_spec`, ...) leave it empty: an encoder reads them back from the text only to
/// compare, and canonicalising the text again was most of a Lease's encoding (issue 33).
/// The decoders of a written object attach it ([`kept`]).
fn verbatim(fields: &Fields) -> Verbatim {
    if fields.is_empty() {
        Verbatim::default()
    } else {
        Verbatim::new(canonical(&Value::Object(fields.clone())))
    }
}

/// Part `name` of a written object read by `read`, with its text kept in the field
/// `text` names.
fn kept<T>(
    top: &Fields,
    name: &str,
    read: impl FnOnce(&Fields) -> Result<T, Rejected>,
    text: impl FnOnce(&mut T) -> &mut Verbatim,
) -> Result<T, Rejected> {
    let m = part(top, name)?;
    let mut t = read(&m)?;
    *text(&mut t) = verbatim(&m);
    Ok(t)
}

fn opt_str(m: &Fields, key: &str, path: &str) -> Result<Option<String>, Rejected> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(&format!("{path}.{key}"), "expected a string")),
    }
}

fn opt_u32(m: &Fields, key: &str, path: &str) -> Result<Option<u32>, Rejected> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| invalid(&format!("{path}.{key}"), "expected a non-negative integer")),
    }
}

fn opt_bool(m: &Fields, key: &str, path: &str) -> Result<bool, Rejected> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(&format!("{path}.{key}"), "expected a boolean")),
    }
}

fn array<'a>(m: &'a Fields, key: &str, path: &str) -> Result<&'a [Value], Rejected> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(invalid(&format!("{path}.{key}"), "expected an array")),
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Fields, Rejected> {
    v.as_object()
        .ok_or_else(|| invalid(path, "expected an object"))
}

fn strings(m: &Fields, key: &str, path: &str) -> Result<BTreeMap<String, String>, Rejected> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(&format!("{path}.{key}.{k}"), "expected a string")),
            })
            .collect(),
        Some(_) => Err(invalid(
            &format!("{path}.{key}"),
            "expected an object of strings",
        )),
    }
}

/// Set `key` to `value`, or remove it for `None`.
fn put(m: &mut Fields, key: &str, value: Option<Value>) {
    match value {
        Some(v) => {
            m.insert(key.into(), v);
        }
        None => {
            m.remove(key);
        }
    }
}

/// metav1.Time or metav1.MicroTime (RFC 3339, `Z`) as virtual time, to the millisecond;
/// a time before the run's epoch is its start.
pub fn parse_time(s: &str) -> Option<SimTime> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let ms: i64 = if frac.is_empty() {
        0
    } else {
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("{frac:0<3}")[..3].parse().ok()?
    };
    // Days from civil (H. Hinnant), then relative to the wire's epoch.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = (days - crate::wire::EPOCH_DAYS) * 86_400 + hh * 3600 + mm * 60 + ss;
    let total = secs * 1000 + ms;
    Some(SimTime(u64::try_from(total).unwrap_or(0)))
}

/// metav1.MicroTime as k8s-openapi writes it: six fractional digits.
pub fn micro_timestamp(t: SimTime) -> String {
    let whole = timestamp(t);
    format!(
        "{}.{:03}000Z",
        whole.trim_end_matches('Z'),
        t.as_ms() % 1000
    )
}

fn opt_time(m: &Fields, key: &str, path: &str) -> Result<Option<SimTime>, Rejected> {
    match opt_str(m, key, path)? {
        None => Ok(None),
        Some(s) => parse_time(&s).map(Some).ok_or_else(|| {
            invalid(
                &format!("{path}.{key}"),
                &format!("{s:?} is not an RFC 3339 time in UTC"),
            )
        }),
    }
}

/// Write a time unless the text already says it (to the millisecond).
fn put_time(m: &mut Fields, key: &str, t: Option<SimTime>, micro: bool) {
    let now = m.get(key).and_then(Value::as_str).and_then(parse_time);
    if now != t {
        let text = t.map(|t| {
            if micro {
                micro_timestamp(t)
            } else {
                timestamp(t)
            }
        });
        put(m, key, text.map(Value::String));
    }
}

fn effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn effect_text(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

fn condition_status(s: &str, path: &str) -> Result<ConditionStatus, Rejected> {
    match s {
        "True" => Ok(ConditionStatus::True),
        "False" => Ok(ConditionStatus::False),
        "Unknown" => Ok(ConditionStatus::Unknown),
        other => Err(invalid(
            path,
            &format!(
                "Unsupported value: {other:?}: supported values: \"True\", \"False\", \"Unknown\""
            ),
        )),
    }
}

fn condition_text(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

/// The condition of `type_` in a conditions list, its index and fields.
fn condition<'a>(list: &'a [Value], type_: &str) -> Option<(usize, &'a Fields)> {
    list.iter()
        .enumerate()
        .filter_map(|(i, c)| c.as_object().map(|c| (i, c)))
        .find(|(_, c)| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// Write the condition `type_` into `m.conditions`, keeping the others and its other
/// fields.
fn put_condition(m: &mut Fields, type_: &str, set: impl FnOnce(&mut Fields)) {
    let mut list = match m.remove("conditions") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    let at = condition(&list, type_).map(|(i, _)| i);
    let i = at.unwrap_or_else(|| {
        list.push(json!({"type": type_}));
        list.len() - 1
    });
    if let Some(c) = list[i].as_object_mut() {
        set(c);
    }
    m.insert("conditions".into(), Value::Array(list));
}

/// A body's top-level fields from its parts.
fn top(parts: [(&str, Fields); 2]) -> Fields {
    let mut out = Fields::new();
    for (name, fields) in parts {
        if !fields.is_empty() || name == "spec" {
            out.insert(name.into(), Value::Object(fields));
        }
    }
    out
}

// ----- core/v1 Node ------------------------------------------------------------------------

fn node_spec(m: &Fields) -> Result<NodeSpec, Rejected> {
    let mut taints = Vec::new();
    for (i, t) in array(m, "taints", "spec")?.iter().enumerate() {
        let at = format!("spec.taints[{i}]");
        let t = object(t, &at)?;
        let key = opt_str(t, "key", &at)?
            .filter(|k| !k.is_empty())
            .ok_or_else(|| invalid(&format!("{at}.key"), "Required value"))?;
        let text = opt_str(t, "effect", &at)?.unwrap_or_default();
        match text.as_str() {
            // Not modeled: the scheduler's soft preference.
            "PreferNoSchedule" => continue,
            e => {
                let effect = effect(e).ok_or_else(|| {
                    invalid(
                        &format!("{at}.effect"),
                        &format!("Unsupported value: {e:?}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""),
                    )
                })?;
                taints.push(Taint {
                    key,
                    effect,
                    time_added: opt_time(t, "timeAdded", &at)?,
                });
            }
        }
    }
    Ok(NodeSpec {
        provider_id: opt_str(m, "providerID", "spec")?,
        taints,
        unschedulable: opt_bool(m, "unschedulable", "spec")?,
        verbatim: Verbatim::default(),
    })
}

fn node_status(m: &Fields) -> Result<NodeStatus, Rejected> {
    let list = array(m, "conditions", "status")?;
    let (ready, ready_since) = match condition(list, "Ready") {
        None => (ConditionStatus::Unknown, None),
        Some((i, c)) => {
            let at = format!("status.conditions[{i}]");
            (
                condition_status(&opt_str(c, "status", &at)?.unwrap_or_default(), &at)?,
                opt_time(c, "lastTransitionTime", &at)?,
            )
        }
    };
    Ok(NodeStatus {
        ready,
        ready_since,
        verbatim: Verbatim::default(),
    })
}

fn encode_node(b: &Body) -> Option<Fields> {
    let n = b.typed::<Node>()?;
    let mut spec = base(&n.spec.verbatim);
    let was = node_spec(&spec).unwrap_or_default();
    if was.provider_id != n.spec.provider_id {
        put(
            &mut spec,
            "providerID",
            n.spec.provider_id.clone().map(Value::String),
        );
    }
    if was.taints != n.spec.taints {
        let taints: Vec<Value> = n
            .spec
            .taints
            .iter()
            .map(|t| {
                let mut v = json!({"key": t.key, "effect": effect_text(t.effect)});
                if let Some(at) = t.time_added {
                    v["timeAdded"] = json!(timestamp(at));
                }
                v
            })
            .collect();
        put(
            &mut spec,
            "taints",
            (!taints.is_empty()).then_some(Value::Array(taints)),
        );
    }
    if was.unschedulable != n.spec.unschedulable {
        put(
            &mut spec,
            "unschedulable",
            n.spec.unschedulable.then_some(json!(true)),
        );
    }
    let mut status = base(&n.status.verbatim);
    let was = node_status(&status).unwrap_or_default();
    if (was.ready, was.ready_since) != (n.status.ready, n.status.ready_since) {
        put_condition(&mut status, "Ready", |c| {
            c.insert("status".into(), json!(condition_text(n.status.ready)));
            put_time(c, "lastTransitionTime", n.status.ready_since, false);
        });
    }
    Some(top([("spec", spec), ("status", status)]))
}

fn decode_node(top: &Fields) -> Result<Body, Rejected> {
    // Each part read in turn (fields evaluate in order), so a bad spec is refused
    // before a bad status.
    Ok(Body::new(Node {
        spec: kept(top, "spec", node_spec, |s| &mut s.verbatim)?,
        status: kept(top, "status", node_status, |s| &mut s.verbatim)?,
    }))
}

// ----- core/v1 Pod -------------------------------------------------------------------------

/// The one container the world models: the first.
const CONTAINER: &str = "main";

fn pod_spec(m: &Fields, path: &str) -> Result<PodSpec, Rejected> {
    let containers = array(m, "containers", path)?;
    let first = containers
        .first()
        .ok_or_else(|| invalid(&format!("{path}.containers"), "Required value"))?;
    let at = format!("{path}.containers[0]");
    let image = opt_str(object(first, &at)?, "image", &at)?
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid(&format!("{at}.image"), "Required value"))?;
    let mut tolerations = Vec::new();
    for (i, t) in array(m, "tolerations", path)?.iter().enumerate() {
        let at = format!("{path}.tolerations[{i}]");
        let t = object(t, &at)?;
        // The world's tolerations name a key and an effect; one of every key or every
        // effect stays in the text only.
        let key = opt_str(t, "key", &at)?.unwrap_or_default();
        let Some(effect) = opt_str(t, "effect", &at)?.as_deref().and_then(effect) else {
            continue;
        };
        if key.is_empty() {
            continue;
        }
        let toleration_seconds = match t.get("tolerationSeconds") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().map(|s| s.max(0) as u64).ok_or_else(|| {
                invalid(&format!("{at}.tolerationSeconds"), "expected an integer")
            })?),
        };
        tolerations.push(Toleration {
            key,
            effect,
            toleration_seconds,
        });
    }
    Ok(PodSpec {
        node_name: opt_str(m, "nodeName", path)?.filter(|n| !n.is_empty()),
        image,
        node_selector: strings(m, "nodeSelector", path)?,
        tolerations,
        verbatim: Verbatim::default(),
    })
}

/// A pod spec with its text, as stored.
fn pod_spec_kept(m: &Fields, path: &str) -> Result<PodSpec, Rejected> {
    Ok(PodSpec {
        verbatim: verbatim(m),
        ..pod_spec(m, path)?
    })
}

/// A pod spec's JSON: its text with the modeled fields written over it.
fn pod_spec_json(s: &PodSpec) -> Fields {
    let mut m = base(&s.verbatim);
    let was = pod_spec(&m, "spec").ok();
    if was.as_ref().map(|w| &w.node_name) != Some(&s.node_name) {
        put(&mut m, "nodeName", s.node_name.clone().map(Value::String));
    }
    if was.as_ref().map(|w| &w.image) != Some(&s.image) {
        match m.get_mut("containers").and_then(Value::as_array_mut) {
            Some(list) if list.first().is_some_and(Value::is_object) => {
                list[0]["image"] = json!(s.image);
            }
            _ => {
                m.insert(
                    "containers".into(),
                    json!([{"name": CONTAINER, "image": s.image}]),
                );
            }
        }
    }
    if was.as_ref().map(|w| &w.node_selector) != Some(&s.node_selector) {
        put(
            &mut m,
            "nodeSelector",
            (!s.node_selector.is_empty()).then(|| json!(s.node_selector)),
        );
    }
    if was.as_ref().map(|w| &w.tolerations) != Some(&s.tolerations) {
        let list: Vec<Value> = s
            .tolerations
            .iter()
            .map(|t| {
                let mut v =
                    json!({"key": t.key, "operator": "Exists", "effect": effect_text(t.effect)});
                if let Some(secs) = t.toleration_seconds {
                    v["tolerationSeconds"] = json!(secs);
                }
                v
            })
            .collect();
        put(
            &mut m,
            "tolerations",
            (!list.is_empty()).then_some(Value::Array(list)),
        );
    }
    m
}

fn phase(s: &str) -> Result<PodPhase, Rejected> {
    match s {
        "Pending" => Ok(PodPhase::Pending),
        "Running" => Ok(PodPhase::Running),
        "Succeeded" => Ok(PodPhase::Succeeded),
        "Failed" => Ok(PodPhase::Failed),
        other => Err(invalid(
            "status.phase",
            &format!(
                "{other:?}: reconsim models the phases Pending, Running, Succeeded and Failed"
            ),
        )),
    }
}

fn phase_text(p: PodPhase) -> &'static str {
    match p {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
    }
}

fn pod_status(m: &Fields) -> Result<PodStatus, Rejected> {
    let restart_count = match array(m, "containerStatuses", "status")?.first() {
        None => 0,
        Some(c) => opt_u32(
            object(c, "status.containerStatuses[0]")?,
            "restartCount",
            "status.containerStatuses[0]",
        )?
        .unwrap_or(0),
    };
    Ok(PodStatus {
        phase: match opt_str(m, "phase", "status")? {
            None => PodPhase::Pending,
            Some(p) => phase(&p)?,
        },
        restart_count,
        verbatim: Verbatim::default(),
    })
}

fn encode_pod(b: &Body) -> Option<Fields> {
    let p = b.typed::<Pod>()?;
    let spec = pod_spec_json(&p.spec);
    let mut status = base(&p.status.verbatim);
    let was = pod_status(&status).unwrap_or_default();
    // A new pod's phase is Pending, as the API server writes it on create.
    status.insert("phase".into(), json!(phase_text(p.status.phase)));
    if (was.phase, was.restart_count) != (p.status.phase, p.status.restart_count) {
        let running = p.status.phase == PodPhase::Running;
        let name = spec
            .get("containers")
            .and_then(|c| c[0]["name"].as_str())
            .unwrap_or(CONTAINER)
            .to_string();
        status.insert(
            "containerStatuses".into(),
            json!([{
                "name": name,
                "image": p.spec.image,
                "imageID": "",
                "ready": running,
                "started": running,
                "restartCount": p.status.restart_count,
            }]),
        );
        put_condition(&mut status, "Ready", |c| {
            c.insert(
                "status".into(),
                json!(if running { "True" } else { "False" }),
            );
        });
    }
    Some(top([("spec", spec), ("status", status)]))
}

fn decode_pod(top: &Fields) -> Result<Body, Rejected> {
    Ok(Body::new(Pod {
        spec: kept(top, "spec", |m| pod_spec(m, "spec"), |s| &mut s.verbatim)?,
        status: kept(top, "status", pod_status, |s| &mut s.verbatim)?,
    }))
}

// ----- coordination.k8s.io/v1 Lease --------------------------------------------------------

fn lease(m: &Fields) -> Result<Lease, Rejected> {
    Ok(Lease {
        holder_identity: opt_str(m, "holderIdentity", "spec")?,
        lease_duration_seconds: opt_u32(m, "leaseDurationSeconds", "spec")?.unwrap_or(0),
        acquire_time: opt_time(m, "acquireTime", "spec")?,
        renew_time: opt_time(m, "renewTime", "spec")?,
        lease_transitions: opt_u32(m, "leaseTransitions", "spec")?.unwrap_or(0),
        verbatim: Verbatim::default(),
    })
}

fn encode_lease(b: &Body) -> Option<Fields> {
    let l = b.typed::<Lease>()?;
    let mut spec = base(&l.verbatim);
    let was = lease(&spec).unwrap_or_default();
    if was.holder_identity != l.holder_identity {
        put(
            &mut spec,
            "holderIdentity",
            l.holder_identity.clone().map(Value::String),
        );
    }
    if was.lease_duration_seconds != l.lease_duration_seconds {
        put(
            &mut spec,
            "leaseDurationSeconds",
            (l.lease_duration_seconds > 0).then(|| json!(l.lease_duration_seconds)),
        );
    }
    put_time(&mut spec, "acquireTime", l.acquire_time, true);
    put_time(&mut spec, "renewTime", l.renew_time, true);
    if was.lease_transitions != l.lease_transitions {
        put(
            &mut spec,
            "leaseTransitions",
            (l.lease_transitions > 0).then(|| json!(l.lease_transitions)),
        );
    }
    let mut out = Fields::new();
    out.insert("spec".into(), Value::Object(spec));
    Some(out)
}

fn decode_lease(top: &Fields) -> Result<Body, Rejected> {
    Ok(Body::new(kept(top, "spec", lease, |l| &mut l.verbatim)?))
}

// ----- certificates.k8s.io/v1 CertificateSigningRequest ------------------------------------

/// The kubelet's client signer.
const KUBELET_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const NODE_CN: &str = "system:node:";

/// The node a request is for: the `system:node:<name>` common name in its DER (a
/// PrintableString or UTF8String, so its bytes are there as text).
fn requested_node(request_b64: &str) -> Option<String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let pem = engine.decode(request_b64.trim()).ok()?;
    let pem = String::from_utf8(pem).ok()?;
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat();
    let der = engine.decode(body.trim()).ok()?;
    let at = der
        .windows(NODE_CN.len())
        .position(|w| w == NODE_CN.as_bytes())?;
    let name: String = der[at + NODE_CN.len()..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
        .map(|&b| char::from(b))
        .collect();
    (!name.is_empty()).then_some(name)
}

/// A request the world's kubelet made, as PEM in base64: not a real PKCS#10 request, only
/// its subject (what [`requested_node`] reads back).
fn request_for(node: &str) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let der = engine.encode(format!("reconsim CSR: CN={NODE_CN}{node}"));
    engine.encode(format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{der}\n-----END CERTIFICATE REQUEST-----\n"
    ))
}

fn csr_spec(m: &Fields) -> Result<CsrSpec, Rejected> {
    let request =
        opt_str(m, "request", "spec")?.ok_or_else(|| invalid("spec.request", "Required value"))?;
    Ok(CsrSpec {
        username: opt_str(m, "username", "spec")?.unwrap_or_default(),
        node_name: requested_node(&request).unwrap_or_default(),
        verbatim: Verbatim::default(),
    })
}

fn csr_status(m: &Fields) -> Result<CsrStatus, Rejected> {
    let list = array(m, "conditions", "status")?;
    Ok(CsrStatus {
        approved: condition(list, "Approved")
            .is_some_and(|(_, c)| c.get("status").and_then(Value::as_str) == Some("True")),
        verbatim: Verbatim::default(),
    })
}

fn encode_csr(b: &Body) -> Option<Fields> {
    let c = b.typed::<CertificateSigningRequest>()?;
    let mut spec = base(&c.spec.verbatim);
    let was = csr_spec(&spec).ok();
    if was.as_ref().map(|w| &w.node_name) != Some(&c.spec.node_name) {
        spec.insert("request".into(), json!(request_for(&c.spec.node_name)));
        spec.entry("signerName").or_insert(json!(KUBELET_SIGNER));
        spec.entry("usages")
            .or_insert(json!(["digital signature", "client auth"]));
    }
    if was.as_ref().map(|w| &w.username) != Some(&c.spec.username) {
        spec.insert("username".into(), json!(c.spec.username));
    }
    let mut status = base(&c.status.verbatim);
    let was = csr_status(&status).unwrap_or_default();
    if was.approved != c.status.approved {
        if c.status.approved {
            put_condition(&mut status, "Approved", |m| {
                m.insert("status".into(), json!("True"));
                m.entry("reason").or_insert(json!("Approved"));
            });
        } else if let Some(Value::Array(list)) = status.get_mut("conditions") {
            list.retain(|c| c["type"] != "Approved");
        }
    }
    Some(top([("spec", spec), ("status", status)]))
}

fn decode_csr(top: &Fields) -> Result<Body, Rejected> {
    Ok(Body::new(CertificateSigningRequest {
        spec: kept(top, "spec", csr_spec, |s| &mut s.verbatim)?,
        status: kept(top, "status", csr_status, |s| &mut s.verbatim)?,
    }))
}

// ----- apps/v1 Deployment ------------------------------------------------------------------

fn deployment_spec(m: &Fields) -> Result<DeploymentSpec, Rejected> {
    let selector = match m.get("selector") {
        None | Some(Value::Null) => return Err(invalid("spec.selector", "Required value")),
        Some(s) => strings(object(s, "spec.selector")?, "matchLabels", "spec.selector")?,
    };
    let template = match m.get("template") {
        None | Some(Value::Null) => return Err(invalid("spec.template", "Required value")),
        Some(t) => object(t, "spec.template")?,
    };
    let labels = match template.get("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(md) => strings(
            object(md, "spec.template.metadata")?,
            "labels",
            "spec.template.metadata",
        )?,
    };
    let spec = match template.get("spec") {
        None | Some(Value::Null) => return Err(invalid("spec.template.spec", "Required value")),
        Some(s) => pod_spec_kept(object(s, "spec.template.spec")?, "spec.template.spec")?,
    };
    Ok(DeploymentSpec {
        // The API server's default.
        replicas: opt_u32(m, "replicas", "spec")?.unwrap_or(1),
        selector,
        template: PodTemplate { labels, spec },
        verbatim: verbatim(m),
    })
}

fn encode_deployment(b: &Body) -> Option<Fields> {
    let d = b.typed::<Deployment>()?;
    let mut spec = base(&d.spec.verbatim);
    let was = deployment_spec(&spec).ok();
    // Written when absent too: the API server stores its default.
    if was.as_ref().map(|w| w.replicas) != Some(d.spec.replicas) || !spec.contains_key("replicas") {
        spec.insert("replicas".into(), json!(d.spec.replicas));
    }
    if was.as_ref().map(|w| &w.selector) != Some(&d.spec.selector) {
        spec.insert("selector".into(), json!({"matchLabels": d.spec.selector}));
    }
    if was.as_ref().map(|w| &w.template) != Some(&d.spec.template) {
        let mut template = spec
            .remove("template")
            .and_then(|t| match t {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        let mut metadata = template
            .remove("metadata")
            .and_then(|t| match t {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        put(
            &mut metadata,
            "labels",
            (!d.spec.template.labels.is_empty()).then(|| json!(d.spec.template.labels)),
        );
        template.insert("metadata".into(), Value::Object(metadata));
        template.insert(
            "spec".into(),
            Value::Object(pod_spec_json(&d.spec.template.spec)),
        );
        spec.insert("template".into(), Value::Object(template));
    }
    let mut status = base(&d.status.verbatim);
    let was = status.get("replicas").and_then(Value::as_u64).unwrap_or(0);
    if was != u64::from(d.status.replicas) {
        put(
            &mut status,
            "replicas",
            (d.status.replicas > 0).then(|| json!(d.status.replicas)),
        );
    }
    Some(top([("spec", spec), ("status", status)]))
}

fn decode_deployment(top: &Fields) -> Result<Body, Rejected> {
    let status = part(top, "status")?;
    Ok(Body::new(Deployment {
        spec: deployment_spec(&part(top, "spec")?)?,
        status: DeploymentStatus {
            replicas: opt_u32(&status, "replicas", "status")?.unwrap_or(0),
            verbatim: verbatim(&status),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write's parts are read in turn: a bad spec is what a write with a bad spec and
    /// a bad status is refused for.
    #[test]
    fn a_bad_spec_is_refused_before_a_bad_status() {
        let top = |v: Value| v.as_object().cloned().expect("an object");
        let both = top(json!({"spec": {"taints": 5}, "status": 7}));
        for decode in [decode_node, decode_pod, decode_csr] {
            let Err(refused) = decode(&both) else {
                panic!("a bad spec and status decoded");
            };
            assert!(refused.message.starts_with("spec"), "{}", refused.message);
        }
    }

    #[test]
    fn times_parse_back_to_the_millisecond() {
        for ms in [0, 1, 999, 86_400_123, 59 * 86_400_000 + 3_723_456] {
            let t = SimTime(ms);
            assert_eq!(parse_time(&micro_timestamp(t)), Some(t), "{ms}");
            assert_eq!(parse_time(&timestamp(t)), Some(SimTime(ms / 1000 * 1000)));
        }
        assert_eq!(parse_time("2025-12-31T23:59:59Z"), Some(SimTime::ZERO));
        assert_eq!(
            parse_time("2026-01-01T00:00:10.1234567Z"),
            Some(SimTime(10_123))
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn a_kubelets_request_names_its_node() {
        assert_eq!(
            requested_node(&request_for("worker-0")).as_deref(),
            Some("worker-0")
        );
    }

    #[test]
    fn a_pod_reads_back_as_written_and_the_worlds_changes_show() {
        let written = json!({
            "spec": {"containers": [{"name": "app", "image": "web", "command": ["serve"]}],
                     "tolerations": [{"operator": "Exists"}]},
        });
        let body = decode_pod(written.as_object().unwrap()).unwrap();
        let fields = encode_pod(&body).unwrap();
        assert_eq!(fields["spec"], written["spec"], "unmodeled fields kept");
        let mut pod = body.typed::<Pod>().unwrap().clone();
        pod.spec.node_name = Some("worker-0".into());
        pod.status.phase = PodPhase::Running;
        let fields = encode_pod(&Body::new(pod)).unwrap();
        assert_eq!(fields["spec"]["nodeName"], "worker-0");
        assert_eq!(fields["spec"]["containers"][0]["command"][0], "serve");
        assert_eq!(fields["status"]["phase"], "Running");
        assert_eq!(fields["status"]["containerStatuses"][0]["name"], "app");
        let back: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": fields["spec"], "status": fields["status"],
        }))
        .unwrap();
        assert_eq!(back.spec.unwrap().node_name.as_deref(), Some("worker-0"));
    }
}
