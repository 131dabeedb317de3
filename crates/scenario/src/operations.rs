//! User operations generated from a kind's schema: what users do to a custom resource
//! besides waiting (Acto, SOSP'23: spec changes within the schema, deletes and
//! re-creates, label edits, rollbacks; Oat, NSDI'26: misoperations), drawn by the seed
//! or placed at a reference run's events by search, as faults are.
//!
//! A scenario's `operation` fault generator names a `controllers.custom` entry whose
//! controller reads manifests (a kube-rs program's `Kinds`): its targets are the objects
//! that entry seeds (all whose kind has a schema, or those it lists). At load, each
//! target's schema is read once into [`Space`]: the fields under `spec` an operation
//! may set, each with its values (an integer's `minimum`..`maximum`, a boolean, a
//! string's `enum`) and its declared value (the seed manifest's, else the schema's
//! `default`). A drawn operation is plain data ([`Operation`]), saved in failure files,
//! shrunk and explained like any fault; the user's client sends its requests when the
//! fault starts and its undo's when it ends ([`reconsim_world::script::Played`]).
//!
//! The oracles are the scenario's own: its invariants at every step, and its
//! convergence check once the last operation and fault are over, which is Acto's
//! consistency oracle (the controller's desired state for the spec the object ends with)
//! and, after a rollback, its rollback oracle (the state of the declared spec again).
//! The differential oracle does not judge a plan with an operation ([`in_plan`]).

use crate::extension::{CustomSection, Manifests};
use crate::faults::Choose;
use reconsim_family::{ParamError, Range};
use reconsim_world::api::ApiOp;
use reconsim_world::fault::{Operation, OperationAction};
use reconsim_world::object::ObjectKey;
use reconsim_world::script::Played;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt;
use std::sync::Arc;

/// Whether `plan` holds a user operation. Such a plan's end state differs from an
/// operation-free run's by design (the user changed what is desired), so the
/// differential oracle does not judge it; its invariants and convergence do.
pub fn in_plan(plan: &crate::format::Plan) -> bool {
    plan.faults
        .iter()
        .any(|f| reconsim_world::fault::is_operation(&f.fault))
}

/// The label a `label` operation adds and then removes.
pub const LABEL_KEY: &str = "operations.reconsim.dev/edited";
/// An integer field with no `maximum` is drawn up to this much above its lowest value.
pub const INT_SPAN: u64 = 8;
/// At most this many fields of one object are drawn from (the first by path).
pub const FIELDS_MAX: usize = 64;

/// What an `operation` generator may do (`operations` in the file; absent: all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationChoice {
    /// Set a field to a value of its schema, for good.
    Set,
    /// Set a field, then set it back to its declared value when the fault ends.
    Rollback,
    /// Two clients set one field at once, to two values.
    Concurrent,
    /// Delete the object.
    Delete,
    /// Delete the object, and create it again (same name, declared manifest) at the end.
    Recreate,
    /// Add a label, and remove it at the end.
    Label,
}

impl OperationChoice {
    pub const ALL: [OperationChoice; 6] = [
        OperationChoice::Set,
        OperationChoice::Rollback,
        OperationChoice::Concurrent,
        OperationChoice::Delete,
        OperationChoice::Recreate,
        OperationChoice::Label,
    ];

    /// Whether it acts on a field (one template per field).
    fn per_field(self) -> bool {
        matches!(
            self,
            OperationChoice::Set | OperationChoice::Rollback | OperationChoice::Concurrent
        )
    }

    /// The generator's list, or every choice for an empty one.
    pub fn or_all(choices: &[OperationChoice]) -> &[OperationChoice] {
        if choices.is_empty() {
            &OperationChoice::ALL
        } else {
            choices
        }
    }
}

/// The objects a generator acts on and what each one's schema allows, read at load.
/// Not part of the file (`#[serde(skip)]`): made again from it whenever it is loaded.
#[derive(Clone, Default)]
pub struct Space {
    targets: Arc<Vec<Target>>,
    /// A generator of a family's workload action instead: its JSON and its request.
    action: Option<Arc<(String, ApiOp)>>,
}

/// Two spaces are equal when their targets are: the same objects, fields and values
/// (the manifests reader is the controller's, which the generator names).
impl PartialEq for Space {
    fn eq(&self, other: &Space) -> bool {
        self.action.as_ref().map(|a| &a.0) == other.action.as_ref().map(|a| &a.0)
            && (Arc::ptr_eq(&self.targets, &other.targets)
                || (self.targets.len() == other.targets.len()
                    && self
                        .targets
                        .iter()
                        .zip(other.targets.iter())
                        .all(|(a, b)| a.object == b.object && a.fields == b.fields)))
    }
}

impl Eq for Space {}

impl fmt::Debug for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.action {
            Some(a) => f.write_str(&a.0),
            None => f
                .debug_list()
                .entries(self.targets.iter().map(|t| &t.object))
                .finish(),
        }
    }
}

#[derive(Clone)]
struct Target {
    /// `ConfigSet default/web`: how operations name it.
    object: String,
    key: ObjectKey,
    /// Its seed manifest: what a re-create creates.
    manifest: Value,
    fields: Vec<Field>,
    reader: Arc<dyn Manifests>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Field {
    /// Dotted: `spec.replicas`.
    path: String,
    values: Values,
    /// The manifest's value, else the schema's default, else `null` (unset).
    declared: Value,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Values {
    Int { lo: u64, hi: u64 },
    Bool,
    Enum(Vec<Value>),
}

impl Values {
    fn draw(&self, c: &mut impl Choose) -> Value {
        match self {
            Values::Int { lo, hi } => Value::from(c.draw(Range { lo: *lo, hi: *hi })),
            Values::Bool => Value::Bool(c.draw(Range { lo: 0, hi: 1 }) == 1),
            Values::Enum(vs) => {
                let i = c.draw(Range {
                    lo: 0,
                    hi: vs.len().saturating_sub(1) as u64,
                });
                vs[(i as usize).min(vs.len() - 1)].clone()
            }
        }
    }

    fn admits(&self, v: &Value) -> bool {
        match self {
            Values::Int { lo, hi } => v.as_u64().is_some_and(|n| *lo <= n && n <= *hi),
            Values::Bool => v.is_boolean(),
            Values::Enum(vs) => vs.contains(v),
        }
    }
}

/// How an object is named in operations and explanations.
fn object_name(key: &ObjectKey) -> String {
    if key.namespace.is_empty() {
        format!("{} {}", key.kind.as_str(), key.name)
    } else {
        format!("{} {}/{}", key.kind.as_str(), key.namespace, key.name)
    }
}

/// The [`Space`] of a generator on `controller`'s seeded objects (those `objects` names
/// by `metadata.name`, or every one whose kind has a schema), doing `operations`.
/// Errors at `.controller`, `.objects[j]` and `.operations`, under the generator's path.
pub fn resolve(
    section: Option<&CustomSection>,
    controller: &str,
    objects: &[String],
    operations: &[OperationChoice],
) -> Result<Space, ParamError> {
    let Some((reader, manifests)) = section.and_then(|s| s.operation_source(controller)) else {
        return Err(ParamError::at(
            ".controller",
            format!(
                "the name of a controllers.custom entry whose controller reads manifests \
                 (a kube-rs program's kinds), not `{controller}`"
            ),
        ));
    };
    let mut targets = Vec::new();
    for m in manifests {
        let Ok(key) = crate::extension::manifests::target(&*reader, m) else {
            continue; // refused at the entry's own `objects` already
        };
        let named = objects.is_empty() || objects.contains(&key.name);
        if !named {
            continue;
        }
        let schema = reader.schema(key.kind);
        if schema.is_none() && objects.is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        if let Some(spec) = schema
            .as_deref()
            .and_then(|s| s.pointer("/properties/spec"))
        {
            walk(spec, "spec", m.get("spec"), &mut fields);
        }
        // By path, whatever order the JSON map keeps: draws must not depend on it.
        fields.sort_by(|a, b| a.path.cmp(&b.path));
        fields.truncate(FIELDS_MAX);
        let mut manifest = m.clone();
        if !key.namespace.is_empty() {
            manifest["metadata"]["namespace"] = Value::String(key.namespace.clone());
        }
        targets.push(Target {
            object: object_name(&key),
            key,
            manifest,
            fields,
            reader: reader.clone(),
        });
    }
    for (j, o) in objects.iter().enumerate() {
        if !targets.iter().any(|t| t.key.name == *o) {
            return Err(ParamError::at(
                format!(".objects[{j}]"),
                format!("the metadata.name of an object `{controller}`'s entry seeds, not `{o}`"),
            ));
        }
    }
    if targets.is_empty() {
        return Err(ParamError::at(
            ".controller",
            format!(
                "a controller whose entry seeds an object of a kind with a schema \
                 (a CustomResource); `{controller}`'s seeds none"
            ),
        ));
    }
    let space = Space {
        targets: Arc::new(targets),
        action: None,
    };
    if space.count(operations) == 0 {
        return Err(ParamError::at(
            ".operations",
            "operations that apply to the objects: none of them has a field its schema \
             lets `set`, `rollback` or `concurrent` draw (an integer, a boolean, an enum); \
             add `delete`, `recreate` or `label`",
        ));
    }
    Ok(space)
}

/// The [`Space`] of a generator of `action`, a workload action of a family the scenario
/// runs (`section(family)`), made as the workload makes it; `alone`: the generator names
/// nothing else. Errors at `.action...` and `.controller`.
pub fn of_action<'s>(
    action: &crate::format::Action,
    alone: bool,
    families: &reconsim_family::Families,
    section: impl Fn(&str) -> Option<&'s dyn reconsim_family::FamilySection>,
) -> Result<Space, ParamError> {
    if !alone {
        return Err(ParamError::at(
            ".action",
            "either `action` or `controller` (with its `objects` and `operations`), not both",
        ));
    }
    let name = &action.name;
    let Some(family) = families.by_action(name) else {
        return Err(ParamError::at(
            ".action",
            format!("an action of a registered family, not `{name}`"),
        ));
    };
    let Some(section) = section(family.name()) else {
        return Err(ParamError::at(
            format!(".action.{name}"),
            format!(
                "a scenario with controllers.{}: `{name}` is that family's action",
                family.name()
            ),
        ));
    };
    let one = reconsim_family::WorkloadAction {
        index: 0,
        at_ms: 0,
        name,
        params: &action.params,
    };
    let mut made = section.workload(&[one]).map_err(|e| {
        // The family names the field as a workload entry's: say it of this one.
        let prefix = ".workload[0].action";
        match e.path.strip_prefix(prefix) {
            Some(rest) => ParamError::at(format!(".action{rest}"), e.message),
            None => e,
        }
    })?;
    let op = made.pop().expect("a family makes one API call per action");
    let json = serde_json::to_string(action).expect("actions serialize");
    Ok(Space {
        targets: Arc::default(),
        action: Some(Arc::new((json, op))),
    })
}

/// The fields under `schema` (at `path`) an operation may set.
fn walk(schema: &Value, path: &str, declared: Option<&Value>, out: &mut Vec<Field>) {
    let declared_value = || {
        declared
            .cloned()
            .or_else(|| schema.get("default").cloned())
            .unwrap_or(Value::Null)
    };
    let values = match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (name, sub) in props {
                    walk(
                        sub,
                        &format!("{path}.{name}"),
                        declared.and_then(|d| d.get(name)),
                        out,
                    );
                }
            }
            return;
        }
        Some("integer") => {
            let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
            let exclusive = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
            // Values below 0 are not drawn (ranges are unsigned).
            let mut lo = bound("minimum").map_or(0.0, |m| m.ceil().max(0.0)) as u64;
            if exclusive("exclusiveMinimum") && bound("minimum").is_some() {
                lo = lo.saturating_add(1);
            }
            let hi = match bound("maximum") {
                Some(m) if m < lo as f64 => return,
                Some(m) => {
                    let hi = m.floor() as u64;
                    if exclusive("exclusiveMaximum") {
                        hi.saturating_sub(1)
                    } else {
                        hi
                    }
                }
                None => lo.saturating_add(INT_SPAN),
            };
            if hi < lo {
                return;
            }
            Values::Int { lo, hi }
        }
        Some("boolean") => Values::Bool,
        Some("string") => match schema.get("enum") {
            Some(Value::Array(vs)) if !vs.is_empty() => Values::Enum(vs.clone()),
            // Free strings, arrays and numbers are not drawn.
            _ => return,
        },
        _ => return,
    };
    out.push(Field {
        path: path.to_string(),
        values,
        declared: declared_value(),
    });
}

/// One template: a target, a choice, and the field it sets (for a per-field choice).
struct Template<'a> {
    target: &'a Target,
    choice: OperationChoice,
    field: Option<&'a Field>,
}

impl Space {
    fn templates<'a>(
        &'a self,
        choices: &'a [OperationChoice],
    ) -> impl Iterator<Item = Template<'a>> {
        self.targets.iter().flat_map(move |target| {
            OperationChoice::or_all(choices)
                .iter()
                .flat_map(move |&choice| {
                    let fields: Vec<Option<&Field>> = if choice.per_field() {
                        target.fields.iter().map(Some).collect()
                    } else {
                        vec![None]
                    };
                    fields.into_iter().map(move |field| Template {
                        target,
                        choice,
                        field,
                    })
                })
        })
    }

    /// How many different operations (before values) the generator chooses among: a
    /// search places each of them.
    pub fn count(&self, choices: &[OperationChoice]) -> usize {
        if self.action.is_some() {
            return 1;
        }
        self.templates(choices).count()
    }

    /// One operation: its template picked first, then its values drawn, in that order.
    pub fn draw(&self, choices: &[OperationChoice], c: &mut impl Choose) -> Operation {
        if let Some(a) = &self.action {
            return Operation {
                object: String::new(),
                action: OperationAction::Workload {
                    action: a.0.clone(),
                },
            };
        }
        let n = self.count(choices);
        let pick = c.pick(n.max(1));
        let t = self
            .templates(choices)
            .nth(pick.min(n.saturating_sub(1)))
            .expect("resolve keeps at least one target, and every target has templates");
        let text = |v: &Value| v.to_string();
        let action = match (t.choice, t.field) {
            (OperationChoice::Set, Some(f)) => OperationAction::Set {
                field: f.path.clone(),
                value: text(&f.values.draw(c)),
                back_to: None,
            },
            (OperationChoice::Rollback, Some(f)) => OperationAction::Set {
                field: f.path.clone(),
                value: text(&f.values.draw(c)),
                back_to: Some(text(&f.declared)),
            },
            (OperationChoice::Concurrent, Some(f)) => OperationAction::Concurrent {
                field: f.path.clone(),
                first: text(&f.values.draw(c)),
                second: text(&f.values.draw(c)),
            },
            (OperationChoice::Recreate, _) => OperationAction::Delete { recreate: true },
            (OperationChoice::Label, _) => OperationAction::Label {
                key: LABEL_KEY.to_string(),
                value: c.draw(Range { lo: 1, hi: 9 }).to_string(),
            },
            (OperationChoice::Delete, _) | (_, None) => OperationAction::Delete { recreate: false },
        };
        Operation {
            object: t.target.object.clone(),
            action,
        }
    }

    /// Whether the generator could have drawn `op` (a plan's fault within the
    /// scenario's envelope).
    pub fn admits(&self, choices: &[OperationChoice], op: &Operation) -> bool {
        if let OperationAction::Workload { action } = &op.action {
            return self.action.as_ref().is_some_and(|a| a.0 == *action);
        }
        let Some(target) = self.target(op) else {
            return false;
        };
        let choices = OperationChoice::or_all(choices);
        let field = |path: &str| target.fields.iter().find(|f| f.path == path);
        let value_ok = |f: &Field, v: &str| {
            serde_json::from_str::<Value>(v).is_ok_and(|v| f.values.admits(&v))
        };
        match &op.action {
            OperationAction::Set {
                field: path,
                value,
                back_to,
            } => field(path).is_some_and(|f| {
                value_ok(f, value)
                    && match back_to {
                        None => choices.contains(&OperationChoice::Set),
                        Some(b) => {
                            choices.contains(&OperationChoice::Rollback)
                                && serde_json::from_str::<Value>(b).ok() == Some(f.declared.clone())
                        }
                    }
            }),
            OperationAction::Concurrent {
                field: path,
                first,
                second,
            } => {
                choices.contains(&OperationChoice::Concurrent)
                    && field(path).is_some_and(|f| value_ok(f, first) && value_ok(f, second))
            }
            OperationAction::Delete { recreate: false } => {
                choices.contains(&OperationChoice::Delete)
            }
            OperationAction::Delete { recreate: true } => {
                choices.contains(&OperationChoice::Recreate)
            }
            OperationAction::Label { key, .. } => {
                choices.contains(&OperationChoice::Label) && key == LABEL_KEY
            }
            OperationAction::Workload { .. } => false,
        }
    }

    fn target(&self, op: &Operation) -> Option<&Target> {
        self.targets.iter().find(|t| t.object == op.object)
    }

    /// `op`'s requests at its start and at its end, as the user's client sends them;
    /// `None` if `op` names no target of this space or a value that is not JSON.
    pub fn played(&self, op: &Operation) -> Option<Played> {
        if let OperationAction::Workload { action } = &op.action {
            let a = self.action.as_ref().filter(|a| a.0 == *action)?;
            return Some(Played {
                operation: op.clone(),
                start: vec![a.1.clone()],
                end: vec![],
            });
        }
        let t = self.target(op)?;
        let set = |field: &str, value: &str| -> Option<ApiOp> {
            let value: Value = serde_json::from_str(value).ok()?;
            let patch = field.rsplit('.').fold(value, |inner, name| {
                Value::Object(serde_json::Map::from_iter([(name.to_string(), inner)]))
            });
            Some(t.reader.merge_patch(t.key.clone(), &patch))
        };
        let label = |value: Value| {
            let labels = serde_json::Map::from_iter([(LABEL_KEY.to_string(), value)]);
            t.reader
                .merge_patch(t.key.clone(), &json!({"metadata": {"labels": labels}}))
        };
        let (start, end) = match &op.action {
            OperationAction::Set {
                field,
                value,
                back_to,
            } => (
                vec![set(field, value)?],
                match back_to {
                    Some(b) => vec![set(field, b)?],
                    None => vec![],
                },
            ),
            OperationAction::Concurrent {
                field,
                first,
                second,
            } => (vec![set(field, first)?, set(field, second)?], vec![]),
            OperationAction::Delete { recreate } => (
                vec![ApiOp::Delete {
                    key: t.key.clone(),
                    uid: None,
                    grace_period_seconds: None,
                    options: Default::default(),
                }],
                if *recreate {
                    vec![ApiOp::Create(Box::new(t.reader.object(&t.manifest).ok()?))]
                } else {
                    vec![]
                },
            ),
            OperationAction::Label { value, .. } => (
                vec![label(Value::String(value.clone()))],
                vec![label(Value::Null)],
            ),
            OperationAction::Workload { .. } => return None,
        };
        Some(Played {
            operation: op.clone(),
            start,
            end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_world::object::{Lease, Object, Resource};

    /// A reader whose merge patch is a GET of the key (the test reads only the key).
    struct Stub;

    impl Manifests for Stub {
        fn kind(&self, _: &str, _: &str) -> Option<reconsim_world::object::Kind> {
            Some(Lease::KIND)
        }
        fn object(&self, _: &Value) -> Result<Object, String> {
            let meta = reconsim_world::object::ObjectMeta::named("default", "web");
            Ok(Object::new(meta, Lease::default()))
        }
        fn merge_patch(&self, key: ObjectKey, _: &Value) -> ApiOp {
            ApiOp::Get(key)
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
            "exclusive": {"type": "integer", "minimum": 0, "exclusiveMinimum": true,
                          "maximum": 3, "exclusiveMaximum": true},
            "open": {"type": "integer", "format": "int64"},
            "negative": {"type": "integer", "minimum": -4, "maximum": -1},
            "paused": {"type": "boolean", "default": false},
            "policy": {"type": "string", "enum": ["OrderedReady", "Parallel"]},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "nested": {"type": "object", "properties": {"depth": {"type": "integer", "maximum": 2}}}
        }})
    }

    fn fields() -> Vec<Field> {
        let mut out = Vec::new();
        walk(&schema(), "spec", Some(&json!({"replicas": 3})), &mut out);
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    #[test]
    fn the_schema_gives_each_settable_field_its_values_and_declared_value() {
        let got: Vec<(String, Values, Value)> = fields()
            .into_iter()
            .map(|f| (f.path, f.values, f.declared))
            .collect();
        let want = vec![
            ("spec.exclusive", Values::Int { lo: 1, hi: 2 }, Value::Null),
            (
                "spec.nested.depth",
                Values::Int { lo: 0, hi: 2 },
                Value::Null,
            ),
            (
                "spec.open",
                Values::Int {
                    lo: 0,
                    hi: INT_SPAN,
                },
                Value::Null,
            ),
            ("spec.paused", Values::Bool, json!(false)),
            (
                "spec.policy",
                Values::Enum(vec![json!("OrderedReady"), json!("Parallel")]),
                Value::Null,
            ),
            ("spec.replicas", Values::Int { lo: 1, hi: 5 }, json!(3)),
        ];
        let want: Vec<(String, Values, Value)> = want
            .into_iter()
            .map(|(p, v, d)| (p.to_string(), v, d))
            .collect();
        // By path; free strings, arrays and a range wholly below 0 are not drawn.
        assert_eq!(got, want);
    }

    fn space() -> Space {
        Space {
            targets: Arc::new(vec![Target {
                object: "Lease default/web".into(),
                key: ObjectKey::new(Lease::KIND, "default", "web"),
                manifest: json!({}),
                fields: fields(),
                reader: Arc::new(Stub),
            }]),
            action: None,
        }
    }

    #[test]
    fn every_drawn_operation_is_admitted_and_draws_are_the_seeds() {
        let s = space();
        let all = OperationChoice::ALL;
        // 6 fields x 3 per-field choices + delete, re-create and label.
        assert_eq!(s.count(&[]), 6 * 3 + 3);
        assert_eq!(s.count(&[OperationChoice::Delete]), 1);
        let streams = reconsim_sim::Streams::new(7);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..400 {
            let op = s.draw(&all, &mut streams.indexed("ops", i));
            assert_eq!(op, s.draw(&all, &mut streams.indexed("ops", i)));
            assert!(s.admits(&all, &op), "{op}");
            assert!(s.played(&op).is_some(), "{op}");
            seen.insert(format!("{:?}", std::mem::discriminant(&op.action)));
        }
        assert_eq!(seen.len(), 4, "every action drawn");
        // Only the generator's choices are admitted, and values within the schema.
        let set = OperationAction::Set {
            field: "spec.replicas".into(),
            value: "9".into(),
            back_to: None,
        };
        let op = |action| Operation {
            object: "Lease default/web".into(),
            action,
        };
        assert!(!s.admits(&all, &op(set)));
        let rollback = OperationAction::Set {
            field: "spec.replicas".into(),
            value: "4".into(),
            back_to: Some("3".into()),
        };
        assert!(s.admits(&all, &op(rollback.clone())));
        assert!(!s.admits(&[OperationChoice::Set], &op(rollback)));
        let wrong_back = OperationAction::Set {
            field: "spec.replicas".into(),
            value: "4".into(),
            back_to: Some("2".into()),
        };
        assert!(
            !s.admits(&all, &op(wrong_back)),
            "a rollback goes to the declared value"
        );
        let elsewhere = Operation {
            object: "Lease default/db".into(),
            action: OperationAction::Delete { recreate: false },
        };
        assert!(!s.admits(&all, &elsewhere));
        assert!(s.played(&elsewhere).is_none());
    }

    #[test]
    fn a_rollback_and_a_label_undo_at_their_end_and_two_clients_send_two_requests() {
        let s = space();
        let o = |action| Operation {
            object: "Lease default/web".into(),
            action,
        };
        let p = s
            .played(&o(OperationAction::Set {
                field: "spec.replicas".into(),
                value: "4".into(),
                back_to: Some("3".into()),
            }))
            .unwrap();
        assert_eq!((p.start.len(), p.end.len()), (1, 1));
        let p = s
            .played(&o(OperationAction::Concurrent {
                field: "spec.replicas".into(),
                first: "1".into(),
                second: "5".into(),
            }))
            .unwrap();
        assert_eq!((p.start.len(), p.end.len()), (2, 0));
        let p = s
            .played(&o(OperationAction::Label {
                key: LABEL_KEY.into(),
                value: "3".into(),
            }))
            .unwrap();
        assert_eq!((p.start.len(), p.end.len()), (1, 1));
        let p = s
            .played(&o(OperationAction::Delete { recreate: false }))
            .unwrap();
        assert!(matches!(p.start[..], [ApiOp::Delete { .. }]) && p.end.is_empty());
        // Not JSON: no requests.
        assert!(
            s.played(&o(OperationAction::Set {
                field: "spec.replicas".into(),
                value: "four".into(),
                back_to: None,
            }))
            .is_none()
        );
    }
}
