//! Differential oracles: findings without an invariant, by comparing how runs end.
//!
//! A run is summed up as an [`EndState`]: object counts by kind, every object as JSON
//! with whatever depends on time, seed or launch order masked (uids, resourceVersions,
//! timestamps, generations, names made by generateName, cloud instance ids), the
//! cloud's live instances, and Sieve's state-update summary (how many objects under each
//! masked name were created and deleted over the run: a controller that makes one Pod
//! too many and later removes it ends right, but not with the same summary). Two
//! oracles compare end states:
//! - [`differential`] (Sieve, OSDI'22): a perturbed run (a fault plan) against the
//!   reference run of the same seed with no faults. Faults that heal must not change
//!   what a correct controller did or where it ended.
//! - [`divergence`] (Kamera): two fault-free runs of the same workload with different
//!   seeds. A seed changes timing (latencies, boot and join delays), never what a
//!   correct controller converges to.
//!
//! A difference is a finding to read, not a verdict: a mask too narrow shows up as a
//! difference in a fixed controller's runs, and a controller that legitimately ends in
//! one of several equivalent states needs its choice masked. The masks are short fixed
//! lists ([`EXCLUDED_KINDS`], [`MASKED_KEYS`], [`MASKED_FIELDS`]), documented in
//! docs/oracle.md.

use crate::build::World;
use crate::format::{Plan, Scenario};
use crate::runner::{Outcome, run_observed, view};
use reconsim_check::View;
use reconsim_cloud::{Cloud, InstanceState};
use reconsim_sim::{ProcId, TraceMode};
use reconsim_world::object::{Deployment, Object, Resource, Uid};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Kinds left out: they churn on their own (node heartbeats and leader locks are Leases,
/// a CSR is one request per kubelet start) and say nothing of a controller's decisions.
/// A Node's own status keeps its Ready condition; when it last changed is masked.
pub const EXCLUDED_KINDS: &[&str] = &["Lease", "Event", "CertificateSigningRequest"];

/// Keys masked wherever they appear (compared lower-case without `_`, so both the typed
/// bodies' `resource_version` and the REST JSON's `resourceVersion` match): identities
/// and counters the API server or cloud assigns, and times. A masked value becomes
/// `"*"`; `null` stays `null`, so whether a timestamp is set (an object being deleted)
/// still counts. Besides these, every key ending in `time` or `timestamp` is masked.
pub const MASKED_KEYS: &[&str] = &[
    "uid",
    "resourceversion",
    "generation",
    "observedgeneration",
    "managedfields",
    "creationtimestamp",
    "deletiontimestamp",
    "lastupdated",
    "readysince",
    "timeadded",
    // A RunInstances idempotency token: machine-api makes it from the Machine's uid.
    "clienttoken",
];

/// Fields masked in one kind only, as paths from the object's top (lower-case, no `_`):
/// choices made by the cluster rather than by the controller under test.
pub const MASKED_FIELDS: &[(&str, &[&str])] = &[
    // Which of the fitting nodes a Pod landed on is the scheduler's pick, and a fault
    // (a node evicted, a partition) legitimately moves it.
    ("Pod", &["spec", "nodename"]),
    // The kubelet restarts a container of a crashed process: the count follows faults.
    ("Pod", &["status", "restartcount"]),
];

/// How many differences a [`Diff`] lists; it counts the rest.
pub const DIFF_LIMIT: usize = 20;

/// The masked value of a masked key, and the end of a masked name.
const MASK: &str = "*";

/// How many objects of a kind there are: live, and being deleted (deletionTimestamp set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub live: usize,
    pub deleting: usize,
}

/// How many objects under one masked name were created and removed over a run (Sieve's
/// state-update summary counts ADDED and DELETED events the same way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Updates {
    pub created: u64,
    /// Removed from the store (for cloud instances: terminated, or gone).
    pub deleted: u64,
}

/// The cloud at the end: instances not terminated, masked (ids and DNS names as `i-*`
/// and `ip-*`, launch times and client tokens as `*`, tags' object names as the objects'
/// own masked names).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CloudState {
    /// Instances pending, running, stopping, stopped or shutting down.
    pub live: usize,
    /// Each of them, masked, sorted by their JSON text.
    pub instances: Vec<Value>,
}

/// The masked, abstract end of a run: what the controllers decided, not when or under
/// which names. Plain data, sorted, the same for the same run on every machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EndState {
    /// When it was taken: the run's end, or the instant a violation stopped it. Not
    /// compared.
    pub time_ms: u64,
    /// By kind name (excluded kinds left out).
    pub counts: BTreeMap<String, Count>,
    /// By `Kind namespace/name` with run-dependent names masked (`Pod default/web-*`):
    /// the masked objects under that key, sorted by their JSON text (several Pods of one
    /// generateName share a key).
    pub objects: BTreeMap<String, Vec<Value>>,
    /// `None` if the world runs no cloud.
    pub cloud: Option<CloudState>,
    /// Over the whole run, by the same keys as `objects` (and `cloud instance` for
    /// launches and terminations). Pods of Deployments are left out: here they are the
    /// controllers' own pods, which a fault legitimately replaces (Sieve leaves out the
    /// controller's own objects too). Empty from [`EndState::of`], which sees only the end.
    pub updates: BTreeMap<String, Updates>,
}

/// One way two end states differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// What differs: `count Pod`, `Pod default/web-*`, `updates Pod default/web-*`,
    /// `cloud instance`, `cloud live instances`.
    pub what: String,
    /// Where inside it, dotted (`spec.replicas`); empty for the whole thing.
    pub field: String,
    /// The value in the end state `diff` was called on; `None`: absent there.
    pub left: Option<Value>,
    /// The value in the other end state; `None`: absent there.
    pub right: Option<Value>,
}

impl Difference {
    /// A difference of the whole thing (no field inside it).
    fn whole(what: String, left: Option<Value>, right: Option<Value>) -> Self {
        Difference {
            what,
            field: String::new(),
            left,
            right,
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("(absent)".to_string(), Value::to_string);
        f.write_str(&self.what)?;
        if !self.field.is_empty() {
            write!(f, " {}", self.field)?;
        }
        write!(f, ": {} vs {}", show(&self.left), show(&self.right))
    }
}

/// The differences between two end states: the first [`DIFF_LIMIT`], sorted by what and
/// field, and how many more there are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub differences: Vec<Difference>,
    /// Differences found beyond those listed.
    pub more: usize,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.differences.is_empty()
    }

    /// Every difference found, listed or not.
    pub fn total(&self) -> usize {
        self.differences.len() + self.more
    }
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str("no difference");
        }
        for d in &self.differences {
            writeln!(f, "{d}")?;
        }
        if self.more > 0 {
            writeln!(f, "... and {} more", self.more)?;
        }
        Ok(())
    }
}

/// Two runs and how they ended.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The reference run and its end state.
    pub reference: Outcome,
    pub reference_state: EndState,
    /// The run compared with it.
    pub other: Outcome,
    pub other_state: EndState,
    /// `reference_state.diff(&other_state)`.
    pub diff: Diff,
}

/// Run `scenario` with `seed` and `plan` to its end (or to the first violation of an
/// invariant it lists, or of its convergence bound) and sum it up. With
/// `scenario.invariants` empty and `convergence` `None`, only the kernel's event budget
/// stops a run early.
pub fn run(scenario: &Scenario, seed: u64, plan: Plan) -> (Outcome, EndState) {
    let mut recorder = Recorder::default();
    let (outcome, world) = run_observed(scenario, seed, plan, TraceMode::Hash, |v| {
        recorder.observe(v)
    });
    let state = EndState::from_recorder(&world, recorder);
    (outcome, state)
}

/// [`run`], keeping what `keep` asks of the run's steps, and the world: a combined
/// campaign's reference run is judged, searched from and signed at once.
pub fn run_kept(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    keep: crate::build::Keep,
) -> (Outcome, EndState, World) {
    let mut recorder = Recorder::default();
    let (outcome, world) =
        crate::runner::run_observed_keeping(scenario, seed, plan, keep, |v| recorder.observe(v));
    let state = EndState::from_recorder(&world, recorder);
    (outcome, state, world)
}

/// Sieve's differential oracle: the run of `seed` under `plan` against the reference
/// run of the same seed with no faults. A difference means the faults, although they
/// healed, changed what the controllers did or where they ended.
pub fn differential(scenario: &Scenario, seed: u64, plan: Plan) -> Comparison {
    compare(
        run(scenario, seed, Plan::default()),
        run(scenario, seed, plan),
    )
}

/// Kamera's divergence: two fault-free runs of the same workload, seeds `a` (the
/// reference) and `b`. A seed changes timing only, so a correct controller that
/// converged ends the same. A difference is a bug when both runs converged (read their
/// outcomes, or give the scenario a convergence bound) and what differs is a decision;
/// it is not when the run ended before the controllers settled, or when the controller
/// legitimately picks one of several equivalent ends (then mask that choice).
pub fn divergence(scenario: &Scenario, a: u64, b: u64) -> Comparison {
    compare(
        run(scenario, a, Plan::default()),
        run(scenario, b, Plan::default()),
    )
}

/// Any two runs from [`run`], the first as the reference: a fixed variant's run against
/// a buggy one's, the same plan under two versions of a controller.
pub fn compare(reference: (Outcome, EndState), other: (Outcome, EndState)) -> Comparison {
    let diff = reference.1.diff(&other.1);
    Comparison {
        reference: reference.0,
        reference_state: reference.1,
        other: other.0,
        other_state: other.1,
        diff,
    }
}

/// What an oracle run records between steps: every object seen (for the state-update
/// summary) and every run-dependent name ever given (so a tag naming a Machine deleted
/// long ago is masked as the live ones are).
#[derive(Default)]
struct Recorder {
    /// Objects in the store at the last look, and their keys in the summary.
    seen: BTreeMap<Uid, Option<String>>,
    names: BTreeMap<String, String>,
    updates: BTreeMap<String, Updates>,
    /// The API server's creates and removals and the cloud's launch count at the last look.
    writes: Option<u64>,
    launched: u64,
    cloud: Option<ProcId>,
}

impl Recorder {
    fn observe(&mut self, view: &View<'_>) {
        let cloud = view.find_cached::<Cloud>(&mut self.cloud);
        if let Some(c) = cloud
            && c.launched() != self.launched
        {
            self.launched = c.launched();
            for i in c.instances() {
                for name in [&i.id, &i.private_dns_name] {
                    self.names.insert(name.clone(), dash_stem(name));
                }
            }
        }
        // Only a create or a removal changes what is recorded (updates, most of a run's
        // writes, leave the set of objects as it was).
        if self.writes == Some(view.api.creates_and_removals()) {
            return;
        }
        self.writes = Some(view.api.creates_and_removals());
        let mut now = BTreeSet::new();
        for o in view.api.objects() {
            now.insert(o.meta.uid);
            if self.seen.contains_key(&o.meta.uid) {
                continue;
            }
            if let Some(stem) = run_dependent_stem(o) {
                self.names
                    .insert(o.meta.name.clone(), format!("{stem}{MASK}"));
            }
            let key = summarised(o).then(|| key(o, &self.rename(&o.meta.name)));
            if let Some(k) = &key {
                self.updates.entry(k.clone()).or_default().created += 1;
            }
            self.seen.insert(o.meta.uid, key);
        }
        let gone: Vec<Uid> = self
            .seen
            .keys()
            .filter(|u| !now.contains(u))
            .copied()
            .collect();
        for uid in gone {
            if let Some(Some(k)) = self.seen.remove(&uid) {
                self.updates.entry(k).or_default().deleted += 1;
            }
        }
    }

    fn rename(&self, name: &str) -> String {
        self.names
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }
}

/// Whether the state-update summary counts `o`: not an excluded kind, not a Pod of a
/// Deployment (a controller's own, which faults legitimately replace).
fn summarised(o: &Object) -> bool {
    let of_a_deployment = o.meta.controller_ref().map(|r| r.kind) == Some(Deployment::KIND);
    !EXCLUDED_KINDS.contains(&o.kind().as_str()) && !of_a_deployment
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped kind.
fn key(o: &Object, name: &str) -> String {
    if o.meta.namespace.is_empty() {
        format!("{} {name}", o.kind())
    } else {
        format!("{} {}/{name}", o.kind(), o.meta.namespace)
    }
}

impl EndState {
    /// The masked end state of `world` as it is now (no state-update summary: only
    /// [`run`] watches a whole run).
    pub fn of(world: &World) -> EndState {
        let mut recorder = Recorder::default();
        recorder.observe(&view(world));
        let mut state = EndState::from_recorder(world, recorder);
        state.updates.clear();
        state
    }

    fn from_recorder(world: &World, mut recorder: Recorder) -> EndState {
        let v = view(world);
        recorder.observe(&v);
        let cloud = world.sim.actor(world.cloud).component::<Cloud>();
        let names = Names::new(&recorder.names);
        let mut counts: BTreeMap<String, Count> = BTreeMap::new();
        let mut objects: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for o in v.api.objects() {
            let kind = o.kind().as_str();
            if EXCLUDED_KINDS.contains(&kind) {
                continue;
            }
            let count = counts.entry(kind.to_string()).or_default();
            if o.meta.is_deleting() {
                count.deleting += 1;
            } else {
                count.live += 1;
            }
            let name = recorder.rename(&o.meta.name);
            let mut json = object_json(o);
            if name != o.meta.name {
                // A masked name says what its generateName said, and a replacement made
                // with one is alike an object seeded without.
                at_path(&mut json, &["metadata", "generatename"], &mut |x| {
                    *x = name.as_str().into()
                });
            }
            names.mask(&mut json);
            for (k, path) in MASKED_FIELDS {
                if *k == kind {
                    at_path(&mut json, path, &mut mask_value);
                }
            }
            objects.entry(key(o, &name)).or_default().push(json);
        }
        for list in objects.values_mut() {
            sort(list);
        }
        let mut updates = recorder.updates;
        let cloud = cloud.map(|c| {
            let mut instances: Vec<Value> = c
                .instances()
                .filter(|i| i.state != InstanceState::Terminated)
                .map(|i| {
                    let mut json = serde_json::to_value(i).unwrap_or(Value::Null);
                    names.mask(&mut json);
                    json
                })
                .collect();
            sort(&mut instances);
            let live = instances.len();
            updates.insert(
                "cloud instance".into(),
                Updates {
                    created: c.launched(),
                    deleted: c.launched().saturating_sub(live as u64),
                },
            );
            CloudState { live, instances }
        });
        EndState {
            time_ms: world.sim.now().as_ms(),
            counts,
            objects,
            cloud,
            updates,
        }
    }

    /// How `self` and `other` differ, `self` on the left: counts by kind, objects in one
    /// and not the other, masked fields, the cloud's instances, the state-update summary.
    pub fn diff(&self, other: &EndState) -> Diff {
        let mut all = Vec::new();
        for kind in union(&self.counts, &other.counts) {
            let (l, r) = (self.counts.get(kind), other.counts.get(kind));
            if l != r {
                all.push(Difference::whole(
                    format!("count {kind}"),
                    l.map(json),
                    r.map(json),
                ));
            }
        }
        let none = Vec::new();
        for key in union(&self.objects, &other.objects) {
            let l = self.objects.get(key).unwrap_or(&none);
            let r = other.objects.get(key).unwrap_or(&none);
            diff_multiset(key, l, r, &mut all);
        }
        let no_cloud = CloudState::default();
        let lc = self.cloud.as_ref().unwrap_or(&no_cloud);
        let rc = other.cloud.as_ref().unwrap_or(&no_cloud);
        if lc.live != rc.live {
            all.push(Difference::whole(
                "cloud live instances".into(),
                Some(lc.live.into()),
                Some(rc.live.into()),
            ));
        }
        diff_multiset("cloud instance", &lc.instances, &rc.instances, &mut all);
        for key in union(&self.updates, &other.updates) {
            let (l, r) = (self.updates.get(key), other.updates.get(key));
            // An object one run made and removed and the other never made, under a name
            // of its own (a rendered config named by its content's hash): an
            // intermediate state a level-triggered controller may skip when changes
            // coalesce, not a decision. Under a shared masked name (`web-*`) the counts
            // are compared as they are.
            let transient = |u: Option<&Updates>| u.is_some_and(|u| u.created == u.deleted);
            if (l.is_none() && transient(r)) || (r.is_none() && transient(l)) {
                continue;
            }
            if l != r {
                all.push(Difference::whole(
                    format!("updates {key}"),
                    l.map(json),
                    r.map(json),
                ));
            }
        }
        // Stable: within one (what, field) the order of discovery stays.
        all.sort_by(|a, b| (&a.what, &a.field).cmp(&(&b.what, &b.field)));
        let more = all.len().saturating_sub(DIFF_LIMIT);
        all.truncate(DIFF_LIMIT);
        Diff {
            differences: all,
            more,
        }
    }
}

/// A count or a summary entry as a difference shows it.
fn json(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The keys of two maps, sorted, each once.
fn union<'a, V>(a: &'a BTreeMap<String, V>, b: &'a BTreeMap<String, V>) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The JSON text of a value: the order of masked objects under one key.
fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn sort(list: &mut [Value]) {
    list.sort_by_cached_key(text);
}

/// Two sorted lists of masked values under one name: those in both drop out; what is
/// left is paired in order (their fields compared) and the unpaired are extra or missing.
fn diff_multiset(what: &str, left: &[Value], right: &[Value], out: &mut Vec<Difference>) {
    let (mut l, mut r) = (left.iter().peekable(), right.iter().peekable());
    let (mut only_l, mut only_r) = (Vec::new(), Vec::new());
    loop {
        match (l.peek(), r.peek()) {
            (None, None) => break,
            (Some(_), None) => only_l.extend(l.by_ref()),
            (None, Some(_)) => only_r.extend(r.by_ref()),
            (Some(a), Some(b)) => match text(a).cmp(&text(b)) {
                std::cmp::Ordering::Equal => {
                    l.next();
                    r.next();
                }
                std::cmp::Ordering::Less => only_l.extend(l.next()),
                std::cmp::Ordering::Greater => only_r.extend(r.next()),
            },
        }
    }
    let paired = only_l.len().min(only_r.len());
    for (a, b) in only_l.iter().zip(&only_r) {
        diff_value(what, String::new(), a, b, out);
    }
    for a in &only_l[paired..] {
        out.push(Difference {
            what: what.to_string(),
            field: String::new(),
            left: Some((*a).clone()),
            right: None,
        });
    }
    for b in &only_r[paired..] {
        out.push(Difference {
            what: what.to_string(),
            field: String::new(),
            left: None,
            right: Some((*b).clone()),
        });
    }
}

/// Field by field: maps by key, lists of equal length by index, anything else whole.
fn diff_value(what: &str, field: String, a: &Value, b: &Value, out: &mut Vec<Difference>) {
    let join = |k: &str| {
        if field.is_empty() {
            k.to_string()
        } else {
            format!("{field}.{k}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff_value(what, join(k), p, q, out),
                    (p, q) if p != q => out.push(Difference {
                        what: what.to_string(),
                        field: join(k),
                        left: p.cloned(),
                        right: q.cloned(),
                    }),
                    _ => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_value(what, join(&i.to_string()), p, q, out);
            }
        }
        _ if a != b => out.push(Difference {
            what: what.to_string(),
            field,
            left: Some(a.clone()),
            right: Some(b.clone()),
        }),
        _ => {}
    }
}

/// An object as JSON, Kubernetes-shaped: `metadata` beside the body's own fields
/// (`spec`, `status`).
fn object_json(o: &Object) -> Value {
    let meta = serde_json::to_value(&o.meta).unwrap_or(Value::Null);
    let mut top = match serde_json::to_value(&o.body) {
        Ok(Value::Object(map)) => map,
        Ok(other) => serde_json::Map::from_iter([("body".to_string(), other)]),
        Err(_) => serde_json::Map::new(),
    };
    top.insert("metadata".into(), meta);
    Value::Object(top)
}

/// A key as [`MASKED_KEYS`] spells it: lower-case, no `_`.
fn normal(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn masked_key(key: &str) -> bool {
    let k = normal(key);
    MASKED_KEYS.contains(&k.as_str()) || k.ends_with("time") || k.ends_with("timestamp")
}

/// `"*"` for a value that is set; `null` stays.
fn mask_value(v: &mut Value) {
    if !v.is_null() {
        *v = MASK.into();
    }
}

/// Apply `f` to the value at `path` (normalised keys), where it exists.
fn at_path(v: &mut Value, path: &[&str], f: &mut dyn FnMut(&mut Value)) {
    let Some((first, rest)) = path.split_first() else {
        f(v);
        return;
    };
    if let Value::Object(map) = v {
        for (k, child) in map.iter_mut() {
            if normal(k) == *first {
                at_path(child, rest, f);
            }
        }
    }
}

/// Run-dependent names and their masks, applied to whole JSON values.
struct Names<'a> {
    /// Longest first, so a name that extends another is replaced as a whole.
    masks: Vec<(&'a str, &'a str)>,
}

impl<'a> Names<'a> {
    fn new(table: &'a BTreeMap<String, String>) -> Names<'a> {
        let mut masks: Vec<(&str, &str)> = table
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        masks.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
        Names { masks }
    }

    /// `s` with every run-dependent name in it masked, where it stands as a whole name
    /// (not inside a longer word: `ip-10-0-0-1` inside `ip-10-0-0-12` is left alone).
    fn rename(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (name, mask) in &self.masks {
            if out.contains(name) {
                out = replace_whole(&out, name, mask);
            }
        }
        out
    }

    /// Mask a JSON value in place: masked keys, then run-dependent names in every string
    /// (map keys included: labels and annotations can name objects).
    fn mask(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.rename(s),
            Value::Array(list) => list.iter_mut().for_each(|x| self.mask(x)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut child) in old {
                    if masked_key(&k) {
                        mask_value(&mut child);
                    } else {
                        self.mask(&mut child);
                    }
                    map.insert(self.rename(&k), child);
                }
            }
            _ => {}
        }
    }
}

/// The stem of a name that depends on the run, by generateName or by its owner's.
fn run_dependent_stem(o: &Object) -> Option<&str> {
    let name = &o.meta.name;
    generated_stem(name, o.meta.generate_name.as_deref())
        .or_else(|| owned_stem(name, &o.meta.controller_ref()?.name))
}

/// The stem of a name made by generateName (the prefix the API server kept, without its
/// 5 random characters), or `None` if the name was given.
fn generated_stem<'a>(name: &'a str, generate_name: Option<&str>) -> Option<&'a str> {
    let prefix = generate_name?;
    let cut = name.len().checked_sub(5)?;
    let stem = name.get(..cut)?;
    (!stem.is_empty() && prefix.starts_with(stem)).then_some(stem)
}

/// The stem of a name made from its controller owner's (`<owner>-<suffix>`, the
/// workload controllers' convention, generated or not: a Deployment's seeded
/// `machine-controller-0` and its replacement `machine-controller-7xk2q` are alike).
fn owned_stem<'a>(name: &'a str, owner: &str) -> Option<&'a str> {
    let stem = name.get(..owner.len() + 1)?;
    (name.len() > stem.len() && stem.starts_with(owner) && stem.ends_with('-')).then_some(stem)
}

/// `i-0000000000000000a` -> `i-*`: the part up to the first `-`, then the mask.
fn dash_stem(name: &str) -> String {
    match name.find('-') {
        Some(i) => format!("{}{MASK}", &name[..=i]),
        None => MASK.to_string(),
    }
}

/// Whether `c` can continue a name (so a match next to it is part of a longer word).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

/// `s` with each whole-name occurrence of `name` replaced by `mask`.
fn replace_whole(s: &str, name: &str, mask: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut done = 0;
    for (start, _) in s.match_indices(name) {
        let end = start + name.len();
        let before = s[..start].chars().next_back();
        let after = s[end..].chars().next();
        if before.is_some_and(name_char) || after.is_some_and(name_char) {
            continue;
        }
        out.push_str(&s[done..start]);
        out.push_str(mask);
        done = end;
    }
    out.push_str(&s[done..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_names_are_masked_and_longer_words_kept() {
        assert_eq!(replace_whole("ip-10-0-0-1", "ip-10-0-0-1", "ip-*"), "ip-*");
        assert_eq!(
            replace_whole("ip-10-0-0-12", "ip-10-0-0-1", "ip-*"),
            "ip-10-0-0-12"
        );
        assert_eq!(
            replace_whole("aws:///us-east-1a/i-01", "i-01", "i-*"),
            "aws:///us-east-1a/i-*"
        );
        assert_eq!(replace_whole("a i-01,i-01", "i-01", "i-*"), "a i-*,i-*");
    }

    #[test]
    fn generated_names_lose_their_suffix() {
        assert_eq!(generated_stem("web-7xk2q", Some("web-")), Some("web-"));
        assert_eq!(generated_stem("web", Some("web-")), None);
        assert_eq!(generated_stem("web-7xk2q", None), None);
        assert_eq!(dash_stem("i-0000000000000000a"), "i-*");
        assert_eq!(owned_stem("web-0", "web"), Some("web-"));
        assert_eq!(owned_stem("web-", "web"), None);
        assert_eq!(owned_stem("webby-0", "web"), None);
    }

    #[test]
    fn masked_keys_match_both_spellings_and_keep_null() {
        let names = Names { masks: vec![] };
        let mut v = serde_json::json!({
            "resource_version": 7, "resourceVersion": 8, "deletion_timestamp": null,
            "lastTransitionTime": 5, "spec": {"replicas": 2, "renew_time": 9}
        });
        names.mask(&mut v);
        assert_eq!(
            v,
            serde_json::json!({
                "resource_version": "*", "resourceVersion": "*", "deletion_timestamp": null,
                "lastTransitionTime": "*", "spec": {"replicas": 2, "renew_time": "*"}
            })
        );
    }

    #[test]
    fn a_diff_pairs_leftovers_and_reports_the_extra() {
        let pod = |image: &str| serde_json::json!({"spec": {"image": image}});
        let mut a = EndState::default();
        let mut b = EndState::default();
        a.objects
            .insert("Pod ns/web-*".into(), vec![pod("a"), pod("b")]);
        b.objects
            .insert("Pod ns/web-*".into(), vec![pod("a"), pod("c"), pod("d")]);
        let d = a.diff(&b);
        assert_eq!(d.total(), 2, "{d}");
        // Sorted by field: the whole extra Pod first, then the paired Pods' image.
        assert_eq!(d.differences[0].left, None);
        assert_eq!(d.differences[0].right, Some(pod("d")));
        assert_eq!(d.differences[1].field, "spec.image");
        assert!(a.diff(&a).is_empty());
    }
}
