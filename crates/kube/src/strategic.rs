//! A strategic merge patch of a built-in type, as the API server applies one
//! (k8s.io/apimachinery `util/strategicpatch/patch.go`, `StrategicMergeMapPatch`, with
//! `MergeParallelList` and `IgnoreUnmatchedNulls`; docs/semantics.md 4.9):
//! - maps merge recursively, a null removes a member;
//! - a list whose Go field is tagged `patchStrategy:"merge"` merges: a list of objects
//!   by its `patchMergeKey` (an element with `"$patch": "delete"` removes those with its
//!   key, a `{"$patch": "replace"}` element makes the list the patch's other elements),
//!   a list of scalars as a union; its order is the patch's first, the live list's
//!   where both have an item (`normalizeElementOrder`); any other list is replaced;
//! - the directives `$patch` (replace, delete) on a map, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`.
//!
//! Which fields merge, and by which key, is every built-in kind's Go types' tags
//! (k8s.io/api `types.go`, apimachinery `ObjectMeta`), from the table
//! [`crate::list_types`] keeps for server-side apply too: a StatefulSet's, DaemonSet's,
//! Job's or CronJob's pod template like a Deployment's, a Service's ports by `port`.
//! Keys are taken in their sorted order (the real server's Go map order is random).

use crate::list_types::{Node, Schema};
use serde_json::{Map, Value};

/// How a field's value merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Replaced by the patch's value (a list); merged recursively (a map).
    Replace,
    /// A list of scalars, merged as a union.
    MergeScalars,
    /// A list of objects, merged by this key.
    MergeBy(&'static str),
}

/// A patch the server refuses: its HTTP code, reason and message
/// (apiserver `interpretStrategicMergePatchError`: 400 for a malformed directive, 422
/// for a list of lists, 500 for anything else).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

fn bad_request(message: &str) -> Refused {
    Refused {
        code: 400,
        reason: "BadRequest",
        message: message.to_string(),
    }
}

fn internal(message: String) -> Refused {
    Refused {
        code: 500,
        reason: "InternalError",
        message,
    }
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// The merge strategy of the field at `path` (field names from the object's root, list
/// indices left out) of an object with `schema`.
pub fn strategy(schema: &Schema, path: &[&str]) -> Strategy {
    let mut node = schema.root();
    let mut out = Strategy::Replace;
    for seg in path {
        let m = node.member(seg);
        out = m.strategy();
        node = m.node;
    }
    out
}

/// Apply `patch` to `original` (the stored object's JSON), an object with `schema`.
pub fn apply(original: &mut Value, patch: &Value, schema: &Schema) -> Result<(), Refused> {
    let Value::Object(patch) = patch else {
        return Err(bad_request("a strategic merge patch is a JSON object"));
    };
    let live = match std::mem::take(original) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let merged = merge_map(live, patch.clone(), schema.root(), &mut Vec::new())?;
    *original = Value::Object(merged);
    Ok(())
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    node: Node<'_>,
    path: &mut Vec<String>,
) -> Result<Map<String, Value>, Refused> {
    if let Some(d) = patch.get(DIRECTIVE) {
        return match d.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(internal(format!(
                "Unknown patch type: {d} in map: {}",
                Value::Object(patch.clone())
            ))),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_order(&mut original, &mut patch, node, path)?;
    for (key, patch_v) in patch {
        let (key, delete_list) = match key.strip_prefix(DELETE_FROM) {
            Some("") => {
                return Err(bad_request("invalid patch format of primitive list"));
            }
            Some(field) => (field.to_string(), true),
            None => (key, false),
        };
        if patch_v.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(orig_v) = original.get_mut(&key) else {
            original.insert(key, patch_v);
            continue;
        };
        let member = node.member(&key);
        let strategy = member.strategy();
        path.push(key);
        let merged = match (std::mem::take(orig_v), patch_v) {
            (Value::Object(o), Value::Object(p)) => {
                Value::Object(merge_map(o, p, member.node, path)?)
            }
            (Value::Array(o), Value::Array(p)) if strategy != Strategy::Replace => {
                Value::Array(merge_list(o, p, strategy, delete_list, member.node, path)?)
            }
            (_, p) => p,
        };
        let key = path.pop().expect("pushed");
        original.insert(key, merged);
    }
    Ok(original)
}

/// `$retainKeys`: the members of `original` it does not name are cleared; every member
/// the patch sets must be named (`applyRetainKeysDirective`).
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), Refused> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let bad = || bad_request("invalid patch format of retainKeys");
    let Value::Array(retain) = retain else {
        return Err(bad());
    };
    let named = |k: &str| retain.iter().any(|r| r.as_str() == Some(k));
    let unnamed = patch.iter().any(|(k, v)| {
        !v.is_null() && !k.starts_with(DELETE_FROM) && !k.starts_with(SET_ORDER) && !named(k)
    });
    if unnamed {
        return Err(bad());
    }
    original.retain(|k, _| named(k));
    Ok(())
}

/// `$setElementOrder/<field>`: the field's merged list in the order it gives
/// (`mergePatchIntoOriginal`).
fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    node: Node<'_>,
    path: &mut Vec<String>,
) -> Result<(), Refused> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let order = patch.remove(&key).expect("listed");
        let Value::Array(order) = order else {
            return Err(internal(format!("{key}: not a list")));
        };
        let field = key[SET_ORDER.len()..].to_string();
        if field.is_empty() {
            return Err(bad_request("invalid patch format of setElementOrder list"));
        }
        let member = node.member(&field);
        let strategy = member.strategy();
        path.push(field.clone());
        let merge_key = match strategy {
            Strategy::MergeBy(k) => Some(k),
            _ => None,
        };
        let live = original.get(&field).and_then(Value::as_array).cloned();
        let patched = patch.remove(&field);
        let patch_list = match &patched {
            Some(Value::Array(p)) => Some(p.clone()),
            Some(_) => return Err(internal(format!("{field}: not a list"))),
            None => None,
        };
        check_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
        let merged = match (live.clone(), patch_list) {
            (Some(live), None) => live,
            (None, Some(p)) => p,
            (Some(live), Some(p)) if strategy != Strategy::Replace => {
                merge_list(live, p, strategy, false, member.node, path)?
            }
            (Some(_), Some(p)) => p,
            (None, None) => {
                path.pop();
                continue;
            }
        };
        path.pop();
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|v| position(&order, v, merge_key).is_some());
        let live = live.unwrap_or_default();
        original.insert(
            field,
            Value::Array(normalize_order(
                in_order,
                server_only,
                &order,
                &live,
                merge_key,
            )),
        );
    }
    Ok(())
}

/// The patch's items (those without a directive) come in the order the
/// `$setElementOrder` list gives them (`validatePatchWithSetOrderList`).
fn check_order(patch: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<(), Refused> {
    let mut at = 0;
    for item in patch.iter().filter(|v| v.get(DIRECTIVE).is_none()) {
        match order[at.min(order.len())..]
            .iter()
            .position(|o| same_item(o, item, merge_key))
        {
            Some(i) => at += i + 1,
            None => {
                return Err(internal(format!(
                    "the order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}",
                    Value::Array(patch.to_vec()),
                    Value::Array(order.to_vec())
                )));
            }
        }
    }
    Ok(())
}

/// Merge a list with a merge strategy (`mergeSlice`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    strategy: Strategy,
    delete_list: bool,
    items: Node<'_>,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, Refused> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let mut kinds = original.iter().chain(&patch).map(|v| match v {
        Value::Object(_) => 1,
        Value::Array(_) => 2,
        _ => 0,
    });
    let first = kinds.next().expect("not both empty");
    if kinds.any(|k| k != first) {
        return Err(internal(format!(
            "the type of the elements of {} differs",
            path.join(".")
        )));
    }
    if first == 2 {
        return Err(Refused {
            code: 422,
            reason: "Invalid",
            message: "lists of lists are not supported".into(),
        });
    }
    if first == 0 {
        if delete_list {
            return Ok(delete_from(original, &patch));
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        let merged = deduplicate(both);
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|v| position(&patch, v, None).is_some());
        return Ok(normalize_order(
            in_patch,
            server_only,
            &patch,
            &original,
            None,
        ));
    }
    let Strategy::MergeBy(key) = strategy else {
        return Err(internal(format!(
            "cannot merge lists without merge key for {}",
            path.join(".")
        )));
    };
    // Special elements first (`mergeSliceWithSpecialElements`).
    let mut live = original;
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        match v.get(DIRECTIVE) {
            None => plain.push(v),
            Some(d) if d == "delete" => {
                let Some(k) = v.get(key) else {
                    return Err(no_merge_key(&v, key));
                };
                live.retain(|o| o.get(key).is_none_or(|ok| !scalar_eq(ok, k)));
            }
            Some(d) if d == "replace" => replace = true,
            Some(d) if d == "merge" => {
                return Err(internal(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            Some(d) => {
                return Err(internal(format!("Unknown patch type: {d} in map: {v}")));
            }
        }
    }
    if replace {
        live = std::mem::take(&mut plain);
    }
    let order = live.clone();
    let mut merged = live;
    for v in &plain {
        let Some(k) = v.get(key) else {
            return Err(no_merge_key(v, key));
        };
        let found = merged
            .iter()
            .position(|o| o.get(key).is_some_and(|ok| scalar_eq(ok, k)));
        match (found, v) {
            (Some(i), Value::Object(p)) => {
                let o = match std::mem::take(&mut merged[i]) {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(o, p.clone(), items, path)?);
            }
            _ => merged.push(v.clone()),
        }
    }
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| position(&plain, v, Some(key)).is_some());
    Ok(normalize_order(
        in_patch,
        server_only,
        &plain,
        &order,
        Some(key),
    ))
}

fn no_merge_key(v: &Value, key: &str) -> Refused {
    internal(format!(
        "map: {v} does not contain declared merge key: {key}"
    ))
}

/// Two scalars as Go's `==` on decoded JSON compares them (numbers as float64).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Whether `a` and `b` are one item: by the merge key for objects, by value otherwise.
fn same_item(a: &Value, b: &Value, merge_key: Option<&str>) -> bool {
    match merge_key {
        Some(k) => match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) => scalar_eq(x, y),
            _ => false,
        },
        None => scalar_eq(a, b),
    }
}

/// `item`'s place in `list`.
fn position(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    list.iter().position(|v| same_item(v, item, merge_key))
}

/// Duplicates removed as `deduplicateScalars` removes them: a later duplicate is
/// replaced by the list's last item, which can move it forward.
fn deduplicate(mut s: Vec<Value>) -> Vec<Value> {
    let mut i = 0;
    while i + 1 < s.len() {
        let mut j = i + 1;
        while j < s.len() {
            if scalar_eq(&s[i], &s[j]) {
                s.swap_remove(j);
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    s
}

/// `$deleteFromPrimitiveList`: the live list, its duplicates removed and sorted as
/// strings, without the patch's items (`deleteFromSlice`).
fn delete_from(live: Vec<Value>, delete: &[Value]) -> Vec<Value> {
    let mut kept = deduplicate(live);
    kept.sort_by_key(scalar_string);
    kept.retain(|v| !delete.iter().any(|d| scalar_eq(d, v)));
    kept
}

/// A scalar as Go's `%v` prints it (the sort key of scalar lists).
fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `normalizeElementOrder`: the patch's items in the patch's order (`patch_order`), the
/// live-only ones in the live order, merged so that two items both in the live list
/// keep its order, and a patch item the live list lacks goes before the live-only items
/// still to place.
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    live_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let (deleting, mut keep): (Vec<Value>, Vec<Value>) = patch_items
        .drain(..)
        .partition(|v| merge_key.is_some() && v.get(DIRECTIVE).is_some_and(|d| d == "delete"));
    keep.sort_by_key(|v| position(patch_order, v, merge_key).unwrap_or(usize::MAX));
    keep.extend(deleting);
    server_only.sort_by_key(|v| position(live_order, v, merge_key).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(keep.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        keep.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                match (
                    position(live_order, l, merge_key),
                    position(live_order, r, merge_key),
                ) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                }
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(kind: &str) -> Schema {
        let (group, kind) = match kind {
            "Deployment" | "StatefulSet" => ("apps", kind),
            _ => ("", kind),
        };
        Schema::builtin(group, "v1", kind)
    }

    fn patched(kind: &str, live: Value, patch: Value) -> Value {
        let mut doc = live;
        apply(&mut doc, &patch, &schema(kind)).expect("applies");
        doc
    }

    #[test]
    fn containers_merge_by_name_and_a_new_one_comes_first() {
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}});
        let out = patched(
            "Pod",
            live.clone(),
            json!({"spec": {"containers": [{"name": "b", "image": "b:2"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
        );
        // An item the live list lacks goes before the live-only ones
        // (`mergeSortedSlice`: no order to compare by, the patch's item first).
        let out = patched(
            "Pod",
            live.clone(),
            json!({"spec": {"containers": [{"name": "c", "image": "c:1"}]}}),
        );
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["c", "a", "b"]);
        // Delete by key, replace the whole list.
        let out = patched(
            "Pod",
            live.clone(),
            json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b", "image": "b:1"}])
        );
        let out = patched(
            "Pod",
            live,
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "z"}]}}),
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "z"}]));
    }

    #[test]
    fn every_built_in_kinds_pod_template_and_a_services_ports_merge_by_key() {
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "side:1"}]}}}});
        let out = patched(
            "StatefulSet",
            live,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}}),
        );
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "image": "app:2"}, {"name": "sidecar", "image": "side:1"}])
        );
        let live = json!({"spec": {"ports": [{"port": 80}, {"port": 443}]}});
        let out = patched(
            "Service",
            live,
            json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
        );
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443}])
        );
    }

    #[test]
    fn a_list_without_a_strategy_is_replaced_and_nested_keys_merge() {
        let live = json!({"spec": {"tolerations": [{"key": "a"}], "containers": [
            {"name": "app", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]}});
        let out = patched(
            "Pod",
            live,
            json!({"spec": {"tolerations": [{"key": "b"}], "containers": [
                {"name": "app", "env": [{"name": "Y", "value": "3"}]}]}}),
        );
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}])
        );
    }

    #[test]
    fn finalizers_are_a_union_and_a_delete_list_sorts_what_stays() {
        let live = json!({"metadata": {"finalizers": ["b", "a"]}});
        // Two items both live keep the live order; `c`, new, after them here.
        let out = patched(
            "ConfigMap",
            live,
            json!({"metadata": {"finalizers": ["a", "c"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "a", "c"]));
        let out = patched(
            "ConfigMap",
            json!({"metadata": {"finalizers": ["z", "b", "a"]}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "z"]));
    }

    #[test]
    fn node_conditions_merge_by_type_and_owner_references_by_uid() {
        let live = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]},
            "metadata": {"ownerReferences": [{"uid": "1", "name": "x"}]}});
        let out = patched(
            "Node",
            live,
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]},
                   "metadata": {"ownerReferences": [{"uid": "2", "name": "y"}]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}])
        );
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([{"uid": "2", "name": "y"}, {"uid": "1", "name": "x"}])
        );
    }

    #[test]
    fn directives_on_maps_and_set_element_order() {
        let live = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let out = patched(
            "Deployment",
            live,
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        );
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let out = patched(
            "ConfigMap",
            live,
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
        let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = patched(
            "Pod",
            live,
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                            "containers": [{"name": "a", "image": "x"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b"}, {"name": "a", "image": "x"}])
        );
    }

    #[test]
    fn malformed_patches_are_refused_with_the_servers_codes() {
        let live = json!({"spec": {"containers": [{"name": "a"}]}});
        let refuse = |patch: Value| {
            let mut doc = live.clone();
            apply(&mut doc, &patch, &schema("Pod"))
                .expect_err("refused")
                .code
        };
        assert_eq!(
            refuse(json!({"spec": {"containers": [{"image": "x"}]}})),
            500
        );
        assert_eq!(refuse(json!({"spec": {"$retainKeys": "x"}})), 400);
        assert_eq!(
            refuse(json!({"spec": {"$retainKeys": ["a"], "containers": []}})),
            400
        );
        assert_eq!(refuse(json!({"spec": {"$patch": "merge"}})), 500);
    }
}
