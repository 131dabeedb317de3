//! Kernel tests of paused processes and hosts: nothing is handled while paused, and
//! everything that came due is handled at resume, in order.

use reconsim_sim::{Fault, ProcState, SimTime, StepKind, TraceMode};

mod common;
use common::*;

// ----- pause --------------------------------------------------------------------------

#[test]
fn paused_process_handles_nothing_then_everything_in_order_at_resume() {
    // p ticks every 10 ms (at 10, 20, ...); s sends it Seq(i) at 5 + 10 i, arriving 3 ms
    // later. p is paused over [100, 300).
    let mut sim = new_sim(
        config(11, 3, 3, TraceMode::Hash),
        vec![timed(
            100,
            Some(200),
            Fault::Pause {
                process: "p".into(),
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let p = sim.spawn(
        hb,
        "p",
        Node::new(Role::Clock {
            every_ms: 10,
            long_ms: None,
        }),
    );
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![p],
            first_ms: 5,
            every_ms: 10,
            count: 50,
        }),
    );
    let mut saw_paused = false;
    while let Some(step) = sim.step_until(SimTime::from_secs(1)) {
        if sim.proc_state(p) == ProcState::Paused {
            saw_paused = true;
            assert_ne!(step, StepKind::Handled(p), "paused p handled an event");
        }
    }
    assert!(saw_paused);
    let l = log(&sim, p);
    let now_of = |s: &Seen| match s {
        Seen::Start { now, .. } | Seen::Msg { now, .. } | Seen::Timer { now, .. } => *now,
        Seen::Fault { now, .. } => *now,
    };
    assert!(l.iter().all(|s| !(100..300).contains(&now_of(s))));
    // Right before the pause: the message at 98; the tick due at 100 was not handled.
    let before: Vec<&Seen> = l.iter().filter(|s| now_of(s) < 100).collect();
    assert_eq!(
        before.last(),
        Some(&&Seen::Msg {
            now: 98,
            from: s,
            msg: Msg::Seq(9)
        })
    );
    // At resume (true time 300; the clock jumped by the 200 ms pause): what came due, in
    // the order it came due: the tick due at 100, then Seq(10)..Seq(29) (108..298).
    let at_resume: Vec<Seen> = l.iter().filter(|s| now_of(s) == 300).cloned().collect();
    let mut expected = vec![Seen::Timer {
        now: 300,
        msg: Msg::Tick(1, 10),
    }];
    expected.extend((10..30).map(|i| Seen::Msg {
        now: 300,
        from: s,
        msg: Msg::Seq(i),
    }));
    assert_eq!(at_resume, expected);
    // Afterwards, business as usual: the re-armed tick fires 10 ms after the resume.
    assert!(l.contains(&Seen::Timer {
        now: 310,
        msg: Msg::Tick(1, 11)
    }));
    assert!(l.contains(&Seen::Msg {
        now: 308,
        from: s,
        msg: Msg::Seq(30)
    }));
    assert_eq!(seqs_from(&sim, p, s).len(), 50);
}

#[test]
fn resume_keeps_link_order_with_messages_due_at_the_resume_instant() {
    // Messages every millisecond with 1..10 ms latency: some of the messages that were
    // not yet due when the pause began come due exactly at the resume instant, together
    // with the parked ones; the parked ones were sent earlier and must still come first.
    for seed in 0..30 {
        let mut sim = new_sim(
            config(seed, 1, 10, TraceMode::Hash),
            vec![timed(
                100,
                Some(200),
                Fault::Pause {
                    process: "r".into(),
                },
            )],
        );
        let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
        let r = sim.spawn(hb, "r", Node::new(Role::Recorder));
        let s = sim.spawn(
            ha,
            "s",
            Node::new(Role::Ticker {
                to: vec![r],
                first_ms: 1,
                every_ms: 1,
                count: 500,
            }),
        );
        sim.run_until(SimTime::from_secs(2));
        let got = seqs_from(&sim, r, s);
        assert!(is_sorted_by_seq(&got), "seed {seed}: {got:?}");
        assert_eq!(got.len(), 500);
    }
}

#[test]
fn pause_host_freezes_every_process_on_the_host_and_only_those() {
    // Two clocks on host b and one on host a; host b is frozen over [100, 300).
    let mut sim = new_sim(
        config(5, 1, 1, TraceMode::Hash),
        vec![timed(100, Some(200), Fault::PauseHost { host: "b".into() })],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let clock = || {
        Node::new(Role::Clock {
            every_ms: 10,
            long_ms: None,
        })
    };
    let b1 = sim.spawn(hb, "b1", clock());
    let b2 = sim.spawn(hb, "b2", clock());
    let a1 = sim.spawn(ha, "a1", clock());
    let mut frozen_seen = false;
    while let Some(step) = sim.step_until(SimTime::from_ms(500)) {
        let now = sim.now().as_ms();
        if (100..300).contains(&now) && now > 100 {
            frozen_seen = true;
            assert_eq!(sim.proc_state(b1), ProcState::Paused);
            assert_eq!(sim.proc_state(b2), ProcState::Paused);
            assert_eq!(sim.proc_state(a1), ProcState::Running);
            assert!(step != StepKind::Handled(b1) && step != StepKind::Handled(b2));
        }
    }
    assert!(frozen_seen);
    let handled_in = |p, lo: u64, hi: u64| {
        log(&sim, p)
            .iter()
            .filter(|s| matches!(s, Seen::Timer { now, .. } if (lo..hi).contains(now)))
            .count()
    };
    assert_eq!(handled_in(b1, 101, 300), 0);
    assert_eq!(handled_in(b2, 101, 300), 0);
    assert!(handled_in(a1, 101, 300) >= 19);
    // Both resumed and tick again.
    assert_eq!(sim.proc_state(b1), ProcState::Running);
    assert!(handled_in(b2, 301, 500) >= 19);
}
