//! Users' own controllers and invariants, registered by name: a family built by
//! registration, for a controller that needs no kind or component of its own beyond
//! what its closures give.
//!
//! An [`Extensions`] is a [`Family`] like the builtin ones (its section is
//! `controllers.custom`, a list of entries; its action is `custom`), registered the
//! same way: `reconsim::families::builtin().with(extensions)`. It holds:
//! - [`Extensions::controller`]: a controller, a [`Custom`] with its own params type:
//!   an entry's `params` are parsed once at load into that type (errors name the JSON
//!   path, `.controllers.custom[0].params.replicas`), and every hook gets them typed:
//!   the reconcilers of one manager process ([`Custom::reconcilers`]) or the entry's
//!   whole program ([`Custom::program`]: how a user's unmodified kube-rs program runs,
//!   reconsim-kube's `KubeBridge`, docs/kube.md), the objects the API server holds at
//!   t = 0, what a `custom` workload action does, and the controller's desired state;
//! - [`Extensions::image`]: a container image by name, a world component made at every
//!   start of a container that runs it: a Pod the user's program creates (an operator's
//!   workload) is scheduled and its kubelet runs the registered program;
//! - [`Extensions::invariant`]: a checker ([`Check`]) by invariant name;
//! - [`Extensions::host`]: how each run is hosted (real code's interception).
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
//! An entry runs as builtin controllers do: a Deployment of its name whose pods
//! (`<name>-0` on its first node, `<name>-1` on its second, ...) the kubelets start, so
//! an exit is a container restart with the kubelet's backoff, a lost node evicts its
//! pod and the Deployment controller makes another. Registered
//! images reach the kubelets only in a scenario with `controllers.custom` entries (the
//! family's section exists only then); in one without, a pod of such an image fails as
//! an unknown image does.
//! docs/guide/writing-a-reconciler.md walks through all of it.

mod custom;
pub(crate) mod manifests;
mod section;

pub use custom::{ConvergenceFn, Custom, Params};
pub use manifests::{DEFAULT_NAMESPACE, Manifests};
pub use section::{APP_LABEL, CustomSection, CustomSpec, IMAGE_PREFIX, LEASE_NAMESPACE};

use crate::build::PAUSE_IMAGE;
use custom::Registration;
use reconsim_check::{Check, NamedCheck};
use reconsim_family::{Family, FamilySection, ParamError, RunHost, ServiceFn, Services};
use reconsim_world::component::Component;
use reconsim_world::kubelet::ContainerEnv;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Makes the process of a container of a registered image from the container's
/// environment (its pod, namespace, node) and the world's services.
pub type ContainerFn = dyn Fn(&ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync;

/// The controllers and invariants a binary registers: the `custom` family. Cheap to
/// clone (closures are shared).
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
    controllers: BTreeMap<String, Arc<dyn Registration>>,
    invariants: Vec<NamedCheck>,
    /// Container images by name: a `BTreeMap`, so the kubelets' registry is built in
    /// one order on every run.
    images: BTreeMap<String, Arc<ContainerFn>>,
    /// The user's own services by name: a `BTreeMap`, so they start in one order.
    services: BTreeMap<String, Arc<ServiceFn>>,
    host: Option<RunHost>,
}

impl Extensions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a controller ([`Custom::reconcilers`] or [`Custom::program`], with its
    /// hooks): scenario entries `{"name": <its name>, "node": ..., "params": ...}` run it.
    ///
    /// # Panics
    /// If a controller of its name is already registered.
    pub fn controller<P: Params>(mut self, controller: Custom<P>) -> Self {
        let name = controller.name().to_string();
        let old = self.controllers.insert(name.clone(), Arc::new(controller));
        assert!(old.is_none(), "controller `{name}` is registered twice");
        self
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
    /// If `name` is already registered, is [`PAUSE_IMAGE`] or starts with
    /// [`IMAGE_PREFIX`] (this family's own).
    pub fn image(
        mut self,
        name: &str,
        make: impl Fn(&ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync + 'static,
    ) -> Self {
        assert!(
            name != PAUSE_IMAGE && !name.starts_with(IMAGE_PREFIX),
            "image `{name}` is the custom family's own (its idling container, or an entry's pods)"
        );
        let old = self.images.insert(name.to_string(), Arc::new(make));
        assert!(old.is_none(), "image `{name}` is registered twice");
        self
    }

    /// Register the user's own external service `name` (a payments API, their cloud's
    /// endpoint): in a scenario with `controllers.custom` entries, `make`'s component
    /// runs as process `name` on a host `name` of its own (so a partition can cut it off
    /// and a crash or pause can name it), started before any pod; every program reaches
    /// it by name (`reconsim_kube::http::HttpClient::to(name)`, or
    /// `Handle::current().service(name)` for typed calls). `make` is called at every
    /// build; a crash keeps the component, calling its `on_crash`.
    ///
    /// ```
    /// use reconsim_scenario::Extensions;
    /// use reconsim_sim::ProcId;
    /// use reconsim_world::Msg;
    /// use reconsim_world::component::{Component, WorldCtx};
    ///
    /// /// A service that answers nothing (a black hole).
    /// #[derive(Debug)]
    /// struct Silent;
    ///
    /// impl Component for Silent {
    ///     fn on_msg(&mut self, _: ProcId, _: Msg, _: &mut WorldCtx<'_>) {}
    ///     fn as_any(&self) -> &dyn std::any::Any {
    ///         self
    ///     }
    /// }
    ///
    /// let mine = Extensions::new().service("payments", |_| Box::new(Silent));
    /// assert_eq!(mine.service_names(), ["payments"]);
    /// ```
    ///
    /// # Panics
    /// If `name` is registered already or empty.
    pub fn service(
        mut self,
        name: &str,
        make: impl Fn(&Services) -> Box<dyn Component> + Send + Sync + 'static,
    ) -> Self {
        assert!(!name.is_empty(), "a service needs a name");
        let old = self.services.insert(name.to_string(), Arc::new(make));
        assert!(old.is_none(), "service `{name}` is registered twice");
        self
    }

    /// Host every run of this binary's scenarios with `host` ([`reconsim_family::host`]):
    /// real code's `reconsim_kube::intercept::host`, so a run's std `HashMap`s and
    /// per-thread generators follow its seed.
    pub fn host(mut self, host: RunHost) -> Self {
        self.host = Some(host);
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

    /// The registered service names, sorted (the order they start in).
    pub fn service_names(&self) -> Vec<&str> {
        self.services.keys().map(String::as_str).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.controllers.is_empty()
            && self.invariants.is_empty()
            && self.images.is_empty()
            && self.services.is_empty()
    }

    fn registered(&self, name: &str) -> Option<&dyn Registration> {
        self.controllers.get(name).map(|r| &**r)
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("controllers", &self.controller_names())
            .field("invariants", &self.invariant_names())
            .field("images", &self.image_names())
            .field("services", &self.service_names())
            .finish()
    }
}

/// The `custom` family: its section is the list of entries.
impl Family for Extensions {
    fn name(&self) -> &str {
        "custom"
    }

    fn parse(&self, section: &Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(CustomSection::parse(section, self.clone())?))
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::Scenario;
    use reconsim_check::View;
    use reconsim_world::apiserver::ApiServer;
    use reconsim_world::manager::{Manager, Reconciler};
    use reconsim_world::object::Object;
    use reconsim_world::object::{Lease, Resource};
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Replicas {
        replicas: u32,
    }

    #[test]
    fn params_are_parsed_once_with_their_paths() {
        let families = reconsim_family::Families::new().with(
            Extensions::new()
                .controller(
                    Custom::reconcilers("idle", |p: &Replicas| {
                        (0..p.replicas)
                            .map(|_| Box::new(Idle) as Box<dyn Reconciler>)
                            .collect()
                    })
                    .validate(|p| {
                        if p.replicas > 3 {
                            return Err(ParamError::at(".replicas", "at most 3"));
                        }
                        Ok(())
                    }),
                )
                .invariant("never", || Box::new(Never)),
        );
        let error = |params: &str| {
            let custom = format!(r#"{{"name": "idle", "node": "m", "params": {params}}}"#);
            let e =
                Scenario::parse("x.json", &scenario(&custom, r#""never""#), &families).unwrap_err();
            (e.path, e.message)
        };
        let (path, msg) = error(r#"{"replicas": -1}"#);
        assert_eq!(path, ".controllers.custom[0].params.replicas");
        assert!(msg.contains("invalid value"), "{msg}");
        let (path, msg) = error("{}");
        assert_eq!(path, ".controllers.custom[0].params");
        assert!(msg.contains("missing field `replicas`"), "{msg}");
        assert_eq!(
            error(r#"{"replicas": 4}"#),
            (
                ".controllers.custom[0].params.replicas".into(),
                "at most 3".into()
            )
        );
        let (path, msg) = error(r#"{"replicas": 0}"#);
        assert_eq!(path, ".controllers.custom[0].params");
        assert!(msg.contains("at least one reconciler"), "{msg}");
        let ok = r#"{"name": "idle", "node": "m", "params": {"replicas": 2}}"#;
        assert!(Scenario::parse("x.json", &scenario(ok, r#""never""#), &families).is_ok());
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

    /// The `idle` controller: one [`Idle`] reconciler, no params.
    fn idle() -> Custom<()> {
        Custom::reconcilers("idle", |_| vec![Box::new(Idle) as Box<dyn Reconciler>])
    }

    pub(crate) fn ext() -> reconsim_family::Families {
        reconsim_family::Families::new().with(
            Extensions::new()
                .controller(idle().convergence(|_| Err("never converges".into())))
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
        // `process` is gone: its error says what replaced it.
        let (path, msg) = error(r#"{"name": "idle", "node": "m", "process": "idle-a"}"#);
        assert_eq!(path, ".controllers.custom[0].process");
        assert!(msg.contains("`idle-0`") && msg.contains("`nodes`"), "{msg}");
        // One entry per controller; one of `node` and `nodes`, each node known.
        let (path, msg) = error(&format!("{ok}, {ok}"));
        assert_eq!(path, ".controllers.custom[1].name");
        assert!(msg.contains("entry [0] too"), "{msg}");
        let (path, _) = error(r#"{"name": "idle", "node": "m", "nodes": ["m"]}"#);
        assert_eq!(path, ".controllers.custom[0].nodes");
        let (path, _) = error(r#"{"name": "idle"}"#);
        assert_eq!(path, ".controllers.custom[0].node");
        let (path, _) = error(r#"{"name": "idle", "nodes": []}"#);
        assert_eq!(path, ".controllers.custom[0].nodes");
        let (path, _) = error(r#"{"name": "idle", "nodes": ["m", "x"]}"#);
        assert_eq!(path, ".controllers.custom[0].nodes[1]");
        assert!(
            Scenario::parse(
                "x.json",
                &scenario(r#"{"name": "idle", "nodes": ["m", "m"]}"#, r#""never""#),
                &ext()
            )
            .is_ok()
        );
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
        // The manager runs as the entry's pod `idle-0`, started by its node's kubelet.
        let mut world = crate::build::build(
            &s,
            0,
            crate::format::Plan::default(),
            reconsim_sim::TraceMode::Hash,
        );
        world.sim.run_until(reconsim_sim::SimTime::from_secs(5));
        let p = world.sim.proc_by_name("idle-0").expect("the entry's pod");
        assert_eq!(world.sim.host_name(world.sim.proc_host(p)), "m");
        let Some(api) = world.sim.actor(world.apiserver).component::<ApiServer>() else {
            unreachable!("process 0 is the API server")
        };
        let pod = reconsim_world::object::ObjectKey::new(
            reconsim_world::object::Pod::KIND,
            LEASE_NAMESPACE,
            "idle-0",
        );
        let pod = api.get(&pod).expect("the entry's pod");
        assert_eq!(
            pod.meta.controller_ref().map(|r| r.name.as_str()),
            Some("idle"),
            "a pod of the entry's Deployment"
        );
    }

    #[test]
    fn a_custom_entry_with_leader_election_leads_on_its_lease() {
        let entry = r#"{"name": "idle", "node": "m", "leader_election":
            {"lease_duration_ms": 15000, "renew_deadline_ms": 10000, "retry_period_ms": 2000}}"#;
        let s = Scenario::parse("x.json", &scenario(entry, r#""never""#), &ext()).unwrap();
        let mut world = crate::build::build(
            &s,
            0,
            crate::format::Plan::default(),
            reconsim_sim::TraceMode::Hash,
        );
        world.sim.run_until(reconsim_sim::SimTime::from_secs(5));
        let Some(api) = world.sim.actor(world.apiserver).component::<ApiServer>() else {
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
        let Some(m) = world.sim.actor(p).component::<Manager>() else {
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
            .controller(idle().objects(|_| {
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
            }))
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
        let Some(api) = world.sim.actor(world.apiserver).component::<ApiServer>() else {
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
    #[should_panic(expected = "controller `idle` is registered twice")]
    fn a_controller_is_registered_once() {
        let _ = Extensions::new().controller(idle()).controller(idle());
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
