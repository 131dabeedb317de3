//! Kernel tests of process lifecycle: crashes (by fault or by the process itself),
//! incarnations and the messages they drop, and handlers that spawn and stop processes.

use reconsim_sim::trace::DropReason;
use reconsim_sim::{Fault, ProcId, ProcState, RecordKind, Sim, SimTime, TraceMode};

mod common;
use common::*;

// ----- crash --------------------------------------------------------------------------

#[test]
fn a_process_that_crashes_itself_sends_first_then_restarts_cold_later() {
    // s ticks Seq(i) to c at 5 + 10 i; at 50 ms a third process asks c to crash itself
    // for 100 ms. What c sent in that handler goes out; what reaches it while down is
    // dropped; it restarts at the crash + 100 ms as a new incarnation.
    let mut sim = new_sim(config(7, 1, 1, TraceMode::Full), vec![]);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(hb, "c", Node::new(Role::Recorder));
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 30,
        }),
    );
    let k = sim.spawn(
        ha,
        "k",
        Node::new(Role::Crasher {
            to: c,
            at_ms: 49,
            restart_ms: 100,
        }),
    );
    sim.run_until(SimTime::from_secs(1));
    let a = sim.actor(c);
    assert_eq!((a.crashes, a.starts), (1, 2));
    let crashed_at = records(&sim)
        .iter()
        .find_map(|r| match r.kind {
            RecordKind::Crashed {
                proc,
                restart_after_ms: 100,
            } if proc == c => Some(r.time.as_ms()),
            _ => None,
        })
        .expect("a Crashed record");
    let restarted = a
        .log
        .iter()
        .find_map(|e| match e {
            Seen::Start { now, inc: 2 } => Some(*now),
            _ => None,
        })
        .expect("a second start");
    assert_eq!(restarted, crashed_at + 100);
    // The Pong sent in the crashing handler reached k.
    assert!(sim.actor(k).log.iter().any(|e| matches!(
        e,
        Seen::Msg {
            msg: Msg::Pong(0),
            ..
        }
    )));
    // Seqs that arrived while c was down were dropped, the others delivered.
    let got = seqs_from(&sim, c, s).len();
    let dropped = drops(&sim, s, c, DropReason::ReceiverDown).len();
    assert_eq!(got + dropped, 30);
    assert_eq!(dropped, 10, "Seq(5)..Seq(14) arrive in [51, 151)");
}

#[test]
fn crash_loses_memory_messages_and_timers_and_restarts_cold() {
    // c ticks every 10 ms and set a Long timer for 500 ms at start; s sends it Seq(i) at
    // 5 + 10 i (arriving 3 ms later). c is down over [100, 300).
    let mut sim = new_sim(
        config(13, 3, 3, TraceMode::Full),
        vec![timed(
            100,
            Some(200),
            Fault::Crash {
                process: "c".into(),
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(
        hb,
        "c",
        Node::new(Role::Clock {
            every_ms: 10,
            long_ms: Some(500),
        }),
    );
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_ms(200));
    assert_eq!(sim.proc_state(c), ProcState::Crashed);
    assert_eq!(sim.actor(c).crashes, 1);
    assert_eq!(sim.actor(c).memory, 0, "on_crash wiped the memory");
    sim.run_until(SimTime::from_secs(2));
    assert_eq!(sim.proc_state(c), ProcState::Running);
    let a = sim.actor(c);
    assert_eq!(a.crashes, 1);
    assert_eq!(a.starts, 2);
    assert_eq!(a.memory, 1);
    let l = &a.log;
    // Started twice: at 0 and, as a new incarnation, at the restart.
    let starts: Vec<&Seen> = l
        .iter()
        .filter(|s| matches!(s, Seen::Start { .. }))
        .collect();
    assert_eq!(
        starts,
        vec![
            &Seen::Start { now: 0, inc: 1 },
            &Seen::Start { now: 300, inc: 2 }
        ]
    );
    // Messages to the dead process are dropped, and recorded so.
    assert_eq!(
        drops(&sim, s, c, DropReason::ReceiverDown),
        (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>()
    );
    let got: Vec<u64> = seqs_from(&sim, c, s).iter().map(|(_, i)| *i).collect();
    assert_eq!(got, (0..10).chain(30..60).collect::<Vec<_>>());
    // The old incarnation's timers never fire: neither its ticks nor its Long timer (due
    // at 500, after the restart). The new incarnation's Long timer fires at 300 + 500.
    let timers: Vec<(u64, &Msg)> = l
        .iter()
        .filter_map(|s| match s {
            Seen::Timer { now, msg } => Some((*now, msg)),
            _ => None,
        })
        .collect();
    assert!(timers.iter().all(|(t, m)| match m {
        Msg::Tick(1, _) | Msg::Long(1) => *t < 100,
        Msg::Tick(2, _) | Msg::Long(2) => *t >= 300,
        _ => false,
    }));
    assert!(!timers.iter().any(|(_, m)| **m == Msg::Long(1)));
    assert!(timers.contains(&(800, &Msg::Long(2))));
    assert!(timers.contains(&(310, &Msg::Tick(2, 1))));
}

/// c (host b) pings srv (host a) once at each start; srv answers at once; latency 50.
fn reply_world(crash_at: u64, crash_for: u64, slow: bool) -> (Sim<Node>, ProcId, ProcId) {
    let mut plan = vec![timed(
        crash_at,
        Some(crash_for),
        Fault::Crash {
            process: "c".into(),
        },
    )];
    if slow {
        plan.push(timed(
            40,
            Some(30),
            Fault::SlowLink {
                hosts_a: names(&["a"]),
                hosts_b: names(&["b"]),
                extra_latency_ms: 200,
                one_way: true,
            },
        ));
    }
    let mut sim = new_sim(config(17, 50, 50, TraceMode::Full), plan);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let srv = sim.spawn(ha, "srv", Node::new(Role::Ponger));
    // A Pinger with 0 rounds pings once per start.
    let c = sim.spawn(
        hb,
        "c",
        Node::new(Role::Pinger {
            peer: srv,
            rounds: 0,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    (sim, srv, c)
}

fn msgs(sim: &Sim<Node>, p: ProcId) -> Vec<(u64, ProcId, Msg)> {
    log(sim, p)
        .iter()
        .filter_map(|s| match s {
            Seen::Msg { now, from, msg } => Some((*now, *from, msg.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn replies_to_the_old_incarnation_are_dropped() {
    // Answered before the crash, delayed past the restart by a slow link: c pings at 0,
    // srv answers at 50 (+200 ms slow: due at 300); c is down over [60, 160) and pings
    // again at 160 (answered at 210, due at 260).
    let (sim, srv, c) = reply_world(60, 100, true);
    assert_eq!(
        msgs(&sim, srv),
        vec![(50, c, Msg::Ping(0)), (210, c, Msg::Ping(0))]
    );
    assert_eq!(msgs(&sim, c), vec![(260, srv, Msg::Pong(0))]);
    assert_eq!(drops(&sim, srv, c, DropReason::ReceiverDown), vec![300]);

    // Answered while c is down, due after its restart: c pings at 0, is down over
    // [30, 90), srv answers at 50 (due at 100, after the restart at 90). The answer was
    // meant for the dead incarnation. The new one pings at 90 and gets its answer at 190.
    let (sim, srv, c) = reply_world(30, 60, false);
    assert_eq!(
        msgs(&sim, srv),
        vec![(50, c, Msg::Ping(0)), (140, c, Msg::Ping(0))]
    );
    assert_eq!(msgs(&sim, c), vec![(190, srv, Msg::Pong(0))]);
    assert_eq!(drops(&sim, srv, c, DropReason::ReceiverDown), vec![100]);
}

#[test]
fn messages_sent_to_a_crashed_process_are_dropped_even_if_they_arrive_after_restart() {
    // s sends to c every 10 ms (at 5, 15, ...) with 50 ms latency; c is down over [100,
    // 130). Messages sent while c is down arrive after it restarted, but were addressed
    // to a dead process (a connection that cannot exist): dropped.
    let mut sim = new_sim(
        config(19, 50, 50, TraceMode::Full),
        vec![timed(
            100,
            Some(30),
            Fault::Crash {
                process: "c".into(),
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(hb, "c", Node::new(Role::Recorder));
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 30,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    let got: Vec<(u64, u64)> = seqs_from(&sim, c, s);
    // Seq(i) is sent at 5 + 10 i. Sent before the crash (i <= 9) or while down
    // (i = 10, 11, 12: at 105, 115, 125): all dropped. Sent after the restart: delivered.
    assert_eq!(
        got,
        (0..5)
            .chain(13..30)
            .map(|i| (55 + 10 * i, i))
            .collect::<Vec<_>>()
    );
    // Those sent before the crash but arriving while down (i = 5..=9) and those sent
    // while down (arriving 155..175): 8 drops. i < 5 arrived before the crash.
    let dropped = drops(&sim, s, c, DropReason::ReceiverDown);
    assert_eq!(dropped, (5..13).map(|i| 55 + 10 * i).collect::<Vec<_>>());
    assert_eq!(
        log(&sim, c)
            .iter()
            .filter(|s| matches!(s, Seen::Msg { now, .. } if *now < 100))
            .count(),
        5
    );
}

// ----- spawn and stop -----------------------------------------------------------------

#[test]
fn handlers_can_spawn_and_stop_processes() {
    let mut sim = new_sim(config(31, 1, 1, TraceMode::Full), vec![]);
    let h = sim.add_host("h");
    let parent = sim.spawn(h, "parent", Node::new(Role::Parent { stop_at_ms: 55 }));
    // The parent's children will be p2 ("child") and p3 ("ticker"); s writes to p3
    // every 10 ms from 3 on (arriving at 4, 14, ...).
    let s = sim.spawn(
        h,
        "s",
        Node::new(Role::Ticker {
            to: vec![ProcId(3)],
            first_ms: 3,
            every_ms: 10,
            count: 20,
        }),
    );
    sim.run_until(SimTime::from_secs(1));
    assert_eq!(sim.proc_count(), 5);
    let [child, ticker, remote] = sim.actor(parent).spawned[..] else {
        panic!("three spawned")
    };
    assert_eq!((child, ticker, remote), (ProcId(2), ProcId(3), ProcId(4)));
    // spawn_on added the named host.
    let new_host = sim.host_by_name("new-host").expect("host added");
    assert_ne!(new_host, h);
    assert_eq!(sim.proc_host(remote), new_host);
    assert_eq!(log(&sim, remote), &[Seen::Start { now: 0, inc: 1 }]);
    assert_eq!(sim.proc_by_name("child"), Some(child));
    assert_eq!(sim.proc_by_name("ticker"), Some(ticker));
    assert_eq!(sim.proc_host(child), h);
    // The child started (its own event), then got the parent's message.
    assert_eq!(
        log(&sim, child),
        &[
            Seen::Start { now: 0, inc: 1 },
            Seen::Msg {
                now: 1,
                from: parent,
                msg: Msg::Seq(0)
            }
        ]
    );
    // The ticker ran until the parent stopped it at 55: ticks at 10..50, then nothing;
    // messages to it after the stop are dropped.
    assert_eq!(sim.proc_state(ticker), ProcState::Stopped);
    let ticks: Vec<u64> = log(&sim, ticker)
        .iter()
        .filter_map(|s| match s {
            Seen::Timer { now, .. } => Some(*now),
            _ => None,
        })
        .collect();
    assert_eq!(ticks, vec![10, 20, 30, 40, 50]);
    assert_eq!(
        seqs_from(&sim, ticker, s),
        (0..6).map(|i| (4 + 10 * i, i)).collect::<Vec<_>>()
    );
    assert_eq!(
        drops(&sim, s, ticker, DropReason::ReceiverDown),
        (6..20).map(|i| 4 + 10 * i).collect::<Vec<_>>()
    );
    assert_eq!(sim.proc_state(parent), ProcState::Running);
}
