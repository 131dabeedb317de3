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
//! What is modelled of the schema (typed/merge.go, typed/tofieldset.go, typed/compare.go):
//! maps (objects) are granular, member by member; a list merges by its list type
//! ([`crate::list_types`]: a built-in kind's from k8s.io/api's markers, a custom
//! resource's from its CRD schema's `x-kubernetes-list-type`, ObjectMeta's everywhere):
//! - `atomic` (a CRD's default): one field, replaced whole by an apply;
//! - `set` (`metadata.finalizers`): each item a field of its own (`v:<json>`);
//! - `map` by its keys (`metadata.ownerReferences` by uid, a pod template's containers
//!   by name, a Service's ports by port and protocol, a CRD's `x-kubernetes-list-map-keys`):
//!   each item a field of its own (`k:{"name":"a"}`), and each of the item's members
//!   inside it. Two managers applying their own items share the list without a
//!   conflict; an apply that stops naming its item removes that item (unless another
//!   manager owns it), and only that one.
//!
//! An item's own path is compared by presence, not by value: a change inside an item is
//! a change of the member changed, so it conflicts only with that member's owner
//! (compare.go adds and removes a map-list item's path, never modifies it).
//! Not modelled: atomic maps and structs (`x-kubernetes-map-type: atomic`, a Service's
//! selector), the `.` of a map an Update created, managedFields on the wire.

use crate::list_types::{ListType, Member, Node, Schema};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// One step of a field's path, as fieldsV1 writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Seg {
    /// An object's member (`f:<name>`).
    Field(String),
    /// A map-list's item by its key fields, a JSON object (`k:{"name":"a"}`).
    Key(String),
    /// A set list's item by its value, as JSON (`v:"x"`).
    Value(String),
}

/// A field's path from the object's root.
pub type Path = Vec<Seg>;

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

/// Why an apply is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Other managers own fields it would change (409).
    Conflicts(Vec<Conflict>),
    /// Its config is not a typed object: a map-list item without a key or twice, a set
    /// item that is an object (structured-merge-diff's typed conversion errors, which
    /// the apiserver answers 500 with "failed to create typed patch object"): each
    /// error, as `path: why`.
    Untyped(Vec<String>),
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

/// Each item's path step in a list of type `list`, or `None` when the list is one
/// field: atomic, or with an item the type cannot key (a live object's list the server
/// would have refused to type; owned whole here rather than refused).
fn item_segs(items: &[Value], list: ListType<'_>) -> Option<Vec<Seg>> {
    match list {
        ListType::Atomic => None,
        ListType::Set => items
            .iter()
            .map(|i| match i {
                Value::Object(_) | Value::Array(_) => None,
                scalar => Some(Seg::Value(scalar.to_string())),
            })
            .collect(),
        ListType::Map(keys) => items
            .iter()
            .map(|i| keys.of(i).ok().map(Seg::Key))
            .collect(),
    }
}

/// The fields of `object` (an object's JSON, or an apply's config) that `reach` takes.
pub fn fields(object: &Value, reach: Reach, schema: &Schema) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    let Value::Object(top) = object else {
        return out;
    };
    let root = schema.root();
    let mut path = Vec::new();
    for (k, v) in top {
        let take = match (k.as_str(), reach) {
            ("apiVersion" | "kind", _) => false,
            ("metadata", Reach::Object { .. }) => {
                if let Value::Object(meta) = v {
                    path.push(Seg::Field(k.clone()));
                    let node = root.member(k).node;
                    for field in OWNED_METADATA {
                        if let Some(x) = meta.get(field) {
                            path.push(Seg::Field(field.to_string()));
                            walk(x, node.member(field), &mut path, &mut out);
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
            path.push(Seg::Field(k.clone()));
            walk(v, root.member(k), &mut path, &mut out);
            path.pop();
        }
    }
    out
}

/// The fields of `v`, the value of member `m` at `path` (typed/tofieldset.go: a leaf,
/// an atomic list whole, each item of a set or map list, and a map-list item's members).
fn walk(v: &Value, m: Member<'_>, path: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Null => {}
        Value::Object(map) if !map.is_empty() => members_of(map, m.node, path, out),
        Value::Array(items) => match item_segs(items, m.list) {
            None => {
                out.insert(path.clone());
            }
            Some(segs) => {
                for (item, seg) in items.iter().zip(segs) {
                    path.push(seg);
                    out.insert(path.clone());
                    if let (Value::Object(map), Some(Seg::Key(_))) = (item, path.last()) {
                        members_of(map, m.node, path, out);
                    }
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

fn members_of(map: &Map<String, Value>, node: Node<'_>, path: &mut Path, out: &mut BTreeSet<Path>) {
    for (k, x) in map {
        path.push(Seg::Field(k.clone()));
        walk(x, node.member(k), path, out);
        path.pop();
    }
}

/// The value at `path` in `v`, if any.
fn at<'a>(v: &'a Value, path: &[Seg], schema: &Schema) -> Option<&'a Value> {
    let mut cur = v;
    let mut m = Member::of(schema.root());
    for seg in path {
        match seg {
            Seg::Field(name) => {
                cur = cur.as_object()?.get(name)?;
                m = m.node.member(name);
            }
            Seg::Key(_) | Seg::Value(_) => {
                let items = cur.as_array()?;
                let i = item_segs(items, m.list)?.iter().position(|s| s == seg)?;
                cur = &items[i];
                m = Member::of(m.node);
            }
        }
    }
    Some(cur)
}

/// What a write did to the fields `reach` takes: (added or changed, removed). A list
/// item's own path is there when the item is added or removed, not when what is in it
/// changes (typed/compare.go).
fn compare(
    old: &Value,
    new: &Value,
    reach: Reach,
    schema: &Schema,
) -> (BTreeSet<Path>, BTreeSet<Path>) {
    let before = fields(old, reach, schema);
    let after = fields(new, reach, schema);
    let removed = before.difference(&after).cloned().collect();
    let changed = after
        .into_iter()
        .filter(|p| {
            !before.contains(p)
                || (!matches!(p.last(), Some(Seg::Key(_) | Seg::Value(_)))
                    && at(old, p, schema) != at(new, p, schema))
        })
        .collect();
    (changed, removed)
}

/// `path` as a field's name in a conflict's message, as structured-merge-diff prints a
/// path: `.spec.holderIdentity`, `.spec.containers[name="a"].image`,
/// `.metadata.finalizers[="x"]`.
pub fn dotted(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(name) => {
                s.push('.');
                s.push_str(name);
            }
            Seg::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let each: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", each.join(",")));
            }
            Seg::Value(v) => s.push_str(&format!("[={v}]")),
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
    pub fn update(
        &mut self,
        manager: &str,
        old: &Value,
        new: &Value,
        reach: Reach,
        schema: &Schema,
    ) {
        let (changed, removed) = compare(old, new, reach, schema);
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

    /// An apply of `config` by `manager` to `live`: the object to store, or why not
    /// (structured-merge-diff's `Updater.Apply`).
    pub fn apply(
        &mut self,
        manager: &str,
        live: &Value,
        config: &Value,
        force: bool,
        reach: Reach,
        schema: &Schema,
    ) -> Result<Value, Refusal> {
        let mut errors = Vec::new();
        check(
            config,
            Member::of(schema.root()),
            &mut Vec::new(),
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(Refusal::Untyped(errors));
        }
        let mut merged = live.clone();
        merge(&mut merged, config, schema.root());
        let applied = fields(config, reach, schema);
        let last = self
            .position(manager, Operation::Apply)
            .map(|i| self.entries[i].fields.clone())
            .unwrap_or_default();
        // The manager's set is now the config's; what it applied before and no longer
        // does goes, unless another manager (or the config) still owns it: a field, or
        // a list item whole (with what is in it).
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
                remove(&mut merged, p, schema);
            }
        }
        let (changed, removed) = compare(live, &merged, reach, schema);
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
            return Err(Refusal::Conflicts(conflicts));
        }
        next.hand_over(manager, Operation::Apply, &changed, &removed);
        next.entries.retain(|e| !e.fields.is_empty());
        *self = next;
        Ok(merged)
    }
}

/// The errors that keep `config` (member `m`'s value) from being typed: a map-list item
/// without a key or with one an earlier item has, a set item that is an object or a
/// list (typed/helpers.go, typed/merge.go `indexListPathElements`).
fn check(config: &Value, m: Member<'_>, path: &mut Path, errors: &mut Vec<String>) {
    match config {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(Seg::Field(k.clone()));
                check(v, m.node.member(k), path, errors);
                path.pop();
            }
        }
        Value::Array(items) => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let seg = match m.list {
                    ListType::Atomic => return,
                    ListType::Set => match item {
                        Value::Object(_) | Value::Array(_) => Err(
                            "associative list without keys has an element that's a map type"
                                .to_string(),
                        ),
                        scalar => Ok(Seg::Value(scalar.to_string())),
                    },
                    ListType::Map(keys) => keys.of(item).map(Seg::Key).map_err(|e| e.0),
                };
                match seg {
                    Err(why) => errors.push(format!("{}: element {i}: {why}", dotted(path))),
                    Ok(seg) => {
                        if !seen.insert(seg.clone()) {
                            errors.push(format!(
                                "{}: duplicate entries for key {}",
                                dotted(path),
                                dotted(std::slice::from_ref(&seg))
                            ));
                        }
                        if matches!(m.list, ListType::Map(_)) {
                            path.push(seg);
                            check(item, Member::of(m.node), path, errors);
                            path.pop();
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// Merge an apply's `config` (an object) into `live` at `node`: maps member by member,
/// lists by their list type ([`merge_list`]); a null in the config sets nothing.
fn merge(live: &mut Value, config: &Value, node: Node<'_>) {
    let Value::Object(c) = config else {
        if !config.is_null() {
            *live = config.clone();
        }
        return;
    };
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let Value::Object(l) = live else { return };
    for (k, v) in c {
        let m = node.member(k);
        match v {
            Value::Null => {}
            Value::Object(_) => merge(l.entry(k.clone()).or_insert(Value::Null), v, m.node),
            Value::Array(add) => match (l.get_mut(k), item_segs(add, m.list)) {
                (Some(Value::Array(have)), Some(add_segs)) => match item_segs(have, m.list) {
                    Some(have_segs) => {
                        let out =
                            merge_list(std::mem::take(have), have_segs, add, add_segs, m.node);
                        *have = out;
                    }
                    None => {
                        *have = add.clone();
                    }
                },
                _ => {
                    l.insert(k.clone(), v.clone());
                }
            },
            _ => {
                l.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A set or map list merged as typed/merge.go `visitListItems` merges one: the live
/// items the config does not name where they were, the config's in its order, the
/// items both have merged (a map-list item member by member) where the config puts
/// them among the live ones.
fn merge_list(
    live: Vec<Value>,
    live_segs: Vec<Seg>,
    config: &[Value],
    config_segs: Vec<Seg>,
    items: Node<'_>,
) -> Vec<Value> {
    let in_config = |seg: &Seg| config_segs.iter().position(|s| s == seg);
    let first_live = |seg: &Seg| live_segs.iter().position(|s| s == seg);
    // The config's items that live has too, in the config's order.
    let mut shared = config_segs.iter().filter(|s| first_live(s).is_some());
    let mut next_shared = shared.next();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let mut merged = BTreeSet::new();
    let mut live: Vec<Option<Value>> = live.into_iter().map(Some).collect();
    let both = |live_item: Option<Value>, cfg: &Value| -> Value {
        match live_item {
            Some(mut l) if cfg.is_object() => {
                merge(&mut l, cfg, items);
                l
            }
            _ => cfg.clone(),
        }
    };
    let (n_live, n_config) = (live_segs.len(), config_segs.len());
    let (mut li, mut ri) = (0, 0);
    while li < n_live || ri < n_config {
        if li < n_live && ri < n_config {
            let pe = &live_segs[li];
            if *pe == config_segs[ri] {
                merged.insert(pe.clone());
                let l = first_live(pe).and_then(|i| live[i].take());
                out.push(both(l, &config[ri]));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_config(pe).is_some() && next_shared.is_some_and(|s| s != pe) {
                li += 1;
                continue;
            }
        }
        if li < n_live {
            let pe = &live_segs[li];
            if in_config(pe).is_none() {
                if let Some(item) = live[li].take() {
                    out.push(item);
                }
                li += 1;
                continue;
            } else if merged.contains(pe) {
                li += 1;
            }
        }
        if ri < n_config {
            let pe = &config_segs[ri];
            merged.insert(pe.clone());
            let l = first_live(pe).and_then(|i| live[i].take());
            out.push(both(l, &config[ri]));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// Remove the field at `path` from `v`: a member, or a list's item (every item with
/// that key or value).
fn remove(v: &mut Value, path: &[Seg], schema: &Schema) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    let mut m = Member::of(schema.root());
    for seg in parent {
        match seg {
            Seg::Field(name) => {
                m = m.node.member(name);
                match cur.as_object_mut().and_then(|o| o.get_mut(name)) {
                    Some(next) => cur = next,
                    None => return,
                }
            }
            Seg::Key(_) | Seg::Value(_) => {
                let Value::Array(items) = cur else { return };
                let Some(i) =
                    item_segs(items, m.list).and_then(|s| s.iter().position(|s| s == seg))
                else {
                    return;
                };
                cur = &mut items[i];
                m = Member::of(m.node);
            }
        }
    }
    match last {
        Seg::Field(name) => {
            if let Value::Object(o) = cur {
                o.remove(name);
            }
        }
        Seg::Key(_) | Seg::Value(_) => {
            let Value::Array(items) = cur else { return };
            let Some(segs) = item_segs(items, m.list) else {
                return;
            };
            let mut segs = segs.into_iter();
            items.retain(|_| segs.next().as_ref() != Some(last));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OBJECT: Reach = Reach::Object {
        status_subresource: false,
    };

    /// A ConfigMap's or a Lease's: nothing but ObjectMeta's lists.
    const PLAIN: Schema = Schema::Builtin(None);

    fn lease(holder: &str, renew: &str) -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "l", "resourceVersion": "3"},
               "spec": {"holderIdentity": holder, "renewTime": renew}})
    }

    #[test]
    fn an_apply_of_another_managers_field_conflicts_unless_forced_or_the_same() {
        let mut m = ManagedFields::default();
        let live = m
            .apply("a", &json!({}), &lease("a", "t0"), false, OBJECT, &PLAIN)
            .unwrap();
        // b applies a different holder: a owns it.
        let Err(Refusal::Conflicts(err)) =
            m.apply("b", &live, &lease("b", "t1"), false, OBJECT, &PLAIN)
        else {
            panic!("a conflict")
        };
        assert_eq!(err[0].manager, "a");
        assert_eq!(
            err[0].fields.iter().map(|p| dotted(p)).collect::<Vec<_>>(),
            [".spec.holderIdentity", ".spec.renewTime"]
        );
        // The same values: shared, no conflict.
        m.apply("b", &live, &lease("a", "t0"), false, OBJECT, &PLAIN)
            .unwrap();
        assert_eq!(m.entries().len(), 2);
        // Forced: b takes them, a keeps nothing.
        let next = m
            .apply("b", &live, &lease("b", "t1"), true, OBJECT, &PLAIN)
            .unwrap();
        assert_eq!(next["spec"]["holderIdentity"], "b");
        assert_eq!(m.entries().len(), 1);
        assert_eq!(m.entries()[0].manager, "b");
    }

    #[test]
    fn an_update_takes_what_it_changes_and_a_removal_frees_it() {
        let mut m = ManagedFields::default();
        let live = m
            .apply("a", &json!({}), &lease("a", "t0"), false, OBJECT, &PLAIN)
            .unwrap();
        // An update by b of renewTime takes it from a.
        let mut renewed = live.clone();
        renewed["spec"]["renewTime"] = json!("t1");
        m.update("b", &live, &renewed, OBJECT, &PLAIN);
        let a = &m.entries()[0];
        assert_eq!(a.fields.len(), 1, "{a:?}");
        // b removes holderIdentity (a strategic patch of null): no one owns it, and an
        // apply by c of a new holder does not conflict.
        let mut released = renewed.clone();
        released["spec"]
            .as_object_mut()
            .unwrap()
            .remove("holderIdentity");
        m.update("b", &renewed, &released, OBJECT, &PLAIN);
        assert!(m.entries().iter().all(|e| e.manager == "b"));
        let config = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "spec": {"holderIdentity": "c"}});
        let next = m
            .apply("c", &released, &config, false, OBJECT, &PLAIN)
            .unwrap();
        assert_eq!(next["spec"]["holderIdentity"], "c");
    }

    #[test]
    fn a_field_no_longer_applied_is_removed_unless_another_owns_it() {
        let mut m = ManagedFields::default();
        let config = json!({"metadata": {"labels": {"x": "1", "y": "2"}, "finalizers": ["f"]}});
        let live = m
            .apply("a", &json!({}), &config, false, OBJECT, &PLAIN)
            .unwrap();
        // b also sets y (an update of the same value changes nothing: a keeps it alone).
        let mut shared = live.clone();
        shared["metadata"]["labels"]["z"] = json!("3");
        m.update("b", &live, &shared, OBJECT, &PLAIN);
        let again = m
            .apply(
                "a",
                &shared,
                &json!({"metadata": {"labels": {"y": "2"}}}),
                false,
                OBJECT,
                &PLAIN,
            )
            .unwrap();
        assert_eq!(again["metadata"]["labels"], json!({"y": "2", "z": "3"}));
        assert_eq!(again["metadata"]["finalizers"], json!([]));
    }

    #[test]
    fn set_and_map_items_merge_in_structured_merge_diffs_order_and_name_their_paths() {
        let mut m = ManagedFields::default();
        let live = json!({"metadata": {"finalizers": ["x", "y"]}});
        m.update("u", &json!({}), &live, OBJECT, &PLAIN);
        // The config's items both have come where the config puts them among the live.
        let merged = m
            .apply(
                "a",
                &live,
                &json!({"metadata": {"finalizers": ["z", "x"]}}),
                false,
                OBJECT,
                &PLAIN,
            )
            .unwrap();
        assert_eq!(merged["metadata"]["finalizers"], json!(["z", "x", "y"]));
        let pod = Schema::builtin("", "v1", "Pod");
        let config =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        let owned = fields(&config, OBJECT, &pod);
        let names: Vec<String> = owned.iter().map(|p| dotted(p)).collect();
        assert_eq!(
            names,
            [
                r#".spec.containers[name="a"]"#,
                r#".spec.containers[name="a"].name"#,
                r#".spec.containers[name="a"].ports[containerPort=80,protocol="TCP"]"#,
                r#".spec.containers[name="a"].ports[containerPort=80,protocol="TCP"].containerPort"#,
            ]
        );
        assert_eq!(
            dotted(&[
                Seg::Field("metadata".into()),
                Seg::Field("finalizers".into()),
                Seg::Value("\"x\"".into())
            ]),
            r#".metadata.finalizers[="x"]"#
        );
    }
}
