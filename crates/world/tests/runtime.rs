//! Integration tests of reconcilers in kube-runtime's shape (`reconsim_world::runtime`):
//! an async `reconcile` and an `error_policy` over `Api<K>` and a `Store`, polled by the
//! manager.
//!
//! The controller under test keeps a WidgetSet's `spec.replicas` Widgets (owned, made by
//! generateName) and writes `status.replicas`, the way a ReplicaSet-like kube-rs
//! controller would. Its context logs every reconcile into a log the test keeps (an
//! observation record that survives crashes; the context itself does not).

use reconsim_sim::{Fault, FaultPlan, PartitionMode, ProcId, Sim, SimConfig, SimTime, TimedFault};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::manager::{Manager, ManagerConfig, REQUEST_TIMEOUT_MS, Reconciler};
use reconsim_world::object::{Body, OwnerReference, Resource};
use reconsim_world::runtime::{
    Action, Api, Client, Controller, DeleteParams, Error, ListParams, PatchParams, PostParams,
};
use reconsim_world::script::{Script, Step as ScriptStep};
use reconsim_world::{Endpoints, Object, ObjectKey, ObjectMeta, Proc, WorldFault};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{Widget, WidgetSet, WidgetSetSpec, WidgetSetStatus};

const NS: &str = "reconsim-test";
const LABEL: &str = "widget-set";

/// What the test sees of each reconcile: the object's name, when it started, how it
/// ended.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: String,
    at: SimTime,
    outcome: String,
}

type Log = Rc<RefCell<Vec<Entry>>>;

/// The controller's context: its client, the test's log, and a counter of its own that
/// a crash resets.
struct Ctx {
    client: Client,
    log: Log,
    reconciles: Cell<u32>,
    /// Fail every reconcile with a 409 before touching anything (the error policy's test).
    fail: bool,
    /// Sleep this long at the start of each reconcile.
    sleep_ms: u64,
}

async fn reconcile(ws: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.reconciles.set(ctx.reconciles.get() + 1);
    let started = ctx.client.now();
    let result = sync(&ws, &ctx).await;
    ctx.log.borrow_mut().push(Entry {
        name: ws.meta.name.clone(),
        at: started,
        outcome: match &result {
            Ok(_) => format!("ok #{}", ctx.reconciles.get()),
            Err(e) => format!("{e}"),
        },
    });
    result
}

async fn sync(ws: &Object, ctx: &Ctx) -> Result<Action, Error> {
    if ctx.sleep_ms > 0 {
        ctx.client.sleep(ctx.sleep_ms).await;
    }
    if ctx.fail {
        // A GET of something that does not exist: a real 404 from the server.
        let missing: Api<Widget> = Api::namespaced(ctx.client.clone(), NS);
        missing.get("no-such-widget").await?;
    }
    let want = ws.typed::<WidgetSet>().expect("a WidgetSet").spec.replicas;
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), NS);
    let owned = ctx
        .client
        .store::<Widget>()
        .owned_by(&ws.meta.namespace, ws.meta.uid);
    let have = owned.iter().filter(|w| !w.meta.is_deleting()).count() as u32;
    for _ in have..want {
        let mut meta = ObjectMeta::named(NS, "");
        meta.generate_name = Some(format!("{}-", ws.meta.name));
        meta.labels.insert(LABEL.into(), ws.meta.name.clone());
        meta.owner_references = vec![OwnerReference {
            kind: WidgetSet::KIND,
            name: ws.meta.name.clone(),
            uid: ws.meta.uid,
            controller: Some(true),
            block_owner_deletion: None,
        }];
        widgets
            .create(&PostParams::default(), Object::new(meta, Widget::default()))
            .await?;
    }
    for extra in owned.iter().skip(want as usize) {
        // The store can be behind the server (its watch latency): an earlier reconcile
        // may have deleted it already, which a real controller takes as done.
        match widgets
            .delete(&extra.meta.name, &DeleteParams::default())
            .await
        {
            Err(e) if e.code() == Some(404) => {}
            other => {
                other?;
            }
        }
    }
    let sets: Api<WidgetSet> = Api::namespaced(ctx.client.clone(), NS);
    let status = WidgetSet {
        status: WidgetSetStatus { replicas: want },
        ..Default::default()
    };
    sets.patch_status(&ws.meta.name, &PatchParams::default(), status)
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Object>, e: &Error, ctx: Arc<Ctx>) -> Action {
    // The client works here too, as in kube-rs (a log line, the clock).
    let now = ctx.client.now();
    ctx.client.note(|| format!("{e} at {now}"));
    Action::requeue(Duration::from_secs(5))
}

fn controller(log: &Log, fail: bool, sleep_ms: u64) -> Box<dyn Reconciler> {
    let log = log.clone();
    Controller::new::<WidgetSet>("widget-set-controller")
        .owns::<Widget>()
        .run(reconcile, error_policy, move |client| Ctx {
            client,
            log: log.clone(),
            reconciles: Cell::new(0),
            fail,
            sleep_ms,
        })
}

fn widget_set(name: &str, replicas: u32) -> Object {
    Object::new(
        ObjectMeta::named(NS, name),
        Body::new(WidgetSet {
            spec: WidgetSetSpec { replicas },
            ..Default::default()
        }),
    )
}

struct World {
    sim: Sim<Proc>,
    api: ProcId,
}

fn world(
    seed: u64,
    faults: Vec<TimedFault<WorldFault>>,
    script: Vec<ScriptStep>,
    reconciler: Box<dyn Reconciler>,
) -> World {
    let mut sim = Sim::new(SimConfig::new(seed), FaultPlan::new(faults));
    let api_host = sim.add_host("api");
    let mut server = ApiServer::new(Default::default());
    server.seed_object(widget_set("ws-a", 2));
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    sim.spawn(api_host, "script", Proc::new(Script::new(api, script)));
    let host = sim.add_host("h-m0");
    let config = ManagerConfig {
        identity: "m0".into(),
        leader: None,
        kubelet: None,
        pod: None,
        ..Default::default()
    };
    let manager = Manager::new(config, Endpoints { apiserver: api }, vec![reconciler]);
    sim.spawn(host, "m0", Proc::new(manager));
    World { sim, api }
}

fn server(w: &World) -> &ApiServer {
    let other = w.sim.actor(w.api);
    other
        .component::<ApiServer>()
        .unwrap_or_else(|| panic!("not the API server: {other:?}"))
}

/// The live Widgets `ws-a` owns, and its status.replicas.
fn state(w: &World) -> (usize, u32) {
    let api = server(w);
    let ws = api
        .get(&ObjectKey::new(WidgetSet::KIND, NS, "ws-a"))
        .expect("ws-a");
    let owned = api
        .list(Widget::KIND)
        .filter(|o| {
            o.meta
                .controller_ref()
                .is_some_and(|r| r.uid == ws.meta.uid)
        })
        .filter(|o| !o.meta.is_deleting())
        .count();
    (owned, ws.typed::<WidgetSet>().unwrap().status.replicas)
}

fn scale(at_ms: u64, replicas: u32) -> ScriptStep {
    ScriptStep {
        at_ms,
        op: ApiOp::Patch {
            key: ObjectKey::new(WidgetSet::KIND, NS, "ws-a"),
            ops: vec![PatchOp::Spec(widget_set("ws-a", replicas).body)],
            resource_version: None,
        },
    }
}

#[test]
fn an_async_controller_converges_and_follows_a_scale_down() {
    let log = Log::default();
    let mut w = world(
        1,
        vec![],
        vec![scale(20_000, 1)],
        controller(&log, false, 0),
    );
    w.sim.run_until(SimTime::from_secs(10));
    assert_eq!(state(&w), (2, 2));
    w.sim.run_until(SimTime::from_secs(40));
    assert_eq!(state(&w), (1, 1));
    let log = log.borrow();
    assert!(log.iter().all(|e| e.outcome.starts_with("ok")), "{log:?}");
    // Owned Widgets' changes wake the owner (`owns`): more reconciles than the two scales.
    assert!(log.len() >= 2, "{log:?}");
}

#[test]
fn an_error_goes_to_the_error_policy_whose_action_schedules_the_retry() {
    let log = Log::default();
    let mut w = world(2, vec![], vec![], controller(&log, true, 0));
    w.sim.run_until(SimTime::from_secs(16));
    let log = log.borrow();
    assert!(log.len() >= 3, "{log:?}");
    for e in log.iter() {
        assert_eq!(e.outcome, "NotFound (404)");
    }
    // Each retry comes 5 s after the previous failure (plus the GET's round trip).
    for pair in log.windows(2) {
        let gap = pair[1].at.since(pair[0].at);
        assert!((5_000..5_100).contains(&gap), "{gap} ms: {log:?}");
    }
    assert_eq!(state(&w), (0, 0), "a failing reconcile writes nothing");
}

#[test]
fn a_request_into_a_partition_resolves_as_a_timeout() {
    let cut = Fault::Partition {
        hosts_a: vec!["h-m0".into()],
        hosts_b: vec!["api".into()],
        mode: PartitionMode::Drop,
        one_way: false,
    };
    let log = Log::default();
    let plan = vec![TimedFault {
        at_ms: 2_000,
        duration_ms: Some(120_000),
        fault: cut,
        on: None,
    }];
    // Each reconcile sleeps 3 s first, so its first request goes into the partition.
    let mut w = world(3, plan, vec![], controller(&log, false, 3_000));
    w.sim.run_until(SimTime::from_secs(100));
    let log = log.borrow();
    let first = log.first().expect("a reconcile ended");
    assert_eq!(first.outcome, "timed out");
    assert!(
        first.at.as_ms() + 3_000 + REQUEST_TIMEOUT_MS <= 100_000,
        "{log:?}"
    );
}

#[test]
fn a_crash_drops_the_reconcile_and_the_context() {
    let log = Log::default();
    // Crash in the middle of the first reconcile's 5 s sleep.
    let plan = vec![TimedFault {
        at_ms: 2_000,
        duration_ms: Some(1_000),
        fault: Fault::Crash {
            process: "m0".into(),
        },
        on: None,
    }];
    let mut w = world(4, plan, vec![], controller(&log, false, 5_000));
    w.sim.run_until(SimTime::from_secs(60));
    let log = log.borrow();
    // The interrupted reconcile never ended; the first that did ran in a fresh context
    // (its counter starts again at 1) after the restart.
    let first = log.first().expect("a reconcile after the restart");
    assert!(first.at >= SimTime(3_000), "{log:?}");
    assert_eq!(first.outcome, "ok #1");
    assert_eq!(state(&w), (2, 2));
}

#[test]
fn a_list_filters_by_label_selector() {
    // A controller that lists its Widgets by label instead of reading the store.
    async fn count(ws: Arc<Object>, ctx: Arc<Ctx>) -> Result<Action, Error> {
        let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), NS);
        let mine = widgets
            .list(&ListParams::default().labels(&format!("{LABEL}={}", ws.meta.name)))
            .await?;
        let all = widgets.list(&ListParams::default()).await?;
        ctx.log.borrow_mut().push(Entry {
            name: ws.meta.name.clone(),
            at: ctx.client.now(),
            outcome: format!("{} of {}", mine.len(), all.len()),
        });
        Ok(Action::requeue(Duration::from_secs(1)))
    }
    let log = Log::default();
    let l = log.clone();
    let lister =
        Controller::new::<WidgetSet>("lister").run(count, error_policy, move |client| Ctx {
            client,
            log: l.clone(),
            reconciles: Cell::new(0),
            fail: false,
            sleep_ms: 0,
        });
    let mut other = Object::new(ObjectMeta::named(NS, "stray"), Widget::default());
    other.meta.labels.insert(LABEL.into(), "ws-b".into());
    let mut mine = Object::new(ObjectMeta::named(NS, "w-1"), Widget::default());
    mine.meta.labels.insert(LABEL.into(), "ws-a".into());
    let script = vec![
        ScriptStep {
            at_ms: 100,
            op: ApiOp::Create(Box::new(other)),
        },
        ScriptStep {
            at_ms: 100,
            op: ApiOp::Create(Box::new(mine)),
        },
    ];
    let mut w = world(5, vec![], script, lister);
    w.sim.run_until(SimTime::from_secs(5));
    let last = log.borrow().last().cloned().expect("reconciles");
    assert_eq!(last.outcome, "1 of 2");
}

#[test]
fn the_same_seed_gives_the_same_trace_hash() {
    let hash = |seed| {
        let log = Log::default();
        let mut w = world(
            seed,
            vec![],
            vec![scale(20_000, 1)],
            controller(&log, false, 0),
        );
        w.sim.run_until(SimTime::from_secs(60));
        w.sim.trace().hash()
    };
    assert_eq!(hash(7), hash(7));
    assert_ne!(hash(7), hash(8));
}
