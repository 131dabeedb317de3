//! A kube-rs controller's own `reconcile` and `error_policy` under reconsim's manager
//! (`reconsim_kube::Controller`), in a world of an API server and one manager process:
//! it converges, an error goes to its error policy, whose `Action` schedules the retry,
//! a crash mid-reconcile restarts it with a fresh client and context, and the
//! determinism self-check names the request where a nondeterministic reconcile parts.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::{CustomResource, Resource, ResourceExt};
use reconsim_kube::{Controller, Kinds};
use reconsim_sim::{Fault, FaultPlan, Sim, SimConfig, SimTime, TimedFault, TraceMode};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::manager::{Manager, ManagerConfig, Reconciler};
use reconsim_world::{Endpoints, Proc, WorldFault};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
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
    /// How many ConfigMaps, named `<bundle>-<i>`.
    count: u32,
    /// Name them in a std HashMap's order (seeded at random per map): the hazard.
    hash_map_names: bool,
    /// Sleep this long on tokio's clock before each create.
    #[serde(default)]
    sleep_ms: u64,
}

/// What the test keeps across crashes (outside the process): each context made, and
/// each reconcile's outcome.
#[derive(Default)]
struct Log {
    contexts: AtomicU32,
    outcomes: Mutex<Vec<String>>,
}

struct Ctx {
    client: kube::Client,
    log: Arc<Log>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
}

async fn reconcile(b: Arc<Bundle>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
    let mut names: Vec<String> = (0..b.spec.count)
        .map(|i| format!("{}-{i}", b.name_any()))
        .collect();
    if b.spec.hash_map_names {
        let set: std::collections::HashMap<String, ()> = names.drain(..).map(|n| (n, ())).collect();
        names = set.into_keys().collect();
    }
    let started = std::time::Instant::now();
    for name in names {
        if cms.get_opt(&name).await?.is_some() {
            continue;
        }
        if b.spec.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(b.spec.sleep_ms)).await;
        }
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name);
        cm.metadata.owner_references = b.controller_owner_ref(&()).map(|r| vec![r]);
        cms.create(&PostParams::default(), &cm).await?;
    }
    let outcome = if b.spec.sleep_ms > 0 {
        format!("ok after {} ms", started.elapsed().as_millis())
    } else {
        "ok".into()
    };
    ctx.log.outcomes.lock().unwrap().push(outcome);
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Bundle>, e: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.log.outcomes.lock().unwrap().push(format!("error: {e}"));
    Action::requeue(Duration::from_secs(7))
}

fn kinds() -> Kinds {
    Kinds::new().crd::<Bundle>().core::<ConfigMap>()
}

fn controller(log: &Arc<Log>) -> Box<dyn Reconciler> {
    let log = log.clone();
    Controller::<Bundle>::new("bundle-controller", kinds())
        .owns::<ConfigMap>()
        .run(reconcile, error_policy, move |client| {
            log.contexts.fetch_add(1, Ordering::Relaxed);
            Ctx {
                client,
                log: log.clone(),
            }
        })
}

fn world(
    seed: u64,
    trace: TraceMode,
    spec: BundleSpec,
    faults: Vec<TimedFault<WorldFault>>,
    log: &Arc<Log>,
) -> Sim<Proc> {
    let mut config = SimConfig::new(seed);
    config.trace = trace;
    let mut sim = Sim::new(config, FaultPlan::new(faults));
    let api_host = sim.add_host("api");
    let mut server = ApiServer::new(Default::default());
    let mut b = Bundle::new("b", spec);
    b.metadata.namespace = Some("default".into());
    server.seed_object(kinds().object(&b).expect("a Bundle"));
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    let host = sim.add_host("h-m0");
    let config = ManagerConfig {
        identity: "m0".into(),
        ..Default::default()
    };
    let manager = Manager::new(config, Endpoints { apiserver: api }, vec![controller(log)]);
    sim.spawn(host, "m0", Proc::new(manager));
    sim
}

/// The world run to `until` twice, as every test of real code runs (the determinism
/// self-check): the first run, once both agree on the trace hash.
fn twice(build: impl Fn() -> Sim<Proc>, until: SimTime) -> Sim<Proc> {
    let mut a = build();
    a.run_until(until);
    let mut b = build();
    b.run_until(until);
    assert_eq!(
        a.trace().hash(),
        b.trace().hash(),
        "two runs of one seed part"
    );
    a
}

fn config_maps(sim: &Sim<Proc>) -> Vec<String> {
    let Some(api) = sim.actor(reconsim_sim::ProcId(0)).component::<ApiServer>() else {
        panic!("process 0 is the API server")
    };
    api.list(reconsim_kube::kinds::kind_of::<ConfigMap>())
        .map(|o| o.meta.name.clone())
        .collect()
}

fn spec(count: u32) -> BundleSpec {
    BundleSpec {
        count,
        hash_map_names: false,
        sleep_ms: 0,
    }
}

#[test]
fn a_kube_rs_controller_converges_under_the_manager() {
    let log = Arc::new(Log::default());
    let sim = twice(
        || world(1, TraceMode::Hash, spec(3), vec![], &log),
        SimTime::from_secs(30),
    );
    assert_eq!(config_maps(&sim), ["b-0", "b-1", "b-2"]);
    let outcomes = log.outcomes.lock().unwrap();
    assert!(outcomes.iter().all(|o| o == "ok"), "{outcomes:?}");
    // One context per run (the log is shared by the two runs).
    assert_eq!(log.contexts.load(Ordering::Relaxed), 2);
}

#[test]
fn a_crash_mid_reconcile_restarts_with_a_fresh_client_and_context() {
    // The manager crashes a few ms in, while the first reconcile's requests are out,
    // and restarts 2 s later: a second context, and the controller converges.
    let log = Arc::new(Log::default());
    let crash = TimedFault::at(
        15,
        Some(2_000),
        Fault::Crash {
            process: "m0".into(),
        },
    );
    let sim = twice(
        || world(2, TraceMode::Hash, spec(5), vec![crash.clone()], &log),
        SimTime::from_secs(30),
    );
    assert_eq!(config_maps(&sim), ["b-0", "b-1", "b-2", "b-3", "b-4"]);
    // Two per run: the start and the restart (the log is shared by the two runs).
    assert_eq!(log.contexts.load(Ordering::Relaxed), 4);
}

#[test]
fn an_error_goes_to_the_error_policy_whose_action_schedules_the_retry() {
    // 15 ms in, while the first reconcile's requests are out, the manager's host is cut
    // off from the API server for 60 s: a request times out (45 s), the error policy
    // asks for 7 s, and a retry after the heal converges.
    let log = Arc::new(Log::default());
    let cut = TimedFault::at(
        15,
        Some(60_000),
        Fault::Partition {
            hosts_a: vec!["api".into()],
            hosts_b: vec!["h-m0".into()],
            mode: reconsim_sim::PartitionMode::Drop,
            one_way: false,
        },
    );
    let sim = twice(
        || world(3, TraceMode::Hash, spec(5), vec![cut.clone()], &log),
        SimTime::from_secs(200),
    );
    assert_eq!(config_maps(&sim), ["b-0", "b-1", "b-2", "b-3", "b-4"]);
    let outcomes = log.outcomes.lock().unwrap();
    assert!(
        outcomes
            .first()
            .is_some_and(|o| o.starts_with("error: kube:")),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.last().map(String::as_str),
        Some("ok"),
        "{outcomes:?}"
    );
}

#[test]
fn the_self_check_names_the_request_where_a_nondeterministic_reconcile_parts() {
    let build = |trace| {
        let spec = BundleSpec {
            count: 12,
            hash_map_names: true,
            sleep_ms: 0,
        };
        world(1, trace, spec, vec![], &Arc::new(Log::default()))
    };
    let divergence = reconsim_kube::selfcheck::twice(build, SimTime::from_secs(30))
        .expect_err("two random orders of 12 names agree 1 time in 479 million");
    assert!(divergence.first.contains("Get"), "{divergence}");
    // A deterministic one agrees with itself.
    let same = |trace| world(1, trace, spec(12), vec![], &Arc::new(Log::default()));
    reconsim_kube::selfcheck::twice(same, SimTime::from_secs(30)).unwrap_or_else(|d| panic!("{d}"));
}

#[test]
fn on_a_thread_of_its_own_a_runs_hash_maps_follow_the_seed() {
    // The same hazard as above, each run on a thread of its own whose std hash keys
    // come from the seed (reconsim_kube::intercept::on_own_thread): the runs agree.
    let run = || {
        reconsim_kube::intercept::on_own_thread(1, || {
            let spec = BundleSpec {
                count: 12,
                hash_map_names: true,
                sleep_ms: 0,
            };
            let mut sim = world(1, TraceMode::Hash, spec, vec![], &Arc::new(Log::default()));
            sim.run_until(SimTime::from_secs(30));
            sim.trace().hash()
        })
    };
    assert_eq!(run(), run());
}

#[test]
fn a_reconcile_that_sleeps_on_tokios_clock_waits_in_virtual_time() {
    // Three creates, each after a 2 s tokio sleep: the reconcile takes 6 s of virtual
    // time and nothing of the wall clock's, and the key stays in processing meanwhile.
    let log = Arc::new(Log::default());
    let spec = BundleSpec {
        count: 3,
        hash_map_names: false,
        sleep_ms: 2_000,
    };
    let wall = std::time::Instant::now();
    let sim = twice(
        || world(4, TraceMode::Hash, spec.clone(), vec![], &log),
        SimTime::from_secs(30),
    );
    assert!(wall.elapsed() < Duration::from_secs(5));
    assert_eq!(config_maps(&sim), ["b-0", "b-1", "b-2"]);
    let outcomes = log.outcomes.lock().unwrap();
    // The first reconcile creates all three (6 s and three gets of a few ms each); the
    // ones its creates wake find nothing to do.
    let first = outcomes.first().expect("a reconcile ended");
    let ms: u64 = first
        .strip_prefix("ok after ")
        .and_then(|r| r.strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{outcomes:?}"));
    assert!((6_000..6_200).contains(&ms), "{outcomes:?}");
}

#[test]
fn owns_maps_every_owner_reference_of_the_kind_not_only_the_controller() {
    // kube-runtime 5.0's trigger_owners maps each owner reference whose apiVersion and
    // kind are the owner's, controller or not (controller-runtime's Owns takes the
    // controller only; that is the families' `enqueue_owner`).
    let log = Arc::new(Log::default());
    let reconciler = controller(&log);
    let mut b = Bundle::new("b", spec(1));
    b.metadata.namespace = Some("default".into());
    b.metadata.uid = Some("d5d0f7a6-0000-0000-0000-000000000001".into());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("shared".into());
    cm.metadata.namespace = Some("default".into());
    let mut plain = b.owner_ref(&()).expect("named, with a uid");
    plain.controller = None;
    cm.metadata.owner_references = Some(vec![plain]);
    let object = kinds().object(&cm).expect("a ConfigMap");
    let mut keys = Vec::new();
    reconciler.keys_for(&object, &mut keys);
    let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(names, ["Bundle default/b"]);
}
