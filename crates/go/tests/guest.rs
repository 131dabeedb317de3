//! A Go program alone, its imports answered by a host whose clocks the test moves:
//! time, entropy, map order and `select` follow the seed; sleeps and timers end at
//! their virtual deadlines; `signal.Notify` does not keep the program from idling;
//! its exit status is what it passed to `os.Exit`.

use crate::fixture;
use rand::SeedableRng;
use reconsim_go::host::{MONOTONIC_BASE_NS, Stream};
use reconsim_go::{Files, Host, Program, Running, Stop};
use reconsim_sim::{SimRng, SimTime};
use std::sync::Arc;

/// Runs the program, moving time to each deadline it waits for: its lines, each with
/// the virtual millisecond it was written at, and how it stopped.
fn run(program: &Program, seed: u64) -> (Vec<(u64, Stream, String)>, Stop) {
    run_in(program, seed, vec![])
}

fn host(seed: u64, env: Vec<String>) -> Host {
    let mut rng = SimRng::seed_from_u64(seed);
    Host::new(
        &mut rng,
        vec!["clock".into()],
        env,
        Arc::new(Files::default()),
    )
}

/// [`run`] with `env` as the program's environment.
fn run_in(program: &Program, seed: u64, env: Vec<String>) -> (Vec<(u64, Stream, String)>, Stop) {
    let host = host(seed, env);
    let mut r = Running::start(program, host);
    let (mut now, mut lines) = (0u64, Vec::new());
    loop {
        let t = SimTime::from_ms(now);
        r.host.lock().unwrap().set_time(t, t);
        let stop = r.resume();
        for (s, l) in r.host.lock().unwrap().take_lines() {
            lines.push((now, s, l));
        }
        match stop {
            Stop::Waiting(w) => {
                let d = w.deadline_ns.expect("the program waits for a timer");
                now = (d - MONOTONIC_BASE_NS).div_ceil(1_000_000).max(now);
            }
            stop => return (lines, stop),
        }
    }
}

#[test]
fn a_go_program_reads_the_run_s_clock_and_seed_and_sleeps_in_virtual_time() {
    let program = Program::load(&fixture::wasm("clock")).expect("the fixture loads");
    let (lines, stop) = run(&program, 7);
    assert_eq!(stop, Stop::Exited(3), "{lines:#?}");
    let text: Vec<String> = lines.iter().map(|(t, _, l)| format!("{t} {l}")).collect();
    // The wall clock starts at the run's epoch, a nanosecond past it at the first read
    // (in initialisation), and goes on a nanosecond a read.
    assert!(
        text[0].starts_with("0 init 2026-01-01T00:00:00.000000001Z "),
        "{text:#?}"
    );
    let start = text
        .iter()
        .find(|l| l.starts_with("0 start "))
        .expect("main starts at 0");
    assert!(
        start.as_str() > "0 start 2026-01-01T00:00:00.000000001Z"
            && start.as_str() < "0 start 2026-01-01T00:00:00.000001Z",
        "{start}"
    );
    assert!(
        lines
            .iter()
            .any(|(t, s, l)| *t == 0 && *s == Stream::Stderr && l == "to stderr")
    );
    // The goroutine's 1.5 s sleep and the 30 s timer end at their virtual deadlines,
    // to the millisecond: signal.Notify's receiver parks, so the program idles.
    assert!(text.contains(&"1500 slept 1.5s".to_string()), "{text:#?}");
    assert!(text.contains(&"30000 timer 30s".to_string()), "{text:#?}");
}

#[test]
fn entropy_map_order_and_select_follow_the_seed() {
    let program = Program::load(&fixture::wasm("clock")).expect("the fixture loads");
    let seeded = |seed| {
        let (lines, _) = run(&program, seed);
        lines
            .into_iter()
            .filter(|(_, _, l)| ["crypto", "map", "select"].iter().any(|p| l.starts_with(p)))
            .map(|(_, _, l)| l)
            .collect::<Vec<_>>()
    };
    let (a, b, c) = (seeded(1), seeded(1), seeded(2));
    assert_eq!(a.len(), 3, "{a:?}");
    assert_eq!(a, b, "the same seed, the same draws");
    for i in 0..3 {
        assert_ne!(a[i], c[i], "another seed, other draws: {a:?} vs {c:?}");
    }
}

#[test]
fn a_run_starts_from_the_snapshot_taken_after_go_s_initialisation() {
    let program = Program::load(&fixture::wasm("clock")).expect("the fixture loads");
    let snapshot = program
        .snapshot(&host(1, vec![]))
        .expect("initialisation that does not wait is snapshotted");
    assert!(snapshot.dirty_bytes() > 0, "{snapshot:?}");
    let init_line = |seed| {
        let (lines, stop) = run(&program, seed);
        assert_eq!(stop, Stop::Exited(3), "{lines:#?}");
        let init: Vec<_> = lines
            .iter()
            .filter(|(_, _, l)| l.starts_with("init"))
            .collect();
        assert_eq!(init.len(), 1, "{lines:#?}");
        // Its line, written during initialisation, is the run's first, at time 0.
        assert_eq!(&lines[0], init[0]);
        init[0].clone()
    };
    // What initialisation draws is the snapshot's, whatever the seed (what main draws
    // follows the seed: entropy_map_order_and_select_follow_the_seed).
    assert_eq!(init_line(1), init_line(2));
    // Another environment, another snapshot and other draws (two replicas differ).
    let (lines, _) = run_in(&program, 1, vec!["POD_NAME=other".into()]);
    assert_eq!(lines[0].0, 0);
    assert!(lines[0].2.starts_with("init "), "{lines:#?}");
    assert_ne!(lines[0], init_line(1), "{lines:#?}");
}

#[test]
fn initialisation_that_waits_runs_in_each_run_on_its_clock() {
    let program = Program::load(&fixture::wasm("clock")).expect("the fixture loads");
    let env = vec!["CLOCK_INIT_SLEEP=1".to_string()];
    assert!(
        program.snapshot(&host(1, env.clone())).is_none(),
        "an initialisation that sleeps is not snapshotted"
    );
    let (lines, stop) = run_in(&program, 1, env.clone());
    assert_eq!(stop, Stop::Exited(3), "{lines:#?}");
    let text: Vec<String> = lines.iter().map(|(t, _, l)| format!("{t} {l}")).collect();
    assert!(text.contains(&"1000 init slept".to_string()), "{text:#?}");
    assert!(
        text.iter().any(|l| l.starts_with("1000 start ")),
        "{text:#?}"
    );
    assert!(text.contains(&"2500 slept 1.5s".to_string()), "{text:#?}");
    assert_eq!(run_in(&program, 1, env).0, lines, "the same twice");
}

#[test]
fn sigterm_from_the_host_reaches_signal_notify() {
    let program = Program::load(&fixture::wasm("clock")).expect("the fixture loads");
    let mut r = Running::start(&program, host(1, vec![]));
    let (mut now, mut lines) = (0u64, Vec::new());
    let mut sent = false;
    let stop = loop {
        let t = SimTime::from_ms(now);
        r.host.lock().unwrap().set_time(t, t);
        let stop = r.resume();
        for (_, l) in r.host.lock().unwrap().take_lines() {
            lines.push(format!("{now} {l}"));
        }
        match stop {
            Stop::Waiting(w) => {
                let d = w.deadline_ns.expect("the program waits for a timer");
                now = (d - MONOTONIC_BASE_NS).div_ceil(1_000_000).max(now);
                // At 1 s, between its start and its sleep's end: SIGTERM.
                if !sent && now > 1_000 {
                    now = 1_000;
                    assert!(r.host.lock().unwrap().signal(reconsim_go::host::SIGTERM));
                    sent = true;
                }
            }
            stop => break stop,
        }
    };
    assert_eq!(stop, Stop::Exited(3), "{lines:#?}");
    assert!(lines.contains(&"1000 signal".to_string()), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("slept")), "{lines:#?}");
}
