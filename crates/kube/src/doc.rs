//! The body of a served object as the simulated API server stores it: its JSON, split
//! into spec (every top-level field but `apiVersion`, `kind`, `metadata` and, for a kind
//! with a status subresource, `status`) and status. Written canonically (object keys
//! sorted at every level, whatever serde_json's map keeps), so two bodies are equal
//! exactly when their JSON is, and a write that changes nothing is a no-op at the
//! server (no new resourceVersion, no event), as with the real one.

use crate::managed::ManagedFields;
use reconsim_world::object::{Document, Kind};
use serde::Serialize;
use serde_json::{Map, Value};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Compared and hashed by its canonical text; the parsed fields are kept beside it, so
/// answering a read does not parse the stored text again.
#[derive(Clone, Debug)]
pub struct JsonDoc {
    pub kind: Kind,
    /// Whether status is its own part (the kind has a status subresource).
    pub status_subresource: bool,
    /// The canonical JSON object of the spec part.
    pub spec: String,
    /// The canonical JSON of `status` (a kind with a status subresource; `None`: absent).
    pub status: Option<String>,
    /// The body's fields as parsed from the same JSON (spec's and, if any, status).
    fields: Arc<Map<String, Value>>,
    /// Who owns which field (`metadata.managedFields`): part of the object, so a write
    /// that only hands fields over is a write; not hashed into traces (it follows from
    /// the writes that are).
    managed: Arc<ManagedFields>,
}

impl PartialEq for JsonDoc {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.status_subresource == other.status_subresource
            && self.spec == other.spec
            && self.status == other.status
            && self.managed == other.managed
    }
}

impl Eq for JsonDoc {}

impl Hash for JsonDoc {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.status_subresource.hash(state);
        self.spec.hash(state);
        self.status.hash(state);
    }
}

impl JsonDoc {
    /// The body of `object`'s JSON (the fields outside metadata): split as the kind
    /// says.
    pub fn from_fields(kind: Kind, status_subresource: bool, object: &Map<String, Value>) -> Self {
        let mut spec = Map::new();
        let mut status = None;
        for (k, v) in object {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                "status" if status_subresource => {
                    if !v.is_null() {
                        status = Some(v.clone());
                    }
                }
                _ => {
                    spec.insert(k.clone(), v.clone());
                }
            }
        }
        let spec = Value::Object(spec);
        let text = canonical(&spec);
        let Value::Object(mut fields) = spec else {
            unreachable!("built as an object")
        };
        let status_text = status.as_ref().map(canonical);
        if let Some(s) = status {
            fields.insert("status".into(), s);
        }
        JsonDoc {
            kind,
            status_subresource,
            spec: text,
            status: status_text,
            fields: Arc::new(fields),
            managed: Arc::default(),
        }
    }

    /// Who owns which field.
    pub fn managed(&self) -> &ManagedFields {
        &self.managed
    }

    /// The same body with `managed` as its field ownership.
    pub fn with_managed(mut self, managed: ManagedFields) -> Self {
        self.managed = Arc::new(managed);
        self
    }

    /// The body's fields, to merge into an object's JSON beside its metadata.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The fields again from the texts, after a write replaced a part.
    fn reparse(&mut self) {
        let mut out = match serde_json::from_str(&self.spec) {
            Ok(Value::Object(m)) => m,
            _ => unreachable!("a JsonDoc's spec is a JSON object it wrote"),
        };
        if let Some(s) = &self.status {
            out.insert(
                "status".into(),
                serde_json::from_str(s).expect("a JsonDoc's status is JSON it wrote"),
            );
        }
        self.fields = Arc::new(out);
    }
}

impl Serialize for JsonDoc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields.serialize(s)
    }
}

impl Document for JsonDoc {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn same_spec(&self, other: &Self) -> bool {
        self.spec == other.spec
    }

    fn set_spec_from(&mut self, other: &Self) {
        self.spec = other.spec.clone();
        if !self.status_subresource {
            self.status = other.status.clone();
        }
        self.reparse();
    }

    fn set_status_from(&mut self, other: &Self) -> bool {
        if !self.status_subresource {
            return false;
        }
        self.status = other.status.clone();
        self.reparse();
        true
    }

    fn summary(&self) -> Option<String> {
        let mut s: String = self.spec.chars().take(40).collect();
        if s.len() < self.spec.len() {
            s.push_str("...");
        }
        Some(s)
    }
}

/// `v` as JSON with every object's keys sorted.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).expect("a scalar serializes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"y": [ {"q": 1, "p": 2} ], "x": "s"}});
        assert_eq!(
            canonical(&a),
            r#"{"a":{"x":"s","y":[{"p":2,"q":1}]},"b":1}"#
        );
    }
}
