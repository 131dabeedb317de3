//! The Cluster API KubeadmControlPlane (seed incident 2) part of a scenario: its settings, validation and the
//! objects and processes it adds to a world. STUB: the incident's work fills it.

use crate::format::Scenario;
use reconsim_sim::Sim;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::{Endpoints, Proc};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KcpSpec {}

impl KcpSpec {
    /// Checks serde cannot make: `Err((json path, what was expected))`.
    pub fn validate(&self, _scenario: &Scenario) -> Result<(), (String, String)> {
        Ok(())
    }

    /// The processes this family starts with (fault targets).
    pub fn processes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Objects the API server holds at t = 0.
    pub fn seed(&self, _server: &mut ApiServer) {}

    /// Container images this family's pods run.
    pub fn images(&self, images: Images) -> Images {
        images
    }

    /// Processes beyond the cluster's own, spawned after them.
    pub fn spawn(&self, _sim: &mut Sim<Proc>, _endpoints: Endpoints) {}
}
