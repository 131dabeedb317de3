//! A custom resource's validation rules (`x-kubernetes-validations`): CEL at any node
//! of its schema, `self` the value there, checked by the API server at every write
//! once the schema's own checks pass (apiextensions-apiserver,
//! pkg/apiserver/schema/cel/validation.go, `validateExpressions`; docs/semantics.md
//! 4.17). kubebuilder writes them from `+kubebuilder:validation:XValidation` markers.
//!
//! As the server: a rule that is false is an error at its node (`fieldPath` moves it),
//! with its `message`, else its `messageExpression`'s string, else `failed rule:
//! <rule>`, shown as `Invalid value` (or `Forbidden`, `Required value`, `Duplicate
//! value` by its `reason`); a rule that fails to evaluate (a missing field read
//! without `has()`) is an error that says so; a transition rule (one that reads
//! `oldSelf`) runs only on an update, where the old object has a value at the same
//! place. Not served: the ratcheting of an unchanged invalid value, list items
//! correlated with the old list's (a transition rule under a list's items never
//! runs), `optionalOldSelf`, cost budgets, and Kubernetes' CEL libraries beyond the
//! standard ones (`quantity`, `url`, `format`...: a rule that calls one fails to
//! evaluate, an error that says so).

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// `source` compiled, once per source for the process.
fn program(source: &str) -> Result<Arc<::cel::Program>, String> {
    type Compiled = Mutex<BTreeMap<String, Result<Arc<::cel::Program>, String>>>;
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    let mut compiled = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    compiled
        .entry(source.to_string())
        .or_insert_with(|| {
            ::cel::Program::compile(source)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// The rules of `schema` and of every schema under it, each with its place
/// (`spec.replicas`, `spec.items[]`): `Err` names the first that does not compile
/// (the API server refuses to create such a CRD).
pub fn compile_all(schema: &Value) -> Result<(), String> {
    fn walk(schema: &Value, at: &str) -> Result<(), String> {
        for (i, r) in schema["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let place = if at.is_empty() { "<root>" } else { at };
            for key in ["rule", "messageExpression"] {
                if let Some(source) = r[key].as_str() {
                    program(source).map_err(|e| {
                        format!("{place}: x-kubernetes-validations[{i}].{key}: not CEL: {e}")
                    })?;
                }
            }
            if r["rule"].as_str().is_none() {
                return Err(format!(
                    "{place}: x-kubernetes-validations[{i}].rule: a CEL expression"
                ));
            }
        }
        let join = |k: &str| {
            if at.is_empty() {
                k.to_string()
            } else {
                format!("{at}.{k}")
            }
        };
        if let Some(props) = schema["properties"].as_object() {
            for (k, s) in props {
                walk(s, &join(k))?;
            }
        }
        if schema["additionalProperties"].is_object() {
            walk(&schema["additionalProperties"], &join("*"))?;
        }
        if schema["items"].is_object() {
            walk(&schema["items"], &format!("{at}[]"))?;
        }
        Ok(())
    }
    walk(schema, "")
}

/// Whether `schema` or a schema under it has a rule.
pub fn any(schema: &Value) -> bool {
    schema.get("x-kubernetes-validations").is_some()
        || schema["properties"]
            .as_object()
            .is_some_and(|p| p.values().any(any))
        || schema.get("additionalProperties").is_some_and(any)
        || schema.get("items").is_some_and(any)
}

/// The rules of `schema` and the schemas under it, against `v` at `path` (`old`: the
/// value at the same place in the object an update replaces): each failure in
/// `errors`.
pub(crate) fn check(
    v: &Value,
    old: Option<&Value>,
    schema: &Value,
    path: &str,
    errors: &mut Vec<String>,
) {
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for r in rules {
            if let Some(e) = rule(v, old, schema, r, path) {
                errors.push(e);
            }
        }
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(o) => {
            let props = schema.get("properties");
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in o {
                if let Some(s) = props.and_then(|p| p.get(k)).or(extra) {
                    check(child, old.and_then(|o| o.get(k)), s, &join(k), errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, None, s, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

/// The schema's type name, as an error shows it.
fn type_name(schema: &Value) -> &str {
    schema["type"].as_str().unwrap_or("object")
}

/// One rule at one value: the error it makes, if any.
fn rule(v: &Value, old: Option<&Value>, schema: &Value, r: &Value, path: &str) -> Option<String> {
    let source = r["rule"].as_str()?;
    let at = {
        let base = if path.is_empty() { "<nil>" } else { path };
        match r["fieldPath"].as_str() {
            Some(f) if f.starts_with('.') && path.is_empty() => f[1..].to_string(),
            Some(f) if f.starts_with('.') => format!("{path}{f}"),
            _ => base.to_string(),
        }
    };
    let ty = type_name(schema);
    let compiled = match program(source) {
        Ok(p) => p,
        // compile_all refused the CRD already; a schema registered otherwise says so.
        Err(e) => {
            return Some(format!(
                "{at}: Invalid value: \"{ty}\": rule compile error: {e}"
            ));
        }
    };
    let transition = compiled.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut ctx = ::cel::Context::default();
    let bind = |ctx: &mut ::cel::Context, name: &str, v: &Value| {
        ::cel::to_value(v)
            .map(|value| ctx.add_variable_from_value(name, value))
            .map_err(|e| e.to_string())
    };
    let bound = bind(&mut ctx, "self", v).and_then(|()| match old {
        Some(o) if transition => bind(&mut ctx, "oldSelf", o),
        _ => Ok(()),
    });
    let result = bound.and_then(|()| compiled.execute(&ctx).map_err(|e| e.to_string()));
    let trimmed = source.trim();
    match result {
        Ok(::cel::Value::Bool(true)) => None,
        Ok(::cel::Value::Bool(false)) => {
            let mut detail = None;
            if let Some(m) = r["messageExpression"].as_str()
                && let Ok(p) = program(m)
                && let Ok(::cel::Value::String(s)) = p.execute(&ctx)
                && !s.trim().is_empty()
            {
                detail = Some(s.to_string());
            }
            let detail = detail.unwrap_or_else(|| match r["message"].as_str().map(str::trim) {
                Some(m) if !m.is_empty() => m.to_string(),
                _ => format!("failed rule: {trimmed}"),
            });
            Some(match r["reason"].as_str() {
                Some("FieldValueForbidden") => format!("{at}: Forbidden: {detail}"),
                Some("FieldValueRequired") => format!("{at}: Required value: {detail}"),
                Some("FieldValueDuplicate") => format!("{at}: Duplicate value: {detail}"),
                // The value itself for a scalar; an object's or a list's is omitted.
                _ => match v {
                    Value::Object(_) | Value::Array(_) => {
                        format!("{at}: Invalid value: {detail}")
                    }
                    scalar => format!("{at}: Invalid value: {scalar}: {detail}"),
                },
            })
        }
        Ok(other) => Some(format!(
            "{at}: Invalid value: \"{ty}\": rule evaluated to {other:?}, not a bool: {trimmed}"
        )),
        Err(e) => Some(format!(
            "{at}: Invalid value: \"{ty}\": {e} evaluating rule: {trimmed}"
        )),
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
                    "properties": {
                        "replicas": {"type": "integer"},
                        "max": {"type": "integer"},
                        "mode": {
                            "type": "string",
                            "x-kubernetes-validations": [
                                {"rule": "self == oldSelf", "message": "mode is immutable"}
                            ]
                        }
                    },
                    "x-kubernetes-validations": [
                        {"rule": "self.replicas <= self.max", "message": "replicas may not exceed max"},
                        {"rule": "!has(self.mode) || self.mode != 'off' || self.replicas == 0",
                         "fieldPath": ".replicas", "reason": "FieldValueForbidden",
                         "message": "an off set has no replicas"}
                    ]
                }
            }
        })
    }

    fn errors(v: &Value, old: Option<&Value>) -> Vec<String> {
        let mut e = Vec::new();
        check(v, old, &schema(), "", &mut e);
        e
    }

    #[test]
    fn a_false_rule_is_an_error_at_its_node_with_its_message() {
        assert!(errors(&json!({"spec": {"replicas": 2, "max": 3}}), None).is_empty());
        assert_eq!(
            errors(&json!({"spec": {"replicas": 4, "max": 3}}), None),
            ["spec: Invalid value: replicas may not exceed max"]
        );
        assert_eq!(
            errors(
                &json!({"spec": {"replicas": 1, "max": 3, "mode": "off"}}),
                None
            ),
            ["spec.replicas: Forbidden: an off set has no replicas"]
        );
    }

    #[test]
    fn a_rule_that_cannot_evaluate_says_so() {
        let e = errors(&json!({"spec": {"replicas": 4}}), None);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("spec: Invalid value: \"object\": ")
                && e[0].ends_with(" evaluating rule: self.replicas <= self.max"),
            "{e:?}"
        );
    }

    #[test]
    fn a_transition_rule_runs_on_updates_only() {
        let new = json!({"spec": {"replicas": 0, "max": 3, "mode": "on"}});
        assert!(errors(&new, None).is_empty(), "a create has no oldSelf");
        let old = json!({"spec": {"replicas": 0, "max": 3, "mode": "off"}});
        assert_eq!(
            errors(&new, Some(&old)),
            ["spec.mode: Invalid value: \"on\": mode is immutable"]
        );
        assert!(errors(&new, Some(&new)).is_empty());
    }

    #[test]
    fn a_rule_that_does_not_compile_names_its_place() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.replicas <="}]}}});
        let e = compile_all(&s).unwrap_err();
        assert!(
            e.starts_with("spec: x-kubernetes-validations[0].rule: not CEL: "),
            "{e}"
        );
        assert_eq!(compile_all(&schema()), Ok(()));
    }
}
