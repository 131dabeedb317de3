//! A custom resource's structural schema at the API server: what a write keeps
//! (pruning), what it gains (defaults) and what it may not do (validation, 422), as
//! apiextensions-apiserver applies the CRD's `openAPIV3Schema` that kube-derive emits
//! (docs/semantics.md 4.17).

use reconsim_world::object::Kind;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Each custom resource kind's schema, registered by [`crate::Kinds::crd`]: the same
/// for a kind in every world, so one table for the process.
fn registry() -> &'static Mutex<BTreeMap<Kind, Arc<Value>>> {
    static SCHEMAS: OnceLock<Mutex<BTreeMap<Kind, Arc<Value>>>> = OnceLock::new();
    SCHEMAS.get_or_init(Default::default)
}

/// Register `kind`'s `openAPIV3Schema`.
pub fn register(kind: Kind, schema: Value) {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(kind, Arc::new(schema));
}

/// `kind`'s schema, if it is a custom resource with one.
pub fn of(kind: Kind) -> Option<Arc<Value>> {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&kind)
        .cloned()
}

/// Prune, default and validate the object `doc` of `kind` named `name` against
/// `schema`, in that order, as the server does before it stores a write; then, if no
/// error blocks them, its `x-kubernetes-validations` rules in CEL, `old` the stored
/// object an update replaces (for transition rules, over `oldSelf`). `Err`: the 422
/// message, every error of the object in it.
pub fn admit(
    doc: &mut Value,
    schema: &Value,
    old: Option<&Value>,
    kind: Kind,
    name: &str,
) -> Result<(), String> {
    let mut errors = Vec::new();
    if let Some(object) = doc.as_object_mut()
        && schema.get("properties").is_some()
    {
        // apiVersion, kind and metadata are the server's own business.
        members(
            object,
            schema,
            "",
            &["apiVersion", "kind", "metadata"],
            &mut errors,
        );
    }
    // apiextensions-apiserver's customResourceStrategy.Validate and ValidateUpdate
    // (pkg/registry/customresource/strategy.go): the rules run only when the schema's
    // checks found no blocking error (hasBlockingErr: a wrong type, a missing
    // required field, a value outside its enum, too long, too many items); else one
    // more error says they were not checked.
    if !crate::validations::any(schema) {
        // No rules: nothing more (the server has no CEL validator for the kind).
    } else if errors.iter().any(|e| blocking(e)) {
        errors.push(
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        );
    } else {
        crate::validations::check(doc, old, schema, "", &mut errors);
    }
    if errors.is_empty() {
        return Ok(());
    }
    let what = format!("{}.{} {name:?}", kind.as_str(), kind.group());
    Err(match errors.as_slice() {
        [one] => format!("{what} is invalid: {one}"),
        many => format!("{what} is invalid: [{}]", many.join(", ")),
    })
}

/// Whether a schema error keeps the CEL rules from running (hasBlockingErr's types:
/// TypeInvalid, Required, NotSupported, TooLong, TooMany), by the messages this file
/// writes for them.
fn blocking(error: &str) -> bool {
    [
        " must be of type ",
        ": Required value",
        ": Unsupported value",
        " should be at most ",
    ]
    .iter()
    .any(|m| error.contains(m))
}

fn nullable(schema: &Value) -> bool {
    schema["nullable"].as_bool() == Some(true)
}

fn preserves(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
}

/// A value at `path` against its schema: objects pruned and defaulted, then each type's
/// own checks.
fn walk(v: &mut Value, schema: &Value, path: &str, errors: &mut Vec<String>) {
    if v.is_null() {
        if !nullable(schema) {
            errors.push(format!(
                "{path}: Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                type_of(schema).unwrap_or("object")
            ));
        }
        return;
    }
    let int_or_string = schema["x-kubernetes-int-or-string"].as_bool() == Some(true);
    if int_or_string {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            errors.push(format!(
                "{path}: Invalid value: {v}: {path} in body must be of type integer or string"
            ));
        }
        return;
    }
    let Some(ty) = type_of(schema) else {
        return;
    };
    let fits = match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    };
    if !fits {
        errors.push(format!(
            "{path}: Invalid value: \"{}\": {path} in body must be of type {ty}: \"{}\"",
            json_type(v),
            json_type(v)
        ));
        return;
    }
    match v {
        Value::Object(object) => members(object, schema, path, &[], errors),
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    // A null item the schema does not allow takes its default
                    // (defaulting's `Default`, the array case).
                    if item.is_null()
                        && !nullable(s)
                        && let Some(d) = s.get("default")
                    {
                        *item = d.clone();
                    }
                    walk(item, s, &format!("{path}[{i}]"), errors);
                }
            }
            let n = items.len();
            bound(
                n as f64,
                schema,
                ("minItems", "maxItems"),
                path,
                format!("{n} items"),
                errors,
                "items",
            );
        }
        Value::String(s) => {
            let len = s.chars().count() as f64;
            bound(
                len,
                schema,
                ("minLength", "maxLength"),
                path,
                format!("{s:?}"),
                errors,
                "chars long",
            );
            if let Some(pattern) = schema["pattern"].as_str() {
                let failed = match matches(pattern, s) {
                    Ok(true) => None,
                    Ok(false) => Some(pattern.to_string()),
                    Err(why) => Some(format!("{pattern}, but pattern is invalid: {why}")),
                };
                if let Some(what) = failed {
                    errors.push(format!(
                        "{path}: Invalid value: {s:?}: {path} in body should match '{what}'"
                    ));
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or_default();
            if let Some(min) = schema["minimum"].as_f64() {
                let exclusive = schema["exclusiveMinimum"].as_bool() == Some(true);
                if x < min || (exclusive && x == min) {
                    errors.push(format!(
                        "{path}: Invalid value: {n}: {path} in body should be greater than {}{min}",
                        if exclusive { "" } else { "or equal to " }
                    ));
                }
            }
            if let Some(max) = schema["maximum"].as_f64() {
                let exclusive = schema["exclusiveMaximum"].as_bool() == Some(true);
                if x > max || (exclusive && x == max) {
                    errors.push(format!(
                        "{path}: Invalid value: {n}: {path} in body should be less than {}{max}",
                        if exclusive { "" } else { "or equal to " }
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!(
            "{path}: Unsupported value: {v}: supported values: {}",
            list.join(", ")
        ));
    }
}

/// An object's members against its schema (`properties`, else `additionalProperties`),
/// but those in `skip`: a member the schema does not know is pruned (unless it keeps
/// unknown fields), a null one it does not allow is dropped, the rest walked; then the
/// object's defaults and required members.
fn members(
    object: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    skip: &[&str],
    errors: &mut Vec<String>,
) {
    let props = schema.get("properties");
    let extra = schema.get("additionalProperties").filter(|a| a.is_object());
    let keys: Vec<String> = object
        .keys()
        .filter(|k| !skip.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in keys {
        match props.and_then(|p| p.get(&k)).or(extra) {
            Some(s) => {
                let child = object.get_mut(&k).expect("listed");
                if child.is_null() && !nullable(s) {
                    // A null the schema does not allow: its default if it has one
                    // (defaulting's isNonNullableNull), else dropped
                    // (PruneNonNullableNullsWithoutDefaults).
                    match s.get("default") {
                        Some(d) => {
                            *child = d.clone();
                            walk(child, s, &member_path(path, &k), errors);
                        }
                        None => {
                            object.remove(&k);
                        }
                    }
                } else {
                    walk(child, s, &member_path(path, &k), errors);
                }
            }
            None if preserves(schema) => {}
            None => {
                object.remove(&k);
            }
        }
    }
    defaults(object, schema, path, errors);
    required(object, schema, path, errors);
}

/// Member `k`'s path in an object at `path` (the root's members have none before them).
fn member_path(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Whether `s` matches the schema's `pattern` anywhere in it (unanchored, as Go's
/// `regexp.MatchString`, which kube-openapi's `validate.Pattern` calls); `Err` with
/// why for a pattern that does not compile. Each is compiled once for the process.
fn matches(pattern: &str, s: &str) -> Result<bool, String> {
    type Compiled = Mutex<BTreeMap<String, Result<regex::Regex, String>>>;
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    let mut compiled = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    match compiled
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern).map_err(|e| e.to_string()))
    {
        Ok(re) => Ok(re.is_match(s)),
        Err(why) => Err(why.clone()),
    }
}

/// A length against the schema's lower and upper bounds (`(min_key, max_key)`).
fn bound(
    len: f64,
    schema: &Value,
    (min_key, max_key): (&str, &str),
    path: &str,
    shown: String,
    errors: &mut Vec<String>,
    unit: &str,
) {
    if let Some(min) = schema[min_key].as_f64()
        && len < min
    {
        errors.push(format!(
            "{path}: Invalid value: {shown}: {path} in body should be at least {min} {unit}"
        ));
    }
    if let Some(max) = schema[max_key].as_f64()
        && len > max
    {
        errors.push(format!(
            "{path}: Invalid value: {shown}: {path} in body should be at most {max} {unit}"
        ));
    }
}

/// The schema's defaults for the members an object lacks, each walked as the members
/// already there were: apiextensions-apiserver's structural defaulting
/// (`pkg/apiserver/schema/defaulting/algorithm.go`, `Default`) inserts a default where
/// the field is absent and then recurses into every member, the inserted ones included,
/// so a default object gains its own members' defaults (and is validated whole).
fn defaults(object: &mut Map<String, Value>, schema: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(props) = schema["properties"].as_object() else {
        return;
    };
    for (k, s) in props {
        if !object.contains_key(k)
            && let Some(d) = s.get("default")
        {
            let mut v = d.clone();
            walk(&mut v, s, &member_path(path, k), errors);
            object.insert(k.clone(), v);
        }
    }
}

fn required(object: &Map<String, Value>, schema: &Value, path: &str, errors: &mut Vec<String>) {
    for r in schema["required"].as_array().into_iter().flatten() {
        if let Some(k) = r.as_str()
            && !object.contains_key(k)
        {
            let at = if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            };
            errors.push(format!("{at}: Required value"));
        }
    }
}

fn type_of(schema: &Value) -> Option<&str> {
    schema["type"].as_str()
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 0, "maximum": 10},
                        "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "note": {"type": "string", "nullable": true},
                        "code": {"type": "string", "pattern": "^[a-z]+-[0-9]+$"},
                        "word": {"type": "string", "pattern": "ab"}
                    }
                },
                "status": {"type": "object", "nullable": true, "properties": {"ready": {"type": "boolean"}}}
            }
        })
    }

    fn kind() -> Kind {
        crate::kinds::intern("test.reconsim.dev", "v1", "Widget", "widgets", true)
    }

    #[test]
    fn unknown_fields_are_pruned_and_defaults_filled() {
        let mut doc = json!({
            "apiVersion": "test.reconsim.dev/v1", "kind": "Widget", "metadata": {"name": "w", "x": 1},
            "spec": {"size": 2, "extra": true, "labels": {"a": "b"}, "free": {"any": [1]}, "note": null},
            "stray": 1
        });
        admit(&mut doc, &schema(), None, kind(), "w").unwrap();
        assert_eq!(
            doc,
            json!({
                "apiVersion": "test.reconsim.dev/v1", "kind": "Widget", "metadata": {"name": "w", "x": 1},
                "spec": {"size": 2, "mode": "safe", "labels": {"a": "b"}, "free": {"any": [1]}, "note": null}
            })
        );
    }

    #[test]
    fn what_the_schema_forbids_is_422_with_its_field_paths() {
        let mut doc = json!({"spec": {"size": 11, "mode": "slow", "tags": ["a", "b", "c"]}});
        let e = admit(&mut doc, &schema(), None, kind(), "w").unwrap_err();
        assert_eq!(
            e,
            "Widget.test.reconsim.dev \"w\" is invalid: [spec.mode: Unsupported value: \"slow\": supported values: \"fast\", \"safe\", spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10, spec.tags: Invalid value: 3 items: spec.tags in body should be at most 2 items]"
        );
        let mut doc = json!({"spec": {"size": "big"}});
        let e = admit(&mut doc, &schema(), None, kind(), "w").unwrap_err();
        assert!(e.ends_with("spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""), "{e}");
        let mut doc = json!({"spec": {}});
        let e = admit(&mut doc, &schema(), None, kind(), "w").unwrap_err();
        assert!(e.ends_with("spec.size: Required value"), "{e}");
    }

    /// apiextensions-apiserver's `Default`: a default inserted is walked for its own
    /// members' defaults, and a non-nullable null with a default takes it, in a map's
    /// values and a list's items as in an object's properties.
    #[test]
    fn defaults_recurse_into_what_they_insert_and_replace_nulls() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {
                "outer": {"type": "object", "default": {},
                          "properties": {"inner": {"type": "integer", "default": 7}}},
                "ports": {"type": "array",
                          "items": {"type": "object", "default": {"port": 80},
                                    "properties": {"port": {"type": "integer"}}}},
                "limits": {"type": "object",
                           "additionalProperties": {"type": "string", "default": "1"}}
            }
        }}});
        let mut doc = json!({"spec": {"ports": [null, {"port": 8080}], "limits": {"cpu": null}}});
        admit(&mut doc, &schema, None, kind(), "w").unwrap();
        assert_eq!(
            doc,
            json!({"spec": {"outer": {"inner": 7}, "ports": [{"port": 80}, {"port": 8080}],
                            "limits": {"cpu": "1"}}})
        );
    }

    #[test]
    fn a_pattern_matches_anywhere_unless_anchored() {
        let mut doc = json!({"spec": {"size": 1, "code": "web-1", "word": "cabd"}});
        assert_eq!(admit(&mut doc, &schema(), None, kind(), "w"), Ok(()));
        let mut doc = json!({"spec": {"size": 1, "code": "web-1x", "word": "ba"}});
        let e = admit(&mut doc, &schema(), None, kind(), "w").unwrap_err();
        assert_eq!(
            e,
            "Widget.test.reconsim.dev \"w\" is invalid: [spec.code: Invalid value: \"web-1x\": spec.code in body should match '^[a-z]+-[0-9]+$', spec.word: Invalid value: \"ba\": spec.word in body should match 'ab']"
        );
        assert!(matches("(", "x").is_err());
    }
}
