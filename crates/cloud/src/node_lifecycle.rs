//! The cloud node lifecycle controller: deletes the Node of an instance that no longer
//! exists (docs/semantics.md 6.7).
//!
//! In a cluster with a cloud provider, kube-controller-manager (or the
//! cloud-controller-manager) runs it: every node-monitor-period (5 s) it looks at each
//! Node whose Ready condition is not True, asks the cloud whether the Node's instance
//! still exists by its providerID, and deletes the Node when it does not (an AWS
//! instance in state terminated counts as gone). Without it, the Node of a terminated
//! machine would stay forever, NotReady.
//!
//! Here it is a kube-runtime-shaped controller over Nodes: a Node that is not Ready is
//! checked at once and then every `monitor_period_ms` while it stays so (the real
//! controller's periodic pass, restricted to the Nodes it would act on). The shutdown
//! taint (an instance stopped, not terminated) is not modelled: instances here are
//! never stopped.
//!
//! It judges a Node by its providerID, never by its name, and deletes by name with no
//! precondition, as the real one does (`MonitorNodes`). With the cloud's reused names
//! (docs/semantics.md 6.8) that matters: a new machine's kubelet that adopted a
//! terminated machine's Node leaves the old providerID on it, so the next time the Node
//! is not Ready it is deleted although its machine runs.

use crate::{Ec2, InstanceState};
use reconsim_sim::ProcId;
use reconsim_world::manager::Reconciler;
use reconsim_world::object::{ConditionStatus, Node, Object};
use reconsim_world::runtime::{Action, Api, Client, Controller, DeleteParams, Error};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The process name (on the control plane's `controller-manager` host).
pub const NAME: &str = "cloud-node-lifecycle";

/// node-monitor-period: how often a not-Ready Node is checked again.
pub const MONITOR_PERIOD_MS: u64 = 5_000;

struct Ctx {
    client: Client,
    ec2: Ec2,
}

/// The controller, asking the cloud process `cloud`.
pub fn controller(cloud: ProcId) -> Box<dyn Reconciler> {
    Controller::new::<Node>(NAME).run(reconcile, error_policy, move |client: Client| Ctx {
        ec2: Ec2::new(client.clone(), cloud),
        client,
    })
}

fn error_policy(_: Arc<Object>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(MONITOR_PERIOD_MS))
}

/// The instance id of an AWS providerID, `aws:///<zone>/<instance-id>`.
fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix("aws:///")
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty())
}

async fn reconcile(node: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(n) = node.typed::<Node>() else {
        return Ok(Action::await_change());
    };
    // A Ready node, or one the cloud does not know of (no providerID): nothing to do.
    let Some(id) = n.spec.provider_id.as_deref().and_then(instance_id) else {
        return Ok(Action::await_change());
    };
    if n.status.ready == ConditionStatus::True || node.meta.is_deleting() {
        return Ok(Action::await_change());
    }
    let answer = ctx
        .ec2
        .describe_instances(vec![id.to_string()], BTreeMap::new(), Vec::new())
        .await?;
    let exists = match answer {
        // InstanceExistsByProviderID: terminated is gone.
        Ok(instances) => instances
            .iter()
            .any(|i| i.id == id && i.state != InstanceState::Terminated),
        // InvalidInstanceID.NotFound: a vanished instance (or one not visible yet; a
        // Node registers only after its instance runs, long past the lag).
        Err(crate::CloudError::InstanceNotFound(_)) => false,
        Err(_) => true,
    };
    if exists {
        return Ok(Action::requeue(Duration::from_millis(MONITOR_PERIOD_MS)));
    }
    ctx.client
        .note(|| format!("deleting Node {}: instance {id} is gone", node.meta.name));
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    // By name, with no precondition, as the real controller does
    // (`Delete(ctx, node.Name, metav1.DeleteOptions{})`): a Node of the same name that a
    // new machine adopted or registered meanwhile goes too (6.8).
    match nodes
        .delete(&node.meta.name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if e.code() == Some(404) => Ok(Action::await_change()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::instance_id;

    #[test]
    fn provider_ids_name_their_instance() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0001"), Some("i-0001"));
        assert_eq!(instance_id("aws:///us-east-1a/"), None);
        assert_eq!(instance_id("gce://p/z/n"), None);
    }
}
