//! Field ownership (`metadata.managedFields`) and server-side apply, as kube-apiserver
//! keeps them with structured-merge-diff (sigs.k8s.io/structured-merge-diff, merge/update.go;
//! docs/semantics.md 4.9):
//! - every write is an **Update** by its field manager (the request's `fieldManager`, else
//!   the prefix of its User-Agent before the first `/`: apiserver handlers/create.go
//!   `managerOrUserAgent`; kube-client sends no User-Agent, so its default manager is
//!   `""`). The manager takes the fields the write added or changed; every other manager
//!   loses them; a field the write removed is no one's.
//! - an **Apply** (`PATCH application/apply-patch+yaml`) merges the manager's config into
//!   the live object, and the manager then owns exactly the config's fields. A field it
//!   applied last time and no longer does is removed, unless another manager owns it. A
//!   field the apply would change that another manager owns is a conflict (409) unless
//!   `force=true`, which takes it; applying the value it already has shares it.
//!
//! What is modelled of the schema: maps (objects) are granular, field by field; lists are
//! atomic (the default of a CRD's lists), but `metadata.finalizers`, a set of strings.
//! ownerReferences and the lists of built-in kinds that real schemas key by name are
//! atomic here.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A field's path from the object's root: member names, and for an item of a set list
/// (`metadata.finalizers`) the item as `v:<its JSON>`, as fieldsV1 writes it.
pub type Path = Vec<String>;

/// What made a manager's fields: an apply of its config, or any other write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

/// One managedFields entry: a manager's fields from one kind of operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub fields: BTreeSet<Path>,
}

/// Which of an object's fields a write can reach: the object's (labels, annotations,
/// finalizers, ownerReferences, the body; status too without a status subresource) or
/// its status subresource's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    Object { status_subresource: bool },
    Status,
}

/// A conflict of an apply: another manager owns fields the apply would change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    pub operation: Operation,
    pub fields: Vec<Path>,
}

/// The field ownership of a stored object: a served document keeps it in its body, a
/// world kind's object in its metadata (its typed body is the world's).
pub fn of(o: &reconsim_world::object::Object) -> ManagedFields {
    match o.body.as_document::<crate::doc::JsonDoc>() {
        Some(doc) => doc.managed().clone(),
        None => o
            .meta
            .managed_fields
            .get::<ManagedFields>()
            .cloned()
            .unwrap_or_default(),
    }
}

/// `o` with `managed` as its field ownership (where [`of`] reads it).
pub fn set(o: &mut reconsim_world::object::Object, managed: ManagedFields) {
    match o.body.as_document::<crate::doc::JsonDoc>() {
        Some(doc) if *doc.managed() != managed => {
            o.body = reconsim_world::object::Body::document(doc.clone().with_managed(managed));
        }
        Some(_) => {}
        None if o.meta.managed_fields.get::<ManagedFields>() != Some(&managed) => {
            o.meta.managed_fields = reconsim_world::object::Opaque::new(managed);
        }
        None => {}
    }
}

/// The managedFields of an object, in the order the server added them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedFields {
    entries: Vec<Entry>,
}

/// The metadata fields a client owns (the server owns the rest).
const OWNED_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

fn is_set_list(path: &[String]) -> bool {
    path.len() == 2 && path[0] == "metadata" && path[1] == "finalizers"
}

/// The fields of `object` (an object's JSON, or an apply's config) that `reach` takes.
pub fn fields(object: &Value, reach: Reach) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    let Value::Object(top) = object else {
        return out;
    };
    let mut path = Vec::new();
    for (k, v) in top {
        let take = match (k.as_str(), reach) {
            ("apiVersion" | "kind", _) => false,
            ("metadata", Reach::Object { .. }) => {
                if let Value::Object(meta) = v {
                    path.push(k.clone());
                    for field in OWNED_METADATA {
                        if let Some(x) = meta.get(field) {
                            path.push(field.to_string());
                            walk(x, &mut path, &mut out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
                false
            }
            ("metadata", Reach::Status) => false,
            ("status", Reach::Object { status_subresource }) => !status_subresource,
            ("status", Reach::Status) => true,
            (_, Reach::Object { .. }) => true,
            (_, Reach::Status) => false,
        };
        if take {
            path.push(k.clone());
            walk(v, &mut path, &mut out);
            path.pop();
        }
    }
    out
}

fn walk(v: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Null => {}
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                path.push(k.clone());
                walk(x, path, out);
                path.pop();
            }
        }
        Value::Array(items) if is_set_list(path) => {
            for item in items {
                path.push(format!("v:{item}"));
                out.insert(path.clone());
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path` in `v`, if any.
fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for (i, seg) in path.iter().enumerate() {
        if let Some(item) = seg.strip_prefix("v:")
            && is_set_list(&path[..i])
        {
            let Value::Array(a) = cur else { return None };
            let item: Value = serde_json::from_str(item).ok()?;
            return a.iter().find(|x| **x == item);
        }
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

/// What a write did to the fields `reach` takes: (added or changed, removed).
fn compare(old: &Value, new: &Value, reach: Reach) -> (BTreeSet<Path>, BTreeSet<Path>) {
    let before = fields(old, reach);
    let after = fields(new, reach);
    let removed = before.difference(&after).cloned().collect();
    let changed = after
        .into_iter()
        .filter(|p| !before.contains(p) || at(old, p) != at(new, p))
        .collect();
    (changed, removed)
}

/// `path` as a field's name in a conflict's message: `.spec.holderIdentity`.
pub fn dotted(path: &[String]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg.strip_prefix("v:") {
            Some(item) => s.push_str(&format!("[{item}]")),
            None => {
                s.push('.');
                s.push_str(seg);
            }
        }
    }
    s
}

impl ManagedFields {
    /// The entries, in the server's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn position(&self, manager: &str, operation: Operation) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.manager == manager && e.operation == operation)
    }

    /// Whether any entry but (`manager`, `operation`) owns `path`.
    fn owned_by_another(&self, path: &Path, manager: &str, operation: Operation) -> bool {
        self.entries
            .iter()
            .any(|e| !(e.manager == manager && e.operation == operation) && e.fields.contains(path))
    }

    /// An Update by `manager` that turned `old` into `new` (structured-merge-diff's
    /// `Updater.Update`: forced, so it never conflicts).
    pub fn update(&mut self, manager: &str, old: &Value, new: &Value, reach: Reach) {
        let (changed, removed) = compare(old, new, reach);
        if changed.is_empty() && removed.is_empty() {
            return;
        }
        self.hand_over(manager, Operation::Update, &changed, &removed);
        let i = match self.position(manager, Operation::Update) {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    manager: manager.to_string(),
                    operation: Operation::Update,
                    fields: BTreeSet::new(),
                });
                self.entries.len() - 1
            }
        };
        let own = &mut self.entries[i].fields;
        own.extend(changed);
        own.retain(|p| !removed.contains(p));
        self.entries.retain(|e| !e.fields.is_empty());
    }

    /// Every manager but (`manager`, `operation`) loses the fields changed or removed.
    fn hand_over(
        &mut self,
        manager: &str,
        operation: Operation,
        changed: &BTreeSet<Path>,
        removed: &BTreeSet<Path>,
    ) {
        for e in &mut self.entries {
            if e.manager == manager && e.operation == operation {
                continue;
            }
            e.fields
                .retain(|p| !changed.contains(p) && !removed.contains(p));
        }
    }

    /// An apply of `config` by `manager` to `live`: the object to store, or the
    /// conflicts that stop it (structured-merge-diff's `Updater.Apply`).
    pub fn apply(
        &mut self,
        manager: &str,
        live: &Value,
        config: &Value,
        force: bool,
        reach: Reach,
    ) -> Result<Value, Vec<Conflict>> {
        let mut merged = live.clone();
        merge(&mut merged, config, &mut Vec::new());
        let applied = fields(config, reach);
        let last = self
            .position(manager, Operation::Apply)
            .map(|i| self.entries[i].fields.clone())
            .unwrap_or_default();
        // The manager's set is now the config's; what it applied before and no longer
        // does goes, unless another manager (or the config) still owns it.
        let mut next = self.clone();
        match next.position(manager, Operation::Apply) {
            Some(i) => next.entries[i].fields = applied.clone(),
            None => next.entries.push(Entry {
                manager: manager.to_string(),
                operation: Operation::Apply,
                fields: applied.clone(),
            }),
        }
        for p in last.difference(&applied) {
            if !next.owned_by_another(p, manager, Operation::Apply) {
                remove(&mut merged, p);
            }
        }
        let (changed, removed) = compare(live, &merged, reach);
        let mut conflicts = Vec::new();
        for e in &next.entries {
            if e.manager == manager && e.operation == Operation::Apply {
                continue;
            }
            let mine: Vec<Path> = e.fields.intersection(&changed).cloned().collect();
            if !mine.is_empty() {
                conflicts.push(Conflict {
                    manager: e.manager.clone(),
                    operation: e.operation,
                    fields: mine,
                });
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflicts);
        }
        next.hand_over(manager, Operation::Apply, &changed, &removed);
        next.entries.retain(|e| !e.fields.is_empty());
        *self = next;
        Ok(merged)
    }
}

/// Merge an apply's `config` into `live`: maps member by member, the finalizers set item
/// by item, any other value (lists included) replaced; a null in the config sets nothing.
fn merge(live: &mut Value, config: &Value, path: &mut Path) {
    let Value::Object(c) = config else {
        if !config.is_null() {
            *live = config.clone();
        }
        return;
    };
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let l = live.as_object_mut().expect("made an object");
    for (k, v) in c {
        path.push(k.clone());
        if v.is_null() {
        } else if is_set_list(path) {
            let entry = l
                .entry(k.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let (Value::Array(have), Value::Array(add)) = (entry, v) {
                for item in add {
                    if !have.contains(item) {
                        have.push(item.clone());
                    }
                }
            } else {
                l.insert(k.clone(), v.clone());
            }
        } else if v.is_object() {
            merge(l.entry(k.clone()).or_insert(Value::Null), v, path);
        } else {
            l.insert(k.clone(), v.clone());
        }
        path.pop();
    }
}

/// Remove the field at `path` from `v`.
fn remove(v: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for seg in parent {
        match cur.as_object_mut().and_then(|m| m.get_mut(seg)) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(item) = last.strip_prefix("v:")
        && is_set_list(parent)
    {
        if let (Value::Array(a), Ok(item)) = (cur, serde_json::from_str::<Value>(item)) {
            a.retain(|x| *x != item);
        }
        return;
    }
    if let Value::Object(m) = cur {
        m.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OBJECT: Reach = Reach::Object {
        status_subresource: false,
    };

    fn lease(holder: &str, renew: &str) -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "l", "resourceVersion": "3"},
               "spec": {"holderIdentity": holder, "renewTime": renew}})
    }

    #[test]
    fn an_apply_of_another_managers_field_conflicts_unless_forced_or_the_same() {
        let mut m = ManagedFields::default();
        let live = m
            .apply("a", &json!({}), &lease("a", "t0"), false, OBJECT)
            .unwrap();
        // b applies a different holder: a owns it.
        let err = m
            .apply("b", &live, &lease("b", "t1"), false, OBJECT)
            .unwrap_err();
        assert_eq!(err[0].manager, "a");
        assert_eq!(
            err[0].fields.iter().map(|p| dotted(p)).collect::<Vec<_>>(),
            [".spec.holderIdentity", ".spec.renewTime"]
        );
        // The same values: shared, no conflict.
        m.apply("b", &live, &lease("a", "t0"), false, OBJECT)
            .unwrap();
        assert_eq!(m.entries().len(), 2);
        // Forced: b takes them, a keeps nothing.
        let next = m
            .apply("b", &live, &lease("b", "t1"), true, OBJECT)
            .unwrap();
        assert_eq!(next["spec"]["holderIdentity"], "b");
        assert_eq!(m.entries().len(), 1);
        assert_eq!(m.entries()[0].manager, "b");
    }

    #[test]
    fn an_update_takes_what_it_changes_and_a_removal_frees_it() {
        let mut m = ManagedFields::default();
        let live = m
            .apply("a", &json!({}), &lease("a", "t0"), false, OBJECT)
            .unwrap();
        // An update by b of renewTime takes it from a.
        let mut renewed = live.clone();
        renewed["spec"]["renewTime"] = json!("t1");
        m.update("b", &live, &renewed, OBJECT);
        let a = &m.entries()[0];
        assert_eq!(a.fields.len(), 1, "{a:?}");
        // b removes holderIdentity (a strategic patch of null): no one owns it, and an
        // apply by c of a new holder does not conflict.
        let mut released = renewed.clone();
        released["spec"]
            .as_object_mut()
            .unwrap()
            .remove("holderIdentity");
        m.update("b", &renewed, &released, OBJECT);
        assert!(m.entries().iter().all(|e| e.manager == "b"));
        let config = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "spec": {"holderIdentity": "c"}});
        let next = m.apply("c", &released, &config, false, OBJECT).unwrap();
        assert_eq!(next["spec"]["holderIdentity"], "c");
    }

    #[test]
    fn a_field_no_longer_applied_is_removed_unless_another_owns_it() {
        let mut m = ManagedFields::default();
        let config = json!({"metadata": {"labels": {"x": "1", "y": "2"}, "finalizers": ["f"]}});
        let live = m.apply("a", &json!({}), &config, false, OBJECT).unwrap();
        // b also sets y (an update of the same value changes nothing: a keeps it alone).
        let mut shared = live.clone();
        shared["metadata"]["labels"]["z"] = json!("3");
        m.update("b", &live, &shared, OBJECT);
        let again = m
            .apply(
                "a",
                &shared,
                &json!({"metadata": {"labels": {"y": "2"}}}),
                false,
                OBJECT,
            )
            .unwrap();
        assert_eq!(again["metadata"]["labels"], json!({"y": "2", "z": "3"}));
        assert_eq!(again["metadata"]["finalizers"], json!([]));
    }
}
