//! Users' own controllers and invariants as closures: a family built by registration, for
//! a controller that needs no kind or component of its own beyond what closures give.
//!
//! An [`Extensions`] is a [`Family`] like the builtin ones (its section is
//! `controllers.custom`, a list of entries; its action is `custom`), registered the
//! same way: `reconsim::families::builtin().with(extensions)`. It maps names to closures:
//! - [`Extensions::controller`]: the reconcilers of one manager process, made from the
//!   scenario entry's `params` (each run makes fresh ones; state never leaks between
//!   runs). Optional hooks for the same name: [`Extensions::objects`] (the objects the
//!   API server holds at t = 0, e.g. the custom resource the controller reconciles),
//!   [`Extensions::action`] (what a `custom` workload action does, as one API call) and
//!   [`Extensions::convergence`] (the controller's desired state, judged once faults
//!   heal, like the builtin families' convergence checks);
//! - [`Extensions::process`]: instead of reconcilers under reconsim's manager, the
//!   entry's whole process, a world component made from its `params` (called again on
//!   every restart of the run's world): how a user's unmodified kube-rs program runs
//!   (reconsim-kube's `KubeBridge`, docs/kube.md), with [`Extensions::host`] to host
//!   each run as real code needs;
//! - [`Extensions::image`]: a container image by name, a world component made at every
//!   start of a container that runs it: a Pod the user's program creates (an operator's
//!   workload) is scheduled and its kubelet runs the registered program;
//! - [`Extensions::invariant`]: a checker ([`Check`]) by invariant name.
//!
//! A family of its own (a type implementing [`Family`] and [`FamilySection`], with typed
//! parameters, its own kinds and components) is the other way to bring a controller;
//! tests/open_world.rs shows one. The scenario keeps the registry it was loaded with, so
//! building, running, fuzzing, shrinking, replaying, explaining and the proptest
//! strategies all see it with no global state; a scenario loaded without it fails
//! validation on any name it does not know, with the file, the field path and the known
//! names.
//!
//! Determinism: the registry is plain data (a `BTreeMap` by name); the closures must be
//! pure functions of their arguments, and reconcilers draw randomness only from
//! `ReconcileCtx::rng`, as every component does (docs/determinism.md).
//!
//! Limits users meet: the controller runs as a plain process on its node (not as a pod),
//! so a `crash` fault restarts it cold and a kubelet stop does not touch it. Registered
//! images reach the kubelets only in a scenario with `controllers.custom` entries (the
//! family's section exists only then); in one without, a pod of such an image fails as
//! an unknown image does.
//! docs/guide/writing-a-reconciler.md walks through all of it.

use crate::build::PAUSE_IMAGE;
use crate::format::known;
use reconsim_check::{Check, NamedCheck, View};
use reconsim_family::{
    Context, Family, FamilySection, LeaseSpec, ParamError, RunHost, Services, WorkloadAction,
};
use reconsim_sim::Sim;
use reconsim_world::Endpoints;
use reconsim_world::Proc;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::component::Component;
use reconsim_world::informer::RelistNotify;
use reconsim_world::kubelet::{Container, ContainerEnv, Images};
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::Object;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// Makes a controller's reconcilers from its scenario entry's `params`.
pub type ControllerFn = dyn Fn(&Value) -> Result<Vec<Box<dyn Reconciler>>, String> + Send + Sync;
/// Makes a controller's whole process from its scenario entry's `params` and the
/// world's services (the API server's process, the cloud's).
pub type ProcessFn = dyn Fn(&Value, &Services) -> Result<Box<dyn Component>, String> + Send + Sync;
/// The objects a controller's scenario entry puts in the API server at t = 0.
pub type ObjectsFn = dyn Fn(&Value) -> Result<Vec<Object>, String> + Send + Sync;
/// A `custom` workload action as one API call: (the entry's params, the action's params).
pub type ActionFn = dyn Fn(&Value, &Value) -> Result<ApiOp, String> + Send + Sync;
/// The controller's desired state: `Err` says what is missing.
pub type ConvergenceFn = dyn Fn(&View<'_>) -> Result<(), String> + Send + Sync;
/// Makes the process of a container of a registered image from the container's
/// environment (its pod, namespace, node) and the world's services.
pub type ContainerFn = dyn Fn(&ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync;

/// The namespace of custom controllers' leader election Leases.
pub const LEASE_NAMESPACE: &str = "default";

/// What an entry runs: reconcilers under reconsim's manager, or a process of its own.
#[derive(Clone)]
enum Make {
    Reconcilers(Arc<ControllerFn>),
    Process(Arc<ProcessFn>),
}

#[derive(Clone)]
struct Registered {
    make: Make,
    objects: Option<Arc<ObjectsFn>>,
    action: Option<Arc<ActionFn>>,
    convergence: Option<Arc<ConvergenceFn>>,
}

/// The controllers and invariants a binary registers by closures: the `custom` family.
/// Cheap to clone (closures are shared).
///
/// ```
/// use reconsim_check::{Check, View, Violation};
/// use reconsim_scenario::{Extensions, Families};
///
/// #[derive(Clone, Debug)]
/// struct NoObjects;
///
/// impl Check for NoObjects {
///     fn check(&mut self, view: &View<'_>) -> Option<Violation> {
///         view.api.objects().next().map(|o| Violation {
///             invariant: "no_objects".into(),
///             time: view.now,
///             message: format!("{} exists", o.key()),
///             objects: Vec::new(),
///         })
///     }
/// }
///
/// // Scenario files then name the invariant (`"invariants": ["no_objects"]`).
/// let mine = Extensions::new().invariant("no_objects", || Box::new(NoObjects));
/// assert_eq!(mine.invariant_names(), ["no_objects"]);
/// let _families = Families::new().with(mine);
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    controllers: BTreeMap<String, Registered>,
    invariants: Vec<NamedCheck>,
    /// Container images by name: a `BTreeMap`, so the kubelets' registry is built in
    /// one order on every run.
    images: BTreeMap<String, Arc<ContainerFn>>,
    host: Option<RunHost>,
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
        self,
        name: &str,
        make: impl Fn(&Value) -> Result<Vec<Box<dyn Reconciler>>, String> + Send + Sync + 'static,
    ) -> Self {
        self.register(name, Make::Reconcilers(Arc::new(make)))
    }

    /// Register controller `name` as a process of its own: `make` turns a scenario
    /// entry's `params` and the world's services into the entry's component (called
    /// for validation at load time, with placeholder services, and once per run). The
    /// same hooks ([`Extensions::objects`], [`Extensions::action`],
    /// [`Extensions::convergence`]) apply.
    ///
    /// # Panics
    /// If `name` is already registered.
    pub fn process(
        self,
        name: &str,
        make: impl Fn(&Value, &Services) -> Result<Box<dyn Component>, String> + Send + Sync + 'static,
    ) -> Self {
        self.register(name, Make::Process(Arc::new(make)))
    }

    /// Register container image `name`: a Pod whose `spec.containers[0].image` is `name`
    /// (one a user's program creates, as an operator creates its workloads) is bound by
    /// the scheduler, and its kubelet runs `make`'s component as the pod's container.
    /// `make` is called again on every start of the container (a restart after its exit
    /// or a kill starts it cold), with the container's environment (pod name, namespace,
    /// node) and the world's services. The kubelets know the image only in scenarios
    /// with `controllers.custom` entries, where this family's section exists. Images
    /// share one registry across families, later sections' names replacing earlier
    /// ones (machine-api's pods run `machine-controller`): give yours names of your own.
    ///
    /// # Panics
    /// If `name` is already registered, or is [`PAUSE_IMAGE`] (this family's own).
    pub fn image(
        mut self,
        name: &str,
        make: impl Fn(&ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            name != PAUSE_IMAGE,
            "image `{name}` is the custom family's own idling container"
        );
        let old = self.images.insert(name.to_string(), Arc::new(make));
        assert!(old.is_none(), "image `{name}` is registered twice");
        self
    }

    /// Host every run of this binary's scenarios with `host` ([`reconsim_family::host`]):
    /// real code's `reconsim_kube::intercept::host`, so a run's std `HashMap`s and
    /// per-thread generators follow its seed.
    pub fn host(mut self, host: RunHost) -> Self {
        self.host = Some(host);
        self
    }

    fn register(mut self, name: &str, make: Make) -> Self {
        let old = self.controllers.insert(
            name.to_string(),
            Registered {
                make,
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
    /// and each run checks a fresh `make()`. Violations carry `name`. (Registering the
    /// extensions in a registry panics if another family has an invariant of the name.)
    ///
    /// # Panics
    /// If `name` is registered here already.
    pub fn invariant(
        mut self,
        name: &str,
        make: impl Fn() -> Box<dyn Check> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            !self.invariants.iter().any(|c| c.name == name),
            "invariant `{name}` is registered twice"
        );
        self.invariants.push(NamedCheck::new(name, make));
        self
    }

    /// The registered controller names, sorted.
    pub fn controller_names(&self) -> Vec<&str> {
        self.controllers.keys().map(String::as_str).collect()
    }

    /// The registered invariant names, in registration order.
    pub fn invariant_names(&self) -> Vec<&str> {
        self.invariants.iter().map(|c| c.name.as_str()).collect()
    }

    /// The registered image names, sorted.
    pub fn image_names(&self) -> Vec<&str> {
        self.images.keys().map(String::as_str).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.controllers.is_empty() && self.invariants.is_empty() && self.images.is_empty()
    }

    fn registered(&self, name: &str) -> &Registered {
        self.controllers
            .get(name)
            .unwrap_or_else(|| panic!("controller `{name}` was validated as registered"))
    }

    /// The reconcilers of a custom entry (none for a process entry).
    pub fn reconcilers(&self, spec: &CustomSpec) -> Result<Vec<Box<dyn Reconciler>>, String> {
        match &self.registered(&spec.name).make {
            Make::Reconcilers(make) => make(&spec.params),
            Make::Process(_) => Ok(Vec::new()),
        }
    }

    /// The process of a process entry (`None` for reconcilers).
    pub fn process_of(
        &self,
        spec: &CustomSpec,
        services: &Services,
    ) -> Option<Result<Box<dyn Component>, String>> {
        match &self.registered(&spec.name).make {
            Make::Reconcilers(_) => None,
            Make::Process(make) => Some(make(&spec.params, services)),
        }
    }

    /// The objects of a custom entry (none without an `objects` hook).
    pub fn seed_objects(&self, spec: &CustomSpec) -> Result<Vec<Object>, String> {
        match &self.registered(&spec.name).objects {
            Some(make) => make(&spec.params),
            None => Ok(Vec::new()),
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
            .field("images", &self.image_names())
            .finish()
    }
}

/// The `custom` family: its section is the list of entries.
impl Family for Extensions {
    fn name(&self) -> &str {
        "custom"
    }

    fn parse(&self, section: &Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(Custom {
            entries: reconsim_family::params::parse(section)?,
            extensions: self.clone(),
        }))
    }

    fn actions(&self) -> &[&str] {
        &["custom"]
    }

    fn invariants(&self) -> Vec<NamedCheck> {
        self.invariants.clone()
    }

    fn host(&self) -> Option<RunHost> {
        self.host
    }
}

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

/// A `custom` workload action's params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomAction {
    controller: String,
    #[serde(default)]
    params: Value,
}

/// Parse a controller's `params` into its own type (derive `Deserialize`, with
/// `#[serde(deny_unknown_fields)]` for strict files). The error starts with the JSON
/// path inside `params` (`at .variant: unknown variant ...`), which validation appends
/// to the entry's path.
pub fn params<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, String> {
    reconsim_family::params::parse(value).map_err(|e| {
        let at = if e.path.is_empty() { "." } else { &e.path };
        format!("at {at}: {}", e.message)
    })
}

/// The error of a closure at `path`: a message `at .x: ...` (from [`params`]) moves its
/// sub-path into the path.
fn nested(path: &str, message: String) -> ParamError {
    if let Some(rest) = message.strip_prefix("at .")
        && let Some((sub, msg)) = rest.split_once(": ")
    {
        let sub = if sub.is_empty() {
            String::new()
        } else {
            format!(".{sub}")
        };
        return ParamError::at(format!("{path}{sub}"), msg);
    }
    ParamError::at(path, message)
}

/// `controllers.custom`: the entries, one manager process each on its node's host, with
/// the objects and convergence their hooks give.
#[derive(Clone, Debug)]
pub struct Custom {
    pub entries: Vec<CustomSpec>,
    extensions: Extensions,
}

/// Written as its entries.
impl Serialize for Custom {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries.serialize(s)
    }
}

impl FamilySection for Custom {
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        let ext = &self.extensions;
        let mut processes = BTreeSet::new();
        let mut keys = BTreeSet::new();
        if self.entries.is_empty() {
            return Err(ParamError::at("", "at least one entry"));
        }
        for (i, c) in self.entries.iter().enumerate() {
            let at = |field: &str| format!("[{i}].{field}");
            if !ext.controllers.contains_key(&c.name) {
                return Err(ParamError::at(
                    at("name"),
                    format!(
                        "a controller this binary registers (known: {}), not `{}`",
                        known(&ext.controller_names()),
                        c.name
                    ),
                ));
            }
            context.node(&at("node"), &c.node)?;
            let process = c.process_name();
            if process.is_empty()
                || context.processes.iter().any(|p| p == process)
                || !processes.insert(process)
            {
                return Err(ParamError::at(
                    at("process"),
                    format!(
                        "a unique process name, not `{process}` (set `process` to tell two entries apart)"
                    ),
                ));
            }
            if let Some(l) = c.leader_election {
                l.check(&at("leader_election"))?;
            }
            let bad = |m: String| nested(&at("params"), m);
            // Placeholder services: a process is made to validate its params, then
            // dropped before it ever starts.
            let placeholder = Services {
                endpoints: Endpoints {
                    apiserver: reconsim_sim::ProcId(0),
                },
                cloud: reconsim_sim::ProcId(0),
            };
            match ext.process_of(c, &placeholder) {
                Some(Err(m)) => return Err(bad(m)),
                Some(Ok(_)) if c.leader_election.is_some() => {
                    return Err(ParamError::at(
                        at("leader_election"),
                        "no leader_election for a process entry (the program elects its own leader)",
                    ));
                }
                Some(Ok(_)) => {}
                None => match ext.reconcilers(c) {
                    Err(m) => return Err(bad(m)),
                    Ok(r) if r.is_empty() => {
                        return Err(bad("params that make at least one reconciler".into()));
                    }
                    Ok(_) => {}
                },
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

    fn processes(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|c| c.process_name().to_string())
            .collect()
    }

    fn seed(&self, server: &mut ApiServer) {
        for c in &self.entries {
            for o in self.extensions.seed_objects(c).expect("validated params") {
                server.seed_object(o);
            }
        }
    }

    /// The idling container users' pods run, and every registered image, each a
    /// component made afresh at each container start.
    fn images(&self, images: Images, services: &Services) -> Images {
        let mut images = images.with(PAUSE_IMAGE, Container::image(None));
        for (name, make) in &self.extensions.images {
            let make = make.clone();
            let services = *services;
            images = images.with(name, move |env| Proc::Component(make(env, &services)));
        }
        images
    }

    /// One manager process per entry on its node's host.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        for c in &self.entries {
            let host = sim.host_by_name(&c.node).expect("validated node");
            let process = c.process_name();
            if let Some(made) = self.extensions.process_of(c, services) {
                let component = made.expect("validated params");
                sim.spawn(host, process, Proc::Component(component));
                continue;
            }
            let leader = c
                .leader_election
                .map(|l| l.leader(LEASE_NAMESPACE, &c.name));
            let reconcilers = self.extensions.reconcilers(c).expect("validated params");
            sim.spawn(
                host,
                process,
                Proc::Manager(Manager::new(
                    ManagerConfig {
                        identity: process.to_string(),
                        leader,
                        kubelet: None,
                        pod: None,
                        // Users' controllers are kube-rs code (kube-runtime's watcher).
                        relist_notify: RelistNotify::Every,
                        fence_ms: c.leader_election.map_or(0, |l| l.fence_ms),
                        ..Default::default()
                    },
                    services.endpoints,
                    reconcilers,
                )),
            );
        }
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        for c in &self.entries {
            self.extensions.converged(c, view)?;
        }
        Ok(())
    }

    /// `custom`: the API call the entry's action hook makes (its first entry's params).
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let CustomAction { controller, params } = a.params()?;
                let Some(spec) = self.entries.iter().find(|c| c.name == controller) else {
                    return Err(ParamError::at(
                        a.path(".controller"),
                        format!("the name of a controllers.custom entry, not `{controller}`"),
                    ));
                };
                let Some(make) = &self.extensions.registered(&spec.name).action else {
                    return Err(ParamError::at(
                        a.path(".controller"),
                        format!("a controller with an action hook; `{controller}` has none"),
                    ));
                };
                make(&spec.params, &params).map_err(|m| nested(&a.path(".params"), m))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Scenario;
    use reconsim_world::object::{Lease, Resource};

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
            nested(".controllers.custom[0].params", e).path,
            ".controllers.custom[0].params.replicas"
        );
        let e = params::<P>(&serde_json::json!({})).unwrap_err();
        let e = nested(".controllers.custom[0].params", e);
        assert_eq!(e.path, ".controllers.custom[0].params");
        assert!(e.message.contains("missing field `replicas`"), "{e}");
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

    /// Never reports a violation.
    #[derive(Clone, Debug)]
    struct Never;

    impl Check for Never {
        fn check(&mut self, _: &View<'_>) -> Option<reconsim_check::Violation> {
            None
        }
    }

    fn ext() -> reconsim_family::Families {
        reconsim_family::Families::new().with(
            Extensions::new()
                .controller("idle", |_| Ok(vec![Box::new(Idle) as Box<dyn Reconciler>]))
                .convergence("idle", |_| Err("never converges".into()))
                .invariant("always", || Box::new(Always))
                .invariant("never", || Box::new(Never)),
        )
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
        let e = Scenario::parse("x.json", &scenario(custom, r#""never""#), &ext()).unwrap_err();
        (e.path, e.message)
    }

    #[test]
    fn custom_entries_are_validated_with_their_paths() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        assert!(Scenario::parse("x.json", &scenario(ok, r#""always""#), &ext()).is_ok());
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
        // Without the family: its section is unknown.
        let e = Scenario::parse(
            "x.json",
            &scenario(ok, r#""never""#),
            &reconsim_family::Families::new(),
        )
        .unwrap_err();
        assert_eq!(e.path, ".controllers.custom");
        assert!(e.message.contains("registers (none)"), "{e}");
        let e = Scenario::parse("x.json", &scenario(ok, r#""never", "nope""#), &ext()).unwrap_err();
        assert_eq!(e.path, ".invariants[1]");
        assert!(e.message.contains("(always, never), not `nope`"), "{e}");
    }

    #[test]
    fn a_custom_checker_reports_under_its_registered_name() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        let s = Scenario::parse("x.json", &scenario(ok, r#""always""#), &ext()).unwrap();
        let (outcome, _) = crate::runner::run(&s, 0);
        let v = outcome.violation.expect("the checker fires");
        assert_eq!(v.invariant, "always");
    }

    #[test]
    fn a_custom_convergence_check_is_judged() {
        let ok = r#"{"name": "idle", "node": "m"}"#;
        let s = Scenario::parse("x.json", &scenario(ok, r#""never""#), &ext()).unwrap();
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
        let s = Scenario::parse("x.json", &scenario(entry, r#""never""#), &ext()).unwrap();
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
            Some("idle-0_1"),
            "the process's first start: its name and a uniquifier"
        );
        let p = world.sim.proc_by_name("idle-0").expect("the process");
        let Proc::Manager(m) = world.sim.actor(p) else {
            unreachable!("a manager")
        };
        assert!(m.running(), "it leads, so its controllers run");
    }

    /// A container that idles, keeping the pod it was made for.
    #[derive(Debug)]
    struct Worker {
        pod: String,
        node: String,
    }

    impl Component for Worker {
        fn on_msg(
            &mut self,
            _: reconsim_sim::ProcId,
            _: reconsim_world::msg::Msg,
            _: &mut reconsim_world::proc::WorldCtx<'_>,
        ) {
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn a_pod_of_a_registered_image_runs_its_component_on_its_node() {
        use reconsim_world::object::{ObjectMeta, Pod, PodPhase, PodSpec};
        let ext = Extensions::new()
            .controller("idle", |_| Ok(vec![Box::new(Idle) as Box<dyn Reconciler>]))
            .objects("idle", |_| {
                let pod = |name: &str, image: &str| {
                    Object::new(
                        ObjectMeta::named("default", name),
                        Pod {
                            spec: PodSpec {
                                image: image.into(),
                                ..Default::default()
                            },
                            ..Default::default()
                        },
                    )
                };
                Ok(vec![pod("worker", "worker:v1"), pod("stray", "nope:v1")])
            })
            .image("worker:v1", |env, _| {
                Box::new(Worker {
                    pod: env.pod_name.clone(),
                    node: env.node_name.clone(),
                })
            })
            .invariant("never", || Box::new(Never));
        let doc = r#"{"name": "x", "expect": "clean", "seeds": 1, "duration_ms": 30000,
            "topology": {"control_plane_nodes": ["m"], "worker_nodes": ["w"]},
            "controllers": {"custom": [{"name": "idle", "node": "m"}]}, "invariants": ["never"]}"#;
        let families = reconsim_family::Families::new().with(ext);
        let s = Scenario::parse("x.json", doc, &families).unwrap();
        let mut world = crate::build::build(
            &s,
            0,
            crate::format::Plan::default(),
            reconsim_sim::TraceMode::Hash,
        );
        world.sim.run_until(reconsim_sim::SimTime::from_secs(30));
        let p = world
            .sim
            .proc_by_name("worker")
            .expect("the pod's container");
        assert_eq!(world.sim.host_name(world.sim.proc_host(p)), "w");
        let Some(w) = world.sim.actor(p).component::<Worker>() else {
            panic!("the registered image's component")
        };
        assert_eq!((w.pod.as_str(), w.node.as_str()), ("worker", "w"));
        let Proc::ApiServer(api) = world.sim.actor(world.apiserver) else {
            unreachable!("process 0 is the API server")
        };
        let phase = |name: &str| {
            let key = reconsim_world::object::ObjectKey::new(Pod::KIND, "default", name);
            api.get(&key)
                .and_then(|o| o.typed::<Pod>())
                .map(|p| p.status.phase)
        };
        assert_eq!(phase("worker"), Some(PodPhase::Running));
        assert_eq!(phase("stray"), Some(PodPhase::Failed), "an unknown image");
    }

    #[test]
    #[should_panic(expected = "image `w` is registered twice")]
    fn an_image_is_registered_once() {
        let make = |_: &ContainerEnv, _: &Services| -> Box<dyn Component> {
            Box::new(Worker {
                pod: String::new(),
                node: String::new(),
            })
        };
        let _ = Extensions::new().image("w", make).image("w", make);
    }

    #[test]
    #[should_panic(expected = "image `pause` is the custom family's own")]
    fn the_pause_image_is_the_familys_own() {
        let _ = Extensions::new().image(PAUSE_IMAGE, |_, _| {
            Box::new(Worker {
                pod: String::new(),
                node: String::new(),
            })
        });
    }

    #[test]
    #[should_panic(expected = "register the controller first")]
    fn a_hook_needs_its_controller() {
        let _ = Extensions::new().objects("x", |_| Ok(vec![]));
    }

    #[test]
    #[should_panic(expected = "invariant `never` of family `other` is registered twice")]
    fn an_invariant_name_is_registered_once_across_families() {
        struct Other;
        impl Family for Other {
            fn name(&self) -> &str {
                "other"
            }
            fn parse(&self, _: &Value) -> Result<Box<dyn FamilySection>, ParamError> {
                Err(ParamError::at("", "nothing"))
            }
            fn invariants(&self) -> Vec<NamedCheck> {
                vec![NamedCheck::new("never", || Box::new(Never))]
            }
        }
        let _ = ext().with(Other);
    }
}
