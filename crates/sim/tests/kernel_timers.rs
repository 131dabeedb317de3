//! Kernel tests of timers and bounds: the event budget ends a livelock, cancelled timers
//! never fire, a ping-pong runs its rounds.

use reconsim_sim::{SimTime, TraceMode};

mod common;
use common::*;

// ----- bounds and timers --------------------------------------------------------------

#[test]
fn max_events_stops_a_zero_delay_livelock() {
    let mut c = config(41, 1, 1, TraceMode::Hash);
    c.max_events = 10_000;
    let mut sim = new_sim(c, vec![]);
    let h = sim.add_host("h");
    let p = sim.spawn(h, "spin", Node::new(Role::Livelock));
    // Step with our own cap, so a kernel that ignored the bound fails here, not hangs.
    let mut steps = 0;
    while steps < 20_000 && sim.step_until(SimTime::from_secs(1)).is_some() {
        steps += 1;
    }
    assert_eq!(steps, 10_000, "the budget ended the run");
    assert!(sim.budget_exhausted());
    assert_eq!(sim.handled(), 10_000);
    assert_eq!(sim.now(), SimTime::ZERO, "time never moved");
    // Start + 9,999 timers.
    assert_eq!(log(&sim, p).len(), 10_000);
    // run_until returns at once on a spent budget.
    sim.run_until(SimTime::from_secs(1));
    assert_eq!(sim.handled(), 10_000);
}

#[test]
fn cancelled_timers_never_fire() {
    let mut sim = new_sim(config(43, 1, 1, TraceMode::Hash), vec![]);
    let h = sim.add_host("h");
    // Labels 0..4 at 10, 20, 30, 40, 50. Cancel 1 at once; when 0 fires, cancel 3;
    // when 2 fires, cancel 0 (already fired: no effect on anything).
    let p = sim.spawn(
        h,
        "t",
        Node::new(Role::Timers {
            after_ms: vec![10, 20, 30, 40, 50],
            cancel_now: vec![1],
            cancel_on_fire: vec![(0, 3), (2, 0)],
        }),
    );
    sim.run_until(SimTime::from_secs(1));
    let fired: Vec<(u64, u64)> = log(&sim, p)
        .iter()
        .filter_map(|s| match s {
            Seen::Timer {
                now,
                msg: Msg::Label(l),
            } => Some((*now, *l)),
            _ => None,
        })
        .collect();
    assert_eq!(fired, vec![(10, 0), (30, 2), (50, 4)]);
}

#[test]
fn ping_pong_runs_its_rounds() {
    let mut sim = new_sim(config(47, 1, 5, TraceMode::Hash), vec![]);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let pong = sim.spawn(hb, "pong", Node::new(Role::Ponger));
    let ping = sim.spawn(
        ha,
        "ping",
        Node::new(Role::Pinger {
            peer: pong,
            rounds: 99,
        }),
    );
    sim.run_until(SimTime::from_secs(10));
    assert_eq!(
        seqs_len(log(&sim, ping), |m| matches!(m, Msg::Pong(_))),
        100
    );
    assert_eq!(
        seqs_len(log(&sim, pong), |m| matches!(m, Msg::Ping(_))),
        100
    );
    // 2 starts + 200 deliveries.
    assert_eq!(sim.handled(), 202);
    assert_eq!(sim.trace().events(), 202);
}

fn seqs_len(l: &[Seen], f: impl Fn(&Msg) -> bool) -> usize {
    l.iter()
        .filter(|s| matches!(s, Seen::Msg { msg, .. } if f(msg)))
        .count()
}
