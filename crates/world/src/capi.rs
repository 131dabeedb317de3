//! Cluster API objects and the workload cluster KubeadmControlPlane manages (seed
//! incident 2). STUB: the KCP work fills this module.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlaneSpec {
    pub replicas: u32,
    pub version: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlaneStatus {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeadmControlPlane {
    pub spec: KubeadmControlPlaneSpec,
    pub status: KubeadmControlPlaneStatus,
}
