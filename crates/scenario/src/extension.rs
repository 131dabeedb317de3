//! Users' own controllers and invariants: a registry a binary builds once and hands to
//! the library or to the CLI (`reconsim::cli::main_with`), so a reconciler that is not
//! one of ours runs, fuzzes, shrinks, replays and explains like the seed ones.
//!
//! An [`Extensions`] maps names to closures:
//! - [`Extensions::controller`]: the reconcilers of one manager process, made from the
//!   scenario entry's `params` (each run makes fresh ones; state never leaks between
//!   runs). Optional hooks for the same name: [`Extensions::objects`] (the objects the
//!   API server holds at t = 0, e.g. the custom resource the controller reconciles),
//!   [`Extensions::action`] (what a `custom` workload action does, as one API call) and
//!   [`Extensions::convergence`] (the controller's desired state, judged once faults
//!   heal, like the builtin families' convergence checks);
//! - [`Extensions::invariant`]: a checker ([`Check`]) by invariant name.
//!
//! A scenario names them: `controllers.custom` entries ([`CustomSpec`]) and invariant
//! names besides the builtin ones ([`InvariantName`]). The registry travels with the
//! scenario it was loaded with ([`Scenario::load_with`] stores it in
//! [`Scenario::extensions`], which serde skips), so building, running, fuzzing,
//! shrinking, replaying, explaining and the proptest strategies all see it with no
//! global state and no change to their signatures; a scenario loaded without it (the
//! builtin CLI, [`Scenario::load`]) fails validation on any name it does not know, with
//! the file, the field path and the known names.
//!
//! Determinism: the registry is plain data (a `BTreeMap` by name); the closures must be
//! pure functions of their arguments, and reconcilers draw randomness only from
//! `ReconcileCtx::rng`, as every component does (docs/determinism.md).
//!
//! Kinds are open: a user's resource is a kind of its own (a type implementing
//! `reconsim_world::object::Resource`, as the PodSet example's is). Limits users meet:
//! the controller runs as a plain process on its node (not as a pod), so a `crash`
//! fault restarts it cold and a kubelet stop does not touch it. docs/guide/writing-a-reconciler.md walks through all of it.

use crate::build::PAUSE_IMAGE;
use crate::family::{FamilySection, Services};
use crate::format::{LeaseSpec, Scenario};
use reconsim_check::{Check, Checker, View};
use reconsim_sim::Sim;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::{Container, Images};
use reconsim_world::leader::LeaderConfig;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::Object;
use reconsim_world::{Endpoints, Proc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// Makes a controller's reconcilers from its scenario entry's `params`.
pub type ControllerFn = dyn Fn(&Value) -> Result<Vec<Box<dyn Reconciler>>, String> + Send + Sync;
/// The objects a controller's scenario entry puts in the API server at t = 0.
pub type ObjectsFn = dyn Fn(&Value) -> Result<Vec<Object>, String> + Send + Sync;
/// A `custom` workload action as one API call: (the entry's params, the action's params).
pub type ActionFn = dyn Fn(&Value, &Value) -> Result<ApiOp, String> + Send + Sync;
/// A fresh checker for one run.
pub type CheckFn = dyn Fn() -> Box<dyn Check> + Send + Sync;
/// The controller's desired state: `Err` says what is missing.
pub type ConvergenceFn = dyn Fn(&View<'_>) -> Result<(), String> + Send + Sync;

/// The namespace of custom controllers' leader election Leases.
pub const LEASE_NAMESPACE: &str = "default";

#[derive(Clone)]
struct Registered {
    reconcilers: Arc<ControllerFn>,
    objects: Option<Arc<ObjectsFn>>,
    action: Option<Arc<ActionFn>>,
    convergence: Option<Arc<ConvergenceFn>>,
}

/// The controllers and invariants a binary adds to the builtin ones. Empty for the
/// `reconsim` binary; cheap to clone (closures are shared).
#[derive(Clone, Default)]
pub struct Extensions {
    controllers: BTreeMap<String, Registered>,
    invariants: BTreeMap<String, Arc<CheckFn>>,
}

impl Extensions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register controller `name`: `make` turns a scenario entry's `params` into the
    /// reconcilers one manager process hosts (called for validation at load time and
    /// once per run; an `Err` is reported at `.controllers.custom[i].params`).
    ///
    /// # Panics
    /// If `name` is already registered.
    pub fn controller(
        mut self,
        name: &str,
        make: impl Fn(&Value) -> Result<Vec<Box<dyn Reconciler>>, String> + Send + Sync + 'static,
    ) -> Self {
        let old = self.controllers.insert(
            name.to_string(),
            Registered {
                reconcilers: Arc::new(make),
                objects: None,
                action: None,
                convergence: None,
            },
        );
        assert!(old.is_none(), "controller `{name}` is registered twice");
        self
    }

    fn hook(&mut self, name: &str, what: &str) -> &mut Registered {
        self.controllers.get_mut(name).unwrap_or_else(|| {
            panic!("{what} for controller `{name}`: register the controller first")
        })
    }

    /// The objects the API server holds at t = 0 for an entry of controller `name`
    /// (names must be set; uid and resourceVersion are the server's).
    ///
    /// # Panics
    /// If `name` is not registered yet.
    pub fn objects(
        mut self,
        name: &str,
        make: impl Fn(&Value) -> Result<Vec<Object>, String> + Send + Sync + 'static,
    ) -> Self {
        self.hook(name, "objects").objects = Some(Arc::new(make));
        self
    }

    /// What a workload action `{"custom": {"controller": name, "params": ...}}` does:
    /// one API call from the user's host, made from the entry's params and the action's.
    ///
    /// # Panics
    /// If `name` is not registered yet.
    pub fn action(
        mut self,
        name: &str,
        make: impl Fn(&Value, &Value) -> Result<ApiOp, String> + Send + Sync + 'static,
    ) -> Self {
        self.hook(name, "action").action = Some(Arc::new(make));
        self
    }

    /// Controller `name`'s desired state, checked when a scenario with a `convergence`
    /// bound reaches it (without this hook the controller adds nothing to convergence).
    ///
    /// # Panics
    /// If `name` is not registered yet.
    pub fn convergence(
        mut self,
        name: &str,
        converged: impl Fn(&View<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.hook(name, "convergence").convergence = Some(Arc::new(converged));
        self
    }

    /// Register invariant `name`: scenarios list it in `invariants` like a builtin one,
    /// and each run checks a fresh `make()`. Violations carry `name`.
    ///
    /// # Panics
    /// If `name` is registered already or is a builtin invariant's name.
    pub fn invariant(
        mut self,
        name: &str,
        make: impl Fn() -> Box<dyn Check> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            crate::builtin::invariant(name).is_none(),
            "invariant `{name}` is a builtin one"
        );
        let old = self.invariants.insert(name.to_string(), Arc::new(make));
        assert!(old.is_none(), "invariant `{name}` is registered twice");
        self
    }

    /// The registered controller names, sorted.
    pub fn controller_names(&self) -> Vec<&str> {
        self.controllers.keys().map(String::as_str).collect()
    }

    /// The registered invariant names, sorted.
    pub fn invariant_names(&self) -> Vec<&str> {
        self.invariants.keys().map(String::as_str).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.controllers.is_empty() && self.invariants.is_empty()
    }

    fn registered(&self, name: &str) -> &Registered {
        self.controllers
            .get(name)
            .unwrap_or_else(|| panic!("controller `{name}` was validated as registered"))
    }

    /// The reconcilers of a custom entry.
    pub fn reconcilers(&self, spec: &CustomSpec) -> Result<Vec<Box<dyn Reconciler>>, String> {
        (self.registered(&spec.name).reconcilers)(&spec.params)
    }

    /// The objects of a custom entry (none without an `objects` hook).
    pub fn seed_objects(&self, spec: &CustomSpec) -> Result<Vec<Object>, String> {
        match &self.registered(&spec.name).objects {
            Some(make) => make(&spec.params),
            None => Ok(Vec::new()),
        }
    }

    /// A fresh checker of `invariant`.
    pub fn checker(&self, invariant: &InvariantName) -> Checker {
        match invariant {
            InvariantName::Builtin(name) => crate::builtin::invariant(name)
                .expect("a builtin name")
                .checker(),
            InvariantName::Custom(name) => {
                Checker::new(
                    name,
                    (self.invariants.get(name).unwrap_or_else(|| {
                        panic!("invariant `{name}` was validated as registered")
                    }))(),
                )
            }
        }
    }

    /// The convergence check of a custom entry (always met without a hook).
    pub fn converged(&self, spec: &CustomSpec, view: &View<'_>) -> Result<(), String> {
        match &self.registered(&spec.name).convergence {
            Some(check) => check(view),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("controllers", &self.controller_names())
            .field("invariants", &self.invariant_names())
            .finish()
    }
}

/// The registry is not part of a scenario's value: two scenarios with the same fields
/// are equal whatever they were loaded with.
impl PartialEq for Extensions {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Extensions {}

/// One entry of `controllers.custom`: a registered controller, run as one manager
/// process on `node`'s host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomSpec {
    /// The name the binary registered the controller under.
    pub name: String,
    /// The topology node whose host runs the process.
    pub node: String,
    /// The process name (a fault target); default: `name`. Two entries of one
    /// controller (two replicas with leader election) need two names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Handed to the controller's closures; its shape is the controller's own.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Leader election on the Lease `default/<name>` with these timings; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaseSpec>,
}

impl CustomSpec {
    /// The process's name.
    pub fn process_name(&self) -> &str {
        self.process.as_deref().unwrap_or(&self.name)
    }
}

/// An invariant a scenario names: a builtin one or one the binary registers. Written as
/// a plain string in scenario files; a name that is not builtin is `Custom` and must be
/// registered (checked by validation).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InvariantName {
    /// One of [`crate::builtin::invariants`].
    Builtin(&'static str),
    Custom(String),
}

impl InvariantName {
    pub fn name(&self) -> &str {
        match self {
            InvariantName::Builtin(name) => name,
            InvariantName::Custom(n) => n,
        }
    }
}

impl InvariantName {
    /// The invariant called `name`: builtin if a builtin family registers it.
    pub fn named(name: &str) -> Self {
        match crate::builtin::invariant(name) {
            Some(i) => InvariantName::Builtin(i.name),
            None => InvariantName::Custom(name.to_string()),
        }
    }
}

impl fmt::Display for InvariantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for InvariantName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for InvariantName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(InvariantName::named(&name))
    }
}

/// Parse a controller's `params` into its own type (derive `Deserialize`, with
/// `#[serde(deny_unknown_fields)]` for strict files). The error starts with the JSON
/// path inside `params` (`at .variant: unknown variant ...`), which validation appends
/// to the entry's path.
pub fn params<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." || path.is_empty() {
            ".".to_string()
        } else {
            format!(".{path}")
        };
        format!("at {at}: {}", e.inner())
    })
}

/// `(path, message)` of a closure's error at `path`: a message `at .x: ...` (from
/// [`params`]) moves its sub-path into the path.
fn nested(path: &str, message: String) -> (String, String) {
    if let Some(rest) = message.strip_prefix("at .")
        && let Some((sub, msg)) = rest.split_once(": ")
    {
        let sub = if sub.is_empty() {
            String::new()
        } else {
            format!(".{sub}")
        };
        return (format!("{path}{sub}"), msg.to_string());
    }
    (path.to_string(), message)
}

fn known(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// Checks of the custom entries (their family section's validation).
fn validate(s: &Scenario) -> Result<(), (String, String)> {
    let ext = &s.extensions;
    let err = |path: String, msg: String| Err((path, msg));
    // `processes()` lists the custom entries' processes last.
    let all = s.processes();
    let builtin_processes = &all[..all.len() - s.controllers.custom.len()];
    let mut processes = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for (i, c) in s.controllers.custom.iter().enumerate() {
        let at = |field: &str| format!(".controllers.custom[{i}].{field}");
        if !ext.controllers.contains_key(&c.name) {
            return err(
                at("name"),
                format!(
                    "a controller this binary registers (known: {}), not `{}`; a scenario with custom controllers runs with the binary that registers them (docs/guide/writing-a-reconciler.md)",
                    known(&ext.controller_names()),
                    c.name
                ),
            );
        }
        if !s.nodes().any(|n| *n == c.node) {
            return err(
                at("node"),
                format!("one of the topology's nodes, not `{}`", c.node),
            );
        }
        let process = c.process_name();
        if process.is_empty()
            || builtin_processes.iter().any(|p| p == process)
            || !processes.insert(process)
        {
            return err(
                at("process"),
                format!(
                    "a unique process name, not `{process}` (set `process` to tell two entries apart)"
                ),
            );
        }
        if let Some(l) = c.leader_election
            && !(l.lease_duration_ms > l.renew_deadline_ms
                && l.renew_deadline_ms * 10 > l.retry_period_ms * 12)
        {
            return err(
                at("leader_election"),
                "lease_duration_ms > renew_deadline_ms > 1.2 * retry_period_ms (client-go's rule)"
                    .into(),
            );
        }
        let bad = |m: String| nested(&at("params"), m);
        match ext.reconcilers(c) {
            Err(m) => return Err(bad(m)),
            Ok(r) if r.is_empty() => {
                return Err(bad("params that make at least one reconciler".into()));
            }
            Ok(_) => {}
        }
        for o in ext.seed_objects(c).map_err(bad)? {
            if o.meta.name.is_empty() || !keys.insert(o.key()) {
                return Err(bad(format!(
                    "objects with unique, non-empty names; `{}` is not",
                    o.key()
                )));
            }
        }
    }
    Ok(())
}

/// Checks of the invariant names: builtin or registered (part of [`Scenario::validate`]).
pub(crate) fn validate_invariants(s: &Scenario) -> Result<(), (String, String)> {
    let ext = &s.extensions;
    let err = |path: String, msg: String| Err((path, msg));
    for (i, name) in s.invariants.iter().enumerate() {
        if let InvariantName::Custom(n) = name
            && !ext.invariants.contains_key(n)
        {
            let builtin: Vec<&str> = crate::builtin::invariants()
                .iter()
                .map(|i| i.name)
                .collect();
            return err(
                format!(".invariants[{i}]"),
                format!(
                    "a builtin invariant ({}) or one this binary registers ({}), not `{n}`",
                    builtin.join(", "),
                    known(&ext.invariant_names())
                ),
            );
        }
    }
    Ok(())
}

/// Workload action `index`, a `custom` one, checked and as its API call.
fn validate_action(
    s: &Scenario,
    index: usize,
    controller: &str,
    params: &Value,
) -> Result<ApiOp, (String, String)> {
    let at = |field: &str| format!(".workload[{index}].action.custom.{field}");
    let Some(spec) = s.controllers.custom.iter().find(|c| c.name == controller) else {
        return Err((
            at("controller"),
            format!("the name of a controllers.custom entry, not `{controller}`"),
        ));
    };
    if s.extensions.registered(&spec.name).action.is_none() {
        return Err((
            at("controller"),
            format!("a controller with an action hook; `{controller}` has none"),
        ));
    }
    action_op(s, controller, params).map_err(|m| nested(&at("params"), m))
}

/// The API call of a `custom` action of `controller` (its first entry's params).
fn action_op(s: &Scenario, controller: &str, params: &Value) -> Result<ApiOp, String> {
    let spec = s
        .controllers
        .custom
        .iter()
        .find(|c| c.name == controller)
        .expect("validated: the action names a custom entry");
    let make = s
        .extensions
        .registered(controller)
        .action
        .as_ref()
        .expect("validated: the controller has an action hook");
    make(&spec.params, params)
}

/// The custom entries of a scenario as one family section: one manager process per
/// entry on its node's host, the objects and convergence their hooks give.
pub struct Custom<'a>(pub &'a Scenario);

impl FamilySection for Custom<'_> {
    fn validate(&self, scenario: &Scenario) -> Result<(), (String, String)> {
        validate(scenario)
    }

    fn processes(&self) -> Vec<String> {
        let custom = &self.0.controllers.custom;
        custom
            .iter()
            .map(|c| c.process_name().to_string())
            .collect()
    }

    fn seed(&self, server: &mut ApiServer) {
        seed(self.0, server)
    }

    /// The idling container users' pods run.
    fn images(&self, images: Images, _: &Services) -> Images {
        images.with(PAUSE_IMAGE, Container::image(None))
    }

    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        spawn(self.0, sim, services.endpoints)
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        for c in &self.0.controllers.custom {
            self.0.extensions.converged(c, view)?;
        }
        Ok(())
    }

    /// `custom`: the API call the entry's action hook makes.
    fn action(&self, scenario: &Scenario, index: usize) -> Option<Result<ApiOp, (String, String)>> {
        let crate::format::Action::Custom { controller, params } = &scenario.workload[index].action
        else {
            return None;
        };
        Some(validate_action(scenario, index, controller, params))
    }
}

/// Seed the custom entries' objects.
fn seed(s: &Scenario, server: &mut ApiServer) {
    for c in &s.controllers.custom {
        for o in s.extensions.seed_objects(c).expect("validated params") {
            server.seed_object(o);
        }
    }
}

/// Spawn one manager process per custom entry on its node's host.
fn spawn(s: &Scenario, sim: &mut Sim<Proc>, endpoints: Endpoints) {
    for c in &s.controllers.custom {
        let host = sim.host_by_name(&c.node).expect("validated node");
        let process = c.process_name();
        let leader = c.leader_election.map(|l| {
            LeaderConfig::new(
                LEASE_NAMESPACE,
                &c.name,
                l.lease_duration_ms,
                l.renew_deadline_ms,
                l.retry_period_ms,
            )
        });
        let reconcilers = s.extensions.reconcilers(c).expect("validated params");
        sim.spawn(
            host,
            process,
            Proc::Manager(Manager::new(
                ManagerConfig {
                    identity: process.to_string(),
                    leader,
                    kubelet: None,
                    pod: None,
                },
                endpoints,
                reconcilers,
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_world::object::{Lease, Resource};

    #[test]
    fn builtin_names_parse_as_builtin_and_others_as_custom() {
        for i in crate::builtin::invariants() {
            let v = Value::String(i.name.into());
            let n: InvariantName = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(n, InvariantName::Builtin(i.name));
            assert_eq!(serde_json::to_value(&n).unwrap(), v, "round trip");
        }
        assert_eq!(crate::builtin::invariants().len(), 10);
        let n: InvariantName = serde_json::from_str("\"podset_max_pods\"").unwrap();
        assert_eq!(n, InvariantName::Custom("podset_max_pods".into()));
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"podset_max_pods\"");
    }

    #[test]
    fn a_params_error_moves_its_path_into_the_field_path() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct P {
            replicas: u32,
        }
        let e = params::<P>(&serde_json::json!({"replicas": -1})).unwrap_err();
        assert_eq!(
            nested(".controllers.custom[0].params", e).0,
            ".controllers.custom[0].params.replicas"
        );
        let e = params::<P>(&serde_json::json!({})).unwrap_err();
        let (path, msg) = nested(".controllers.custom[0].params", e);
        assert_eq!(path, ".controllers.custom[0].params");
        assert!(msg.contains("missing field `replicas`"), "{msg}");
    }

    /// A reconciler that watches nothing and does nothing.
    #[derive(Debug)]
    struct Idle;

    impl Reconciler for Idle {
        fn name(&self) -> &str {
            "idle"
        }
        fn watches(&self) -> Vec<reconsim_world::object::Kind> {
            Vec::new()
        }
        fn keys_for(&self, _: &Object, _: &mut Vec<reconsim_world::object::ObjectKey>) {}
        fn reconcile(
            &mut self,
            _: &mut reconsim_world::manager::ReconcileCtx<'_>,
        ) -> reconsim_world::manager::Step {
            reconsim_world::manager::Step::done()
        }
        fn reset(&mut self) {}
    }

    /// Reports a violation under a name of its own at its first check.
    #[derive(Clone, Debug)]
    struct Always;

    impl Check for Always {
        fn check(&mut self, view: &View<'_>) -> Option<reconsim_check::Violation> {
            Some(reconsim_check::Violation {
                invariant: "some_other_name".into(),
                time: view.now,
                message: "always".into(),
                objects: vec![],
            })
        }
    }

    fn ext() -> Extensions {
        Extensions::new()
            .controller("idle", |_| Ok(vec![Box::new(Idle) as Box<dyn Reconciler>]))
            .convergence("idle", |_| Err("never converges".into()))
            .invariant("always", || Box::new(Always))
    }

    fn scenario(custom: &str, invariants: &str) -> String {
        format!(
            r#"{{"name": "x", "expect": "clean", "seeds": 1, "duration_ms": 10000,
                "topology": {{"control_plane_nodes": ["m"]}},
                "controllers": {{"custom": [{custom}]}},
                "invariants": [{invariants}], "convergence": {{"within_ms": 5000}}}}"#
        )
    }

    fn error(custom: &str) -> (String, String) {
        let e = Scenario::parse_with(
            "x.json",
            &scenario(custom, r#""no_leaked_instances""#),
            &ext(),
        )
        .unwrap_err();
        (e.path, e.message)
    }

    #[test]
    fn custom_entries_are_validated_with_their_paths() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        assert!(Scenario::parse_with("x.json", &scenario(ok, r#""always""#), &ext()).is_ok());
        let (path, msg) = error(r#"{"name": "nope", "node": "m"}"#);
        assert_eq!(path, ".controllers.custom[0].name");
        assert!(
            msg.contains("known: idle") && msg.contains("not `nope`"),
            "{msg}"
        );
        assert_eq!(
            error(r#"{"name": "idle", "node": "x"}"#).0,
            ".controllers.custom[0].node"
        );
        // A process name must not clash with a builtin process or another entry.
        let (path, _) = error(r#"{"name": "idle", "node": "m", "process": "workloads"}"#);
        assert_eq!(path, ".controllers.custom[0].process");
        let (path, _) = error(&format!("{ok}, {ok}"));
        assert_eq!(path, ".controllers.custom[1].process");
        let lease = r#"{"lease_duration_ms": 10, "renew_deadline_ms": 20, "retry_period_ms": 1}"#;
        let (path, _) = error(&format!(
            r#"{{"name": "idle", "node": "m", "leader_election": {lease}}}"#
        ));
        assert_eq!(path, ".controllers.custom[0].leader_election");
        // Without the registry: the name is unknown, and so is the invariant.
        let e = Scenario::parse("x.json", &scenario(ok, r#""no_leaked_instances""#)).unwrap_err();
        assert!(e.message.contains("known: none"), "{e}");
        let e = Scenario::parse_with(
            "x.json",
            &scenario(ok, r#""no_leaked_instances", "nope""#),
            &ext(),
        )
        .unwrap_err();
        assert_eq!(e.path, ".invariants[1]");
        assert!(e.message.contains("registers (always)"), "{e}");
    }

    #[test]
    fn a_custom_checker_reports_under_its_registered_name() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        let s = Scenario::parse_with("x.json", &scenario(ok, r#""always""#), &ext()).unwrap();
        let (outcome, _) = crate::runner::run(&s, 0);
        let v = outcome.violation.expect("the checker fires");
        assert_eq!(v.invariant, "always");
    }

    #[test]
    fn a_custom_convergence_check_is_judged() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        let s = Scenario::parse_with("x.json", &scenario(ok, r#""no_leaked_instances""#), &ext())
            .unwrap();
        let (outcome, _) = crate::runner::run(&s, 0);
        let v = outcome.violation.expect("convergence fails");
        assert_eq!(v.invariant, crate::runner::CONVERGENCE);
        assert!(v.message.contains("never converges"), "{}", v.message);
        // The manager process runs on its node under the entry's name.
        let world = crate::build::build(
            &s,
            0,
            crate::format::Plan::default(),
            reconsim_sim::TraceMode::Hash,
        );
        let p = world.sim.proc_by_name("idle").expect("the custom process");
        assert_eq!(world.sim.host_name(world.sim.proc_host(p)), "m");
    }

    #[test]
    fn a_custom_entry_with_leader_election_leads_on_its_lease() {
        let entry = r#"{"name": "idle", "node": "m", "process": "idle-0", "leader_election":
            {"lease_duration_ms": 15000, "renew_deadline_ms": 10000, "retry_period_ms": 2000}}"#;
        let s = Scenario::parse_with(
            "x.json",
            &scenario(entry, r#""no_leaked_instances""#),
            &ext(),
        )
        .unwrap();
        let mut world = crate::build::build(
            &s,
            0,
            crate::format::Plan::default(),
            reconsim_sim::TraceMode::Hash,
        );
        world.sim.run_until(reconsim_sim::SimTime::from_secs(5));
        let Proc::ApiServer(api) = world.sim.actor(world.apiserver) else {
            unreachable!("process 0 is the API server")
        };
        let key = reconsim_world::object::ObjectKey::new(
            reconsim_world::object::Lease::KIND,
            LEASE_NAMESPACE,
            "idle",
        );
        let lease = api.get(&key).expect("the entry's Lease");
        assert_eq!(
            lease
                .typed::<Lease>()
                .and_then(|l| l.holder_identity.as_deref()),
            Some("idle-0")
        );
        let p = world.sim.proc_by_name("idle-0").expect("the process");
        let Proc::Manager(m) = world.sim.actor(p) else {
            unreachable!("a manager")
        };
        assert!(m.running(), "it leads, so its controllers run");
    }

    #[test]
    #[should_panic(expected = "register the controller first")]
    fn a_hook_needs_its_controller() {
        let _ = Extensions::new().objects("x", |_| Ok(vec![]));
    }

    #[test]
    #[should_panic(expected = "is a builtin one")]
    fn a_builtin_invariant_name_cannot_be_registered() {
        #[derive(Clone, Debug)]
        struct C;
        impl Check for C {
            fn check(&mut self, _: &View<'_>) -> Option<reconsim_check::Violation> {
                None
            }
        }
        let _ = Extensions::new().invariant("no_leaked_instances", || Box::new(C));
    }
}
