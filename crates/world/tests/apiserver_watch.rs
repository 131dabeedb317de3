//! API server: watches over the network, each type's watch-cache history, and the watch
//! cache's lag.

use reconsim_sim::{Fault, FaultPlan, TimedFault};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, EventType, PatchOp, WatchEvent};
use reconsim_world::apiserver::{ApiServerConfig, WatchWindowConfig};
use reconsim_world::object::Resource;
use reconsim_world::script::{Script, Step};
use reconsim_world::{Proc, WorldFault};

mod common;
use common::apiserver::{World, delete, patch, widget, widget_set, wkey};
use common::{Widget, WidgetSet};

#[test]
fn watchers_receive_ordered_numbered_events_over_the_network() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let w1 = w.watcher("w1", 1, vec![Widget::KIND], 0);
    let w2 = w.watcher("w2", 2, vec![Widget::KIND], 0);
    let sets = w.watcher("sets", 3, vec![WidgetSet::KIND], 0);
    w.run_to(100);
    assert_eq!(w.server().watcher_count(), 3);
    assert!(matches!(
        w.script(w1).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    for i in 0..20 {
        w.obj(patch(
            &k,
            vec![PatchOp::SetLabel("i".into(), Some(i.to_string()))],
        ));
    }
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    w.call(delete(&k)).unwrap();
    w.run_for(100);
    let e1 = w.events(w1);
    assert_eq!(e1.len(), 23);
    let watch_id = e1[0].watch_id;
    for (i, e) in e1.iter().enumerate() {
        assert_eq!(e.seq, i as u64, "seq counts from 0 without gaps");
        assert_eq!(e.watch_id, watch_id);
        assert_eq!(e.object.kind(), Widget::KIND);
    }
    assert!(
        e1.windows(2)
            .all(|p| p[0].object.meta.resource_version < p[1].object.meta.resource_version)
    );
    assert_eq!(e1[0].event, EventType::Added);
    assert_eq!(e1[5].object.meta.labels["i"], "4");
    assert_eq!(e1[22].event, EventType::Deleted);
    assert_eq!(e1[22].object.meta.name, "a");
    // Every watcher sees the same stream, under its own watch id.
    let e2 = w.events(w2);
    assert_ne!(e2[0].watch_id, watch_id);
    let strip = |v: &[WatchEvent]| -> Vec<_> {
        v.iter()
            .map(|e| (e.seq, e.event, e.object.clone()))
            .collect()
    };
    assert_eq!(strip(&e1), strip(&e2));
    // Kinds filter the stream.
    let es = w.events(sets);
    assert_eq!(es.len(), 1);
    assert_eq!((es[0].seq, es[0].object.kind()), (0, WidgetSet::KIND));
    // Events arrive after the write, over the network: never at the write's instant.
    let arrivals = &w.script(w1).events;
    assert!(
        arrivals
            .iter()
            .all(|(t, e)| t.as_ms() > e.object.meta.creation_timestamp.as_ms())
    );
}

#[test]
fn a_watch_replays_from_a_resource_version() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    let mid = w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
    ));
    w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("2".into()))],
    ));
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    let from = mid.meta.resource_version;
    let at = w.t + 10;
    let late = w.watcher("late", at, vec![Widget::KIND], from);
    w.run_for(100);
    w.call(delete(&wkey("b"))).unwrap();
    w.run_for(100);
    let evs = w.events(late);
    let got: Vec<(u64, EventType, u64)> = evs
        .iter()
        .map(|e| (e.seq, e.event, e.object.meta.resource_version))
        .collect();
    assert_eq!(
        got,
        [
            (0, EventType::Modified, from + 1),
            (1, EventType::Added, from + 2),
            (2, EventType::Deleted, from + 3),
        ],
        "replay strictly after from_rv, then live events, one numbering"
    );
    // Re-opening the same stream replaces the watch.
    assert_eq!(w.server().watcher_count(), 1);
}

#[test]
fn a_quiet_type_s_watch_resumes_from_an_old_resource_version_whatever_else_is_written() {
    // One watch cache per type, evicting only when full (watch_cache.go `updateCache`):
    // 150 WidgetSet writes over 20 minutes do not touch the Widget cache, so a Widget
    // watch resumes from `a`'s resourceVersion (probe P-F of fidelity review 3: before,
    // one 5-minute history for all kinds answered 410 here).
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
    ));
    for i in 0..150 {
        w.run_to(10_000 + i * 8_000);
        w.obj(ApiOp::Create(Box::new(widget_set(&format!("s{i}")))));
    }
    let at = w.t + 10;
    let ok = w.watcher("ok", at, vec![Widget::KIND], a.meta.resource_version);
    w.run_for(100);
    assert!(matches!(
        w.script(ok).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
    assert_eq!(w.events(ok).len(), 1, "the patch, replayed");
    // The WidgetSet cache filled within 75 s of its oldest event only at first; it
    // evicted its oldest events, so a WidgetSet watch from the start is gone.
    let sets = w.watcher(
        "sets",
        w.t + 10,
        vec![WidgetSet::KIND],
        a.meta.resource_version,
    );
    w.run_for(100);
    assert_eq!(
        w.script(sets).response(0).unwrap().result,
        Err(ApiError::Gone)
    );
    assert_eq!(w.server().watch_cache_capacity(WidgetSet::KIND), 100);
}

#[test]
fn a_type_s_watch_cache_doubles_while_its_events_are_fresh() {
    // Full, with its oldest event younger than 75 s: the buffer doubles
    // (`resizeCacheLocked`), so a burst keeps its history.
    let mut w = World::new(Default::default());
    let first = w.obj(ApiOp::Create(Box::new(widget_set("s0"))));
    for i in 1..250 {
        w.obj(ApiOp::Create(Box::new(widget_set(&format!("s{i}")))));
    }
    assert_eq!(w.server().watch_cache_capacity(WidgetSet::KIND), 400);
    let all = w.watcher(
        "all",
        w.t + 10,
        vec![WidgetSet::KIND],
        first.meta.resource_version - 1,
    );
    w.run_for(100);
    assert_eq!(w.events(all).len(), 250);
}

#[test]
fn a_watch_from_before_the_server_restarted_is_gone() {
    // The restarted server's caches are lists at the current revision (`Replace` sets
    // `listResourceVersion`): a watch from before it is 410 and its client relists
    // (probe P-I of fidelity review 3: before, the history survived the crash).
    let crash = Fault::Crash {
        process: "apiserver".into(),
    };
    let plan = FaultPlan::new(vec![TimedFault::at(5_000, Some(1_000), crash)]);
    let mut w = World::with_plan(1, Default::default(), plan);
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    let before = w.watcher("before", 2_000, vec![Widget::KIND], a.meta.resource_version);
    w.run_to(10_000);
    assert!(matches!(
        w.script(before).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
    let rv = w.server().resource_version();
    let old = w.watcher("old", 10_010, vec![Widget::KIND], a.meta.resource_version);
    let now = w.watcher("now", 10_020, vec![Widget::KIND], rv);
    w.run_to(11_000);
    assert_eq!(
        w.script(old).response(0).unwrap().result,
        Err(ApiError::Gone)
    );
    assert!(matches!(
        w.script(now).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
}

#[test]
fn a_watch_beyond_the_bounded_history_is_gone() {
    let mut w = World::new(ApiServerConfig {
        watch_cache: WatchWindowConfig {
            capacity_min: 3,
            capacity_max: 3,
            ..Default::default()
        },
        ..Default::default()
    });
    let k = wkey("a");
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    for i in 0..5 {
        w.obj(patch(
            &k,
            vec![PatchOp::SetLabel("i".into(), Some(i.to_string()))],
        ));
    }
    let rv = w.server().resource_version(); // 6; the Widget cache holds 4..=6
    let at = w.t + 10;
    let gone = w.watcher("gone", at, vec![Widget::KIND], rv - 4);
    let edge = w.watcher("edge", at + 5, vec![Widget::KIND], rv - 3);
    w.run_for(100);
    assert_eq!(
        w.script(gone).response(0).unwrap().result,
        Err(ApiError::Gone)
    );
    let got: Vec<u64> = w
        .events(edge)
        .iter()
        .map(|e| e.object.meta.resource_version)
        .collect();
    assert_eq!(got, [rv - 2, rv - 1, rv]);
}

#[test]
fn unwatch_stops_the_stream() {
    let mut w = World::new(Default::default());
    let host = w.sim.host_by_name("client").unwrap();
    let watch = ApiOp::Watch {
        stream: 7,
        kinds: vec![Widget::KIND],
        from_rv: 0,
        options: Default::default(),
    };
    let pid = w.sim.spawn(
        host,
        "watch",
        Proc::new(Script::new(
            w.api,
            vec![
                Step {
                    at_ms: 1,
                    op: watch,
                },
                Step {
                    at_ms: 1_000,
                    op: ApiOp::Unwatch { stream: 7 },
                },
            ],
        )),
    );
    w.run_to(100);
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.run_to(2_000);
    assert_eq!(w.server().watcher_count(), 0);
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    w.run_for(100);
    assert_eq!(w.events(pid).len(), 1);
}

#[test]
fn with_a_watch_lag_a_reflector_list_is_served_from_the_lagging_watch_cache() {
    // 3.15: a reflector's list (resourceVersion "0" or its last) is served from the watch
    // cache, which follows etcd by the lag; a consistent read is not.
    let plan = lag_500_ms(None);
    let mut w = World::with_plan(1, Default::default(), plan);
    let host = w.sim.host_by_name("client").unwrap();
    let list = |at_ms, from_watch_cache| list_at(at_ms, Widget::KIND, from_watch_cache);
    let steps = vec![
        Step {
            at_ms: 100,
            op: ApiOp::Create(Box::new(widget("a"))),
        },
        list(200, true),
        list(200, false),
        list(700, true),
        Step {
            at_ms: 1_200,
            op: ApiOp::Create(Box::new(widget("b"))),
        },
        list(1_300, true),
    ];
    let pid = w
        .sim
        .spawn(host, "lister", Proc::new(Script::new(w.api, steps)));
    w.run_to(3_000);
    let s = w.script(pid);
    let names = |step: usize| -> (Vec<String>, u64) {
        match &s.response(step).expect("answered").result {
            Ok(ApiOk::List {
                items,
                resource_version,
            }) => (
                items.iter().map(|o| o.meta.name.clone()).collect(),
                *resource_version,
            ),
            other => panic!("{other:?}"),
        }
    };
    let (cached, cached_rv) = names(1);
    let (fresh, fresh_rv) = names(2);
    assert!(
        cached.is_empty(),
        "the create is not in the watch cache yet"
    );
    assert!(cached_rv < fresh_rv, "and the list says how old it is");
    assert_eq!(fresh, ["a"], "a consistent read sees it");
    assert_eq!(names(3).0, ["a"], "released 500 ms later");
    assert_eq!(
        names(5).0,
        ["a", "b"],
        "no lag: the watch cache is the store"
    );
}

#[test]
fn with_a_watch_lag_the_writer_gets_its_response_before_the_event() {
    // The watch cache lags etcd (3.11): a controller can read its own write's response
    // and start its next reconcile before its informer has the event.
    let plan = lag_500_ms(None);
    let mut w = World::with_plan(1, Default::default(), plan);
    let host = w.sim.host_by_name("client").unwrap();
    let k = wkey("a");
    let steps = vec![
        Step {
            at_ms: 1,
            op: ApiOp::Watch {
                stream: 0,
                kinds: vec![Widget::KIND],
                from_rv: 0,
                options: Default::default(),
            },
        },
        Step {
            at_ms: 100,
            op: ApiOp::Create(Box::new(widget("a"))),
        },
        Step {
            at_ms: 120,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("1".into()))]),
        },
        // In the lag's last moments, and just after it ends: the second waits behind
        // the first (order), then writes are prompt again.
        Step {
            at_ms: 1_040,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("2".into()))]),
        },
        Step {
            at_ms: 1_060,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("2b".into()))]),
        },
        Step {
            at_ms: 2_000,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("3".into()))]),
        },
    ];
    let pid = w
        .sim
        .spawn(host, "writer", Proc::new(Script::new(w.api, steps)));
    w.run_to(3_000);
    let s = w.script(pid);
    let answered = |step: usize| s.responses.iter().find(|r| r.0 == step).unwrap().1;
    let events = &s.events;
    assert_eq!(events.len(), 5);
    // Order and numbering hold through the lag.
    for (i, (_, e)) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
    }
    // The create and the first patch: answered at once, their events 500 ms later.
    for (step, ev) in [(1, 0), (2, 1)] {
        let (at, _) = events[ev];
        assert!(answered(step).as_ms() < 130, "answered at once");
        assert!(
            at.as_ms() >= answered(step).as_ms() + 450,
            "event {ev} at {at} after its answer at {}",
            answered(step)
        );
    }
    // Written in the lag's last moments: its event waits its full lag, and the next
    // one, written after the lag ended, does not overtake it.
    assert!(events[2].0.as_ms() >= 1_040 + 450);
    assert!(events[3].0 >= events[2].0);
    assert!(events[3].0.as_ms() < 1_040 + 600);
    // Long after: an event follows its write within a round trip.
    assert!(events[4].0.as_ms() < 2_000 + 50);
    assert_eq!(events[4].1.object.meta.labels["i"], "3");
}

/// The events `pid` received: (arrival, kind, resourceVersion, seq), in arrival order.
fn arrivals(w: &World, pid: reconsim_sim::ProcId) -> Vec<(u64, &'static str, u64, u64)> {
    w.script(pid)
        .events
        .iter()
        .map(|(t, e)| {
            (
                t.as_ms(),
                e.object.kind().as_str(),
                e.object.meta.resource_version,
                e.seq,
            )
        })
        .collect()
}

/// A watch lag of 500 ms on every type (`of_kind` none) or one, from 50 ms for a second.
fn lag_500_ms(of_kind: Option<&str>) -> FaultPlan<WorldFault> {
    FaultPlan::new(vec![TimedFault {
        at_ms: 50,
        duration_ms: Some(1_000),
        fault: Fault::Inject {
            process: "apiserver".into(),
            fault: WorldFault::WatchLag {
                lag_ms: 500,
                of_kind: of_kind.map(str::to_string),
            },
        },
        on: None,
    }])
}

/// A list of `kind` at `at_ms`, from the watch cache or a consistent read.
fn list_at(at_ms: u64, kind: reconsim_world::Kind, from_watch_cache: bool) -> Step {
    Step {
        at_ms,
        op: ApiOp::List {
            kind,
            namespace: None,
            from_watch_cache,
        },
    }
}

/// A watch of `kinds` from resourceVersion 0, opened at `at_ms`.
fn watch_at(at_ms: u64, kinds: Vec<reconsim_world::Kind>) -> Step {
    Step {
        at_ms,
        op: ApiOp::Watch {
            stream: 0,
            kinds,
            from_rv: 0,
            options: Default::default(),
        },
    }
}

/// A create of `object` at `at_ms`.
fn create_at(at_ms: u64, object: reconsim_world::Object) -> Step {
    Step {
        at_ms,
        op: ApiOp::Create(Box::new(object)),
    }
}

#[test]
fn a_watch_lag_on_one_type_holds_only_that_types_events_and_its_watch_cache() {
    // Each resource type has its own watch cache (k8s.io/apiserver storage/cacher, one
    // per resource; semantics 3.19): a Widget cache 500 ms behind holds the Widgets'
    // events and Widget lists, not the WidgetSets'. A stream of both kinds numbers its
    // events in the order they really leave.
    let plan = lag_500_ms(Some("Widget"));
    let mut w = World::with_plan(1, Default::default(), plan);
    let host = w.sim.host_by_name("client").unwrap();
    let list = |at_ms, kind| list_at(at_ms, kind, true);
    let steps = vec![
        watch_at(1, vec![Widget::KIND, WidgetSet::KIND]),
        create_at(100, widget("a")),
        create_at(120, widget_set("s")),
        list(200, Widget::KIND),
        list(200, WidgetSet::KIND),
        list(800, Widget::KIND),
    ];
    let pid = w
        .sim
        .spawn(host, "watcher", Proc::new(Script::new(w.api, steps)));
    w.run_to(3_000);
    let got = arrivals(&w, pid);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0].1, got[0].3),
        ("WidgetSet", 0),
        "the later WidgetSet first, numbered first: {got:?}"
    );
    assert!(got[0].0 < 200, "not held: {got:?}");
    assert_eq!((got[1].1, got[1].3), ("Widget", 1), "{got:?}");
    assert!(got[1].0 >= 600, "held 500 ms: {got:?}");
    let s = w.script(pid);
    let listed = |step: usize| match &s.response(step).expect("answered").result {
        Ok(ApiOk::List {
            items,
            resource_version,
        }) => (
            items
                .iter()
                .map(|o| o.meta.name.clone())
                .collect::<Vec<_>>(),
            *resource_version,
        ),
        other => panic!("{other:?}"),
    };
    let (widgets, widgets_rv) = listed(3);
    assert!(widgets.is_empty(), "the Widget cache lags: {widgets:?}");
    assert_eq!(listed(4).0, ["s"], "the WidgetSet cache does not");
    assert!(
        widgets_rv < listed(4).1,
        "each list says how fresh its own cache is"
    );
    assert_eq!(listed(5).0, ["a"], "released");
}

#[test]
fn with_a_watch_delay_a_writer_can_hear_its_response_first_and_two_types_events_cross() {
    // The watch latency of a real server (semantics 3.19): each event waits in its
    // type's cache for a drawn delay. Over a few seeds, a writer gets its create's
    // response before the create's own event, and a later write of another type
    // arrives before an earlier one; one type's events never cross.
    let config = ApiServerConfig {
        watch_delay_ms: Some(reconsim_world::watch_cache::DelayRange {
            lo_ms: 0,
            hi_ms: 40,
        }),
        ..Default::default()
    };
    let (mut response_first, mut crossed) = (0, 0);
    for seed in 0..10 {
        let mut w = World::with_plan(seed, config, FaultPlan::default());
        let host = w.sim.host_by_name("client").unwrap();
        let mut steps = vec![watch_at(1, vec![Widget::KIND, WidgetSet::KIND])];
        for i in 0..10u64 {
            steps.push(create_at(100 + 20 * i, widget(&format!("w{i}"))));
            steps.push(create_at(105 + 20 * i, widget_set(&format!("s{i}"))));
        }
        let pid = w
            .sim
            .spawn(host, "writer", Proc::new(Script::new(w.api, steps)));
        w.run_to(2_000);
        let got = arrivals(&w, pid);
        assert_eq!(got.len(), 20, "every event arrives: {got:?}");
        for (i, e) in got.iter().enumerate() {
            assert_eq!(e.3, i as u64, "numbered in arrival order: {got:?}");
        }
        for kind in ["Widget", "WidgetSet"] {
            let rvs: Vec<u64> = got.iter().filter(|e| e.1 == kind).map(|e| e.2).collect();
            assert!(
                rvs.is_sorted(),
                "{kind} events keep the store's order: {got:?}"
            );
        }
        crossed += got.windows(2).filter(|p| p[0].2 > p[1].2).count();
        let s = w.script(pid);
        for (_, at, resp) in &s.responses {
            let Ok(ApiOk::Object(o)) = &resp.result else {
                continue;
            };
            let event_at = got
                .iter()
                .find(|e| e.2 == o.meta.resource_version)
                .expect("its event came")
                .0;
            if at.as_ms() < event_at {
                response_first += 1;
            }
        }
    }
    assert!(response_first > 0, "a response before its own event");
    assert!(crossed > 0, "two types' events crossed");
}

#[test]
fn without_a_watch_delay_events_leave_with_the_write() {
    // The default keeps every event with its write: no type falls behind, no cache is
    // kept, and a stream's events come in the store's order.
    let mut w = World::new(Default::default());
    let all = w.watcher("all", 1, vec![Widget::KIND, WidgetSet::KIND], 0);
    w.run_to(50);
    for i in 0..5 {
        w.obj(ApiOp::Create(Box::new(widget(&format!("w{i}")))));
        w.obj(ApiOp::Create(Box::new(widget_set(&format!("s{i}")))));
    }
    w.run_for(100);
    let rvs: Vec<u64> = w
        .events(all)
        .iter()
        .map(|e| e.object.meta.resource_version)
        .collect();
    assert_eq!(rvs.len(), 10);
    assert!(rvs.is_sorted(), "{rvs:?}");
}
