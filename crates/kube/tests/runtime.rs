//! kube-runtime's own `Controller` as a user's program builds it (DESIGN.md section 11):
//! `Controller::new(api, watcher::Config::default()).owns(..).run(..).for_each(..)`,
//! with its watcher, reflector store, scheduler and runner, against the simulated API
//! server, in virtual time, deterministic under a seed.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, Resource, ResourceExt};
use reconsim_kube::{Kinds, KubeWorld, Program, intercept};
use reconsim_sim::{Fault, FaultPlan, PartitionMode, SimTime, TimedFault, TraceMode};
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
    /// The reconcile's requeue; `None`: it waits for a change.
    requeue: Option<Duration>,
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
    Ok(ctx
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

fn error_policy(_: Arc<Bundle>, e: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.log.lock().unwrap().push(format!("error: {e}"));
    Action::requeue(Duration::from_secs(5))
}

fn kinds() -> Kinds {
    Kinds::new().crd::<Bundle>().core::<ConfigMap>()
}

/// How the program's Controller runs: its reconcile's requeue and its watchers' config.
#[derive(Clone)]
struct Setup {
    requeue: Option<Duration>,
    watcher: watcher::Config,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            requeue: Some(Duration::from_secs(60)),
            watcher: watcher::Config::default(),
        }
    }
}

/// The user's `main`, but for the client: two Bundles, then kube-runtime's Controller.
fn program(log: Arc<Mutex<Vec<String>>>, setup: Setup) -> Program {
    Arc::new(move |client: kube::Client| {
        let log = log.clone();
        let setup = setup.clone();
        Box::pin(async move {
            let bundles: Api<Bundle> = Api::namespaced(client.clone(), "default");
            for (name, count) in [("a", 2), ("b", 3)] {
                let b = Bundle::new(name, BundleSpec { count });
                if let Err(e) = bundles.create(&PostParams::default(), &b).await {
                    return format!("create {name}: {e}");
                }
            }
            let cms: Api<ConfigMap> = Api::all(client.clone());
            let ctx = Arc::new(Ctx {
                client,
                log,
                requeue: setup.requeue,
            });
            Controller::new(bundles, setup.watcher.clone())
                .owns(cms, setup.watcher)
                .run(reconcile, error_policy, ctx)
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
    run_with(seed, until, Setup::default())
}

fn run_with(seed: u64, until: SimTime, setup: Setup) -> Outcome {
    run_in(seed, until, kinds(), FaultPlan::default(), |log| {
        program(log, setup)
    })
}

/// A run of the program `make` builds around the log, serving `kinds`, under `faults`.
fn run_in(
    seed: u64,
    until: SimTime,
    kinds: Kinds,
    faults: FaultPlan<reconsim_world::WorldFault>,
    make: impl FnOnce(Arc<Mutex<Vec<String>>>) -> Program + Send,
) -> Outcome {
    intercept::on_own_thread(seed, || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut w = KubeWorld::with_faults(
            seed,
            TraceMode::Hash,
            ApiServerConfig::default(),
            kinds,
            make(log.clone()),
            faults,
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
    // Each Bundle reconciled at start, again as its ConfigMaps' creates come back
    // through the watch, and after each 60 s requeue, on the run's clock.
    for name in ["a", "b"] {
        assert_reconciled_at_start_and_at(&o, name, &["60", "120"]);
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

/// The times (s) at which Bundle `name` was reconciled.
fn reconciled(o: &Outcome, name: &str) -> Vec<String> {
    o.log
        .iter()
        .filter_map(|l| l.strip_suffix(&format!(" s: reconciled {name}")))
        .map(str::to_string)
        .collect()
}

/// Bundle `name` reconciled at 0 s (its start), again at 0 s as the events of the
/// ConfigMaps it made come back (each 1-20 ms behind its create, the server's watch
/// latency, so one wake per event or fewer: at most one per ConfigMap), and then at
/// `later` only.
fn assert_reconciled_at_start_and_at(o: &Outcome, name: &str, later: &[&str]) {
    let times = reconciled(o, name);
    let made = o
        .config_maps
        .iter()
        .filter(|c| c.starts_with(&format!("{name}-")))
        .count();
    let at_start = times.iter().take_while(|t| *t == "0").count();
    assert!(
        (2..=1 + made).contains(&at_start),
        "{name}: {at_start} reconciles at 0 s for {made} ConfigMaps: {:?}",
        o.log
    );
    assert_eq!(&times[at_start..], later, "{:?}", o.log);
}

#[test]
fn a_quiet_object_is_reconciled_once_an_hour_not_after_every_watch_timeout() {
    // kube-runtime's watcher asks for 290 s watches with bookmarks; the server ends each
    // at its timeout after a bookmark at its current resourceVersion, and the watcher
    // re-watches from there: no 410, no relist, no reconcile (semantics 3.18). Without
    // bookmarks and timeouts the watch from the list's resourceVersion aged out of the
    // history and each relist reconciled everything again.
    let setup = Setup {
        requeue: None,
        ..Setup::default()
    };
    let o = run_with(1, SimTime::from_secs(3_600), setup);
    for name in ["a", "b"] {
        assert_reconciled_at_start_and_at(&o, name, &[]);
    }
    let lists = o
        .requests
        .iter()
        .filter(|r| r.contains("limit=500"))
        .count();
    assert_eq!(lists, 2, "one list per watcher: {:?}", o.requests);
    let watches = o
        .requests
        .iter()
        .filter(|r| r.contains("bundles?&watch=true"))
        .count();
    assert_eq!(watches, 3_600 / 290 + 1, "{:?}", o.requests);
    assert!(!o.log.iter().any(|l| l.starts_with("error")), "{:?}", o.log);
}

#[test]
fn a_long_partition_ends_without_a_relist_while_the_watched_kinds_were_quiet() {
    // Probe P-F2 of fidelity review 3 (issue 59, D2): the program's host is cut off for
    // 6 minutes while a task of its own writes a Secret every 10 s (before the cut and
    // after). After the heal kube-runtime's watchers re-watch from their last bookmarks:
    // each type's watch cache evicted nothing of Bundles and ConfigMaps, so the watches
    // resume and nothing is reconciled again. Before, one 5-minute history for all kinds
    // answered 410, and the relist reconciled both Bundles at about 427 s.
    let setup = Setup {
        requeue: None,
        ..Setup::default()
    };
    let cut = Fault::Partition {
        hosts_a: vec!["user".into()],
        hosts_b: vec!["api".into()],
        mode: PartitionMode::Hold,
        one_way: false,
    };
    let faults = FaultPlan::new(vec![TimedFault::at(60_000, Some(360_000), cut)]);
    let kinds = kinds().core::<Secret>();
    let o = run_in(1, SimTime::from_secs(900), kinds, faults, |log| {
        let controller = program(log, setup);
        Arc::new(move |client: kube::Client| {
            let controller = controller.clone();
            Box::pin(async move {
                let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
                tokio::spawn(async move {
                    for i in 0.. {
                        let mut s = Secret::default();
                        s.metadata.name = Some(format!("s{i}"));
                        let _ = secrets.create(&PostParams::default(), &s).await;
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                });
                controller(client).await
            })
        })
    });
    for name in ["a", "b"] {
        assert_reconciled_at_start_and_at(&o, name, &[]);
    }
}

#[test]
fn a_streaming_list_ends_its_initial_events_with_a_bookmark() {
    // kube-runtime's `streaming_lists()`: a watch with sendInitialEvents, whose initial
    // events end with the bookmark annotated k8s.io/initial-events-end; without it the
    // watcher never reaches its first reconcile.
    let setup = Setup {
        watcher: watcher::Config::default().streaming_lists(),
        ..Setup::default()
    };
    let o = run_with(1, SimTime::from_secs(150), setup);
    assert_converges_with(&o, "sendInitialEvents=true");
    assert!(
        !o.requests.iter().any(|r| r.contains("limit=500")),
        "{:?}",
        o.requests
    );
}

/// The two Bundles' ConfigMaps made, each Bundle reconciled at start, after its
/// creates and at its two requeues, and some request containing `asked`.
fn assert_converges_with(o: &Outcome, asked: &str) {
    assert_eq!(
        o.config_maps,
        ["a-0", "a-1", "b-0", "b-1", "b-2"],
        "{:?}",
        o.requests
    );
    assert!(
        o.requests.iter().any(|r| r.contains(asked)),
        "{:?}",
        o.requests
    );
    for name in ["a", "b"] {
        assert_reconciled_at_start_and_at(o, name, &["60", "120"]);
    }
}

#[test]
fn a_watcher_that_lists_in_pages_converges() {
    // kube-runtime's `page_size`: each list in pages of one, `continue` from page to page.
    let setup = Setup {
        watcher: watcher::Config::default().page_size(1),
        ..Setup::default()
    };
    let o = run_with(1, SimTime::from_secs(150), setup);
    assert_converges_with(&o, "continue=");
}
