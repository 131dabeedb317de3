//! The Node-name collision of aws/karpenter-provider-aws#2734, written against the
//! cloud's reused names (docs/semantics.md 6.8).
//!
//! A Karpenter-like controller provisions one machine per NodeClaim: it launches an
//! instance (idempotent by the claim's name, the instance's id and name persisted in
//! the claim's status before anything else), then links the claim to the instance's
//! Node. Its buggy link, as Karpenter had it before its node-ownership RFC: it creates
//! the Node itself, and an AlreadyExists means "the kubelet registered it first", so it
//! links to whatever Node has the name. When an instance terminated from outside
//! releases its address and the next launch gets it, the old machine's Node (still there
//! until the cloud node lifecycle controller deletes it) is linked to the new claim. The
//! fix links by providerID: only a Node whose `spec.providerID` is the claim's
//! instance's. The checker, run after every step: a linked claim's Node, while it exists,
//! names the claim's instance.

use reconsim_cloud::{Cloud, CloudConfig, CloudError, Ec2, node_lifecycle};
use reconsim_sim::{Fault, FaultPlan, ProcId, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::kubelet::Images;
use reconsim_world::lifecycle::NodeLifecycle;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::object::{
    Body, Kind, KindInfo, Node, NodeSpec, Object, ObjectMeta, Resource, Uid,
};
use reconsim_world::runtime::{Action, Api, Client, Controller, Error, PatchParams, PostParams};
use reconsim_world::{Endpoints, Proc, WorldFault};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct ClaimSpec {
    /// The claim is acted on from this time (a second claim, made later).
    not_before_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct ClaimStatus {
    provider_id: Option<String>,
    node_name: Option<String>,
    /// The Node the claim is linked to, and that Node object's uid.
    linked: Option<String>,
    linked_uid: Option<Uid>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct NodeClaim {
    spec: ClaimSpec,
    status: ClaimStatus,
}

impl Resource for NodeClaim {
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "karpenter.sh",
        "v1",
        "NodeClaim",
        "nodeclaims",
    ));
    reconsim_world::status_subresource!();
}

struct Ctx {
    client: Client,
    ec2: Ec2,
    /// Link by providerID (the fix), or by a Node create's AlreadyExists (the bug).
    by_provider_id: bool,
}

fn error_policy(_: Arc<Object>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(object: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(claim) = object.typed::<NodeClaim>() else {
        return Ok(Action::await_change());
    };
    let name = object.meta.name.clone();
    let now = ctx.client.now().as_ms();
    if now < claim.spec.not_before_ms {
        return Ok(Action::requeue(Duration::from_millis(
            claim.spec.not_before_ms - now,
        )));
    }
    if claim.status.linked.is_some() {
        return Ok(Action::await_change());
    }
    let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let (provider_id, node_name) = match (&claim.status.provider_id, &claim.status.node_name) {
        (Some(p), Some(n)) => (p.clone(), n.clone()),
        _ => {
            let tags = BTreeMap::from([("karpenter.sh/nodeclaim".to_string(), name.clone())]);
            let instance = match ctx.ec2.run_instances(tags, Some(name.clone())).await? {
                Ok(mut v) if !v.is_empty() => v.remove(0),
                Ok(_) | Err(CloudError::InsufficientFreeAddressesInSubnet) => {
                    return Ok(Action::requeue(Duration::from_secs(5)));
                }
                Err(e) => {
                    ctx.client.note(|| format!("launch failed: {e:?}"));
                    return Ok(Action::requeue(Duration::from_secs(5)));
                }
            };
            let status = NodeClaim {
                spec: claim.spec.clone(),
                status: ClaimStatus {
                    provider_id: Some(instance.provider_id()),
                    node_name: Some(instance.node_name().to_string()),
                    linked: None,
                    linked_uid: None,
                },
            };
            claims
                .patch_status(&name, &PatchParams::default(), status)
                .await?;
            return Ok(Action::requeue(Duration::from_millis(1)));
        }
    };
    let linked = if ctx.by_provider_id {
        // The fix: the Node whose providerID is this claim's instance's, whatever its
        // name; none yet: wait for the kubelet.
        let all = nodes.list(&Default::default()).await?;
        all.iter()
            .find(|n| {
                n.typed::<Node>()
                    .is_some_and(|n| n.spec.provider_id.as_deref() == Some(provider_id.as_str()))
            })
            .map(|n| (n.meta.name.clone(), n.meta.uid))
    } else {
        let node = Node {
            spec: NodeSpec {
                provider_id: Some(provider_id.clone()),
                ..Default::default()
            },
            status: Default::default(),
        };
        let object = Object::new(ObjectMeta::named("", &node_name), Body::new(node));
        match nodes.create(&PostParams::default(), object).await {
            Ok(n) => Some((node_name.clone(), n.meta.uid)),
            // The bug: "the kubelet registered it first", so the Node of that name is ours.
            Err(e) if e.code() == Some(409) => {
                let n = nodes.get(&node_name).await?;
                Some((node_name.clone(), n.meta.uid))
            }
            Err(e) => return Err(e),
        }
    };
    let Some((linked, uid)) = linked else {
        return Ok(Action::requeue(Duration::from_secs(5)));
    };
    let status = NodeClaim {
        spec: claim.spec.clone(),
        status: ClaimStatus {
            linked: Some(linked),
            linked_uid: Some(uid),
            ..claim.status.clone()
        },
    };
    claims
        .patch_status(&name, &PatchParams::default(), status)
        .await?;
    Ok(Action::await_change())
}

fn controller(cloud: ProcId, by_provider_id: bool) -> Box<dyn Reconciler> {
    Controller::new::<NodeClaim>("nodeclaim").run(reconcile, error_policy, move |client: Client| {
        Ctx {
            ec2: Ec2::new(client.clone(), cloud),
            client,
            by_provider_id,
        }
    })
}

/// Claim `a` at 0 s; its instance is terminated from outside at 40 s (gone ~70 s);
/// claim `b` at 72 s gets the one address again. Join 30 s after running, so the new
/// kubelet comes after the old Node is deleted (~85 s).
fn world(by_provider_id: bool) -> (Sim<Proc>, ProcId) {
    let config = CloudConfig {
        boot_ms_min: 1_000,
        boot_ms_max: 1_000,
        describe_lag_ms_min: 1_000,
        describe_lag_ms_max: 1_000,
        join_ms_min: 30_000,
        join_ms_max: 30_000,
        subnet_size: 1,
        ..CloudConfig::default()
    };
    let terminate = TimedFault {
        at_ms: 40_000,
        duration_ms: Some(1_000),
        fault: Fault::Inject {
            process: "cloud".to_string(),
            fault: WorldFault::TerminateInstance {
                launch: Some(1),
                tag: None,
            },
        },
        on: None,
    };
    let mut sim = Sim::new(SimConfig::new(1), FaultPlan::new(vec![terminate]));
    let cp = sim.add_host("control-plane");
    let mut server = ApiServer::new(Default::default());
    for (name, at) in [("a", 0), ("b", 72_000)] {
        let claim = NodeClaim {
            spec: ClaimSpec { not_before_ms: at },
            status: Default::default(),
        };
        server.seed_object(Object::new(ObjectMeta::named("", name), Body::new(claim)));
    }
    let apiserver = sim.spawn(cp, "apiserver", Proc::new(server));
    let endpoints = Endpoints { apiserver };
    let cloud = sim.spawn(
        cp,
        "cloud",
        Proc::new(Cloud::new(config, endpoints, Images::default())),
    );
    sim.spawn(
        cp,
        reconsim_world::lifecycle::NAME,
        Proc::new(NodeLifecycle::new(Default::default(), endpoints)),
    );
    let managers = [
        (node_lifecycle::NAME, node_lifecycle::controller(cloud)),
        ("karpenter", controller(cloud, by_provider_id)),
    ];
    for (name, c) in managers {
        let config = ManagerConfig {
            identity: name.to_string(),
            ..Default::default()
        };
        sim.spawn(
            cp,
            name,
            Proc::new(Manager::new(config, endpoints, vec![c])),
        );
    }
    (sim, apiserver)
}

/// The first moment a claim's linked Node object, while it exists, names another
/// instance, and the claims' links at the end.
fn run(by_provider_id: bool) -> (Option<String>, Vec<Option<String>>) {
    let (mut sim, apiserver) = world(by_provider_id);
    let mut violation = None;
    while sim.step_until(SimTime::from_secs(300)).is_some() {
        let api = sim.actor(apiserver).component::<ApiServer>().unwrap();
        for claim in api.list(NodeClaim::KIND) {
            let c = claim.typed::<NodeClaim>().unwrap();
            let (Some(linked), Some(uid)) = (&c.status.linked, c.status.linked_uid) else {
                continue;
            };
            let Some(node) = api.by_uid(uid) else {
                continue;
            };
            let p = node.typed::<Node>().unwrap().spec.provider_id.clone();
            if p != c.status.provider_id && violation.is_none() {
                violation = Some(format!(
                    "at {}: NodeClaim {} ({:?}) is linked to Node {linked} of {p:?}",
                    sim.now(),
                    claim.meta.name,
                    c.status.provider_id
                ));
            }
        }
    }
    let api = sim.actor(apiserver).component::<ApiServer>().unwrap();
    let links = api
        .list(NodeClaim::KIND)
        .map(|o| o.typed::<NodeClaim>().unwrap().status.linked.clone())
        .collect();
    (violation, links)
}

#[test]
fn already_exists_means_registered_links_a_new_claim_to_a_terminated_machines_node() {
    let (violation, _) = run(false);
    let v = violation.expect("the wrong link is caught");
    eprintln!("{v}");
    assert!(v.contains("NodeClaim b"), "{v}");
    assert!(v.contains("i-00000000000000001"), "{v}");
}

#[test]
fn linking_by_provider_id_links_each_claim_to_its_own_machine() {
    let (violation, links) = run(true);
    assert_eq!(violation, None);
    assert_eq!(
        links,
        vec![
            Some("ip-10-0-0-1".to_string()),
            Some("ip-10-0-0-1".to_string())
        ],
        "both linked, each to its own machine's Node under the reused name"
    );
}
