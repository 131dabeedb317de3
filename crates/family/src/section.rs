//! A family's parsed section of one scenario and what it adds to a world.
//!
//! The scenario builder calls every section of a scenario in the registry's order
//! ([`crate::Families`]): `services` first (their processes start right after the
//! cloud), `seed` and `images` before the cluster's processes start, `spawn` after
//! them, `workload` for the user's script; the runner calls `converged` once faults
//! heal. The section is plain data (cloneable, serializable back into the
//! file it came from), so failure files embed it and tests can edit it typed
//! ([`FamilySection`]'s `as_any_mut`, through `Controllers::get_mut` of the scenario
//! crate).

use crate::params::ParamError;
use reconsim_check::View;
use reconsim_sim::{ProcId, Sim};
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::component::Component;
use reconsim_world::kubelet::Images;
use reconsim_world::object::Kind;
use reconsim_world::{Endpoints, Proc};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

/// The world's shared services, for the processes a family spawns.
#[derive(Clone, Debug)]
pub struct Services {
    pub endpoints: Endpoints,
    /// The cloud API process.
    pub cloud: ProcId,
    /// The sections' own service processes ([`FamilySection::services`]), by name.
    pub named: Arc<BTreeMap<String, ProcId>>,
}

impl Services {
    /// The world's services with no service of a section's.
    pub fn new(endpoints: Endpoints, cloud: ProcId) -> Self {
        Services {
            endpoints,
            cloud,
            named: Arc::default(),
        }
    }

    /// The process of the section's service `name` ([`FamilySection::services`]).
    pub fn service(&self, name: &str) -> Option<ProcId> {
        self.named.get(name).copied()
    }
}

/// Makes a service's component, at every build of a world.
pub type ServiceFn = dyn Fn(&Services) -> Box<dyn Component> + Send + Sync;

/// A service process a section starts on a host of its own: a user's external service
/// (a payments API, a DNS provider), reachable from programs by its name.
#[derive(Clone)]
pub struct ServiceProcess {
    /// The name of its process and of its host, both fault targets (`payments`).
    pub name: String,
    pub make: Arc<ServiceFn>,
}

impl Debug for ServiceProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProcess")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a section's validation sees of the rest of its scenario.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The topology's nodes, control plane first.
    pub nodes: &'a [String],
    /// Every host: the fixed ones (`api`, `controller-manager`, `cloud`, `user`), then
    /// the nodes.
    pub hosts: &'a [String],
    /// The processes started before this section's: the cluster's, then the sections
    /// registered before it.
    pub processes: &'a [String],
    pub duration_ms: u64,
}

impl Context<'_> {
    /// `Err` at `path` unless `node` is one of the topology's nodes.
    pub fn node(&self, path: &str, node: &str) -> Result<(), ParamError> {
        if !self.nodes.iter().any(|n| n == node) {
            return Err(ParamError::at(
                path,
                format!("one of the topology's nodes, not `{node}`"),
            ));
        }
        Ok(())
    }
}

/// One workload action of a family, as its file wrote it: `{"<name>": params}` at
/// `.workload[index]`.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadAction<'a> {
    /// Its index in the scenario's `workload`.
    pub index: usize,
    pub at_ms: u64,
    pub name: &'a str,
    pub params: &'a serde_json::Value,
}

impl WorkloadAction<'_> {
    /// The file's path of `field` of the params (`""` for the params themselves).
    pub fn path(&self, field: &str) -> String {
        format!(".workload[{}].action.{}{field}", self.index, self.name)
    }

    /// The file's path of its time.
    pub fn at_ms_path(&self) -> String {
        format!(".workload[{}].at_ms", self.index)
    }

    /// Its params as `T`; errors carry the file's path.
    pub fn params<T: serde::de::DeserializeOwned>(&self) -> Result<T, ParamError> {
        crate::params::parse(self.params).map_err(|e| e.under(&self.path("")))
    }
}

/// An object name a section's field gives ([`FamilySection::object_names`]): the
/// loader checks it against its kind's rule (`reconsim_world::names`) and refuses the
/// scenario at `path` with what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectName {
    /// The field's path, relative to the section (`.machine_sets[0].name`).
    pub path: String,
    /// The kind of the object it names.
    pub kind: Kind,
    pub name: String,
}

impl ObjectName {
    pub fn new(path: impl Into<String>, kind: Kind, name: impl Into<String>) -> Self {
        ObjectName {
            path: path.into(),
            kind,
            name: name.into(),
        }
    }
}

/// A family's section of one scenario, parsed by [`crate::Family::parse`].
///
/// Paths in [`FamilySection::validate`]'s errors are relative to the section
/// (`.node`); [`FamilySection::workload`]'s are the file's ([`WorkloadAction::path`]).
pub trait FamilySection: SectionData {
    /// Checks serde cannot make: names that must exist, ranges, uniqueness.
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError>;
    /// The object names its fields give, with their kinds and paths, checked at load
    /// before [`FamilySection::validate`]: a name the API server would refuse on create
    /// stops the scenario at its field. The objects it [`seed`](FamilySection::seed)s
    /// and the API calls of its [`workload`](FamilySection::workload) actions are
    /// checked without it (their fields found by value); list here what its processes
    /// create later, or names it derives. Default: none.
    fn object_names(&self) -> Vec<ObjectName> {
        Vec::new()
    }
    /// The processes it starts with (fault targets), in a fixed order.
    fn processes(&self) -> Vec<String>;
    /// The objects the API server holds at t = 0.
    fn seed(&self, server: &mut ApiServer);
    /// The container images its pods run, added to `images`.
    fn images(&self, images: Images, services: &Services) -> Images {
        let _ = services;
        images
    }
    /// Its service processes, each on a host of its own name: started right after the
    /// cloud, before any container, so every image and program knows their processes
    /// ([`Services::service`]). Default: none.
    fn services(&self) -> Vec<ServiceProcess> {
        Vec::new()
    }
    /// The processes it spawns after the cluster's own.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services);
    /// Whether it approves joining nodes' client certificates (OpenShift's
    /// cluster-machine-approver): then the cloud's new nodes bootstrap TLS and register
    /// only once approved. Without such a family, joining is approved at once.
    fn approves_node_certificates(&self) -> bool {
        false
    }
    /// Its desired state, judged once faults heal: `Err` says what is missing.
    fn converged(&self, view: &View<'_>) -> Result<(), String>;
    /// Invariants its entries declare (a Go program's, written in the scenario file),
    /// which the scenario's `invariants` may name beside the registered ones. Default:
    /// none.
    fn invariants(&self) -> Vec<reconsim_check::NamedCheck> {
        Vec::new()
    }
    /// Its workload actions (the scenario's actions with this family's names, in file
    /// order) as API calls from the user's host, one per action. Called at validation
    /// and at every build.
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        match actions.first() {
            None => Ok(Vec::new()),
            Some(a) => Err(ParamError::at(a.path(""), "an action of this family")),
        }
    }
}

/// What every section is as data: cloneable, serializable back to its JSON, and
/// readable typed. Implemented for every `Clone + Serialize + Debug` section.
pub trait SectionData: Any + Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_section(&self) -> Box<dyn FamilySection>;
    /// The section as it is written in a scenario file.
    fn to_json(&self) -> serde_json::Value;
}

impl<T> SectionData for T
where
    T: FamilySection + Clone + serde::Serialize + Debug + Send + Sync + 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_section(&self) -> Box<dyn FamilySection> {
        Box::new(self.clone())
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a section serializes")
    }
}
