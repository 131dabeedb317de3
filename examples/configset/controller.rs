//! ConfigSet: a kube-rs controller written as kube-rs users write one, with no reconsim
//! import. This file compiles against kube and runs against a real cluster through
//! kube-runtime's `Controller` ([`run`]); reconsim runs that same `run`, kube-runtime
//! and all, against its simulated cluster (`harness.rs`).
//!
//! A ConfigSet (`example.reconsim.dev/v1`, a `#[derive(CustomResource)]` with a status
//! subresource) keeps `spec.replicas` ConfigMaps, made with `generateName`, labelled and
//! owned by it (a controller owner reference, so the garbage collector removes them
//! with it). One reconcile, under kube-runtime's finalizer helper (a finalizer added by
//! a JSON patch with a `test`, removed on cleanup):
//! 1. list the ConfigMaps labelled with the ConfigSet's name that it controls and that
//!    are not being deleted;
//! 2. too few: create the missing ones; too many: delete the last by name;
//! 3. write `status.replicas` through the status subresource (a merge patch).
//!
//! The bug (`Read::WatchCache`): step 1 lists with `ListParams::match_any()`, which
//! kube documents as "the most recent resource version available in the cache": a
//! `resourceVersion=0` list that the API server answers from its watch cache, cheaper
//! than a quorum read. The watch cache follows etcd through a watch of its own and can
//! lag it (kubernetes/kubernetes#59848; docs/semantics.md 3.12 and 3.15). A reconcile
//! woken by a second scale that lands while the first reconcile's creates are not yet
//! in the cache counts them as missing and creates them again.
//!
//! The fix (`Read::Consistent`): `ListParams::default()`, a consistent read from etcd,
//! which sees every write the server answered before it. A ConfigSet's reconciles never
//! overlap (kube-runtime, like controller-runtime, reconciles one object at a time), so
//! each one sees the creates of the one before.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The label a ConfigSet finds its ConfigMaps by.
pub const LABEL: &str = "configset.example.reconsim.dev/name";
/// The finalizer the controller keeps on every ConfigSet.
pub const FINALIZER: &str = "configsets.example.reconsim.dev/cleanup";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "example.reconsim.dev",
    version = "v1",
    kind = "ConfigSet",
    namespaced,
    status = "ConfigSetStatus"
)]
pub struct ConfigSetSpec {
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct ConfigSetStatus {
    pub replicas: u32,
}

/// How step 1 reads the ConfigMaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Read {
    /// `ListParams::match_any()`: from the API server's watch cache (the bug).
    WatchCache,
    /// `ListParams::default()`: a consistent read (the fix).
    Consistent,
    /// A second bug: to scale up, trust `status.replicas` (what the last reconcile
    /// made, as it wrote it) and list only to scale down. The ConfigSet a reconcile is
    /// handed comes from kube-runtime's store, fed by the ConfigSets' watch: when the
    /// status patch's response comes back before its own watch event (a real API server
    /// feeds watches from a watch cache behind etcd, docs/semantics.md 3.19), the next
    /// reconcile, woken by the new ConfigMaps' events, still reads the old status and
    /// creates them again.
    Status,
}

pub struct Ctx {
    pub client: Client,
    pub read: Read,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    #[error("a ConfigSet without a namespace")]
    NoNamespace,
}

pub async fn reconcile(cs: Arc<ConfigSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = cs.namespace().ok_or(Error::NoNamespace)?;
    let sets: Api<ConfigSet> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&sets, FINALIZER, cs, |event| async {
        match event {
            Event::Apply(cs) => apply(&cs, &ctx).await,
            // The ConfigMaps go with the ConfigSet (the garbage collector follows their
            // owner references); nothing outside the cluster to clean.
            Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(cs: &ConfigSet, ctx: &Ctx) -> Result<Action, Error> {
    let ns = cs.namespace().ok_or(Error::NoNamespace)?;
    let name = cs.name_any();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("{LABEL}={name}");
    let lp = match ctx.read {
        Read::WatchCache => ListParams::default().labels(&selector).match_any(),
        Read::Consistent | Read::Status => ListParams::default().labels(&selector),
    };
    let want = cs.spec.replicas as usize;
    if ctx.read == Read::Status {
        let made = cs.status.as_ref().map_or(0, |s| s.replicas as usize);
        if made < want {
            for _ in made..want {
                cms.create(&PostParams::default(), &config_map(cs)).await?;
            }
            return set_status(cs, ctx).await;
        }
    }
    let uid = cs.uid();
    let mut owned: Vec<ConfigMap> = cms
        .list(&lp)
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
    for _ in owned.len()..want {
        cms.create(&PostParams::default(), &config_map(cs)).await?;
    }
    for extra in owned.iter().skip(want).rev() {
        cms.delete(&extra.name_any(), &DeleteParams::default())
            .await?;
    }
    set_status(cs, ctx).await
}

/// Step 3: `status.replicas` through the status subresource.
async fn set_status(cs: &ConfigSet, ctx: &Ctx) -> Result<Action, Error> {
    let ns = cs.namespace().ok_or(Error::NoNamespace)?;
    let sets: Api<ConfigSet> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({ "status": ConfigSetStatus { replicas: cs.spec.replicas } });
    sets.patch_status(
        &cs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// A new ConfigMap for `cs`: a generated name, its label, its controller reference.
fn config_map(cs: &ConfigSet) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", cs.name_any())),
            labels: Some([(LABEL.to_string(), cs.name_any())].into()),
            owner_references: cs.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        data: Some([("owner".to_string(), cs.name_any())].into()),
        ..Default::default()
    }
}

pub fn error_policy(_: Arc<ConfigSet>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// The controller's `main`, past building its client: kube-runtime's `Controller` on
/// the ConfigSets it owns ConfigMaps of. In a cluster, `Client::try_default()` makes the
/// client; reconsim hands it one that speaks to the simulated API server (`harness.rs`).
pub async fn run(client: Client, read: Read) {
    let sets: Api<ConfigSet> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::all(client.clone());
    Controller::new(sets, watcher::Config::default())
        .owns(cms, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(Ctx { client, read }))
        .for_each(|_| futures::future::ready(()))
        .await;
}
