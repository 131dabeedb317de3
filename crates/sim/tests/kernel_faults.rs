//! Kernel tests of the faults on one process: clock skew, and world faults injected
//! through `on_fault` (unknown targets are recorded no-ops).

use reconsim_sim::{Fault, ProcState, SimTime, TraceMode};

mod common;
use common::*;

// ----- clock skew ---------------------------------------------------------------------

#[test]
fn clock_skew_offsets_only_the_skewed_process_and_reverts() {
    let mut sim = new_sim(
        config(23, 1, 1, TraceMode::Hash),
        vec![
            timed(
                100,
                Some(200),
                Fault::ClockSkew {
                    process: "p1".into(),
                    offset_ms: 5000,
                },
            ),
            timed(
                400,
                Some(100),
                Fault::ClockSkew {
                    process: "p1".into(),
                    offset_ms: -30,
                },
            ),
        ],
    );
    let h = sim.add_host("h");
    let clock = || {
        Node::new(Role::Clock {
            every_ms: 10,
            long_ms: None,
        })
    };
    let p1 = sim.spawn(h, "p1", clock());
    let p2 = sim.spawn(h, "p2", clock());
    sim.run_until(SimTime::from_ms(600));
    // Tick(_, k) fires at true time 10 k: skew is visible in now(), durations are not
    // skewed (ticks stay on true 10 ms boundaries).
    let offsets = |p| -> Vec<(u64, i64)> {
        log(&sim, p)
            .iter()
            .filter_map(|s| match s {
                Seen::Timer {
                    now,
                    msg: Msg::Tick(_, k),
                } => Some((10 * k, *now as i64 - 10 * *k as i64)),
                _ => None,
            })
            .collect()
    };
    let o1 = offsets(p1);
    assert_eq!(o1.len(), 60);
    for (true_t, off) in o1 {
        let expected = match true_t {
            100..300 => 5000,
            400..500 => -30,
            _ => 0,
        };
        assert_eq!(off, expected, "p1 at true time {true_t}");
    }
    assert!(offsets(p2).iter().all(|(_, off)| *off == 0));
}

// ----- injected faults ----------------------------------------------------------------

#[test]
fn injected_faults_reach_on_fault_and_unknown_targets_are_recorded_no_ops() {
    let mut sim = new_sim(
        config(29, 1, 1, TraceMode::Full),
        vec![
            timed(
                100,
                Some(50),
                Fault::Inject {
                    process: "w".into(),
                    fault: "kubelet-stop".into(),
                },
            ),
            timed(
                120,
                Some(10),
                Fault::Inject {
                    process: "nobody".into(),
                    fault: "lag".into(),
                },
            ),
            timed(
                130,
                Some(10),
                Fault::Pause {
                    process: "ghost".into(),
                },
            ),
            timed(
                200,
                None,
                Fault::Inject {
                    process: "w".into(),
                    fault: "forever".into(),
                },
            ),
        ],
    );
    let h = sim.add_host("h");
    let w = sim.spawn(h, "w", Node::new(Role::Recorder));
    sim.run_until(SimTime::from_secs(1));
    let faults: Vec<&Seen> = log(&sim, w)
        .iter()
        .filter(|s| matches!(s, Seen::Fault { .. }))
        .collect();
    assert_eq!(
        faults,
        vec![
            &Seen::Fault {
                now: 100,
                fault: "kubelet-stop".into(),
                active: true
            },
            &Seen::Fault {
                now: 150,
                fault: "kubelet-stop".into(),
                active: false
            },
            &Seen::Fault {
                now: 200,
                fault: "forever".into(),
                active: true
            },
        ]
    );
    assert_eq!(
        fault_records(&sim),
        vec![
            (100, 0, true, true),
            (120, 1, true, false),
            (130, 1, false, false),
            (130, 2, true, false),
            (140, 2, false, false),
            (150, 0, false, true),
            (200, 3, true, true),
        ]
    );
}

#[test]
fn an_injection_for_a_process_not_yet_started_reaches_it_at_its_first_start() {
    // "late" is spawned after the last fault action before it (as a kubelet starts a
    // pod's container after the fault plan armed its failpoint); "expired" ends before
    // its process ever starts.
    let mut sim = new_sim(
        config(31, 1, 1, TraceMode::Full),
        vec![
            timed(
                0,
                Some(1_000),
                Fault::Inject {
                    process: "late".into(),
                    fault: "armed".into(),
                },
            ),
            timed(
                0,
                Some(100),
                Fault::Inject {
                    process: "late".into(),
                    fault: "expired".into(),
                },
            ),
        ],
    );
    let h = sim.add_host("h");
    sim.run_until(SimTime(300));
    let spawned = sim.now().0;
    assert!(spawned >= 100, "after `expired` ended: {spawned}");
    let late = sim.spawn(h, "late", Node::new(Role::Recorder));
    sim.run_until(SimTime::from_secs(2));
    let faults: Vec<&Seen> = log(&sim, late)
        .iter()
        .filter(|s| matches!(s, Seen::Fault { .. }))
        .collect();
    assert_eq!(
        faults,
        vec![
            &Seen::Fault {
                now: spawned,
                fault: "armed".into(),
                active: true
            },
            &Seen::Fault {
                now: 1_000,
                fault: "armed".into(),
                active: false
            },
        ]
    );
    assert_eq!(
        fault_records(&sim),
        vec![
            (0, 0, true, false),
            (0, 1, true, false),
            (100, 1, false, false),
            (spawned, 0, true, true),
            (1_000, 0, false, true),
        ]
    );
}

#[test]
fn a_crash_or_pause_for_a_process_not_yet_started_holds_it_from_its_spawn() {
    let mut sim = new_sim(
        config(37, 1, 1, TraceMode::Full),
        vec![
            timed(
                0,
                Some(500),
                Fault::Crash {
                    process: "down".into(),
                },
            ),
            timed(
                0,
                Some(700),
                Fault::Pause {
                    process: "held".into(),
                },
            ),
        ],
    );
    let h = sim.add_host("h");
    sim.run_until(SimTime(100));
    let down = sim.spawn(h, "down", Node::new(Role::Recorder));
    let held = sim.spawn(h, "held", Node::new(Role::Recorder));
    sim.run_until(SimTime(200));
    assert_eq!(sim.proc_state(down), ProcState::Crashed);
    assert_eq!(sim.proc_state(held), ProcState::Paused);
    sim.run_until(SimTime::from_secs(2));
    assert_eq!(
        sim.proc_state(down),
        ProcState::Running,
        "restarted at 500 ms"
    );
    assert_eq!(
        sim.proc_state(held),
        ProcState::Running,
        "resumed at 700 ms"
    );
    let spawned = fault_records(&sim)
        .iter()
        .filter(|(_, _, active, applied)| *active && *applied)
        .count();
    assert_eq!(spawned, 2, "{:?}", fault_records(&sim));
}

#[test]
fn a_fault_naming_a_process_strikes_its_latest_start() {
    // "w" exited and started again as "w#1" (a kubelet's restarted container): a crash
    // and a pause naming "w" strike "w#1", not the process that is gone, nor a process
    // whose name only begins the same ("w#1x", "ww").
    let mut sim = new_sim(
        config(37, 1, 1, TraceMode::Hash),
        vec![
            timed(
                100,
                Some(100),
                Fault::Crash {
                    process: "w".into(),
                },
            ),
            timed(
                300,
                Some(100),
                Fault::Pause {
                    process: "w".into(),
                },
            ),
        ],
    );
    let h = sim.add_host("h");
    let gone = sim.spawn(h, "w", Node::new(Role::Recorder));
    assert!(sim.crash(gone));
    let now = sim.spawn(h, "w#1", Node::new(Role::Recorder));
    let others = [
        sim.spawn(h, "w#1x", Node::new(Role::Recorder)),
        sim.spawn(h, "ww", Node::new(Role::Recorder)),
    ];
    assert_eq!(sim.fault_target("w"), Some(now));
    assert_eq!(sim.proc_by_name("w"), Some(gone));
    sim.run_until(SimTime(150));
    assert_eq!(sim.proc_state(now), ProcState::Crashed);
    sim.run_until(SimTime(250));
    assert_eq!(sim.proc_state(now), ProcState::Running);
    sim.run_until(SimTime(350));
    assert_eq!(sim.proc_state(now), ProcState::Paused);
    assert!(
        others
            .iter()
            .all(|p| sim.proc_state(*p) == ProcState::Running)
    );
    sim.run_until(SimTime(450));
    assert_eq!(sim.proc_state(now), ProcState::Running);
    assert_eq!(sim.proc_state(gone), ProcState::Crashed);
}
