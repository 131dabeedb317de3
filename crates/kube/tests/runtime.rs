//! kube-runtime's own `Controller` as a user's program builds it (DESIGN.md section 11):
//! `Controller::new(api, watcher::Config::default()).owns(..).run(..).for_each(..)`,
//! with its watcher, reflector store, scheduler and runner, against the simulated API
//! server, in virtual time, deterministic under a seed.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, Resource, ResourceExt};
use reconsim_kube::{Kinds, KubeWorld, Program, intercept};
use reconsim_sim::{SimTime, TraceMode};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "test.reconsim.dev",
    version = "v1",
    kind = "Bundle",
    namespaced
)]
struct BundleSpec {
    count: u32,
}

struct Ctx {
    client: kube::Client,
    log: Arc<Mutex<Vec<String>>>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
}

async fn reconcile(b: Arc<Bundle>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
    for i in 0..b.spec.count {
        let name = format!("{}-{i}", b.name_any());
        if cms.get_opt(&name).await?.is_some() {
            continue;
        }
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name);
        cm.metadata.owner_references = b.controller_owner_ref(&()).map(|r| vec![r]);
        cms.create(&PostParams::default(), &cm).await?;
    }
    // The wall clock a program reads is the run's: seconds since its epoch.
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - intercept::EPOCH_UNIX_SECS;
    ctx.log
        .lock()
        .unwrap()
        .push(format!("{since_epoch} s: reconciled {}", b.name_any()));
    Ok(Action::requeue(Duration::from_secs(60)))
}

fn error_policy(_: Arc<Bundle>, e: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.log.lock().unwrap().push(format!("error: {e}"));
    Action::requeue(Duration::from_secs(5))
}

fn kinds() -> Kinds {
    Kinds::new().crd::<Bundle>().core::<ConfigMap>()
}

/// The user's `main`, but for the client: two Bundles, then kube-runtime's Controller.
fn program(log: Arc<Mutex<Vec<String>>>) -> Program {
    Arc::new(move |client: kube::Client| {
        let log = log.clone();
        Box::pin(async move {
            let bundles: Api<Bundle> = Api::namespaced(client.clone(), "default");
            for (name, count) in [("a", 2), ("b", 3)] {
                let b = Bundle::new(name, BundleSpec { count });
                if let Err(e) = bundles.create(&PostParams::default(), &b).await {
                    return format!("create {name}: {e}");
                }
            }
            let cms: Api<ConfigMap> = Api::all(client.clone());
            Controller::new(bundles, watcher::Config::default())
                .owns(cms, watcher::Config::default())
                .run(reconcile, error_policy, Arc::new(Ctx { client, log }))
                .for_each(|_| futures::future::ready(()))
                .await;
            "the controller stopped".to_string()
        })
    })
}

struct Outcome {
    hash: u64,
    config_maps: Vec<String>,
    log: Vec<String>,
    requests: Vec<String>,
}

fn run(seed: u64, until: SimTime) -> Outcome {
    intercept::on_own_thread(seed, || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut w = KubeWorld::new(
            seed,
            TraceMode::Hash,
            ApiServerConfig::default(),
            kinds(),
            program(log.clone()),
        );
        w.sim.run_until(until);
        let Some(api) = w.sim.actor(w.apiserver).component::<ApiServer>() else {
            panic!("process 0 is the API server")
        };
        let config_maps = api
            .list(reconsim_kube::kinds::kind_of::<ConfigMap>())
            .map(|o| o.meta.name.clone())
            .collect();
        let log = log.lock().unwrap().clone();
        Outcome {
            hash: w.sim.trace().hash(),
            config_maps,
            log,
            requests: w.bridge().requests.clone(),
        }
    })
}

#[test]
fn kube_runtimes_controller_converges_and_requeues_in_virtual_time() {
    let o = run(1, SimTime::from_secs(150));
    assert_eq!(
        o.config_maps,
        ["a-0", "a-1", "b-0", "b-1", "b-2"],
        "{:?}",
        o.requests
    );
    // Each Bundle reconciled at start, again when its ConfigMaps' creates come back
    // through the watch, and after each 60 s requeue, on the run's clock.
    for name in ["a", "b"] {
        let times: Vec<&str> = o
            .log
            .iter()
            .filter_map(|l| l.strip_suffix(&format!(" s: reconciled {name}")))
            .collect();
        assert_eq!(times, ["0", "0", "60", "120"], "{:?}", o.log);
    }
    assert!(!o.log.iter().any(|l| l.starts_with("error")), "{:?}", o.log);
}

#[test]
fn kube_runtimes_controller_is_deterministic_under_a_seed() {
    for seed in 0..3 {
        let (a, b) = (
            run(seed, SimTime::from_secs(100)),
            run(seed, SimTime::from_secs(100)),
        );
        assert_eq!(
            a.hash, b.hash,
            "seed {seed}: {:?}\n{:?}",
            a.requests, b.requests
        );
        assert_eq!(a.log, b.log);
    }
}
