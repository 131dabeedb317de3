//! STUB: the kubelet. The types below are the interface other modules rely on.

use crate::fault::WorldFault;
use crate::msg::{Msg, Timer as AnyTimer};
use crate::proc::{Endpoints, Proc, WorldCtx};
use reconsim_sim::{HostId, ProcId};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {}

/// What a container process is told when its kubelet starts it.
#[derive(Clone, Debug)]
pub struct ContainerEnv {
    pub pod_name: String,
    pub namespace: String,
    pub node_name: String,
    pub host: HostId,
    /// The kernel process name: `<pod>` (with `#<restart>` after restarts).
    pub process_name: String,
    pub endpoints: Endpoints,
}

/// Builds a container's process from its environment.
pub type ImageFn = dyn Fn(&ContainerEnv) -> Proc + Send + Sync;

/// The images a kubelet can run, by `PodSpec::image` name.
#[derive(Clone, Default)]
pub struct Images(pub Arc<BTreeMap<String, Arc<ImageFn>>>);

impl std::fmt::Debug for Images {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

#[derive(Clone, Debug)]
pub struct KubeletConfig {
    pub node_name: String,
    pub provider_id: Option<String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug)]
pub struct Kubelet {
    pub config: KubeletConfig,
    pub endpoints: Endpoints,
    pub images: Images,
}

impl Kubelet {
    pub fn new(config: KubeletConfig, endpoints: Endpoints, images: Images) -> Self {
        Kubelet {
            config,
            endpoints,
            images,
        }
    }
    pub fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_msg(&mut self, _from: ProcId, _msg: Msg, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_timer(&mut self, _t: AnyTimer, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_crash(&mut self) {}
    pub fn on_fault(&mut self, _f: &WorldFault, _active: bool, _ctx: &mut WorldCtx<'_>) {}
}
