//! A served object between the world and the wire: its JSON as the API server writes it
//! (metadata from the world's [`ObjectMeta`], the body from its [`JsonDoc`]), and the
//! world object a client's JSON asks for. Only what a client may write is read from the
//! wire: name, generateName, labels, annotations, finalizers, ownerReferences, and the
//! resourceVersion and uid it holds as preconditions; the server owns the rest.

use crate::doc::JsonDoc;
use crate::kinds::{self, Served};
use reconsim_sim::SimTime;
use reconsim_world::object::{Body, Kind, Object, ObjectMeta, OwnerReference, Uid};
use serde_json::{Map, Value, json};
use std::fmt;

/// A client's object that the server cannot take: the status code and the message.
#[derive(Debug)]
pub struct Rejected {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

pub fn rejected(code: u16, reason: &'static str, message: String) -> Rejected {
    Rejected {
        code,
        reason,
        message,
    }
}

/// A uid as Kubernetes writes one (a UUID), from the world's counter.
pub fn uid_text(u: Uid) -> String {
    UidText(u).to_string()
}

/// [`uid_text`] as `Display`, written without a `String` (every object's text has one).
pub(crate) struct UidText(pub Uid);

impl fmt::Display for UidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self.0.0;
        if u >= 1 << 48 {
            // More than the 12 digits: a uid this server did not write (`parse_uid`).
            return write!(f, "00000000-0000-4000-8000-{u:012x}");
        }
        let mut text = *b"00000000-0000-4000-8000-000000000000";
        for (i, b) in text[24..].iter_mut().enumerate() {
            let digit = (u >> (4 * (11 - i))) & 0xf;
            *b = b"0123456789abcdef"[digit as usize];
        }
        f.write_str(std::str::from_utf8(&text).expect("ASCII"))
    }
}

/// The world uid of a uid on the wire. One this server did not write (a test's own
/// owner reference) gets a uid no object has, with the top bit set, so it dangles.
pub fn parse_uid(s: &str) -> Uid {
    s.strip_prefix("00000000-0000-4000-8000-")
        .filter(|t| t.len() == 12)
        .and_then(|t| u64::from_str_radix(t, 16).ok())
        .map_or_else(
            || Uid(reconsim_sim::StableHasher::hash_one(&s) | 1 << 63),
            Uid,
        )
}

/// The wall-clock instant a run's time 0 stands for (metav1.Time: RFC 3339, seconds).
pub const EPOCH_DAYS: i64 = 20_454; // 2026-01-01

/// Virtual time as an RFC 3339 timestamp (whole seconds, as metav1.Time writes).
pub fn timestamp(t: SimTime) -> String {
    Timestamp(t).to_string()
}

/// [`timestamp`] as `Display`, written without a `String` (every object's text has one).
pub(crate) struct Timestamp(pub SimTime);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d, rem) = civil(self.0);
        let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
        if !(0..=9999).contains(&y) {
            return write!(f, "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z");
        }
        let mut text = *b"0000-00-00T00:00:00Z";
        let digits = |text: &mut [u8; 20], at: usize, width: u32, v: i64| {
            for i in 0..width as usize {
                let place = 10_i64.pow(width - 1 - i as u32);
                text[at + i] = b'0' + (v / place % 10) as u8;
            }
        };
        digits(&mut text, 0, 4, y);
        digits(&mut text, 5, 2, m);
        digits(&mut text, 8, 2, d);
        digits(&mut text, 11, 2, hh);
        digits(&mut text, 14, 2, mm);
        digits(&mut text, 17, 2, ss);
        f.write_str(std::str::from_utf8(&text).expect("ASCII"))
    }
}

/// The civil date of a virtual time, and its seconds into the day.
fn civil(t: SimTime) -> (i64, i64, i64, i64) {
    let secs = (t.as_ms() / 1000) as i64;
    let days = EPOCH_DAYS + secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's days_from_civil, inverted).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem)
}

/// Whether the API server keeps `metadata.generation` for `kind`: a custom resource's
/// strategy sets it, and so do the built-in kinds with a spec a controller acts on
/// (apps, batch, ReplicationController, and Pod since KEP-5067), but not ConfigMap,
/// Secret, Service, Node, Namespace, Lease, Event or CertificateSigningRequest, whose
/// registry strategies never set it, so the real server's JSON has none
/// (docs/semantics.md 4.14).
pub(crate) fn has_generation(kind: Kind) -> bool {
    match kind.group() {
        "" => matches!(kind.as_str(), "Pod" | "ReplicationController"),
        "coordination.k8s.io" | "certificates.k8s.io" | "events.k8s.io" => false,
        _ => true,
    }
}

fn metadata(meta: &ObjectMeta, kind: Kind) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(meta.name));
    if !meta.namespace.is_empty() {
        m.insert("namespace".into(), json!(meta.namespace));
    }
    if let Some(g) = &meta.generate_name {
        m.insert("generateName".into(), json!(g));
    }
    m.insert("uid".into(), json!(uid_text(meta.uid)));
    m.insert(
        "resourceVersion".into(),
        json!(meta.resource_version.to_string()),
    );
    if has_generation(kind) {
        m.insert("generation".into(), json!(meta.generation));
    }
    m.insert(
        "creationTimestamp".into(),
        json!(timestamp(meta.creation_timestamp)),
    );
    if let Some(t) = meta.deletion_timestamp {
        m.insert("deletionTimestamp".into(), json!(timestamp(t)));
    }
    if let Some(s) = meta.deletion_grace_period_seconds {
        m.insert("deletionGracePeriodSeconds".into(), json!(s));
    }
    if !meta.labels.is_empty() {
        m.insert("labels".into(), json!(meta.labels));
    }
    if !meta.annotations.is_empty() {
        m.insert("annotations".into(), json!(meta.annotations));
    }
    if !meta.finalizers.is_empty() {
        m.insert("finalizers".into(), json!(meta.finalizers));
    }
    if !meta.owner_references.is_empty() {
        let refs: Vec<Value> = meta
            .owner_references
            .iter()
            .map(|r| {
                let mut v = json!({
                    "apiVersion": r.kind.api_version(),
                    "kind": r.kind.as_str(),
                    "name": r.name,
                    "uid": uid_text(r.uid),
                });
                // Each as written: absent when unset (`*bool`, omitempty).
                if let Some(c) = r.controller {
                    v["controller"] = json!(c);
                }
                if let Some(b) = r.block_owner_deletion {
                    v["blockOwnerDeletion"] = json!(b);
                }
                v
            })
            .collect();
        m.insert("ownerReferences".into(), Value::Array(refs));
    }
    Value::Object(m)
}

/// The JSON of a stored object: a served document's, or a world kind's as its codec
/// writes it ([`crate::world_kinds`]); `None` for a family's typed kind, which the wire
/// does not serve.
pub fn to_json(o: &Object) -> Option<Value> {
    let kind = o.kind();
    let mut m = Map::new();
    m.insert("apiVersion".into(), json!(kind.api_version()));
    m.insert("kind".into(), json!(kind.as_str()));
    m.insert("metadata".into(), metadata(&o.meta, o.kind()));
    match o.body.as_document::<JsonDoc>() {
        Some(doc) => m.extend(doc.fields().iter().map(|(k, v)| (k.clone(), v.clone()))),
        None => m.extend((crate::world_kinds::codec(kind)?.encode)(&o.body)?),
    }
    if kind.group().is_empty() && kind.as_str() == "Namespace" {
        namespace_face(&mut m, o.meta.is_deleting());
    }
    Some(Value::Object(m))
}

/// What the namespace strategy keeps of a Namespace whatever a client wrote
/// (registry/core/namespace/strategy.go, `PrepareForCreate`, `PrepareForUpdate`): the
/// `kubernetes` finalizer in its spec, which holds it while the namespace controller
/// deletes its content, and its phase, `Terminating` once deleted (docs/semantics.md
/// 4.13).
fn namespace_face(m: &mut Map<String, Value>, deleting: bool) {
    let spec = m.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == "kubernetes")
        {
            list.push(json!("kubernetes"));
        }
    }
    let phase = if deleting { "Terminating" } else { "Active" };
    let status = m.entry("status").or_insert_with(|| json!({}));
    if let Some(status) = status.as_object_mut() {
        status.insert("phase".into(), json!(phase));
    }
}

/// A stored object as the kube-rs type `K` (what a checker reads of a served kind);
/// `None` for another kind or JSON that is not a `K`.
pub fn decode<K: serde::de::DeserializeOwned>(o: &Object) -> Option<K> {
    serde_json::from_value(to_json(o)?).ok()
}

fn strings(v: Option<&Value>, path: &str) -> Result<Vec<(String, String)>, Rejected> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(rejected(
                    422,
                    "Invalid",
                    format!("{path}.{k}: expected a string"),
                )),
            })
            .collect(),
        Some(_) => Err(rejected(
            422,
            "Invalid",
            format!("{path}: expected an object of strings"),
        )),
    }
}

fn string(v: Option<&Value>, path: &str) -> Result<Option<String>, Rejected> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(rejected(
            422,
            "Invalid",
            format!("{path}: expected a string"),
        )),
    }
}

/// What a client's JSON says of an object: the world object (server-owned metadata
/// empty), and the resourceVersion and uid it carries as preconditions.
pub struct Parsed {
    pub object: Object,
    pub resource_version: Option<u64>,
    pub uid: Option<Uid>,
}

/// The world object a client's JSON `v` of the served kind `served` in `namespace` asks
/// for.
pub fn from_json(v: &Value, served: Served, namespace: &str) -> Result<Parsed, Rejected> {
    let Value::Object(top) = v else {
        return Err(rejected(
            400,
            "BadRequest",
            format!("a {}'s JSON is an object", served.kind),
        ));
    };
    let empty = Map::new();
    let meta = match top.get("metadata") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(rejected(
                422,
                "Invalid",
                "metadata: expected an object".into(),
            ));
        }
    };
    let resource_version = match string(meta.get("resourceVersion"), "metadata.resourceVersion")? {
        None => None,
        Some(s) if s.is_empty() => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            rejected(
                422,
                "Invalid",
                format!("metadata.resourceVersion: {s:?} is not one this server wrote"),
            )
        })?),
    };
    let uid = string(meta.get("uid"), "metadata.uid")?
        .filter(|s| !s.is_empty())
        .map(|s| parse_uid(&s));
    let finalizers = match meta.get("finalizers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|f| {
                f.as_str().map(str::to_string).ok_or_else(|| {
                    rejected(
                        422,
                        "Invalid",
                        "metadata.finalizers: expected strings".into(),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(rejected(
                422,
                "Invalid",
                "metadata.finalizers: expected an array".into(),
            ));
        }
    };
    let owner_references = match meta.get("ownerReferences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, r)| owner_reference(r, i))
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(rejected(
                422,
                "Invalid",
                "metadata.ownerReferences: expected an array".into(),
            ));
        }
    };
    if owner_references
        .iter()
        .filter(|r: &&OwnerReference| r.is_controller())
        .count()
        > 1
    {
        return Err(rejected(
            422,
            "Invalid",
            "metadata.ownerReferences: only one reference can have controller set to true".into(),
        ));
    }
    let object_meta = ObjectMeta {
        name: string(meta.get("name"), "metadata.name")?.unwrap_or_default(),
        namespace: namespace.to_string(),
        generate_name: string(meta.get("generateName"), "metadata.generateName")?,
        labels: strings(meta.get("labels"), "metadata.labels")?
            .into_iter()
            .collect(),
        annotations: strings(meta.get("annotations"), "metadata.annotations")?
            .into_iter()
            .collect(),
        finalizers,
        owner_references,
        resource_version: resource_version.unwrap_or(0),
        ..Default::default()
    };
    let body = match crate::world_kinds::codec(served.kind) {
        Some(codec) => (codec.decode)(top)?,
        None => Body::document(JsonDoc::from_fields(
            served.kind,
            served.status_subresource,
            top,
        )),
    };
    Ok(Parsed {
        object: Object::new(object_meta, body),
        resource_version,
        uid,
    })
}

fn owner_reference(r: &Value, i: usize) -> Result<OwnerReference, Rejected> {
    let at = |f: &str| format!("metadata.ownerReferences[{i}].{f}");
    let need = |f: &str| -> Result<String, Rejected> {
        string(r.get(f), &at(f))?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| rejected(422, "Invalid", format!("{}: required", at(f))))
    };
    let api_version = need("apiVersion")?;
    let (group, version) = api_version
        .split_once('/')
        .unwrap_or(("", api_version.as_str()));
    let kind = need("kind")?;
    Ok(OwnerReference {
        // The owner's kind as the wire names it; served or not, its uid is what counts.
        kind: kinds::intern(group, version, &kind, "", true),
        name: need("name")?,
        uid: parse_uid(&need("uid")?),
        // Unset stays unset: the reference reads back as it was sent.
        controller: r.get("controller").and_then(Value::as_bool),
        block_owner_deletion: r.get("blockOwnerDeletion").and_then(Value::as_bool),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts written digit by digit are the formatted ones, to the last case.
    #[test]
    fn timestamps_and_uids_are_their_formatted_texts() {
        let formatted = |t: SimTime| {
            let (y, m, d, rem) = civil(t);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            )
        };
        let mut ms = 0_u64;
        while ms < 400 * 365 * 86_400_000 {
            assert_eq!(timestamp(SimTime(ms)), formatted(SimTime(ms)), "{ms}");
            ms = ms * 3 / 2 + 999_999;
        }
        for ms in [u64::MAX, u64::MAX / 1000, 7_975 * 365 * 86_400_000] {
            assert_eq!(timestamp(SimTime(ms)), formatted(SimTime(ms)), "{ms}");
        }
        let mut u = 0_u64;
        for _ in 0..200 {
            assert_eq!(
                uid_text(Uid(u)),
                format!("00000000-0000-4000-8000-{u:012x}"),
                "{u}"
            );
            u = u * 5 / 3 + 7;
        }
        for u in [(1 << 48) - 1, 1 << 48, u64::MAX, 1 << 63 | 12_345] {
            assert_eq!(
                uid_text(Uid(u)),
                format!("00000000-0000-4000-8000-{u:012x}")
            );
        }
    }

    #[test]
    fn timestamps_are_rfc3339_from_the_runs_epoch() {
        assert_eq!(timestamp(SimTime::ZERO), "2026-01-01T00:00:00Z");
        assert_eq!(
            timestamp(SimTime::from_secs(86_400 * 59 + 3_723)),
            "2026-03-01T01:02:03Z"
        );
    }

    #[test]
    fn uids_round_trip_and_foreign_ones_dangle() {
        assert_eq!(parse_uid(&uid_text(Uid(42))), Uid(42));
        assert!(parse_uid("d5d0f7a6-0000-0000-0000-000000000000").0 >= 1 << 63);
    }
}
