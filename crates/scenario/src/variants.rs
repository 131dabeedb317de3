//! Scenario variants without copies: a file that `extends` another, and `--set`.
//!
//! A scenario file may name a base (`"extends": "machineapi-leader-election"`, a name
//! the library knows or a path relative to the file) and hold only what differs: the
//! file is applied to its base as a JSON merge patch (RFC 7386: objects merge key by
//! key, anything else replaces, `null` removes a key), and a base may extend another, at
//! most [`crate::limits::EXTENDS_DEPTH_MAX`] deep, never in a cycle. A variant names
//! itself: a file that extends must have its own `name`, so its failure files never
//! pass for its base's.
//!
//! `--set PATH=VALUE` changes one field for one command (`net.latency_ms=[1,50]`,
//! `controllers.machine_api.variant=leader-election`): VALUE is JSON, or a string when
//! it is not JSON. Both happen on the document before it is parsed, so the result is
//! validated like any file, with the field's path in every error; the failure files of
//! such a run embed the whole scenario as it ran.

use crate::format::LoadError;
use crate::limits::EXTENDS_DEPTH_MAX;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A base scenario found by name or path: the name errors give its file, its text, and
/// its path when it is a file (its own `extends` resolves relative to it).
pub struct Base {
    pub file: String,
    pub text: String,
    pub path: Option<PathBuf>,
}

/// How a binary finds a base: `(what "extends" says, the extending file's path)`.
pub type Resolve<'a> = dyn Fn(&str, Option<&Path>) -> Result<Base, LoadError> + 'a;

/// RFC 7386's MergePatch(target, patch).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(map) = target else {
        unreachable!("made an object above")
    };
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn error(file: &str, path: &str, message: String) -> LoadError {
    LoadError {
        file: file.to_string(),
        path: path.to_string(),
        message,
    }
}

/// Whether the document `text` extends another (a cheap look before the JSON route).
pub fn extends(doc: &Value) -> bool {
    doc.get("extends").is_some()
}

/// The document `doc` (of `file`, at `path`) with its `extends` chain applied: the
/// whole scenario, without `extends`.
pub fn expand(
    file: &str,
    mut doc: Value,
    path: Option<&Path>,
    resolve: &Resolve<'_>,
) -> Result<Value, LoadError> {
    let mut seen: Vec<String> = vec![file.to_string()];
    let mut chain: Vec<Value> = Vec::new();
    let (mut here_file, mut here_path) = (file.to_string(), path.map(Path::to_path_buf));
    while let Some(ext) = doc.as_object_mut().and_then(|m| m.remove("extends")) {
        let Value::String(base_name) = ext else {
            return Err(error(
                &here_file,
                ".extends",
                "the name or path of the scenario this one changes".into(),
            ));
        };
        if doc.get("name").is_none() {
            return Err(error(
                &here_file,
                ".name",
                format!(
                    "a name of its own: it extends `{base_name}`, and its failure files must not pass for that one's"
                ),
            ));
        }
        if chain.len() >= EXTENDS_DEPTH_MAX {
            return Err(error(
                &here_file,
                ".extends",
                format!(
                    "at most {EXTENDS_DEPTH_MAX} scenarios extending one another (EXTENDS_DEPTH_MAX)"
                ),
            ));
        }
        let base = resolve(&base_name, here_path.as_deref())
            .map_err(|e| error(&here_file, ".extends", e.to_string()))?;
        if seen.contains(&base.file) {
            return Err(error(
                &here_file,
                ".extends",
                format!(
                    "a scenario that does not extend itself: `{base_name}` comes back to {}",
                    base.file
                ),
            ));
        }
        seen.push(base.file.clone());
        crate::json::check_top_object(&base.text, "a scenario")
            .map_err(|m| error(&base.file, ".", m))?;
        let base_doc: Value = crate::json::parse(&base.file, &base.text)?;
        // Two scenarios under one name would share results and failure files.
        if let (Some(mine), Some(theirs)) = (
            doc.get("name").and_then(Value::as_str),
            base_doc.get("name").and_then(Value::as_str),
        ) && mine == theirs
        {
            return Err(error(
                &here_file,
                ".name",
                format!(
                    "a name of its own: `{mine}` is also the name of {}, which it extends",
                    base.file
                ),
            ));
        }
        chain.push(std::mem::replace(&mut doc, base_doc));
        here_file = base.file;
        here_path = base.path;
    }
    // The last base first, then each file that extends it.
    for patch in chain.iter().rev() {
        merge_patch(&mut doc, patch);
    }
    Ok(doc)
}

/// One `--set PATH=VALUE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Set {
    /// `.a.b[0].c`.
    pub path: String,
    pub value: Value,
}

/// Parse `PATH=VALUE`: PATH is dotted field names with `[i]` indices (a leading `.` is
/// optional); VALUE is JSON, or a string when it is not JSON.
pub fn parse_set(spec: &str) -> Result<Set, String> {
    let bad = || format!("--set: expected PATH=VALUE such as net.latency_ms=[1,50], not `{spec}`");
    let (path, value) = spec.split_once('=').ok_or_else(bad)?;
    let path = path.trim();
    if path.is_empty() || path == "." {
        return Err(bad());
    }
    let path = if path.starts_with('.') {
        path.to_string()
    } else {
        format!(".{path}")
    };
    steps(&path).map_err(|m| format!("--set {path}: {m}"))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok(Set { path, value })
}

/// A path's steps: a field name or an index.
enum Step {
    Field(String),
    Index(usize),
}

fn steps(path: &str) -> Result<Vec<Step>, String> {
    let mut out = Vec::new();
    for part in path.split('.').skip(1) {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() && rest.is_empty() {
            return Err("a field name between each two dots, and none at the end".into());
        }
        if !name.is_empty() {
            out.push(Step::Field(name.to_string()));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').ok_or("an index closed by `]`")?;
            let i = r[..close]
                .parse()
                .map_err(|_| format!("an index, not `{}`", &r[..close]))?;
            out.push(Step::Index(i));
            rest = &r[close + 1..];
        }
        if !rest.is_empty() {
            return Err(format!("a field or an index, not `{rest}`"));
        }
    }
    Ok(out)
}

/// What a JSON value is, in words.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Apply `set` to `doc`: a missing field is added (and then judged like any field),
/// an index must exist.
pub fn apply_set(doc: &mut Value, set: &Set) -> Result<(), String> {
    let mut here = doc;
    let mut at = String::new();
    let steps = steps(&set.path)?;
    for (k, step) in steps.iter().enumerate() {
        let last = k + 1 == steps.len();
        match step {
            Step::Field(name) => {
                at.push('.');
                at.push_str(name);
                let Value::Object(map) = here else {
                    // The error's path is the --set's own: it says where the walk stopped.
                    let hint = match (&*here, name.parse::<usize>()) {
                        (Value::Array(_), Ok(i)) => {
                            format!(" (an index goes in brackets: {}[{i}])", parent(&at))
                        }
                        _ => String::new(),
                    };
                    return Err(format!(
                        "--set: {} is {}, not an object{hint}",
                        parent(&at),
                        kind_of(here)
                    ));
                };
                if last {
                    map.insert(name.clone(), set.value.clone());
                    return Ok(());
                }
                here = map
                    .entry(name.clone())
                    .or_insert_with(|| Value::Object(Default::default()));
            }
            Step::Index(i) => {
                at.push_str(&format!("[{i}]"));
                let Value::Array(items) = here else {
                    return Err(format!(
                        "--set: {} is {}, not an array",
                        parent(&at),
                        kind_of(here)
                    ));
                };
                let len = items.len();
                let Some(item) = items.get_mut(*i) else {
                    return Err(format!("--set: {} has {len} items, no [{i}]", parent(&at)));
                };
                if last {
                    *item = set.value.clone();
                    return Ok(());
                }
                here = item;
            }
        }
    }
    unreachable!("a path has at least one step")
}

/// The path above `at`, for messages.
fn parent(at: &str) -> String {
    let cut = at.rfind(['.', '[']).unwrap_or(0);
    match &at[..cut] {
        "" => "the document".into(),
        p => p.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        // RFC 7386 section 3's example.
        let mut target = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example", "sample"], "content": "This will be unchanged"});
        let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": null}, "tags": ["example"]});
        merge_patch(&mut target, &patch);
        assert_eq!(
            target,
            json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"], "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"})
        );
    }

    #[test]
    fn sets_reach_fields_and_indices() {
        let mut doc = json!({"net": {"latency_ms": [1, 5]}, "faults": [{"count": [1, 1]}]});
        for (spec, want) in [
            ("net.latency_ms=[1,50]", json!([1, 50])),
            (".faults[0].count=[2,2]", json!([2, 2])),
        ] {
            let set = parse_set(spec).unwrap();
            apply_set(&mut doc, &set).unwrap();
            assert_eq!(
                doc.pointer(&set.path.replace(['.', '['], "/").replace(']', "")),
                Some(&want),
                "{spec}"
            );
        }
        let set = parse_set("controllers.machine_api.variant=leader-election").unwrap();
        assert_eq!(set.value, json!("leader-election"));
        assert!(
            apply_set(&mut doc, &parse_set("faults[3].count=1").unwrap())
                .unwrap_err()
                .contains("has 1 items, no [3]")
        );
        assert!(
            apply_set(&mut doc, &parse_set("net.latency_ms.x=1").unwrap())
                .unwrap_err()
                .contains(".net.latency_ms is a list, not an object")
        );
        // A dotted index into a list says how to write it.
        assert_eq!(
            apply_set(&mut doc, &parse_set("faults.0.count=1").unwrap()).unwrap_err(),
            "--set: .faults is a list, not an object (an index goes in brackets: .faults[0])"
        );
        for bad in ["nothing", "=1", "a[x]=1", "a[1=2"] {
            assert!(parse_set(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn extends_applies_each_file_on_its_base_and_refuses_cycles() {
        let files = |name: &str, _: Option<&Path>| -> Result<Base, LoadError> {
            let text = match name {
                "base" => r#"{"name": "base", "seeds": 10, "net": {"latency_ms": [1, 5]}}"#,
                "mid" => r#"{"extends": "base", "name": "mid", "seeds": 20}"#,
                "loop" => r#"{"extends": "loop2", "name": "loop"}"#,
                "loop2" => r#"{"extends": "loop", "name": "loop2"}"#,
                _ => return Err(error(name, ".", "no such scenario".into())),
            };
            Ok(Base {
                file: format!("{name}.json"),
                text: text.into(),
                path: None,
            })
        };
        let doc = json!({"extends": "mid", "name": "top", "net": {"latency_ms": [2, 9]}});
        let out = expand("top.json", doc, None, &files).unwrap();
        assert_eq!(
            out,
            json!({"name": "top", "seeds": 20, "net": {"latency_ms": [2, 9]}})
        );
        let e = expand(
            "x.json",
            json!({"extends": "loop", "name": "x"}),
            None,
            &files,
        )
        .unwrap_err();
        assert!(e.message.contains("does not extend itself"), "{e}");
        let e = expand("x.json", json!({"extends": "base"}), None, &files).unwrap_err();
        assert_eq!(e.path, ".name");
        let e = expand(
            "x.json",
            json!({"extends": "nope", "name": "x"}),
            None,
            &files,
        )
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.path.as_str()), ("x.json", ".extends"));
    }
}
