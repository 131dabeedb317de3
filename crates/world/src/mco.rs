//! machine-config-operator objects and the components that serve configs to booting
//! machines (seed incident 3). STUB: the MCO work fills this module.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A MachineConfig: source or rendered. Has no status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfig {
    /// The merged content, as key -> value pairs (files, osImageURL, ssh keys...).
    pub content: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolSpec {
    /// spec.configuration.name: the rendered config the pool should run.
    pub configuration: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolStatus {
    /// status.configuration.name
    pub configuration: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPool {
    pub spec: MachineConfigPoolSpec,
    pub status: MachineConfigPoolStatus,
}
