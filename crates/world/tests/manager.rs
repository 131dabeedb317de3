//! Integration tests of the controller host (docs/semantics.md section 2 for the work
//! queue, section 1 for the leader election it embeds).
//!
//! A [`Recorder`] is a small reconciler defined here: it follows a per-reconcile [`Plan`]
//! (sleep, a few Gets, a status patch, then an ending) and logs every reconcile with its
//! key, start, end, what its cache held and every reply it got. The log is an observation
//! record, like a trace: it survives a crash, while the reconciler's working memory does
//! not. Tests read it back through `Reconciler::as_any`.
//!
//! Topology: the API server and a [`Script`] (user actions at fixed times) on host "api";
//! each manager on its own host "h-<name>", so a partition can cut one manager off.

use reconsim_sim::{
    Fault, FaultPlan, PartitionMode, ProcId, ProcState, Sim, SimConfig, SimTime, TimedFault,
};
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::informer::{PING_TIMEOUT_MS, READ_IDLE_TIMEOUT_MS};
use reconsim_world::leader::{Candidate, LeaderConfig};
use reconsim_world::manager::{
    Call, Manager, ManagerConfig, REQUEST_TIMEOUT_MS, ReconcileCtx, Reconciler, Reply, Step,
    WorkQueue,
};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Kind, Lease};
use reconsim_world::script::{Script, Step as ScriptStep};
use reconsim_world::{Endpoints, Object, ObjectKey, ObjectMeta, Proc, WorldFault};
use std::collections::BTreeMap;

mod common;
use common::{Widget, WidgetSet, WidgetSetSpec};

const NS: &str = "reconsim-test";
const LOCK: &str = "manager-lock";

// ----- objects ----------------------------------------------------------------------------

fn widget_set(name: &str, replicas: u32) -> Object {
    Object::new(
        ObjectMeta::named(NS, name),
        Body::new(WidgetSet {
            spec: WidgetSetSpec { replicas },
            ..Default::default()
        }),
    )
}

fn widget(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(Widget::default()))
}

fn ws_key(name: &str) -> ObjectKey {
    ObjectKey::new(WidgetSet::KIND, NS, name)
}

fn label(at_ms: u64, name: &str, value: u64) -> ScriptStep {
    ScriptStep {
        at_ms,
        op: ApiOp::Patch {
            key: ws_key(name),
            ops: vec![PatchOp::SetLabel("v".into(), Some(value.to_string()))],
            resource_version: None,
        },
    }
}

fn scale(at_ms: u64, name: &str, replicas: u32) -> ScriptStep {
    let ws = widget_set(name, replicas).body;
    ScriptStep {
        at_ms,
        op: ApiOp::Patch {
            key: ws_key(name),
            ops: vec![PatchOp::Spec(ws)],
            resource_version: None,
        },
    }
}

// ----- the test reconciler ------------------------------------------------------------------

/// What one reconcile does, in order: sleep, `gets` Gets of its key, a status patch
/// (status.replicas = spec.replicas, from the cache), then `end`.
#[derive(Clone, Debug)]
struct Plan {
    sleep_ms: Option<u64>,
    gets: u32,
    patch_status: bool,
    end: Step,
}

impl Plan {
    fn done() -> Self {
        Plan {
            sleep_ms: None,
            gets: 0,
            patch_status: false,
            end: Step::done(),
        }
    }

    fn ending(end: Step) -> Self {
        Plan {
            end,
            ..Self::done()
        }
    }

    fn sleep(mut self, ms: u64) -> Self {
        self.sleep_ms = Some(ms);
        self
    }

    fn gets(mut self, n: u32) -> Self {
        self.gets = n;
        self
    }

    fn patch_status(mut self) -> Self {
        self.patch_status = true;
        self
    }

    fn stages(&self) -> Vec<Stage> {
        let mut s = Vec::new();
        if let Some(ms) = self.sleep_ms {
            s.push(Stage::Sleep(ms));
        }
        s.extend((0..self.gets).map(|_| Stage::Get));
        if self.patch_status {
            s.push(Stage::Patch);
        }
        s.push(Stage::End(self.end.clone()));
        s
    }
}

#[derive(Clone, Debug)]
enum Stage {
    Sleep(u64),
    Get,
    Patch,
    End(Step),
}

/// A reply, reduced to what tests look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    ApiOk,
    ApiErr,
    Cloud,
    TimedOut,
    Woke,
}

/// One reconcile as observed.
#[derive(Clone, Debug)]
struct Run {
    key: ObjectKey,
    start: SimTime,
    end: Option<SimTime>,
    /// Objects in the cache at the start.
    cache_len: usize,
    /// resourceVersion of the key's object in the cache at the start.
    rv: Option<u64>,
    /// (when, what) of every reply.
    replies: Vec<(SimTime, Seen)>,
    /// When each request (or sleep) was issued.
    issued: Vec<SimTime>,
    stages: Vec<Stage>,
    next: usize,
}

#[derive(Debug)]
struct Recorder {
    kinds: Vec<Kind>,
    /// Reconcile `n` (since the last reset) follows `plans[min(n, len - 1)]`.
    plans: Vec<Plan>,
    // Working memory, lost on a crash.
    current: Option<usize>,
    n: usize,
    // Observation record, kept.
    log: Vec<Run>,
    resets: u32,
}

impl Recorder {
    fn new(kinds: &[Kind], plans: Vec<Plan>) -> Self {
        assert!(!plans.is_empty());
        Recorder {
            kinds: kinds.to_vec(),
            plans,
            current: None,
            n: 0,
            log: Vec::new(),
            resets: 0,
        }
    }

    fn widget_sets(plans: Vec<Plan>) -> Self {
        Self::new(&[WidgetSet::KIND], plans)
    }

    fn runs_of(&self, key: &ObjectKey) -> Vec<&Run> {
        self.log.iter().filter(|r| &r.key == key).collect()
    }
}

impl Reconciler for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn watches(&self) -> Vec<Kind> {
        self.kinds.clone()
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        if object.kind() == WidgetSet::KIND {
            keys.push(object.key());
        }
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let i = match ctx.reply.take() {
            None => {
                if let Some(c) = self.current {
                    panic!(
                        "{}: reconcile of {} began while {} was in progress",
                        ctx.identity, ctx.key, self.log[c].key
                    );
                }
                let plan = &self.plans[self.n.min(self.plans.len() - 1)];
                self.n += 1;
                self.log.push(Run {
                    key: ctx.key.clone(),
                    start: ctx.now,
                    end: None,
                    cache_len: ctx.cache.len(),
                    rv: ctx.cache.get(ctx.key).map(|o| o.meta.resource_version),
                    replies: Vec::new(),
                    issued: Vec::new(),
                    stages: plan.stages(),
                    next: 0,
                });
                self.current = Some(self.log.len() - 1);
                self.log.len() - 1
            }
            Some(reply) => {
                let i = self.current.expect("a reply outside any reconcile");
                assert_eq!(&self.log[i].key, ctx.key, "a reply for another key");
                let seen = match reply {
                    Reply::Api(Ok(_)) => Seen::ApiOk,
                    Reply::Api(Err(_)) => Seen::ApiErr,
                    Reply::Service(_) => Seen::Cloud,
                    Reply::TimedOut => Seen::TimedOut,
                    Reply::Woke => Seen::Woke,
                };
                self.log[i].replies.push((ctx.now, seen));
                i
            }
        };
        let run = &mut self.log[i];
        let stage = run.stages[run.next].clone();
        run.next += 1;
        match stage {
            Stage::Sleep(ms) => {
                run.issued.push(ctx.now);
                Step::Sleep { ms }
            }
            Stage::Get => {
                run.issued.push(ctx.now);
                Step::Call(Call::Api(ApiOp::Get(ctx.key.clone())))
            }
            Stage::Patch => {
                run.issued.push(ctx.now);
                let Some(ws) = ctx.cache.get(ctx.key).and_then(|o| o.typed::<WidgetSet>()) else {
                    panic!("no WidgetSet {} in the cache", ctx.key);
                };
                let mut ws = ws.clone();
                ws.status.replicas = ws.spec.replicas;
                Step::Call(Call::Api(ApiOp::Patch {
                    key: ctx.key.clone(),
                    ops: vec![PatchOp::Status(Body::new(ws))],
                    resource_version: None,
                }))
            }
            Stage::End(step) => {
                run.end = Some(ctx.now);
                self.current = None;
                step
            }
        }
    }

    fn reset(&mut self) {
        self.current = None;
        self.n = 0;
        self.resets += 1;
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// ----- the world ----------------------------------------------------------------------------

struct World {
    sim: Sim<Proc>,
    api: ProcId,
    mgrs: Vec<ProcId>,
}

struct Mgr {
    name: &'static str,
    leader: Option<LeaderConfig>,
    recorder: Recorder,
    sync_period_ms: Option<u64>,
}

fn mgr(name: &'static str, recorder: Recorder) -> Mgr {
    Mgr {
        name,
        leader: None,
        recorder,
        sync_period_ms: None,
    }
}

fn elected(name: &'static str, recorder: Recorder) -> Mgr {
    Mgr {
        leader: Some(LeaderConfig::client_go_defaults(NS, LOCK)),
        ..mgr(name, recorder)
    }
}

fn world(
    seed: u64,
    faults: Vec<TimedFault<WorldFault>>,
    seeded: Vec<Object>,
    script: Vec<ScriptStep>,
    mgrs: Vec<Mgr>,
) -> World {
    let mut sim = Sim::new(SimConfig::new(seed), FaultPlan::new(faults));
    let api_host = sim.add_host("api");
    let mut server = ApiServer::new(Default::default());
    for o in seeded {
        server.seed_object(o);
    }
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    sim.spawn(api_host, "script", Proc::new(Script::new(api, script)));
    let endpoints = Endpoints { apiserver: api };
    let mgrs = mgrs
        .into_iter()
        .map(|m| {
            let host = sim.add_host(&format!("h-{}", m.name));
            let config = ManagerConfig {
                identity: m.name.to_string(),
                leader: m.leader,
                kubelet: None,
                pod: None,
                sync_period_ms: m.sync_period_ms,
                ..Default::default()
            };
            let manager = Manager::new(config, endpoints, vec![Box::new(m.recorder)]);
            sim.spawn(host, m.name, Proc::new(manager))
        })
        .collect();
    World { sim, api, mgrs }
}

fn manager(sim: &Sim<Proc>, p: ProcId) -> &Manager {
    let other = sim.actor(p);
    other
        .component::<Manager>()
        .unwrap_or_else(|| panic!("not a manager: {other:?}"))
}

fn rec(sim: &Sim<Proc>, p: ProcId) -> &Recorder {
    manager(sim, p)
        .reconciler(0)
        .as_any()
        .expect("the recorder opts in")
        .downcast_ref::<Recorder>()
        .expect("a Recorder")
}

fn stored(w: &World, key: &ObjectKey) -> std::sync::Arc<Object> {
    let Some(a) = w.sim.actor(w.api).component::<ApiServer>() else {
        panic!("not the API server")
    };
    a.get(key).expect("stored").clone()
}

fn timed(at_ms: u64, duration_ms: Option<u64>, fault: Fault<WorldFault>) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms,
        duration_ms,
        fault,
        on: None,
    }
}

/// Run to `end`, calling `f` after every event.
fn observe(w: &mut World, end: SimTime, mut f: impl FnMut(&World)) {
    while w.sim.step_until(end).is_some() {
        f(w);
    }
}

// ----- the work queue (public API) -----------------------------------------------------------

#[test]
fn work_queue_dedups_adds_and_serves_in_fifo_order() {
    let mut q = WorkQueue::default();
    let (a, b, c) = (ws_key("a"), ws_key("b"), ws_key("c"));
    q.add(b.clone());
    q.add(a.clone());
    q.add(b.clone());
    q.add(c.clone());
    q.add(a.clone());
    assert_eq!(q.len(), 3, "repeated adds of a waiting key are one entry");
    // First-added first, whatever the key order.
    assert_eq!(q.get(), Some(b.clone()));
    assert_eq!(
        q.get(),
        None,
        "one worker: nothing while a key is processed"
    );
    q.done();
    assert_eq!(q.get(), Some(a));
    q.done();
    assert_eq!(q.get(), Some(c));
    q.done();
    assert_eq!(q.get(), None);
    assert!(q.is_empty());
}

#[test]
fn work_queue_key_added_while_processing_runs_once_more_after_done() {
    let mut q = WorkQueue::default();
    let (a, b) = (ws_key("a"), ws_key("b"));
    q.add(a.clone());
    assert_eq!(q.get(), Some(a.clone()));
    // Many adds while processing: the key is dirty but not queued beside itself.
    for _ in 0..10 {
        q.add(a.clone());
    }
    q.add(b.clone());
    assert_eq!(q.len(), 1, "only b waits; a is not queued while processed");
    q.done();
    // a re-joins the line behind b, exactly once.
    assert_eq!(q.get(), Some(b));
    q.done();
    assert_eq!(q.get(), Some(a));
    q.done();
    assert_eq!(
        q.get(),
        None,
        "ten adds during processing coalesce into one re-run"
    );
    // Without adds during processing, done does not requeue.
    q.add(ws_key("c"));
    assert!(q.get().is_some());
    q.done();
    assert_eq!(q.get(), None);
}

// ----- the manager ----------------------------------------------------------------------------

#[test]
fn key_is_never_reconciled_concurrently_and_rapid_updates_coalesce() {
    // Three round trips per reconcile while 300 label updates arrive, in bursts 1 ms
    // apart and some spread out: an update during a reconcile must wait for it.
    let mut script = Vec::new();
    let mut v = 0;
    for burst in 0..10u64 {
        for j in 0..20u64 {
            v += 1;
            script.push(label(5_000 + burst * 3_000 + j, "ws-a", v));
        }
        for j in 0..10u64 {
            v += 1;
            script.push(label(5_000 + burst * 3_000 + 100 + j * 7, "ws-b", v));
        }
    }
    let updates = script.len();
    for seed in 0..4 {
        let mut w = world(
            seed,
            vec![],
            vec![widget_set("ws-a", 1), widget_set("ws-b", 2)],
            script.clone(),
            vec![mgr("m0", Recorder::widget_sets(vec![Plan::done().gets(3)]))],
        );
        w.sim.run_until(SimTime::from_secs(60));
        let r = rec(&w.sim, w.mgrs[0]);
        for name in ["ws-a", "ws-b"] {
            let runs = r.runs_of(&ws_key(name));
            for pair in runs.windows(2) {
                let prev_end = pair[0]
                    .end
                    .expect("a later reconcile began: this one ended");
                assert!(
                    pair[1].start >= prev_end,
                    "seed {seed}: {name} reconciled concurrently: [{}, {}] and from {}",
                    pair[0].start,
                    prev_end,
                    pair[1].start
                );
            }
            assert!(runs.iter().all(|r| r.replies.len() == 3));
            // The last reconcile saw the object's final state: an update during the
            // previous reconcile was not lost.
            let last = runs.last().expect("reconciled");
            assert_eq!(
                last.rv,
                Some(stored(&w, &ws_key(name)).meta.resource_version),
                "seed {seed}: {name}'s last reconcile saw a stale object"
            );
        }
        let total = r.log.len();
        assert!(
            total < updates / 2,
            "seed {seed}: {total} reconciles for {updates} updates: they did not coalesce"
        );
        assert!(total >= 2 + 10, "seed {seed}: too few reconciles ({total})");
        assert_eq!(manager(&w.sim, w.mgrs[0]).reconciles(), vec![total as u64]);
    }
}

#[test]
fn status_patch_reconciler_converges_and_sees_its_own_write() {
    // The patch's own watch event triggers one more reconcile, which patches again (a
    // no-op write) and so on only while the spec changes: after the last scale the
    // status matches the spec.
    let script = vec![scale(10_000, "ws-a", 5), scale(10_001, "ws-a", 7)];
    let mut w = world(
        1,
        vec![],
        vec![widget_set("ws-a", 3)],
        script,
        vec![mgr(
            "m0",
            Recorder::widget_sets(vec![Plan::done().patch_status()]),
        )],
    );
    w.sim.run_until(SimTime::from_secs(30));
    let o = stored(&w, &ws_key("ws-a"));
    let ws = o.typed::<WidgetSet>().expect("a WidgetSet");
    assert_eq!(ws.spec.replicas, 7);
    assert_eq!(ws.status.replicas, 7);
    let r = rec(&w.sim, w.mgrs[0]);
    assert!(
        r.log
            .iter()
            .all(|run| run.replies == vec![(run.end.unwrap(), Seen::ApiOk)])
    );
}

#[test]
fn controllers_start_after_cache_sync_and_offer_every_cached_object_once() {
    // Two kinds, so two lists that answer at different times: a controller started before
    // both came back would reconcile with part of the cache.
    let names: Vec<String> = (0..12).map(|i| format!("ws-{i:02}")).collect();
    for seed in 0..16 {
        let mut seeded: Vec<Object> = names.iter().map(|n| widget_set(n, 1)).collect();
        seeded.extend((0..8).map(|i| widget(&format!("w-{i}"))));
        let total = seeded.len();
        let mut w = world(
            seed,
            vec![],
            seeded,
            vec![],
            vec![mgr(
                "m0",
                Recorder::new(&[Widget::KIND, WidgetSet::KIND], vec![Plan::done()]),
            )],
        );
        let mut started_unsynced = false;
        observe(&mut w, SimTime::from_secs(60), |w| {
            let m = manager(&w.sim, w.mgrs[0]);
            if !m.informer().synced() && (m.running() || m.reconciles()[0] > 0) {
                started_unsynced = true;
            }
        });
        assert!(
            !started_unsynced,
            "seed {seed}: ran before the cache synced"
        );
        let r = rec(&w.sim, w.mgrs[0]);
        assert!(
            r.log.iter().all(|run| run.cache_len == total),
            "seed {seed}: a reconcile began with a partial cache: {:?}",
            r.log.iter().map(|r| r.cache_len).collect::<Vec<_>>()
        );
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for run in &r.log {
            *counts.entry(run.key.name.clone()).or_default() += 1;
        }
        let want: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 1)).collect();
        assert_eq!(counts, want, "seed {seed}: every cached WidgetSet once");
    }
}

#[test]
fn a_sync_period_reoffers_every_cached_object_at_a_jittered_period() {
    for seed in 0..8 {
        let reconciles = |sync_period_ms| {
            let m = Mgr {
                sync_period_ms,
                ..mgr("m0", Recorder::widget_sets(vec![Plan::done()]))
            };
            let mut w = world(seed, vec![], vec![widget_set("ws-a", 1)], vec![], vec![m]);
            w.sim.run_until(SimTime::from_secs(3_000));
            let starts: Vec<u64> = rec(&w.sim, w.mgrs[0])
                .log
                .iter()
                .map(|r| r.start.as_ms())
                .collect();
            starts
        };
        assert_eq!(
            reconciles(None).len(),
            1,
            "seed {seed}: no resync, no change"
        );
        let starts = reconciles(Some(600_000));
        assert!((5..=6).contains(&starts.len()), "seed {seed}: {starts:?}");
        let periods: Vec<u64> = starts[1..].windows(2).map(|p| p[1] - p[0]).collect();
        assert!(
            periods
                .iter()
                .all(|&p| p == periods[0] && (540_000..660_000).contains(&p)),
            "seed {seed}: one period in [0.9, 1.1) x 10 min: {periods:?}"
        );
    }
}

#[test]
fn a_watch_stall_delays_one_managers_events_only() {
    // m0's watch stream stalls 5 s from 10 s to 40 s; m1's does not. A change at 20 s
    // reaches m1 at once and m0 5 s later; after the stall both see changes at once.
    let stall = timed(
        10_000,
        Some(30_000),
        Fault::Inject {
            process: "m0".into(),
            fault: WorldFault::WatchStall { lag_ms: 5_000 },
        },
    );
    let mut w = world(
        4,
        vec![stall],
        vec![widget_set("ws-a", 1)],
        vec![scale(20_000, "ws-a", 2), scale(60_000, "ws-a", 3)],
        vec![
            mgr("m0", Recorder::widget_sets(vec![Plan::done()])),
            mgr("m1", Recorder::widget_sets(vec![Plan::done()])),
        ],
    );
    w.sim.run_until(SimTime::from_secs(90));
    let starts = |m: usize| -> Vec<u64> {
        rec(&w.sim, w.mgrs[m])
            .log
            .iter()
            .map(|r| r.start.as_ms())
            .collect()
    };
    let (m0, m1) = (starts(0), starts(1));
    assert_eq!(m0.len(), 3, "{m0:?}");
    assert_eq!(m1.len(), 3, "{m1:?}");
    assert!((20_000..20_100).contains(&m1[1]), "m1 at once: {m1:?}");
    assert!((25_000..25_100).contains(&m0[1]), "m0 5 s late: {m0:?}");
    assert!(
        (60_000..60_100).contains(&m0[2]),
        "after the stall, at once: {m0:?}"
    );
}

#[test]
fn requeue_after_reconciles_again_exactly_after_the_delay() {
    let mut w = world(
        2,
        vec![],
        vec![widget_set("ws-a", 1)],
        vec![],
        vec![mgr(
            "m0",
            Recorder::widget_sets(vec![Plan::ending(Step::requeue_after(10_000)).gets(1)]),
        )],
    );
    w.sim.run_until(SimTime::from_secs(95));
    let r = rec(&w.sim, w.mgrs[0]);
    assert!(r.log.len() >= 9, "{} reconciles", r.log.len());
    for pair in r.log.windows(2) {
        assert_eq!(pair[1].start, pair[0].end.unwrap().plus_ms(10_000));
    }
}

#[test]
fn errors_requeue_with_doubling_backoff_capped_and_success_forgets() {
    // 22 failures (5 ms doubling reaches the 1000 s cap at the 19th), one success that
    // requeues after 1 s, then failures again: the first retry is back at 5 ms.
    let mut plans = vec![Plan::ending(failed("boom")); 22];
    plans.push(Plan::ending(Step::requeue_after(1_000)));
    plans.push(Plan::ending(failed("again")));
    let mut w = world(
        3,
        vec![],
        vec![widget_set("ws-a", 1)],
        vec![],
        vec![mgr("m0", Recorder::widget_sets(plans))],
    );
    w.sim.run_until(SimTime::from_secs(4 * 3600));
    let r = rec(&w.sim, w.mgrs[0]);
    let gaps: Vec<u64> = r
        .log
        .windows(2)
        .map(|p| p[1].start.since(p[0].end.unwrap()))
        .collect();
    let mut want: Vec<u64> = (0..22u32).map(|n| (5u64 << n).min(1_000_000)).collect();
    want.push(1_000); // the success's requeue_after
    want.push(5); // failures forgotten by the success
    want.push(10);
    assert!(gaps.len() >= want.len(), "{gaps:?}");
    assert_eq!(&gaps[..want.len()], &want[..]);
    assert_eq!(want[18], 1_000_000, "capped at 1000 s");
}

#[test]
fn a_requeue_without_error_goes_through_the_rate_limiter_too() {
    // controller-runtime's `Result{Requeue: true}` is AddRateLimited (semantics 2.4):
    // consecutive requeues back off as errors do, and a success forgets them.
    let mut plans = vec![Plan::ending(Step::RateLimited); 4];
    plans.push(Plan::done());
    plans.push(Plan::ending(Step::RateLimited));
    plans.push(Plan::ending(Step::RateLimited));
    let mut w = world(
        3,
        vec![],
        vec![widget_set("ws-a", 1)],
        vec![scale(2_000, "ws-a", 2)],
        vec![mgr("m0", Recorder::widget_sets(plans))],
    );
    w.sim.run_until(SimTime::from_secs(10));
    let r = rec(&w.sim, w.mgrs[0]);
    let gaps: Vec<u64> = r
        .log
        .windows(2)
        .map(|p| p[1].start.since(p[0].end.unwrap()))
        .collect();
    // Four requeues: 5, 10, 20, 40 ms; the success waits for the scale at 2 s; then the
    // backoff starts again at 5 ms.
    assert_eq!(&gaps[..4], &[5, 10, 20, 40], "{gaps:?}");
    assert_eq!(gaps[5], 5, "{gaps:?}");
}

#[test]
fn sleep_waits_then_continues_with_woke_and_keeps_the_key() {
    // During the sleep an update arrives: it must wait for the sleeping reconcile.
    let mut w = world(
        4,
        vec![],
        vec![widget_set("ws-a", 1)],
        vec![label(2_000, "ws-a", 1)],
        vec![mgr(
            "m0",
            Recorder::widget_sets(vec![Plan::done().sleep(7_000).gets(1)]),
        )],
    );
    w.sim.run_until(SimTime::from_secs(30));
    let r = rec(&w.sim, w.mgrs[0]);
    assert_eq!(r.log.len(), 2, "the initial reconcile and the update's");
    let first = &r.log[0];
    assert_eq!(
        first.replies[0],
        (first.issued[0].plus_ms(7_000), Seen::Woke)
    );
    assert_eq!(first.replies[1].1, Seen::ApiOk, "continued after waking");
    assert!(r.log[1].start >= first.end.unwrap());
    assert_eq!(
        r.log[1].start,
        first.end.unwrap(),
        "the update queued during the sleep ran right after it"
    );
}

/// A reconcile that sleeps 5 s, then sends `plan`'s request into a partition (from 4 s,
/// `cut_ms` long) of `mode`: its reconciles.
fn into_a_partition(mode: PartitionMode, cut_ms: u64, plan: Plan) -> Vec<Run> {
    let cut = Fault::Partition {
        hosts_a: vec!["h-m0".into()],
        hosts_b: vec!["api".into()],
        mode,
        one_way: false,
    };
    let mut w = world(
        5,
        vec![timed(4_000, Some(cut_ms), cut)],
        vec![widget_set("ws-a", 1)],
        vec![],
        vec![mgr("m0", Recorder::widget_sets(vec![plan.sleep(5_000)]))],
    );
    w.sim.run_until(SimTime::from_secs(200));
    rec(&w.sim, w.mgrs[0]).log.clone()
}

#[test]
fn write_lost_to_a_dropping_partition_fails_with_the_reset() {
    // TCP never loses one request silently: the loss breaks the connection (a reset,
    // semantics 4.12), and a write fails as it is lost (client-go never retries one),
    // where it once waited out the 45 s health check (issue 29 item 10).
    let log = into_a_partition(PartitionMode::Drop, 120_000, Plan::done().patch_status());
    let first = &log[0];
    assert_eq!(first.replies.len(), 2);
    let (at, seen) = first.replies[1];
    assert_eq!(seen, Seen::TimedOut);
    assert!(
        at > first.issued[1] && at.since(first.issued[1]) <= 5,
        "failed at the loss, one latency after the send: {at:?}"
    );
    assert_eq!(first.end, Some(at));
}

#[test]
fn read_lost_to_a_dropping_partition_is_sent_again_after_a_second() {
    // client-go retries a GET that failed with a reset, after 1 s (rest request.go):
    // past a 1.5 s cut the retry is answered, and the reconcile never sees the loss.
    let log = into_a_partition(PartitionMode::Drop, 1_500, Plan::done().gets(1));
    let first = &log[0];
    assert_eq!(first.replies.len(), 2);
    let (at, seen) = first.replies[1];
    assert_eq!(seen, Seen::ApiOk);
    let waited = at.since(first.issued[1]);
    assert!(
        (1_000..1_020).contains(&waited),
        "answered {waited} ms after the send"
    );
    // A cut that outlasts the retry: the retry's new connection is refused, which
    // client-go does not retry, so the read fails then, a second after the loss.
    let log = into_a_partition(PartitionMode::Drop, 120_000, Plan::done().gets(1));
    let first = &log[0];
    let (at, seen) = first.replies[1];
    assert_eq!(seen, Seen::TimedOut);
    let waited = at.since(first.issued[1]);
    assert!(
        (1_000..1_020).contains(&waited),
        "failed {waited} ms after the send"
    );
    // The next reconcile (the informer's relist after the heal re-offers the object, or
    // nothing does) is never handed the stale answer.
    assert!(
        log.iter()
            .skip(1)
            .all(|run| run.replies.iter().all(|(_, s)| *s != Seen::TimedOut))
    );
}

#[test]
fn request_held_by_a_partition_times_out_with_the_health_check() {
    // A request the partition holds (TCP retransmitting into silence) fails when the
    // HTTP/2 health check gives up on the connection: 30 s idle + 15 s ping (4.3).
    assert_eq!(REQUEST_TIMEOUT_MS, READ_IDLE_TIMEOUT_MS + PING_TIMEOUT_MS);
    let log = into_a_partition(PartitionMode::Hold, 120_000, Plan::done().gets(1));
    let first = &log[0];
    assert_eq!(first.replies.len(), 2);
    assert_eq!(
        first.replies[1],
        (first.issued[1].plus_ms(REQUEST_TIMEOUT_MS), Seen::TimedOut)
    );
}

#[test]
fn only_the_leader_reconciles_and_a_paused_leader_overlaps_then_exits() {
    // m0 holds the lease first (seeded, as its first process "m0_1"); it is paused from
    // 30 s for 30 s, twice the lease
    // duration. m1 takes over; m0 resumes still believing it leads (semantics 1.13),
    // reconciles until its renew deadline passes, then its process exits (1.11).
    let seeded = vec![widget_set("ws-a", 1), lease_held_by("m0_1")];
    let plan = || Recorder::widget_sets(vec![Plan::ending(Step::requeue_after(500)).gets(1)]);
    let pause = Fault::Pause {
        process: "m0".into(),
    };
    for seed in 0..4 {
        let mut w = world(
            seed,
            vec![timed(30_000, Some(30_000), pause.clone())],
            seeded.clone(),
            vec![],
            vec![elected("m0", plan()), elected("m1", plan())],
        );
        let (m0, m1) = (w.mgrs[0], w.mgrs[1]);
        let mut both_believed = false;
        let mut m0_stopped_at = None;
        observe(&mut w, SimTime::from_secs(120), |w| {
            let (a, b) = (manager(&w.sim, m0), manager(&w.sim, m1));
            if w.sim.proc_state(m0) == ProcState::Running
                && a.believes_leader()
                && b.believes_leader()
            {
                both_believed = true;
            }
            if m0_stopped_at.is_none() && w.sim.proc_state(m0) == ProcState::Stopped {
                m0_stopped_at = Some(w.sim.now());
            }
        });
        let (r0, r1) = (rec(&w.sim, m0), rec(&w.sim, m1));
        // Before the pause only m0 reconciles.
        assert!(r0.log.iter().any(|r| r.start < SimTime::from_secs(30)));
        let m1_first = r1.log.first().expect("m1 took over").start;
        assert!(
            m1_first > SimTime::from_secs(45),
            "seed {seed}: m1 reconciled at {m1_first}, before the lease could expire"
        );
        assert!(m1_first < SimTime::from_secs(60), "seed {seed}: {m1_first}");
        // The window of the seed incident: both believe they lead and both reconcile.
        assert!(both_believed, "seed {seed}: no overlap of beliefs");
        let overlap: Vec<SimTime> = r0
            .log
            .iter()
            .map(|r| r.start)
            .filter(|t| *t >= SimTime::from_secs(60))
            .collect();
        assert!(
            !overlap.is_empty(),
            "seed {seed}: the resumed old leader did not reconcile"
        );
        let stopped = m0_stopped_at.expect("m0 exits after losing the lease");
        assert!(
            stopped <= SimTime::from_secs(60 + 10 + 2) && stopped > SimTime::from_secs(60),
            "seed {seed}: m0 stopped at {stopped}"
        );
        assert!(overlap.iter().all(|t| *t <= stopped));
        assert_eq!(w.sim.proc_state(m0), ProcState::Stopped);
        assert!(!manager(&w.sim, m0).running());
        // m1 carries on alone.
        assert_eq!(w.sim.proc_state(m1), ProcState::Running);
        assert!(r1.log.last().unwrap().start > SimTime::from_secs(110));
    }
}

fn lease_held_by(holder: &str) -> Object {
    let lease = Lease {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: 15,
        acquire_time: Some(SimTime::ZERO),
        renew_time: Some(SimTime::ZERO),
        lease_transitions: 0,
        ..Default::default()
    };
    Object::new(ObjectMeta::named(NS, LOCK), Body::new(lease))
}

#[test]
fn without_the_lease_a_manager_syncs_but_never_reconciles() {
    // "other" (a plain candidate) holds the lease and keeps renewing it.
    let mut w = world(
        6,
        vec![],
        vec![widget_set("ws-a", 1), lease_held_by("other")],
        vec![label(5_000, "ws-a", 1)],
        vec![elected("m0", Recorder::widget_sets(vec![Plan::done()]))],
    );
    let h = w.sim.add_host("h-other");
    let other = Candidate::new(
        LeaderConfig::client_go_defaults(NS, LOCK),
        "other".into(),
        w.api,
    );
    let other = w.sim.spawn(h, "other", Proc::new(other));
    w.sim.run_until(SimTime::from_secs(120));
    let Some(c) = w.sim.actor(other).component::<Candidate>() else {
        unreachable!()
    };
    assert!(c.is_leader());
    let m = manager(&w.sim, w.mgrs[0]);
    assert!(!m.believes_leader());
    assert!(!m.running(), "not leading, yet running");
    assert!(m.informer().synced(), "the cache syncs while waiting");
    assert!(
        rec(&w.sim, w.mgrs[0]).log.is_empty(),
        "reconciled without the lease"
    );
    assert_eq!(
        w.sim.proc_state(w.mgrs[0]),
        ProcState::Running,
        "still a candidate"
    );
}

#[test]
fn crashed_manager_restarts_cold_and_carries_on() {
    // m0 crashes at 10 s in the middle of a reconcile (each sleeps 8 s, does three Gets
    // and requeues after 3 s; one worker, two keys, so one is always in progress); ws-a
    // is scaled while it is down; it restarts at 20 s.
    let plan = Plan::ending(Step::requeue_after(3_000))
        .sleep(8_000)
        .gets(3);
    let crash = Fault::Crash {
        process: "m0".into(),
    };
    let mut w = world(
        7,
        vec![timed(10_001, Some(10_000), crash)],
        vec![widget_set("ws-a", 1), widget_set("ws-b", 1)],
        vec![scale(15_000, "ws-a", 4)],
        vec![mgr("m0", Recorder::widget_sets(vec![plan]))],
    );
    let m0 = w.mgrs[0];
    let mut checked_down = false;
    observe(&mut w, SimTime::from_secs(60), |w| {
        if w.sim.proc_state(m0) == ProcState::Crashed && !checked_down {
            checked_down = true;
            let m = manager(&w.sim, m0);
            assert!(!m.running());
            assert!(m.queue(0).is_empty(), "the queue died with the process");
            assert_eq!(rec(&w.sim, m0).resets, 1, "reset on crash");
        }
    });
    assert!(checked_down);
    let m = manager(&w.sim, m0);
    let r = rec(&w.sim, m0);
    assert!(m.running());
    // The reconcile interrupted by the crash never ended; the Recorder panics if a new
    // reconcile began while it believed one was in progress, so the reset took effect.
    let interrupted: Vec<&Run> = r
        .log
        .iter()
        .filter(|run| run.end.is_none() && run.start < SimTime::from_secs(20))
        .collect();
    assert_eq!(
        interrupted.len(),
        1,
        "exactly the reconcile the crash cut short"
    );
    assert!(interrupted[0].start < SimTime::from_ms(10_001));
    // After the restart: a fresh cache (it holds the scale done while down) and every
    // cached object offered again.
    let after: Vec<&Run> = r
        .log
        .iter()
        .filter(|run| run.start >= SimTime::from_secs(20))
        .collect();
    for name in ["ws-a", "ws-b"] {
        assert!(
            after.iter().any(|run| run.key == ws_key(name)),
            "{name} not reconciled after the restart"
        );
    }
    let ws_a_rv = stored(&w, &ws_key("ws-a")).meta.resource_version;
    let first_a = after.iter().find(|run| run.key == ws_key("ws-a")).unwrap();
    assert_eq!(
        first_a.rv,
        Some(ws_a_rv),
        "the re-synced cache has the scale"
    );
    assert_eq!(first_a.cache_len, 2);
    // No reconcile started while down.
    assert!(
        !r.log
            .iter()
            .any(|run| run.start > SimTime::from_ms(10_001) && run.start < SimTime::from_secs(20))
    );
    // And it carries on: requeues keep coming to the end.
    assert!(r.log.last().unwrap().start > SimTime::from_secs(50));
}

#[test]
fn requeue_survives_a_clock_skew_that_reverts() {
    // The manager's clock runs 60 s ahead from 5 s to 32 s. Delayed adds fire on true
    // time; one pending when the skew reverts must still fire, and later ones too.
    let skew = Fault::ClockSkew {
        process: "m0".into(),
        offset_ms: 60_000,
    };
    let mut w = world(
        8,
        vec![timed(5_000, Some(27_000), skew)],
        vec![widget_set("ws-a", 1)],
        vec![],
        vec![mgr(
            "m0",
            Recorder::widget_sets(vec![Plan::ending(Step::requeue_after(10_000))]),
        )],
    );
    w.sim.run_until(SimTime::from_secs(300));
    let r = rec(&w.sim, w.mgrs[0]);
    assert!(
        r.log.len() >= 28,
        "requeues stopped: {} reconciles, last at {}",
        r.log.len(),
        r.log.last().unwrap().start
    );
}

#[test]
fn a_large_initial_cache_is_offered_without_deep_recursion() {
    // 20 000 objects whose reconciles end at once: the worker loops, it does not recurse
    // once per queued key (a test thread has a 2 MiB stack).
    let n = 20_000;
    let seeded: Vec<Object> = (0..n)
        .map(|i| widget_set(&format!("ws-{i:05}"), 1))
        .collect();
    let mut w = world(
        9,
        vec![],
        seeded,
        vec![],
        vec![mgr("m0", Recorder::widget_sets(vec![Plan::done()]))],
    );
    w.sim.run_until(SimTime::from_secs(10));
    assert_eq!(rec(&w.sim, w.mgrs[0]).log.len(), n);
}

#[test]
fn same_seed_gives_the_same_trace_hash() {
    let run = |seed: u64| {
        let pause = Fault::Pause {
            process: "m0".into(),
        };
        let mut w = world(
            seed,
            vec![timed(20_000, Some(20_000), pause)],
            vec![widget_set("ws-a", 1), widget_set("ws-b", 3)],
            (0..20).map(|i| label(1_000 + i * 400, "ws-a", i)).collect(),
            vec![
                elected(
                    "m0",
                    Recorder::widget_sets(vec![Plan::done().gets(2).patch_status()]),
                ),
                elected(
                    "m1",
                    Recorder::widget_sets(vec![
                        Plan::ending(failed("x")).gets(1),
                        Plan::ending(Step::requeue_after(700)).sleep(300),
                    ]),
                ),
            ],
        );
        w.sim.run_until(SimTime::from_secs(90));
        (w.sim.trace().hash(), w.sim.trace().events())
    };
    let a = run(11);
    assert_eq!(a, run(11));
    assert!(a.1 > 100);
    assert_ne!(a.0, run(12).0, "the seed reaches the run");
}

#[test]
fn a_restarted_leader_is_a_new_candidate_and_waits_its_old_lease_out() {
    // m0 leads (15 s / 10 s / 2 s) and crashes at 10 s for 1 s. Its new process has a new
    // identity (controller-runtime: hostname + "_" + a new uuid, semantics 1.14), so the
    // lease its former self renewed just before the crash is another holder's: it may
    // take it only once it has seen the record unchanged for LeaseDuration.
    let crash = Fault::Crash {
        process: "m0".into(),
    };
    let mut w = world(
        9,
        vec![timed(10_000, Some(1_000), crash)],
        vec![widget_set("ws-a", 1)],
        vec![],
        vec![elected("m0", Recorder::widget_sets(vec![Plan::done()]))],
    );
    let m0 = w.mgrs[0];
    w.sim.run_until(SimTime::from_secs(9));
    assert!(manager(&w.sim, m0).running());
    let holder = |w: &World| {
        stored(w, &ObjectKey::new(Lease::KIND, NS, LOCK))
            .typed::<Lease>()
            .and_then(|l| l.holder_identity.clone())
    };
    assert_eq!(holder(&w).as_deref(), Some("m0_1"));
    // Restarted at 11 s: still waiting at 24 s (its first look at the record was at
    // 11 s; 11 + 15 = 26).
    w.sim.run_until(SimTime::from_secs(24));
    assert!(!manager(&w.sim, m0).running(), "it waits the old lease out");
    assert_eq!(holder(&w).as_deref(), Some("m0_1"));
    w.sim.run_until(SimTime::from_secs(40));
    assert!(manager(&w.sim, m0).running());
    assert_eq!(holder(&w).as_deref(), Some("m0_2"));
}

/// A reconcile's error of the test's own.
#[derive(Debug)]
struct Boom(&'static str);

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Boom {}

fn failed(what: &'static str) -> Step {
    Step::error(Boom(what))
}
