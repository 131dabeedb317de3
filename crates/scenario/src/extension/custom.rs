//! One controller a binary registers, typed: its scenario entry's `params` are parsed
//! once, at load, into the controller's own type `P`, and every hook gets them typed.
//!
//! The hooks of one controller hang off its [`Custom`], so a hook for a controller that
//! is not registered, or one that reads another type of params, cannot be written.

use super::manifests::Manifests;
use reconsim_check::View;
use reconsim_family::{ParamError, Services};
use reconsim_world::api::ApiOp;
use reconsim_world::component::Component;
use reconsim_world::kubelet::ContainerEnv;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::Object;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What a controller's params are: any type serde can read (derive `Deserialize`, with
/// `#[serde(deny_unknown_fields)]` for strict files; `()` for a controller without).
pub trait Params: DeserializeOwned + Send + Sync + 'static {}

impl<T: DeserializeOwned + Send + Sync + 'static> Params for T {}

type MakeReconcilers<P> = dyn Fn(&P) -> Vec<Box<dyn Reconciler>> + Send + Sync;
type MakeProgram<P> = dyn Fn(&P, &ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync;
type Validate<P> = dyn Fn(&P) -> Result<(), ParamError> + Send + Sync;
type Objects<P> = dyn Fn(&P) -> Result<Vec<Object>, ParamError> + Send + Sync;
type Action<P> = dyn Fn(&P, &Value) -> Result<ApiOp, ParamError> + Send + Sync;
/// A controller's desired state: `Err` says what is missing.
pub type ConvergenceFn = dyn Fn(&View<'_>) -> Result<(), String> + Send + Sync;

/// What an entry runs: reconcilers under reconsim's manager, or a program of its own.
enum Run<P> {
    Reconcilers(Arc<MakeReconcilers<P>>),
    Program(Arc<MakeProgram<P>>),
}

/// A controller registered by name, with its params type `P` and its hooks; handed to
/// [`crate::Extensions::controller`].
///
/// ```
/// use reconsim_scenario::extension::Custom;
/// use reconsim_world::object::{Lease, Object, ObjectMeta};
///
/// #[derive(serde::Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Params {
///     leases: Vec<String>,
/// }
///
/// // A controller with no reconcilers yet (they would go in the closure), whose
/// // entries seed one Lease per name in their params.
/// let _ = Custom::reconcilers("leases", |_: &Params| Vec::new()).objects(|p| {
///     Ok(p.leases
///         .iter()
///         .map(|n| Object::new(ObjectMeta::named("default", n), Lease::default()))
///         .collect())
/// });
/// ```
pub struct Custom<P> {
    name: String,
    run: Run<P>,
    validate: Option<Arc<Validate<P>>>,
    objects: Option<Arc<Objects<P>>>,
    action: Option<Arc<Action<P>>>,
    convergence: Option<Arc<ConvergenceFn>>,
    manifests: Option<Arc<dyn Manifests>>,
}

impl<P: Params> Custom<P> {
    fn new(name: &str, run: Run<P>) -> Self {
        Custom {
            name: name.to_string(),
            run,
            validate: None,
            objects: None,
            action: None,
            convergence: None,
            manifests: None,
        }
    }

    /// Controller `name` as reconcilers under reconsim's manager, made from its params
    /// (once to validate them, then once per run: state never leaks between runs).
    pub fn reconcilers(
        name: &str,
        make: impl Fn(&P) -> Vec<Box<dyn Reconciler>> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, Run::Reconcilers(Arc::new(make)))
    }

    /// Controller `name` as a program of its own (reconsim-kube's `KubeBridge` runs a
    /// kube-rs `main`; `reconsim_kube::custom` makes the whole entry): a world component
    /// made from its params, its pod's container and the world's services, called again
    /// on every start of its container (a restart runs it anew).
    pub fn program(
        name: &str,
        make: impl Fn(&P, &ContainerEnv, &Services) -> Box<dyn Component> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, Run::Program(Arc::new(make)))
    }

    /// Checks of the params serde cannot make (ranges, names that must match); the
    /// error's path is inside the params (`.replicas`).
    pub fn validate(
        mut self,
        check: impl Fn(&P) -> Result<(), ParamError> + Send + Sync + 'static,
    ) -> Self {
        self.validate = Some(Arc::new(check));
        self
    }

    /// The objects the API server holds at t = 0 for an entry (names must be set and
    /// unique; uid and resourceVersion are the server's).
    pub fn objects(
        mut self,
        make: impl Fn(&P) -> Result<Vec<Object>, ParamError> + Send + Sync + 'static,
    ) -> Self {
        self.objects = Some(Arc::new(make));
        self
    }

    /// What a workload action `{"custom": {"controller": name, "params": ...}}` does:
    /// one API call from the user's host, made from the entry's params and the action's
    /// own, parsed into `A` (errors at `.workload[i].action.custom.params...`).
    pub fn action<A: Params>(
        mut self,
        make: impl Fn(&P, &A) -> Result<ApiOp, ParamError> + Send + Sync + 'static,
    ) -> Self {
        self.action = Some(Arc::new(move |p: &P, action: &Value| {
            make(p, &reconsim_family::params::parse::<A>(action)?)
        }));
        self
    }

    /// The controller's desired state, checked when a scenario with a `convergence`
    /// bound reaches it (without this hook the controller adds nothing to convergence).
    pub fn convergence(
        mut self,
        converged: impl Fn(&View<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.convergence = Some(Arc::new(converged));
        self
    }

    /// How its kinds read manifests, so that its entries may seed `objects` and its
    /// workload actions `create`, `patch` and `delete` objects named as kubectl names
    /// them (`reconsim_kube::custom` registers the program's `Kinds`).
    pub fn manifests(mut self, manifests: impl Manifests + 'static) -> Self {
        self.manifests = Some(Arc::new(manifests));
        self
    }
}

/// An entry's params, parsed by its controller's [`Custom`] and typed again only there.
#[derive(Clone)]
pub(crate) struct Parsed(Arc<dyn Any + Send + Sync>);

impl fmt::Debug for Parsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Parsed(..)")
    }
}

/// A [`Custom`] with its params type erased, as the registry keeps it.
pub(crate) trait Registration: Send + Sync {
    fn name(&self) -> &str;
    fn parse(&self, params: &Value) -> Result<Parsed, ParamError>;
    fn is_program(&self) -> bool;
    /// The reconcilers of an entry (none for a program).
    fn reconcilers(&self, params: &Parsed) -> Vec<Box<dyn Reconciler>>;
    /// The program of an entry (`None` for reconcilers).
    fn program(
        &self,
        params: &Parsed,
        env: &ContainerEnv,
        services: &Services,
    ) -> Option<Box<dyn Component>>;
    fn objects(&self, params: &Parsed) -> Result<Vec<Object>, ParamError>;
    /// `None` without an action hook.
    fn action(&self, params: &Parsed, action: &Value) -> Option<Result<ApiOp, ParamError>>;
    fn converged(&self, view: &View<'_>) -> Result<(), String>;
    /// `None` unless [`Custom::manifests`] registered them.
    fn manifests(&self) -> Option<&Arc<dyn Manifests>>;
}

impl<P: Params> Custom<P> {
    fn typed(params: &Parsed) -> &P {
        params
            .0
            .downcast_ref::<P>()
            .expect("an entry's params are parsed by its own registration")
    }
}

impl<P: Params> Registration for Custom<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn parse(&self, params: &Value) -> Result<Parsed, ParamError> {
        let p: P = reconsim_family::params::parse(params)?;
        if let Some(check) = &self.validate {
            check(&p)?;
        }
        Ok(Parsed(Arc::new(p)))
    }

    fn is_program(&self) -> bool {
        matches!(self.run, Run::Program(_))
    }

    fn reconcilers(&self, params: &Parsed) -> Vec<Box<dyn Reconciler>> {
        match &self.run {
            Run::Reconcilers(make) => make(Self::typed(params)),
            Run::Program(_) => Vec::new(),
        }
    }

    fn program(
        &self,
        params: &Parsed,
        env: &ContainerEnv,
        services: &Services,
    ) -> Option<Box<dyn Component>> {
        match &self.run {
            Run::Reconcilers(_) => None,
            Run::Program(make) => Some(make(Self::typed(params), env, services)),
        }
    }

    fn objects(&self, params: &Parsed) -> Result<Vec<Object>, ParamError> {
        match &self.objects {
            Some(make) => make(Self::typed(params)),
            None => Ok(Vec::new()),
        }
    }

    fn action(&self, params: &Parsed, action: &Value) -> Option<Result<ApiOp, ParamError>> {
        let make = self.action.as_ref()?;
        Some(make(Self::typed(params), action))
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        match &self.convergence {
            Some(check) => check(view),
            None => Ok(()),
        }
    }

    fn manifests(&self) -> Option<&Arc<dyn Manifests>> {
        self.manifests.as_ref()
    }
}
