//! StepSet: a kube-rs controller with an operation-order bug that no fault finds, only
//! a user's operation at the wrong moment does. Written as kube-rs users write one,
//! with no reconsim import; reconsim runs its `run`, kube-runtime's `Controller` and
//! all (`harness.rs`).
//!
//! A StepSet (`example.reconsim.dev/v1`, a `#[derive(CustomResource, JsonSchema)]` with
//! a status subresource) keeps `spec.replicas` ConfigMaps (0 to 5, its schema says),
//! made with `generateName`, labelled and owned by it. With `policy: OrderedReady` (the
//! default, as a StatefulSet's `podManagementPolicy`) it adds or removes them one at a
//! time, waiting `STEP` for each to settle; with `Parallel`, all at once. One reconcile
//! (kube-runtime runs one at a time per object, and queues the next while it runs):
//! 1. nothing to do if the status says its generation was carried out
//!    (`status.observedGeneration`, read from the server: the cache may not show the
//!    last status write yet);
//! 2. list its ConfigMaps (a consistent read) and step them to `spec.replicas`;
//! 3. write the status: `replicas` and `observedGeneration`, by a read-modify-write of
//!    the status subresource (a GET, then a PUT with its resourceVersion).
//!
//! The bug (`Observed::Latest`): step 3 copies `observedGeneration` from the object it
//! has just read back, not from the one it acted on. A user who changes the spec while
//! an ordered rollout is under way (a scale-down during a scale-up) bumps the
//! generation; the status then says the new generation was carried out, the queued
//! reconcile takes the shortcut of step 1, and the StepSet stays at the old count for
//! good. Only the convergence check (Acto's consistency oracle) sees it: no invariant is
//! broken, and no fault changes a spec.
//!
//! The fix (`Observed::ActedOn`): `observedGeneration` is the generation of the object
//! the reconcile was handed, whose spec it carried out.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The label a StepSet finds its ConfigMaps by.
pub const LABEL: &str = "stepset.example.reconsim.dev/name";
/// How long an ordered rollout waits for each ConfigMap it added or removed.
pub const STEP: Duration = Duration::from_secs(2);

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "example.reconsim.dev",
    version = "v1",
    kind = "StepSet",
    namespaced,
    status = "StepSetStatus"
)]
pub struct StepSetSpec {
    #[schemars(range(min = 0, max = 5))]
    pub replicas: u32,
    #[serde(default)]
    pub policy: Policy,
}

/// How a rollout goes, as a StatefulSet's `podManagementPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Policy {
    /// One ConfigMap at a time, `STEP` apart.
    #[default]
    OrderedReady,
    /// All at once.
    Parallel,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepSetStatus {
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Which generation step 3 says was carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observed {
    /// The generation of the object read back at the end (the bug).
    Latest,
    /// The generation of the object the reconcile acted on (the fix).
    ActedOn,
}

pub struct Ctx {
    pub client: Client,
    pub observed: Observed,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("a StepSet without a namespace")]
    NoNamespace,
}

pub async fn reconcile(set: Arc<StepSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = set.namespace().ok_or(Error::NoNamespace)?;
    let name = set.name_any();
    let generation = set.metadata.generation;
    let sets: Api<StepSet> = Api::namespaced(ctx.client.clone(), &ns);
    // Step 1, on the status as the server has it (the cache may not show the last
    // status write yet).
    let current = sets.get_status(&name).await?;
    let observed = current.status.as_ref().and_then(|s| s.observed_generation);
    if observed.is_some() && observed == current.metadata.generation {
        return Ok(Action::requeue(Duration::from_secs(300)));
    }
    // Step 2.
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = set.uid();
    let mut owned: Vec<ConfigMap> = cms
        .list(&ListParams::default().labels(&format!("{LABEL}={name}")))
        .await?
        .items
        .into_iter()
        .filter(|cm| cm.metadata.deletion_timestamp.is_none())
        .filter(|cm| {
            cm.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && Some(&r.uid) == uid.as_ref())
        })
        .collect();
    owned.sort_by_key(|cm| cm.name_any());
    let want = set.spec.replicas as usize;
    let ordered = set.spec.policy == Policy::OrderedReady;
    for _ in owned.len()..want {
        cms.create(&PostParams::default(), &config_map(&set))
            .await?;
        if ordered {
            tokio::time::sleep(STEP).await;
        }
    }
    for extra in owned.iter().skip(want).rev() {
        cms.delete(&extra.name_any(), &DeleteParams::default())
            .await?;
        if ordered {
            tokio::time::sleep(STEP).await;
        }
    }
    // Step 3: read-modify-write of the status.
    let mut latest = sets.get_status(&name).await?;
    let observed_generation = match ctx.observed {
        Observed::Latest => latest.metadata.generation,
        Observed::ActedOn => generation,
    };
    latest.status = Some(StepSetStatus {
        replicas: want as u32,
        observed_generation,
    });
    sets.replace_status(&name, &PostParams::default(), &latest)
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// A new ConfigMap for `set`: a generated name, its label, its controller reference.
fn config_map(set: &StepSet) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", set.name_any())),
            labels: Some([(LABEL.to_string(), set.name_any())].into()),
            owner_references: set.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        data: Some([("owner".to_string(), set.name_any())].into()),
        ..Default::default()
    }
}

pub fn error_policy(_: Arc<StepSet>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// The controller's `main`, past building its client: kube-runtime's `Controller` on
/// the StepSets it owns ConfigMaps of.
pub async fn run(client: Client, observed: Observed) {
    let sets: Api<StepSet> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::all(client.clone());
    Controller::new(sets, watcher::Config::default())
        .owns(cms, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(Ctx { client, observed }))
        .for_each(|_| futures::future::ready(()))
        .await;
}
