//! Launcher: a kube-rs controller that gives each VirtualMachine a cloud instance,
//! written as kube-rs users write one, with no reconsim import. It runs in a cluster
//! through kube-runtime's `Controller` ([`run`]) with a cloud SDK behind [`Cloud`];
//! reconsim runs that same `run` against its simulated cluster and cloud (`harness.rs`).
//! Its one dependency for testing is `reconsim-failpoint`, whose `fail_point!` is
//! nothing in a build without the simulation.
//!
//! A VirtualMachine (`example.reconsim.dev/v1`) is done when `status.instanceId` names
//! its instance. One reconcile: done, nothing to do; else find or launch the instance,
//! then record its id through the status subresource.
//!
//! The bug (`Launch::LookUpFirst`): look for an instance tagged with the VM first, and
//! launch one only if none is found. Two replicas of the controller (a Deployment with
//! two replicas and no leader election, or a rolling update whose new pod starts
//! before the old one stops: OpenShift's duplicate machine controllers, Bugzilla
//! 1864352) both find none and both launch; and EC2's DescribeInstances is eventually
//! consistent (docs/semantics.md 6.3), so a replica that crashed after the launch and
//! before the record looks, finds nothing yet, and launches again.
//!
//! The fix (`Launch::ClientToken`): launch with the VM's uid as the client token, which
//! makes RunInstances idempotent (6.1): every replica, every retry, gets the one
//! instance of the first call.

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "example.reconsim.dev",
    version = "v1",
    kind = "VirtualMachine",
    namespaced,
    status = "VirtualMachineStatus"
)]
pub struct VirtualMachineSpec {
    pub size: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    pub instance_id: Option<String>,
}

/// The cloud as the controller needs it; in a cluster, the cloud SDK's client behind it.
/// `vm` is the VM's `namespace/name`, the tag its instance carries.
pub trait Cloud: Send + Sync + 'static {
    /// A live (pending or running) instance tagged with `vm`, if the cloud lists one.
    fn find(&self, vm: &str) -> impl Future<Output = Result<Option<String>, CloudError>> + Send;
    /// Launch an instance tagged with `vm`; with a client token, idempotent.
    fn launch(
        &self,
        vm: &str,
        client_token: Option<String>,
    ) -> impl Future<Output = Result<String, CloudError>> + Send;
}

#[derive(Debug, thiserror::Error)]
#[error("cloud: {0}")]
pub struct CloudError(pub String);

/// How a reconcile gets its VM an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// Look for a tagged instance, launch if none (the bug).
    LookUpFirst,
    /// Launch with the VM's uid as the client token (the fix).
    ClientToken,
}

pub struct Ctx<C> {
    pub client: Client,
    pub cloud: C,
    pub launch: Launch,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cloud(#[from] CloudError),
    #[error("a VirtualMachine without a namespace or uid")]
    Unnamed,
    #[error("failpoint {0}")]
    Injected(&'static str),
}

pub async fn reconcile<C: Cloud>(
    vm: Arc<VirtualMachine>,
    ctx: Arc<Ctx<C>>,
) -> Result<Action, Error> {
    if vm
        .status
        .as_ref()
        .and_then(|s| s.instance_id.as_ref())
        .is_some()
    {
        return Ok(Action::await_change());
    }
    let ns = vm.namespace().ok_or(Error::Unnamed)?;
    let tag = format!("{ns}/{}", vm.name_any());
    let id = match ctx.launch {
        Launch::LookUpFirst => match ctx.cloud.find(&tag).await? {
            Some(id) => id,
            None => ctx.cloud.launch(&tag, None).await?,
        },
        Launch::ClientToken => {
            let token = vm.uid().ok_or(Error::Unnamed)?;
            ctx.cloud.launch(&tag, Some(token)).await?
        }
    };
    // Between the launch and its record: where a crash leaves an instance no object
    // names (a scenario's `failpoint` fault arms it; nothing outside a simulation).
    reconsim_failpoint::fail_point!("after-launch", Err(Error::Injected("after-launch")));
    let vms: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({ "status": { "instanceId": id } });
    vms.patch_status(
        &vm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await?;
    Ok(Action::await_change())
}

pub fn error_policy<C>(_: Arc<VirtualMachine>, _: &Error, _: Arc<Ctx<C>>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// The controller's `main`, past building its clients: kube-runtime's `Controller` on
/// the VirtualMachines.
pub async fn run<C: Cloud>(client: Client, cloud: C, launch: Launch) {
    let vms: Api<VirtualMachine> = Api::all(client.clone());
    let ctx = Arc::new(Ctx {
        client,
        cloud,
        launch,
    });
    Controller::new(vms, watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}
