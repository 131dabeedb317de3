//! The launcher (`launcher.rs`, real kube-rs code) registered with reconsim: its
//! `custom` entry's pods the replicas, its cloud the simulated one through the program's
//! handle; its VirtualMachines as seed objects; and the invariant that no VM has two
//! instances. This file is the only one that imports reconsim.

use super::launcher::{self, Cloud, CloudError, Launch, VirtualMachine, VirtualMachineSpec};
use reconsim::cloud::{self as sim_cloud, Ec2, InstanceState};
use reconsim::prelude::*;
use reconsim_kube::Handle;
use reconsim_kube::custom::CLOUD;
use reconsim_kube::kinds::Kinds;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The controller's registration.
pub const NAME: &str = "launcher";
/// The invariant this file registers.
pub const ONE_INSTANCE: &str = "launcher_one_instance_per_vm";
/// The tag an instance names its VM by (`namespace/name`).
pub const VM_TAG: &str = "example.reconsim.dev/vm";

pub fn kinds() -> Kinds {
    Kinds::new().crd::<VirtualMachine>()
}

/// `controllers.custom[].params` of the `launcher` entry (every replica's).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub launch: LaunchParam,
    /// The VirtualMachines (in `default`) in the API server at t = 0.
    #[serde(default)]
    pub vms: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchParam {
    LookUpFirst,
    ClientToken,
}

/// The simulated cloud behind the controller's [`Cloud`]: the cloud's own typed client
/// over the program's handle, where a cluster has the cloud SDK.
struct SimCloud(Ec2<Handle>);

fn failed(e: impl std::fmt::Debug) -> CloudError {
    CloudError(format!("{e:?}"))
}

impl Cloud for SimCloud {
    async fn find(&self, vm: &str) -> Result<Option<String>, CloudError> {
        let tags = BTreeMap::from([(VM_TAG.to_string(), vm.to_string())]);
        let live = vec![InstanceState::Pending, InstanceState::Running];
        let found = self.0.describe_instances(Vec::new(), tags, live).await;
        let found = found.map_err(failed)?.map_err(failed)?;
        Ok(found.first().map(|i| i.id.clone()))
    }

    async fn launch(&self, vm: &str, client_token: Option<String>) -> Result<String, CloudError> {
        let tags = BTreeMap::from([(VM_TAG.to_string(), vm.to_string())]);
        let launched = self.0.run_instances(tags, client_token).await;
        let launched = launched.map_err(failed)?.map_err(failed)?;
        let first = launched
            .first()
            .ok_or_else(|| CloudError("no instance".into()))?;
        Ok(first.id.clone())
    }
}

/// `launcher_one_instance_per_vm`: no VM has two live (pending or running) instances.
#[derive(Clone, Debug, Default)]
pub struct OneInstancePerVm {
    cloud: Option<ProcId>,
}

impl Check for OneInstancePerVm {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let mut by_vm: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for i in sim_cloud::instances(view, &mut self.cloud) {
            if matches!(i.state, InstanceState::Pending | InstanceState::Running)
                && let Some(vm) = i.tags.get(VM_TAG)
            {
                by_vm.entry(vm).or_default().push(&i.id);
            }
        }
        let (vm, ids) = by_vm.into_iter().find(|(_, ids)| ids.len() > 1)?;
        Some(Violation {
            invariant: ONE_INSTANCE.into(),
            time: view.now,
            message: format!(
                "VirtualMachine {vm} has {} instances: {}",
                ids.len(),
                ids.join(", ")
            ),
            objects: vec![format!("VirtualMachine {vm}")],
        })
    }

    /// Only the cloud's instances: checked after a step that changed them.
    fn reads(&self) -> Reads {
        Reads::kinds([]).component::<sim_cloud::Cloud>()
    }
}

fn seed(name: &str) -> Result<Object, ParamError> {
    let mut vm = VirtualMachine::new(
        name,
        VirtualMachineSpec {
            size: "m5.large".into(),
        },
    );
    vm.metadata.namespace = Some("default".into());
    kinds()
        .object(&vm)
        .map_err(|e| ParamError::at(".vms", e.to_string()))
}

/// Everything this file adds to reconsim, by name: each replica the user's program with
/// clients of the simulated API server and cloud.
pub fn extensions() -> Extensions {
    let launcher = reconsim_kube::custom(NAME, kinds(), |p: &Params, _, client| {
        let launch = match p.launch {
            LaunchParam::LookUpFirst => Launch::LookUpFirst,
            LaunchParam::ClientToken => Launch::ClientToken,
        };
        let handle = Handle::current();
        let cloud = handle.service(CLOUD).expect("a custom program's cloud");
        launcher::run(client, SimCloud(Ec2::new(handle, cloud)), launch)
    })
    .objects(|p| p.vms.iter().map(|n| seed(n)).collect());
    Extensions::new()
        .controller(launcher)
        .invariant(ONE_INSTANCE, || Box::new(OneInstancePerVm::default()))
        .host(reconsim_kube::intercept::host)
}
