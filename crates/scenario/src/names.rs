//! Object names a scenario declares, checked at load as the API server checks them on
//! create (reconsim_world::names: one rule per kind, docs/semantics.md 4.18), so a name
//! the real server would refuse stops the scenario at its field, exit 2, instead of
//! running a world no cluster could hold.
//!
//! Three sources, all of them data before anything runs:
//! - what a family's section says it names ([`FamilySection::object_names`]), each at
//!   its own path;
//! - the objects the world starts with: every section seeds a scratch API server, and
//!   each object's name and namespace are checked;
//! - the workload: every action's API call as its family makes it
//!   ([`crate::Scenario::workload_ops`]), the created object's name or generateName,
//!   and the name and namespace any other call addresses (a name no create can make
//!   names nothing).
//!
//! A seeded object or a call carries no path: its field is found by value in the
//! section or the action's params (the field holding the name, else the longest one the
//! name is made of, else the section or action itself). Every name is shown through
//! [`crate::limits::quoted`]: a megabyte of name cannot flood the error.

use crate::limits::quoted;
use reconsim_family::{FamilySection, ObjectName};
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::names;
use reconsim_world::object::{Kind, Object, ObjectKey};
use serde_json::Value;

/// `Err((path, expected))` for the first name of `declared` its kind refuses; paths are
/// under `at` (the section's).
pub(crate) fn check_declared(at: &str, declared: &[ObjectName]) -> Result<(), (String, String)> {
    for n in declared {
        names::check(n.kind, &n.name, false).map_err(|expected| {
            (
                format!("{at}{}", n.path),
                format!("expected {expected}, not {}", quoted(&n.name)),
            )
        })?;
    }
    Ok(())
}

/// `Err((path, expected))` for the first object `section` seeds whose name or namespace
/// the API server would refuse; `at` is the section's path.
pub(crate) fn check_seeded(at: &str, section: &dyn FamilySection) -> Result<(), (String, String)> {
    let mut scratch = ApiServer::new(ApiServerConfig::default());
    section.seed(&mut scratch);
    let objects: Vec<Object> = scratch.objects().map(|o| (**o).clone()).collect();
    if objects.is_empty() {
        return Ok(());
    }
    let json = section.to_json();
    for o in objects {
        check_key(at, &json, &o.key())?;
    }
    Ok(())
}

/// `Err((path, expected))` for the first call of `ops` (one per action of `workload`, in
/// order: `(path of the action's params, params)`) naming an object the API server would
/// refuse to create.
pub(crate) fn check_ops(
    workload: &[(String, &Value)],
    ops: &[ApiOp],
) -> Result<(), (String, String)> {
    for ((at, params), op) in workload.iter().zip(ops) {
        let (key, generate_name) = match op {
            ApiOp::Create(o) => (o.key(), o.meta.generate_name.as_deref()),
            ApiOp::Update { object, .. } => (object.key(), None),
            ApiOp::Get(key)
            | ApiOp::Patch { key, .. }
            | ApiOp::Delete { key, .. }
            | ApiOp::Bind { key, .. } => (key.clone(), None),
            _ => continue,
        };
        match generate_name {
            Some(prefix) if key.name.is_empty() => {
                check_namespace(at, params, &key.namespace)?;
                check_one(at, params, key.kind, prefix, true)?;
            }
            _ => check_key(at, params, &key)?,
        }
    }
    Ok(())
}

fn check_key(at: &str, json: &Value, key: &ObjectKey) -> Result<(), (String, String)> {
    check_namespace(at, json, &key.namespace)?;
    check_one(at, json, key.kind, &key.name, false)
}

fn check_namespace(at: &str, json: &Value, namespace: &str) -> Result<(), (String, String)> {
    if namespace.is_empty() {
        return Ok(());
    }
    check_one(at, json, names::NAMESPACE, namespace, false)
}

/// `name` of `kind` against its rule; on refusal, the path of the field of `json` (at
/// `at`) it came from.
fn check_one(
    at: &str,
    json: &Value,
    kind: Kind,
    name: &str,
    prefix: bool,
) -> Result<(), (String, String)> {
    let Err(expected) = names::check(kind, name, prefix) else {
        return Ok(());
    };
    let mut path = String::new();
    if find(json, &mut path, &|s| s == name) {
        return Err((
            format!("{at}{path}"),
            format!("expected {expected}, not {}", quoted(name)),
        ));
    }
    // A name made of a field's value (`<name>-0`): the longest such value.
    let mut best: Option<(String, &str)> = None;
    let mut path = String::new();
    collect(json, &mut path, &mut |p, s| {
        if !s.is_empty() && name.contains(s) && best.as_ref().is_none_or(|(_, b)| s.len() > b.len())
        {
            best = Some((p.to_string(), s));
        }
    });
    let what = if prefix { "generateName" } else { "name" };
    Err(match best {
        Some((p, value)) => (
            format!("{at}{p}"),
            format!(
                "expected a value whose {kind} {} is a valid {kind} {what} ({}), not {}",
                quoted(name),
                names::rule(kind).describe(),
                quoted(value),
                kind = kind.as_str(),
            ),
        ),
        None => (
            if at.is_empty() {
                ".".into()
            } else {
                at.to_string()
            },
            format!(
                "expected {expected}, not {} (a {} {what} this makes)",
                quoted(name),
                kind.as_str()
            ),
        ),
    })
}

/// Whether a string of `v` satisfies `want`; `path` is then its path.
fn find(v: &Value, path: &mut String, want: &dyn Fn(&str) -> bool) -> bool {
    match v {
        Value::String(s) => want(s),
        Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let found = find(item, path, want);
            if !found {
                path.truncate(len);
            }
            found
        }),
        Value::Object(map) => map.iter().any(|(k, item)| {
            let len = path.len();
            path.push('.');
            path.push_str(k);
            let found = find(item, path, want);
            if !found {
                path.truncate(len);
            }
            found
        }),
        _ => false,
    }
}

/// Every string of `v` with its path.
fn collect<'a>(v: &'a Value, path: &mut String, each: &mut dyn FnMut(&str, &'a str)) {
    match v {
        Value::String(s) => each(path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                collect(item, path, each);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                collect(item, path, each);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_world::object::{Body, ObjectMeta, Pod};
    use serde_json::json;

    fn pod(ns: &str, name: &str) -> ApiOp {
        ApiOp::Create(Box::new(Object::new(
            ObjectMeta::named(ns, name),
            Body::new(Pod::default()),
        )))
    }

    #[test]
    fn a_call_is_refused_at_the_param_that_holds_the_name() {
        let params = json!({"create": {"metadata": {"name": "my pod", "namespace": "default"}}});
        let at = ".workload[3].action.custom".to_string();
        let (path, why) =
            check_ops(&[(at.clone(), &params)], &[pod("default", "my pod")]).unwrap_err();
        assert_eq!(path, ".workload[3].action.custom.create.metadata.name");
        assert!(
            why.starts_with("expected a Pod name (DNS-1123 subdomain"),
            "{why}"
        );
        assert!(why.ends_with(r#"not "my pod""#), "{why}");
        // The namespace is a Namespace's name: a label.
        let params = json!({"ns": "team.a", "name": "web"});
        let (path, why) = check_ops(&[(at.clone(), &params)], &[pod("team.a", "web")]).unwrap_err();
        assert_eq!(path, ".workload[3].action.custom.ns");
        assert!(
            why.starts_with("expected a Namespace name (DNS-1123 label"),
            "{why}"
        );
        // A name made of a field's value: the field, and the name it makes.
        let stem = "a".repeat(252);
        let params = json!({"stem": stem});
        let made = format!("{stem}-0");
        let (path, why) =
            check_ops(&[(at.clone(), &params)], &[pod("default", &made)]).unwrap_err();
        assert_eq!(path, ".workload[3].action.custom.stem");
        assert!(why.starts_with("expected a value whose Pod \"aaa"), "{why}");
        assert!(why.len() < 400, "{why}");
        // Valid names pass; a generateName is checked as a prefix.
        check_ops(&[(at.clone(), &params)], &[pod("default", "web-0")]).unwrap();
        let mut meta = ObjectMeta::named("default", "");
        meta.generate_name = Some("web-".into());
        let op = ApiOp::Create(Box::new(Object::new(meta, Body::new(Pod::default()))));
        check_ops(&[(at, &params)], &[op]).unwrap();
    }
}
