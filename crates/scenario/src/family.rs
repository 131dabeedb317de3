//! The one interface a family's section of a scenario implements: what the family adds
//! to a world (its fault targets, its objects at t = 0, its pods' images, its processes,
//! its workload actions) and what its desired state is. The builder, the runner and validation go through it
//! for every family alike: machine-api, KCP, MCO and the users' custom entries.
//!
//! Today the sections are typed fields of [`crate::format::Controllers`]; the next step
//! moves this trait into a crate below the scenario crate, so that each family
//! implements it in its own crate and registers its section by name
//! (docs/architecture.md).

use crate::format::Scenario;
use reconsim_check::View;
use reconsim_sim::{ProcId, Sim};
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::{Endpoints, Proc};

/// The world's shared services, for the processes a family spawns.
#[derive(Clone, Copy, Debug)]
pub struct Services {
    pub endpoints: Endpoints,
    /// The cloud API process.
    pub cloud: ProcId,
}

/// A family's section of one scenario.
pub trait FamilySection {
    /// Checks serde cannot make (names that must exist, ranges): `Err((json path, what
    /// was expected))`.
    fn validate(&self, scenario: &Scenario) -> Result<(), (String, String)>;
    /// The processes it starts with (fault targets), in a fixed order.
    fn processes(&self) -> Vec<String>;
    /// The objects the API server holds at t = 0.
    fn seed(&self, server: &mut ApiServer);
    /// The container images its pods run, added to `images`.
    fn images(&self, images: Images, services: &Services) -> Images;
    /// The processes it spawns after the cluster's own.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services);
    /// Its desired state, judged once faults heal: `Err` says what is missing.
    fn converged(&self, view: &View<'_>) -> Result<(), String>;
    /// Workload action `index` as an API call from the user's host, if the action is
    /// this family's (`None` otherwise); `Err` names the field and what was expected.
    /// Called at validation and at every build.
    fn action(&self, scenario: &Scenario, index: usize) -> Option<Result<ApiOp, (String, String)>>;
}

impl<T: FamilySection + ?Sized> FamilySection for &T {
    fn validate(&self, scenario: &Scenario) -> Result<(), (String, String)> {
        (**self).validate(scenario)
    }
    fn processes(&self) -> Vec<String> {
        (**self).processes()
    }
    fn seed(&self, server: &mut ApiServer) {
        (**self).seed(server)
    }
    fn images(&self, images: Images, services: &Services) -> Images {
        (**self).images(images, services)
    }
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        (**self).spawn(sim, services)
    }
    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        (**self).converged(view)
    }
    fn action(&self, scenario: &Scenario, index: usize) -> Option<Result<ApiOp, (String, String)>> {
        (**self).action(scenario, index)
    }
}
