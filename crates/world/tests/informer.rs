//! Integration tests of the informer (docs/semantics.md sections 3.10 and 4): a
//! [`Watcher`] process on host "node" caches Widgets from the API server on host "api";
//! a [`Script`] on the API server's host (never partitioned from it) writes at fixed
//! times. Faults cut or hold the node's link to the API server, or crash the watcher.

use reconsim_sim::{
    Fault, FaultPlan, PartitionMode, ProcId, RecordKind, Sim, SimConfig, SimTime, TimedFault,
    TraceMode,
};
use reconsim_world::api::{ApiError, ApiOp, PatchOp};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig, WatchWindowConfig};
use reconsim_world::informer::{
    Informer, MIN_WATCH_TIMEOUT_MS, PING_TIMEOUT_MS, READ_IDLE_TIMEOUT_MS, RelistNotify, Watcher,
};
use reconsim_world::object::Body;
use reconsim_world::object::Resource;
use reconsim_world::script::{Script, Step};
use reconsim_world::{Msg, Object, ObjectKey, ObjectMeta, Proc, WorldFault};
use std::collections::BTreeMap;

mod common;
use common::Widget;

const NS: &str = "reconsim-test";

struct World {
    sim: Sim<Proc>,
    api: ProcId,
    watcher: ProcId,
}

fn widget(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(Widget::default()))
}

fn wkey(name: &str) -> ObjectKey {
    ObjectKey::new(Widget::KIND, NS, name)
}

fn create(at_ms: u64, name: &str) -> Step {
    Step {
        at_ms,
        op: ApiOp::Create(Box::new(widget(name))),
    }
}

fn label(at_ms: u64, name: &str, value: &str) -> Step {
    Step {
        at_ms,
        op: ApiOp::Patch {
            key: wkey(name),
            ops: vec![PatchOp::SetLabel("v".into(), Some(value.into()))],
            resource_version: None,
        },
    }
}

fn delete(at_ms: u64, name: &str) -> Step {
    Step {
        at_ms,
        op: ApiOp::Delete {
            key: wkey(name),
            uid: None,
            grace_period_seconds: None,
            options: Default::default(),
        },
    }
}

fn cut(at_ms: u64, duration_ms: u64, mode: PartitionMode) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms,
        duration_ms: Some(duration_ms),
        fault: Fault::Partition {
            hosts_a: vec!["node".into()],
            hosts_b: vec!["api".into()],
            mode,
            one_way: false,
        },
        on: None,
    }
}

impl World {
    fn new(
        seed: u64,
        config: ApiServerConfig,
        steps: Vec<Step>,
        faults: Vec<TimedFault<WorldFault>>,
    ) -> Self {
        Self::notifying(seed, config, steps, faults, RelistNotify::Changed)
    }

    fn notifying(
        seed: u64,
        config: ApiServerConfig,
        steps: Vec<Step>,
        faults: Vec<TimedFault<WorldFault>>,
        notify: RelistNotify,
    ) -> Self {
        let mut cfg = SimConfig::new(seed);
        cfg.trace = TraceMode::Full;
        let mut sim = Sim::new(cfg, FaultPlan::new(faults));
        let h_api = sim.add_host("api");
        let h_node = sim.add_host("node");
        let api = sim.spawn(h_api, "apiserver", Proc::new(ApiServer::new(config)));
        sim.spawn(h_api, "writer", Proc::new(Script::new(api, steps)));
        let informer = Informer::new(0, &[Widget::KIND], api).notifying(notify);
        let watcher = sim.spawn(h_node, "watcher", Proc::new(Watcher::new(informer)));
        World { sim, api, watcher }
    }

    fn server(&self) -> &ApiServer {
        let p = self.sim.actor(self.api);
        p.component::<ApiServer>()
            .unwrap_or_else(|| panic!("not the API server: {p:?}"))
    }

    fn watcher(&self) -> &Watcher {
        let p = self.sim.actor(self.watcher);
        p.component::<Watcher>()
            .unwrap_or_else(|| panic!("not a watcher: {p:?}"))
    }

    fn informer(&self) -> &Informer {
        &self.watcher().informer
    }

    fn run_to(&mut self, t_ms: u64) {
        self.sim.run_until(SimTime::from_ms(t_ms));
    }

    /// (name, resourceVersion) of every Widget the server holds.
    fn server_view(&self) -> BTreeMap<String, u64> {
        self.server()
            .list(Widget::KIND)
            .map(|o| (o.meta.name.clone(), o.meta.resource_version))
            .collect()
    }

    /// (name, resourceVersion) of every Widget in the cache.
    fn cache_view(&self) -> BTreeMap<String, u64> {
        self.informer()
            .cache()
            .list(Widget::KIND)
            .map(|o| (o.meta.name.clone(), o.meta.resource_version))
            .collect()
    }

    /// resourceVersions the cache ever held for `name`, in order.
    fn seen(&self, name: &str) -> Vec<u64> {
        self.watcher()
            .log
            .iter()
            .filter(|(_, k, _)| k.name == name)
            .map(|(_, _, rv)| *rv)
            .collect()
    }

    /// When the watcher first heard its connection reset, in ms.
    fn reset_at(&self) -> Option<u64> {
        self.sim
            .trace()
            .records()
            .iter()
            .find_map(|r| match &r.kind {
                RecordKind::Deliver {
                    to,
                    msg: Msg::ConnectionReset,
                    ..
                } if *to == self.watcher => Some(r.time.as_ms()),
                _ => None,
            })
    }

    /// Watch-open requests the watcher sent.
    fn watch_opens(&self) -> usize {
        self.sim
            .trace()
            .records()
            .iter()
            .filter(|r| match &r.kind {
                RecordKind::Deliver {
                    from,
                    msg: Msg::Api(req),
                    ..
                } => *from == self.watcher && matches!(req.op, ApiOp::Watch { .. }),
                _ => false,
            })
            .count()
    }

    /// Watch-open answers the watcher received with 410 Gone.
    fn gone_answers(&self) -> usize {
        self.sim
            .trace()
            .records()
            .iter()
            .filter(|r| match &r.kind {
                RecordKind::Deliver {
                    to,
                    msg: Msg::ApiResp(resp),
                    ..
                } => *to == self.watcher && resp.result == Err(ApiError::Gone),
                _ => false,
            })
            .count()
    }
}

#[test]
fn the_informer_lists_then_follows_the_watch() {
    let steps = vec![
        create(100, "a"),
        create(200, "b"),
        label(3_000, "a", "1"),
        delete(4_000, "b"),
    ];
    let mut w = World::new(1, Default::default(), steps, vec![]);
    w.run_to(50);
    assert!(w.informer().synced(), "the initial list came back");
    assert!(w.informer().cache().is_empty());
    w.run_to(10_000);
    assert_eq!(w.cache_view(), w.server_view());
    assert_eq!(w.cache_view().len(), 1);
    assert_eq!(w.informer().relists(), 0);
    // Every state was seen, in order (a quiet, healthy watch skips nothing).
    assert_eq!(w.seen("a").len(), 2);
    assert_eq!(w.seen("b").len(), 2, "added, then deleted");
    assert!(
        w.watcher()
            .log
            .windows(2)
            .all(|p| p[0].2 < p[1].2 || p[0].1 != p[1].1)
    );
}

#[test]
fn the_cache_lags_the_server() {
    let steps = vec![create(1_000, "a"), label(2_000, "a", "1")];
    let mut w = World::new(3, Default::default(), steps, vec![]);
    let key = wkey("a");
    let mut server_first = None;
    let mut cache_first = None;
    let mut server_rv2 = None;
    let mut cache_rv2 = None;
    while w.sim.step_until(SimTime::from_secs(5)).is_some() {
        let now = w.sim.now();
        let s = w.server().get(&key).map(|o| o.meta.resource_version);
        let c = w
            .informer()
            .cache()
            .get(&key)
            .map(|o| o.meta.resource_version);
        if s.is_some() && server_first.is_none() {
            server_first = Some(now);
            assert!(
                c.is_none(),
                "the cache cannot have it at the server's instant"
            );
        }
        if c.is_some() && cache_first.is_none() {
            cache_first = Some(now);
        }
        if s == Some(2) && server_rv2.is_none() {
            server_rv2 = Some(now);
            assert_eq!(c, Some(1), "the cache still holds the old version");
        }
        if c == Some(2) && cache_rv2.is_none() {
            cache_rv2 = Some(now);
        }
    }
    let (s1, c1) = (server_first.unwrap(), cache_first.unwrap());
    let (s2, c2) = (server_rv2.unwrap(), cache_rv2.unwrap());
    assert!(s1 < c1, "server {s1} before cache {c1}");
    assert!(s2 < c2, "server {s2} before cache {c2}");
}

#[test]
fn a_dropping_partition_stales_the_cache_then_a_relist_converges() {
    // Partitioned 5 s..105 s, far longer than the 45 s dead-connection detection.
    let steps = vec![
        create(100, "a"),
        create(200, "b"),
        create(300, "c"),
        delete(10_000, "b"),
        label(20_000, "a", "1"),
        label(30_000, "a", "2"),
        create(40_000, "d"),
        create(50_000, "e"),
        delete(60_000, "e"),
    ];
    let mut w = World::new(
        5,
        Default::default(),
        steps,
        vec![cut(5_000, 100_000, PartitionMode::Drop)],
    );
    w.run_to(4_000);
    assert_eq!(w.cache_view(), w.server_view());
    let before = w.cache_view();
    let rv_a_mid = {
        w.run_to(25_000);
        w.server().get(&wkey("a")).unwrap().meta.resource_version
    };
    w.run_to(104_000);
    assert_eq!(
        w.cache_view(),
        before,
        "nothing reaches a partitioned informer"
    );
    assert_ne!(w.cache_view(), w.server_view());
    assert!(
        w.informer().synced(),
        "a stale cache still counts as synced"
    );
    // After the heal the informer relists within detection + backoff and converges.
    let heal_ms = 105_000;
    let bound_ms = READ_IDLE_TIMEOUT_MS + PING_TIMEOUT_MS + 30_000;
    w.run_to(heal_ms + bound_ms);
    assert!(w.informer().relists() > 0);
    assert_eq!(w.cache_view(), w.server_view(), "converged to the server");
    assert!(
        w.informer().cache().get(&wkey("b")).is_none(),
        "the deletion is seen"
    );
    // Intermediate states were skipped: a's first label, and e entirely.
    assert!(!w.seen("a").contains(&rv_a_mid), "{:?}", w.seen("a"));
    assert!(w.seen("e").is_empty());
    assert_eq!(w.seen("d").len(), 1);
}

#[test]
fn a_relist_wakes_client_go_handlers_for_changes_and_kube_runtime_for_every_object() {
    // `a` does not change while the informer is cut off; `b` does.
    let steps = vec![create(100, "a"), create(200, "b"), label(20_000, "b", "1")];
    let heal_ms = 105_000;
    let woken_after_heal = |notify| {
        let faults = vec![cut(5_000, heal_ms - 5_000, PartitionMode::Drop)];
        let mut w = World::notifying(5, Default::default(), steps.clone(), faults, notify);
        w.run_to(heal_ms + 120_000);
        assert!(w.informer().relists() > 0);
        assert_eq!(w.cache_view(), w.server_view());
        let mut names: Vec<String> = w
            .watcher()
            .log
            .iter()
            .filter(|(t, _, _)| t.as_ms() > heal_ms)
            .map(|(_, k, _)| k.name.clone())
            .collect();
        names.dedup();
        names
    };
    // client-go: an unchanged resourceVersion is a resync, for resyncing handlers only.
    assert_eq!(woken_after_heal(RelistNotify::Changed), ["b"]);
    // kube-runtime: every listed object is an InitApply.
    assert_eq!(woken_after_heal(RelistNotify::Every), ["a", "b"]);
}

#[test]
fn a_lost_watch_event_breaks_the_connection_and_relists_at_once() {
    // A short cut (2 s) loses one event, and nothing follows it: TCP never loses one
    // message of a stream silently, so the loss is a reset (semantics 4.12) and the
    // informer relists at once, where it once stayed stale until its watch timed out
    // (5-10 min later; issue 29 item 10).
    let steps = vec![
        create(100, "a"),
        create(200, "b"),
        label(11_000, "a", "lost"),
    ];
    let mut w = World::new(
        9,
        Default::default(),
        steps,
        vec![cut(10_000, 2_000, PartitionMode::Drop)],
    );
    w.run_to(10_900);
    assert_eq!(w.informer().relists(), 0);
    w.run_to(11_100);
    assert!(
        w.reset_at().is_some_and(|t| (11_000..11_100).contains(&t)),
        "the loss is heard as a reset when it happens: {:?}",
        w.reset_at()
    );
    // Relisting (backing off 0.8, 1.6 s... while the cut lasts), converged soon after
    // the heal.
    w.run_to(20_000);
    assert!(w.informer().relists() >= 1);
    assert_eq!(w.cache_view(), w.server_view());
}

#[test]
fn a_holding_partition_delivers_held_events_in_order_without_relist() {
    let steps = vec![
        create(100, "a"),
        label(11_000, "a", "1"),
        label(12_000, "a", "2"),
        create(13_000, "b"),
        label(14_000, "a", "3"),
    ];
    let mut w = World::new(
        11,
        Default::default(),
        steps,
        vec![cut(10_000, 10_000, PartitionMode::Hold)],
    );
    w.run_to(19_900);
    let rv_a0 = w.seen("a");
    assert_eq!(rv_a0.len(), 1, "nothing arrives while held");
    w.run_to(30_000);
    assert_eq!(w.informer().relists(), 0);
    assert_eq!(w.cache_view(), w.server_view());
    // Every held event arrived, in order, right after the heal.
    let after: Vec<u64> = w
        .watcher()
        .log
        .iter()
        .filter(|(t, _, _)| t.as_ms() >= 20_000)
        .map(|(_, _, rv)| *rv)
        .collect();
    assert_eq!(after, [2, 3, 4, 5]);
    assert!(
        w.watcher()
            .log
            .iter()
            .all(|(t, _, rv)| *rv == 1 || t.as_ms() < 20_100)
    );
}

#[test]
fn a_crashed_informer_restarts_cold_and_resyncs() {
    let steps = vec![
        create(100, "a"),
        create(200, "b"),
        delete(12_000, "a"),
        create(13_000, "c"),
    ];
    let crash = TimedFault {
        at_ms: 10_000,
        duration_ms: Some(5_000),
        fault: Fault::Crash {
            process: "watcher".into(),
        },
        on: None,
    };
    let mut w = World::new(13, Default::default(), steps, vec![crash]);
    w.run_to(9_000);
    assert!(w.informer().synced());
    assert_eq!(w.cache_view().len(), 2);
    w.run_to(14_000);
    assert!(!w.informer().synced(), "memory lost with the process");
    assert!(w.informer().cache().is_empty());
    // Step through the restart: unsynced until its list answers, then synced.
    let mut saw_unsynced_after_restart = false;
    while w.sim.step_until(SimTime::from_secs(20)).is_some() {
        if w.sim.now() >= SimTime::from_ms(15_000) && !w.informer().synced() {
            saw_unsynced_after_restart = true;
        }
        if w.informer().synced() {
            break;
        }
    }
    assert!(saw_unsynced_after_restart);
    assert!(w.informer().synced());
    assert_eq!(w.cache_view(), w.server_view());
    assert_eq!(w.cache_view().keys().collect::<Vec<_>>(), ["b", "c"]);
    w.run_to(30_000);
    assert_eq!(
        w.informer().relists(),
        0,
        "a cold start lists, it does not relist"
    );
}

#[test]
fn gone_on_the_watch_leads_to_a_relist() {
    // The node's requests to the server take 5 s more; meanwhile the server writes more
    // than its history holds, so the watch opened after the list is 410 Gone.
    let mut steps = vec![];
    for i in 0..120u64 {
        steps.push(create(1_000 + i * 100, &format!("m{i:03}")));
    }
    let slow = TimedFault {
        at_ms: 0,
        duration_ms: Some(30_000),
        fault: Fault::SlowLink {
            hosts_a: vec!["node".into()],
            hosts_b: vec!["api".into()],
            extra_latency_ms: 5_000,
            one_way: true,
        },
        on: None,
    };
    let config = ApiServerConfig {
        watch_cache: WatchWindowConfig {
            capacity_min: 5,
            capacity_max: 5,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut w = World::new(17, config, steps, vec![slow]);
    w.run_to(60_000);
    assert!(w.gone_answers() >= 1, "the watch was answered 410 Gone");
    assert!(w.informer().relists() >= 1);
    assert_eq!(w.cache_view(), w.server_view());
    assert_eq!(w.cache_view().len(), 120);
}

fn scenario_hash(seed: u64) -> u64 {
    let mut steps = vec![];
    for i in 0..20u64 {
        steps.push(create(100 + i * 1_000, &format!("m{i}")));
        steps.push(label(600 + i * 1_000, &format!("m{i}"), "x"));
    }
    steps.push(delete(30_000, "m3"));
    let faults = vec![
        cut(5_000, 3_000, PartitionMode::Drop),
        cut(9_000, 60_000, PartitionMode::Hold),
    ];
    let mut w = World::new(seed, Default::default(), steps, faults);
    w.run_to(200_000);
    assert_eq!(w.cache_view(), w.server_view());
    w.sim.trace().hash()
}

#[test]
fn same_seed_same_trace_hash() {
    let a = scenario_hash(21);
    assert_eq!(a, scenario_hash(21));
    assert_ne!(a, scenario_hash(22), "the seed reaches the run");
}

#[test]
fn the_watch_timeout_rewatches_from_the_last_resource_version() {
    // The watch ends by itself after a random 5-10 min (its timeoutSeconds, 3.11) and
    // the reflector re-watches from the last resourceVersion it saw; with the history
    // still holding it, no relist is needed.
    let steps = vec![create(100, "a"), create(200, "b"), delete(11_000, "b")];
    let mut w = World::new(23, Default::default(), steps, vec![]);
    w.run_to(11_000 + 2 * MIN_WATCH_TIMEOUT_MS);
    assert_eq!(w.cache_view(), w.server_view());
    assert!(w.watch_opens() >= 2, "re-watched: {}", w.watch_opens());
    assert_eq!(
        w.informer().relists(),
        0,
        "a re-watch from the last RV, not a relist"
    );
}

#[test]
fn a_rewatch_of_a_quiet_kind_resumes_whatever_other_kinds_wrote() {
    // Widgets go quiet after `a`; writes of another kind move the store on, and by the
    // watch's timeout (5-10 min) `a`'s resourceVersion is minutes old. Each type's watch
    // cache evicts only when full, and the Widget one holds everything since the
    // server's start (watch_cache.go `getAllEventsSinceLocked`): the re-watch resumes,
    // no 410, no relist. (Before issue 59 one 60 s history for all kinds answered 410
    // here and the reflector relisted, healing any lost trigger.)
    let set = |at_ms: u64, name: &str| Step {
        at_ms,
        op: ApiOp::Create(Box::new(Object::new(
            ObjectMeta::named(NS, name),
            Body::new(common::WidgetSet::default()),
        ))),
    };
    let steps = vec![create(100, "a"), set(20_000, "s1"), set(30_000, "s2")];
    let mut w = World::new(29, Default::default(), steps, vec![]);
    w.run_to(100 + 2 * MIN_WATCH_TIMEOUT_MS + 1_000);
    assert_eq!(w.cache_view(), w.server_view());
    assert!(w.watch_opens() >= 2, "re-watched: {}", w.watch_opens());
    assert_eq!(w.gone_answers(), 0, "the Widget cache evicted nothing");
    assert_eq!(w.informer().relists(), 0);
}

#[test]
fn a_restarted_api_server_resets_the_watch_and_the_informer_relists_at_once() {
    // A crashed server process's connections are reset by its host: the informer does
    // not wait for its 30 s health check to learn that its watch is gone.
    let steps = vec![create(100, "a"), create(8_000, "x"), label(9_000, "a", "1")];
    let crash = TimedFault {
        at_ms: 5_000,
        duration_ms: Some(1_000),
        fault: Fault::Crash {
            process: "apiserver".into(),
        },
        on: None,
    };
    let mut w = World::new(3, Default::default(), steps, vec![crash]);
    w.run_to(4_000);
    assert_eq!(w.cache_view(), w.server_view());
    w.run_to(12_000);
    assert!(w.informer().relists() > 0, "the reset made it relist");
    assert_eq!(
        w.cache_view(),
        w.server_view(),
        "writes after the restart are seen within seconds, not after the health check"
    );
}
