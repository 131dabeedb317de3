//! Determinism without changing the code (DESIGN.md section 11): inside a run, the
//! clock, tokio's timers and every source of entropy a program reaches for follow the
//! run's seed and virtual time; outside a run they are the real ones.

use reconsim_kube::intercept::{self, EPOCH_UNIX_SECS};
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{SimTime, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a program may do that reads a clock or draws entropy.
async fn hazards() -> Vec<String> {
    let mut out = Vec::new();
    let start = std::time::Instant::now();
    let wall = SystemTime::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    out.push(format!("slept {} ms", start.elapsed().as_millis()));
    let mut interval = tokio::time::interval(Duration::from_millis(250));
    let ticks = tokio::time::Instant::now();
    for _ in 0..3 {
        interval.tick().await;
    }
    out.push(format!("3 ticks in {} ms", ticks.elapsed().as_millis()));
    let timed_out =
        tokio::time::timeout(Duration::from_millis(100), std::future::pending::<()>()).await;
    out.push(format!("timed out: {}", timed_out.is_err()));
    out.push(format!(
        "wall at start: {} s",
        wall.duration_since(UNIX_EPOCH).unwrap().as_secs()
    ));
    out.push(format!("jiff: {}", jiff::Timestamp::now()));
    let map: HashMap<u32, u32> = (0..12).map(|i| (i, i)).collect();
    out.push(format!("hashmap: {:?}", map.keys().collect::<Vec<_>>()));
    out.push(format!("rand: {}", rand::random::<u64>()));
    out.push(format!("uuid: {}", uuid::Uuid::new_v4()));
    let mut picks = String::new();
    for _ in 0..24 {
        tokio::select! {
            _ = async {} => picks.push('a'),
            _ = async {} => picks.push('b'),
        }
    }
    out.push(format!("select: {picks}"));
    out
}

fn program() -> Program {
    Arc::new(|_client| Box::pin(async { hazards().await.join("\n") }))
}

/// One run of seed `seed` on a thread of its own: the program's lines and the trace hash.
fn run(seed: u64) -> (Vec<String>, u64) {
    intercept::on_own_thread(seed, || {
        let mut w = KubeWorld::new(
            seed,
            TraceMode::Hash,
            ApiServerConfig::default(),
            Kinds::new(),
            program(),
        );
        w.sim.run_until(SimTime(10_000));
        let lines = w.bridge().results.join("\n");
        (
            lines.lines().map(str::to_string).collect(),
            w.sim.trace().hash(),
        )
    })
}

fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix}: {lines:?}"))
}

#[test]
fn tokio_timers_and_clocks_run_in_virtual_time() {
    let (lines, _) = run(7);
    assert_eq!(
        lines[..5],
        [
            "slept 1500 ms".to_string(),
            "3 ticks in 500 ms".into(),
            "timed out: true".into(),
            format!("wall at start: {EPOCH_UNIX_SECS} s"),
            // The program's clock at its end: 1.5 s + 0.5 s + 0.1 s after the epoch,
            // and its first read at that instant, a nanosecond after it.
            "jiff: 2026-01-01T00:00:02.100000001Z".into(),
        ]
    );
}

#[test]
fn every_source_of_entropy_follows_the_seed() {
    let varying = ["hashmap:", "rand:", "uuid:", "select:"];
    let mut seen: Vec<BTreeSet<String>> = vec![BTreeSet::new(); varying.len()];
    for seed in 0..4 {
        let (a, hash_a) = run(seed);
        let (b, hash_b) = run(seed);
        assert_eq!(a, b, "seed {seed}: the same seed gave different lines");
        assert_eq!(
            hash_a, hash_b,
            "seed {seed}: the same seed gave different traces"
        );
        for (i, prefix) in varying.iter().enumerate() {
            seen[i].insert(line(&a, prefix).to_string());
        }
    }
    for (i, prefix) in varying.iter().enumerate() {
        assert!(
            seen[i].len() > 1,
            "{prefix} is the same for every seed: {:?}",
            seen[i]
        );
    }
}

#[test]
fn outside_a_run_the_functions_are_the_real_ones() {
    assert!(!intercept::inside());
    // The real wall clock is this year's, not the run's epoch.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(now.as_secs() > EPOCH_UNIX_SECS + 86_400 * 30, "{now:?}");
    // The real monotonic clock moves while the thread sleeps for real.
    let t = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(5));
    assert!(t.elapsed() >= Duration::from_millis(5));
    // Real entropy: two draws differ (a chance of 2^-64 that they do not).
    assert_ne!(rand::random::<u64>(), rand::random::<u64>());
    assert_ne!(uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    // And a run between two real readings does not leave its clock behind.
    let before = SystemTime::now();
    let _ = run(1);
    assert!(SystemTime::now() >= before);
}
