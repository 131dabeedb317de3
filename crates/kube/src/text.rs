//! A stored object's JSON text, written straight from the object: byte for byte what
//! serializing [`wire::to_json`]'s `Value` writes (serde_json's map writes its keys in
//! sorted order, so these views do too), without building that tree and copying every
//! field into it first. Every answer and watch event the bridge sends is one of these;
//! building the tree was 8-12 % of a real-code example's time (docs/PERFORMANCE.md).

use crate::doc::JsonDoc;
use crate::wire::{self, Timestamp, UidText, has_generation};
use reconsim_world::object::{ApiVersion, Kind, Object, ObjectMeta, OwnerReference};
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::fmt;

/// Append the JSON text of `o` to `out`; `None` (nothing written) when the wire does not
/// serve its kind, as [`wire::to_json`].
pub fn write_object(o: &Object, out: &mut Vec<u8>) -> Option<()> {
    match o.body.as_document::<JsonDoc>() {
        // A Namespace's face adds to its fields (`wire::namespace_face`): through the tree.
        Some(doc) if !is_namespace(o.kind()) => {
            serde_json::to_writer(&mut *out, &ObjectText { o, doc }).expect("JSON text writes");
        }
        _ => serde_json::to_writer(&mut *out, &wire::to_json(o)?).expect("JSON values write"),
    }
    Some(())
}

/// The JSON text of `o` alone.
pub fn object(o: &Object) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    write_object(o, &mut out)?;
    Some(out)
}

fn is_namespace(kind: Kind) -> bool {
    kind.group().is_empty() && kind.as_str() == "Namespace"
}

/// A served document's object: `apiVersion`, `kind` and `metadata` merged in key order
/// with the document's own fields, a field of the document winning a key of both (as
/// `Map::extend` does in `to_json`).
struct ObjectText<'a> {
    o: &'a Object,
    doc: &'a JsonDoc,
}

enum Fixed<'a> {
    ApiVersion(Kind),
    Str(&'a str),
    Meta(&'a ObjectMeta, Kind),
}

impl Serialize for Fixed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Fixed::ApiVersion(kind) => Shown(ApiVersion(*kind)).serialize(s),
            Fixed::Str(v) => s.serialize_str(v),
            Fixed::Meta(meta, kind) => MetaText { meta, kind: *kind }.serialize(s),
        }
    }
}

/// A value written as a JSON string through its `Display`: serde_json writes it
/// straight into the text (`collect_str`), with no `String` made for each timestamp,
/// uid and resourceVersion of every object (issue 33).
struct Shown<T>(T);

impl<T: fmt::Display> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl Serialize for ObjectText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kind = self.o.kind();
        // In key order: "apiVersion" < "kind" < "metadata".
        let fixed = [
            ("apiVersion", Fixed::ApiVersion(kind)),
            ("kind", Fixed::Str(kind.as_str())),
            ("metadata", Fixed::Meta(&self.o.meta, kind)),
        ];
        let mut fixed = fixed.iter().peekable();
        let mut fields = self.doc.fields().iter().peekable();
        let mut map = s.serialize_map(None)?;
        loop {
            match (fixed.peek(), fields.peek()) {
                (Some((fk, fv)), Some((k, v))) => match (*fk).cmp(k.as_str()) {
                    std::cmp::Ordering::Less => {
                        map.serialize_entry(fk, fv)?;
                        fixed.next();
                    }
                    std::cmp::Ordering::Equal => {
                        map.serialize_entry(k, v)?;
                        fixed.next();
                        fields.next();
                    }
                    std::cmp::Ordering::Greater => {
                        map.serialize_entry(k, v)?;
                        fields.next();
                    }
                },
                (Some((fk, fv)), None) => {
                    map.serialize_entry(fk, fv)?;
                    fixed.next();
                }
                (None, Some((k, v))) => {
                    map.serialize_entry(k, v)?;
                    fields.next();
                }
                (None, None) => break,
            }
        }
        map.end()
    }
}

/// `metadata`, its keys in order (as `wire::metadata` builds it).
struct MetaText<'a> {
    meta: &'a ObjectMeta,
    kind: Kind,
}

impl Serialize for MetaText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.meta;
        let mut map = s.serialize_map(None)?;
        if !m.annotations.is_empty() {
            map.serialize_entry("annotations", &m.annotations)?;
        }
        map.serialize_entry("creationTimestamp", &Shown(Timestamp(m.creation_timestamp)))?;
        if let Some(secs) = m.deletion_grace_period_seconds {
            map.serialize_entry("deletionGracePeriodSeconds", &secs)?;
        }
        if let Some(t) = m.deletion_timestamp {
            map.serialize_entry("deletionTimestamp", &Shown(Timestamp(t)))?;
        }
        if !m.finalizers.is_empty() {
            map.serialize_entry("finalizers", &m.finalizers)?;
        }
        if let Some(g) = &m.generate_name {
            map.serialize_entry("generateName", g)?;
        }
        if has_generation(self.kind) {
            map.serialize_entry("generation", &m.generation)?;
        }
        if !m.labels.is_empty() {
            map.serialize_entry("labels", &m.labels)?;
        }
        map.serialize_entry("name", &m.name)?;
        if !m.namespace.is_empty() {
            map.serialize_entry("namespace", &m.namespace)?;
        }
        if !m.owner_references.is_empty() {
            map.serialize_entry("ownerReferences", &OwnersText(&m.owner_references))?;
        }
        map.serialize_entry("resourceVersion", &Shown(m.resource_version))?;
        map.serialize_entry("uid", &Shown(UidText(m.uid)))?;
        map.end()
    }
}

/// The owner references, written one by one (no vector of views per object).
struct OwnersText<'a>(&'a [OwnerReference]);

impl Serialize for OwnersText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(OwnerText))
    }
}

/// An owner reference, its keys in order.
struct OwnerText<'a>(&'a OwnerReference);

impl Serialize for OwnerText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("apiVersion", &Shown(ApiVersion(r.kind)))?;
        if let Some(b) = r.block_owner_deletion {
            map.serialize_entry("blockOwnerDeletion", &b)?;
        }
        if let Some(c) = r.controller {
            map.serialize_entry("controller", &c)?;
        }
        map.serialize_entry("kind", r.kind.as_str())?;
        map.serialize_entry("name", &r.name)?;
        map.serialize_entry("uid", &Shown(UidText(r.uid)))?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::{self, Shape};
    use crate::selector::Selector;
    use proptest::prelude::*;
    use reconsim_sim::SimTime;
    use reconsim_world::api::{ApiError, ApiOk};
    use reconsim_world::object::{Body, Uid};
    use serde_json::{Map, Value, json};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Strings with what JSON escapes: quotes, backslashes, control and non-ASCII.
    fn text() -> impl Strategy<Value = String> {
        prop::string::string_regex("[a-z0-9./\"\\\\\\n\u{1}é✓-]{0,12}").expect("a regex")
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            text().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(text(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn owner() -> impl Strategy<Value = OwnerReference> {
        (
            text(),
            any::<u64>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            any::<bool>(),
        )
            .prop_map(|(name, uid, controller, block, core)| OwnerReference {
                kind: if core {
                    crate::kinds::intern("", "v1", "ConfigMap", "configmaps", true)
                } else {
                    crate::kinds::intern("example.dev", "v1", "Thing", "things", true)
                },
                name,
                uid: Uid(uid >> 16),
                controller,
                block_owner_deletion: block,
            })
    }

    prop_compose! {
        fn any_object()(
            kind_index in 0..4usize,
            status_subresource in any::<bool>(),
            name in text(),
            namespace in prop_oneof![Just(String::new()), text()],
            generate_name in prop::option::of(text()),
            uid in any::<u64>(),
            resource_version in any::<u64>(),
            generation in any::<u64>(),
            created_ms in 0..u64::from(u32::MAX),
            deleted_ms in prop::option::of(0..u64::from(u32::MAX)),
            grace in prop::option::of(any::<u64>()),
            finalizers in prop::collection::vec(text(), 0..3),
            owners in prop::collection::vec(owner(), 0..3),
            labels in prop::collection::btree_map(text(), text(), 0..4),
            annotations in prop::collection::btree_map(text(), text(), 0..3),
            fields in prop::collection::btree_map(
                prop_oneof![
                    Just("data".to_string()),
                    Just("spec".to_string()),
                    Just("status".to_string()),
                    Just("items".to_string()),
                    Just("binaryData".to_string()),
                    Just("zeta".to_string()),
                    Just("Apple".to_string()),
                    text(),
                ],
                json_value(),
                0..5,
            ),
        ) -> Object {
            let kind = [
                crate::kinds::intern("", "v1", "ConfigMap", "configmaps", true),
                crate::kinds::intern("", "v1", "Pod", "pods", true),
                crate::kinds::intern("coordination.k8s.io", "v1", "Lease", "leases", true),
                crate::kinds::intern("example.dev", "v1alpha1", "Thing", "things", false),
            ][kind_index];
            let meta = ObjectMeta {
                name,
                namespace,
                generate_name,
                uid: Uid(uid >> 16),
                resource_version,
                generation,
                creation_timestamp: SimTime::from_ms(created_ms),
                deletion_timestamp: deleted_ms.map(SimTime::from_ms),
                deletion_grace_period_seconds: grace,
                finalizers,
                owner_references: owners,
                labels,
                annotations,
                ..Default::default()
            };
            let fields: Map<String, Value> = fields.into_iter().collect();
            Object::new(meta, Body::document(JsonDoc::from_fields(kind, status_subresource, &fields)))
        }
    }

    fn through_the_tree(o: &Object) -> Vec<u8> {
        serde_json::to_vec(&wire::to_json(o).expect("served")).expect("JSON values serialize")
    }

    proptest! {
        /// The text is byte for byte the serialized tree, for any metadata and fields.
        #[test]
        fn an_objects_text_is_its_trees(o in any_object()) {
            prop_assert_eq!(
                String::from_utf8(object(&o).expect("served")).expect("UTF-8"),
                String::from_utf8(through_the_tree(&o)).expect("UTF-8")
            );
        }

        /// A list's answer and a watch event's line, likewise.
        #[test]
        fn a_lists_text_and_an_events_line_are_the_trees(
            items in prop::collection::vec(any_object(), 0..4),
            resource_version in any::<u64>(),
        ) {
            let kind = crate::kinds::intern("", "v1", "ConfigMap", "configmaps", true);
            let shape = Shape::List {
                kind,
                selector: Selector::default(),
                page: Default::default(),
            };
            let result: Result<ApiOk, ApiError> = Ok(ApiOk::List {
                items: items.iter().cloned().map(Arc::new).collect(),
                resource_version,
            });
            let (status, tree) = rest::answer(&result, &shape);
            let (text_status, text) = rest::answer_text(&result, &shape);
            prop_assert_eq!(status, text_status);
            prop_assert_eq!(
                String::from_utf8(text).expect("UTF-8"),
                serde_json::to_string(&tree).expect("JSON values serialize")
            );
            for o in &items {
                let ev = reconsim_world::api::WatchEvent {
                    watch_id: 1,
                    seq: 1,
                    event: reconsim_world::api::EventType::Added,
                    object: Arc::new(o.clone()),
                    prev: None,
                };
                let line = rest::event_line(&ev, None, &Selector::default()).expect("a line");
                let mut tree = serde_json::to_vec(
                    &json!({"type": "ADDED", "object": wire::to_json(o).expect("served")}),
                )
                .expect("JSON values serialize");
                tree.push(b'\n');
                prop_assert_eq!(String::from_utf8(line).expect("UTF-8"), String::from_utf8(tree).expect("UTF-8"));
            }
        }
    }

    #[test]
    fn a_namespace_keeps_its_face() {
        let kind = crate::kinds::intern("", "v1", "Namespace", "namespaces", false);
        let meta = ObjectMeta {
            name: "team".into(),
            labels: BTreeMap::from([("a".into(), "b".into())]),
            ..Default::default()
        };
        let o = Object::new(
            meta,
            Body::document(JsonDoc::from_fields(kind, true, &Map::new())),
        );
        let text = String::from_utf8(object(&o).expect("served")).expect("UTF-8");
        assert_eq!(
            text,
            String::from_utf8(through_the_tree(&o)).expect("UTF-8")
        );
        assert!(text.contains("\"finalizers\":[\"kubernetes\"]"), "{text}");
    }
}
