//! A client's write of a served object, applied at the API server to the object it
//! stores ([`ObjectPatch`]): a replace (PUT), a JSON merge patch (RFC 7386), a strategic
//! merge patch ([`crate::strategic`]), a JSON patch (RFC 6902) or a
//! server-side apply ([`crate::managed`]), of the object or of its status subresource.
//! Every write records who changed which field (managedFields). The patch works on the
//! object's JSON, as the real server does, so any field and any path a client names is
//! patched; what lands is then only what the part written may change:
//! - the object: labels, annotations, finalizers, ownerReferences and the body; the
//!   status too unless the kind has a status subresource;
//! - `/status`: the status alone.
//!
//! A resourceVersion or uid in the result that is not the stored object's is a
//! precondition that failed (409 Conflict), whether a PUT carried it or a patch set it;
//! a JSON patch whose `test` fails is 422 Invalid (kube-runtime's finalizer helper
//! guards its finalizer edits with one).

use crate::doc::JsonDoc;
use crate::kinds::Served;
use crate::list_types::Schema;
use crate::managed::{Conflict, Operation, Reach, Refusal, dotted};
use crate::wire;
use reconsim_world::api::{ApiError, ObjectPatch};
use reconsim_world::object::{Object, ObjectKey};
use serde::Serialize;
use serde_json::Value;

/// Which part of the object a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Part {
    Object,
    Status,
}

/// How the new object is made from the stored one (each as canonical JSON text).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Change {
    Replace(String),
    Merge(String),
    Json(String),
    /// A strategic merge patch of a built-in type ([`crate::strategic`]).
    Strategic(String),
    /// A server-side apply of this config; `force` takes fields other managers own.
    Apply {
        config: String,
        force: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Write {
    pub part: Part,
    pub change: Change,
    pub status_subresource: bool,
    /// The field manager the write is recorded under ([`crate::managed`]).
    pub manager: String,
}

/// A JSON merge patch of the object at `key` (a scenario's action: scale a custom
/// resource), as the REST layer would route it.
pub fn merge(
    served: Served,
    key: reconsim_world::object::ObjectKey,
    patch: &Value,
) -> reconsim_world::api::ApiOp {
    reconsim_world::api::ApiOp::Patch {
        key,
        ops: vec![reconsim_world::api::PatchOp::Object(
            reconsim_world::api::WholePatch::new(Write {
                part: Part::Object,
                change: Change::Merge(crate::doc::canonical(patch)),
                status_subresource: served.status_subresource,
                manager: String::new(),
            }),
        )],
        resource_version: None,
    }
}

/// A JSON patch as kube-apiserver applies it: with evanphx/json-patch, whose `test` of
/// `null` at a missing member of an existing object passes (patch.go, `test`: a nil
/// value against a null operand; its test table: `{"foo": "bar"}` tests `/baz` null
/// true). kube-runtime's finalizer helper relies on it: its first finalizer is added
/// after a test that `/metadata/finalizers` is null, which the server omits when empty.
/// The `json_patch` crate follows RFC 6902 to the letter there, so such a test is
/// settled here and the other operations applied by it, one at a time on the working
/// copy (the caller discards the copy on an error, so the patch stays all or nothing).
fn json_patch_as_the_server_applies(
    doc: &mut Value,
    ops: &json_patch::Patch,
) -> Result<(), ApiError> {
    for op in &ops.0 {
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
        {
            let path = t.path.to_string();
            let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
            if doc.pointer(&path).is_none_or(Value::is_null)
                && doc.pointer(parent).is_some_and(Value::is_object)
            {
                continue;
            }
        }
        json_patch::patch(doc, std::slice::from_ref(op))
            .map_err(|e| invalid(format!("the JSON patch failed: {e}")))?;
    }
    Ok(())
}

/// An apply's conflicts as kube-apiserver words them (fieldmanager's conflict error:
/// `Apply failed with 1 conflict: conflict with "m": .spec.x`, and for a manager's
/// update `conflict with "m" using coordination.k8s.io/v1: .spec.x`).
fn conflicts(c: &[Conflict], api_version: &str) -> String {
    let n: usize = c.iter().map(|c| c.fields.len()).sum();
    let each: Vec<String> = c
        .iter()
        .flat_map(|c| {
            let using = match c.operation {
                Operation::Apply => String::new(),
                Operation::Update => format!(" using {api_version}"),
            };
            c.fields
                .iter()
                .map(move |p| format!("conflict with {:?}{using}: {}", c.manager, dotted(p)))
        })
        .collect();
    format!(
        "Apply failed with {n} conflict{}: {}",
        if n == 1 { "" } else { "s" },
        each.join("\n")
    )
}

fn invalid(why: String) -> ApiError {
    ApiError::Invalid(why)
}

/// An apply's refusal as the server words it: the conflicts (409), or a config the
/// server cannot type (fieldmanager's "failed to create typed patch object", which the
/// real server answers 500; 422 here, as a refused strategic merge patch is).
fn refused(r: Refusal, key: &ObjectKey) -> ApiError {
    match r {
        Refusal::Conflicts(c) => ApiError::ApplyConflict(conflicts(&c, &key.kind.api_version())),
        Refusal::Untyped(errors) => {
            let what = match errors.as_slice() {
                [one] => one.clone(),
                many => format!("errors:\n  {}", many.join("\n  ")),
            };
            let name = if key.namespace.is_empty() {
                key.name.clone()
            } else {
                format!("{}/{}", key.namespace, key.name)
            };
            invalid(format!(
                "failed to create typed patch object ({name}; {}, Kind={}): {what}",
                key.kind.api_version(),
                key.kind.as_str()
            ))
        }
    }
}

impl ObjectPatch for Write {
    fn apply(&self, current: &Object) -> Result<Object, ApiError> {
        let stored = wire::to_json(current)
            .ok_or_else(|| invalid(format!("{} is not served on the wire", current.kind())))?;
        let parse = |text: &str| -> Value {
            serde_json::from_str(text).expect("a Write holds JSON the REST layer parsed")
        };
        let reach = match self.part {
            Part::Object => Reach::Object {
                status_subresource: self.status_subresource,
            },
            Part::Status => Reach::Status,
        };
        let mut managed = crate::managed::of(current);
        let schema = Schema::of(current.kind());
        let mut written = match &self.change {
            Change::Replace(v) => parse(v),
            Change::Merge(p) => {
                let mut doc = stored.clone();
                json_patch::merge(&mut doc, &parse(p));
                doc
            }
            // A patch the real server refuses with 400 or 500 (a malformed directive, a
            // merge list's item without its key) is refused 422 here, with its message.
            Change::Strategic(p) => {
                let mut doc = stored.clone();
                crate::strategic::apply(&mut doc, &parse(p), &schema)
                    .map_err(|r| invalid(r.message))?;
                doc
            }
            Change::Json(ops) => {
                let ops: json_patch::Patch = serde_json::from_value(parse(ops))
                    .map_err(|e| invalid(format!("a JSON patch: {e}")))?;
                let mut doc = stored.clone();
                json_patch_as_the_server_applies(&mut doc, &ops)?;
                doc
            }
            Change::Apply { config, force } => managed
                .apply(
                    &self.manager,
                    &stored,
                    &parse(config),
                    *force,
                    reach,
                    &schema,
                )
                .map_err(|r| refused(r, &current.key()))?,
        };
        // A custom resource's schema prunes, defaults and validates what the write left
        // (semantics 4.17).
        if let Some(schema) = crate::schema::of(current.kind()) {
            crate::schema::admit(
                &mut written,
                &schema,
                Some(&stored),
                current.kind(),
                &current.meta.name,
            )
            .map_err(invalid)?;
        }
        if !matches!(self.change, Change::Apply { .. }) {
            managed.update(&self.manager, &stored, &written, reach, &schema);
        }
        let meta = &written["metadata"];
        let same = |field: &str| match meta[field].as_str() {
            None | Some("") => true,
            Some(v) => Some(v) == stored["metadata"][field].as_str(),
        };
        if !same("resourceVersion") || !same("uid") {
            return Err(ApiError::Conflict);
        }
        let served = Served {
            kind: current.kind(),
            status_subresource: self.status_subresource,
            strategic_merge: false,
        };
        let parsed = wire::from_json(&written, served, &current.meta.namespace)
            .map_err(|r| invalid(r.message))?;
        let mut next = current.clone();
        match self.part {
            Part::Object => {
                let m = parsed.object.meta;
                next.meta.labels = m.labels;
                next.meta.annotations = m.annotations;
                next.meta.finalizers = m.finalizers;
                next.meta.owner_references = m.owner_references;
                next.body.set_spec_from(&parsed.object.body);
            }
            Part::Status => {
                if !next.body.set_status_from(&parsed.object.body) {
                    return Err(invalid(format!(
                        "{} has no status subresource",
                        current.kind()
                    )));
                }
            }
        }
        crate::managed::set(&mut next, managed);
        // A world kind keeps the text a client wrote beside its modeled fields: a write
        // that reads back as the stored JSON, with the same owners, changed nothing,
        // whatever text it sent (the echo of a read the world had written over).
        if next.body.as_document::<JsonDoc>().is_none()
            && next.meta.managed_fields == current.meta.managed_fields
            && wire::to_json(&next).as_ref() == Some(&stored)
        {
            return Ok(current.clone());
        }
        Ok(next)
    }

    /// A server-side apply of an object that does not exist creates it, from its config
    /// alone, its manager owning every field it names (apiserver `patch.go`: an apply
    /// patch's `createOnUpdate`; docs/semantics.md 4.9). An apply of `/status` does not.
    fn create(&self, key: &ObjectKey) -> Option<Result<Object, ApiError>> {
        let (Change::Apply { config, force }, Part::Object) = (&self.change, self.part) else {
            return None;
        };
        let config: Value =
            serde_json::from_str(config).expect("a Write holds JSON the REST layer parsed");
        let reach = Reach::Object {
            status_subresource: self.status_subresource,
        };
        let mut managed = crate::managed::ManagedFields::default();
        let empty = Value::Object(Default::default());
        let made = managed
            .apply(
                &self.manager,
                &empty,
                &config,
                *force,
                reach,
                &Schema::of(key.kind),
            )
            .map_err(|r| refused(r, key));
        Some(made.and_then(|mut doc| {
            doc["metadata"]["name"] = Value::String(key.name.clone());
            // A custom resource is the kind with a CRD schema (`Kinds::crd`).
            let schema = crate::schema::of(key.kind);
            let served = Served {
                kind: key.kind,
                status_subresource: self.status_subresource,
                strategic_merge: schema.is_none(),
            };
            served.prepare_for_create(&mut doc);
            if let Some(schema) = schema {
                crate::schema::admit(&mut doc, &schema, None, key.kind, &key.name)
                    .map_err(invalid)?;
            }
            let mut object = wire::from_json(&doc, served, &key.namespace)
                .map_err(|r| invalid(r.message))?
                .object;
            crate::managed::set(&mut object, managed);
            Ok(object)
        }))
    }

    fn summary(&self) -> String {
        let (how, text) = match &self.change {
            Change::Replace(t) => ("replace", t),
            Change::Merge(t) => ("merge", t),
            Change::Json(t) => ("json-patch", t),
            Change::Strategic(t) => ("strategic", t),
            Change::Apply { config, .. } => ("apply", config),
        };
        let part = match self.part {
            Part::Object => "",
            Part::Status => " status",
        };
        let short: String = text.chars().take(40).collect();
        format!("{how}{part} {short}")
    }
}
