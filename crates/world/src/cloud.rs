//! The simulated cloud provider (EC2-like). STUB: protocol fixed, behaviour to implement.

use crate::fault::WorldFault;
use crate::msg::Msg;
use crate::proc::WorldCtx;
use reconsim_sim::{ProcId, SimTime};
use serde::Serialize;
use std::collections::BTreeMap;

/// A request to the cloud API; `id` matches the response.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CloudRequest {
    pub id: u64,
    pub op: CloudOp,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CloudOp {
    /// Launch one instance with these tags. With a `client_token`, a retry with the same
    /// token returns the instance of the first call instead of launching another.
    RunInstances {
        tags: BTreeMap<String, String>,
        client_token: Option<String>,
    },
    /// Instances by id (if `ids` is not empty), else by tag filter, in any of `states`
    /// (all states if empty). Eventually consistent: a new instance may be missing.
    DescribeInstances {
        ids: Vec<String>,
        tag_filters: BTreeMap<String, String>,
        states: Vec<InstanceState>,
    },
    TerminateInstances { ids: Vec<String> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Instance {
    pub id: String,
    pub tags: BTreeMap<String, String>,
    pub state: InstanceState,
    pub launch_time: SimTime,
    pub client_token: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CloudResponse {
    pub id: u64,
    pub result: Result<Vec<Instance>, CloudError>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CloudError {
    /// The same client token with other parameters.
    IdempotentParameterMismatch,
    /// InvalidInstanceID.NotFound: an id the (eventually consistent) API does not know yet.
    InstanceNotFound(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {}

#[derive(Debug, Default)]
pub struct Cloud {}

impl Cloud {
    pub fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_msg(&mut self, _from: ProcId, _msg: Msg, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_timer(&mut self, _t: Timer, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_crash(&mut self) {}
    pub fn on_fault(&mut self, _f: &WorldFault, _active: bool, _ctx: &mut WorldCtx<'_>) {}
}
