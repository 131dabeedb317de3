//! A controller-runtime manager as shipped, against the simulated API server: its
//! client's discovery and requests (protobuf bodies sent as JSON), its informer's
//! streaming list and watch, its work queue's `RequeueAfter` on the run's clock, and
//! the same trace for the same seed.

use crate::fixture;
use reconsim_go::{GoWorld, Program};
use reconsim_kube::Kinds;
use reconsim_sim::{FaultPlan, SimTime, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;

fn world(seed: u64, trace: TraceMode) -> GoWorld {
    let program = Program::load(&fixture::wasm("requeue")).expect("the fixture loads");
    GoWorld::new(
        seed,
        trace,
        ApiServerConfig::default(),
        Kinds::new(),
        program,
        FaultPlan::new(Vec::new()),
    )
}

/// The virtual instants (ms since the epoch's minute) of the program's reconciles.
fn reconciles(lines: &[String]) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("reconcile default/settings 2026-01-01T00:"))
        .map(|t| {
            let (min, rest) = t.split_once(':').expect("mm:ss");
            let secs: f64 = rest.trim_end_matches('Z').parse().expect("seconds");
            min.parse::<u64>().expect("minutes") * 60_000 + (secs * 1_000.0).floor() as u64
        })
        .collect()
}

#[test]
fn a_manager_reconciles_and_requeues_at_its_virtual_deadline() {
    let mut w = world(1, TraceMode::Full);
    w.sim.run_until(SimTime::from_ms(100_000));
    let b = w.bridge();
    assert!(b.results.is_empty(), "the manager runs on: {:?}", b.results);
    assert!(
        b.lines
            .iter()
            .any(|l| l.starts_with("created settings uid ")),
        "{:#?}",
        b.lines
    );
    // Its informer lists and watches (client-go's streaming list), and the reconcile's
    // update goes as JSON (the program's client sends ConfigMaps as protobuf).
    assert!(
        b.requests
            .iter()
            .any(|r| r.starts_with("GET /api/v1/configmaps?") && r.contains("watch=true")),
        "{:#?}",
        b.requests
    );
    assert!(
        b.requests
            .contains(&"PUT /api/v1/namespaces/default/configmaps/settings".to_string())
    );
    // The first reconcile (the informer's ADDED), the second (the update's event),
    // then RequeueAfter: 30s, each at its virtual deadline to the millisecond.
    let at = reconciles(&b.lines);
    assert!(at.len() >= 4, "{:#?}", b.lines);
    let last = &at[at.len() - 3..];
    assert_eq!(last[1] - last[0], 30_000, "{at:?}");
    assert_eq!(last[2] - last[1], 30_000, "{at:?}");
}

#[test]
fn a_manager_s_run_is_the_same_twice_and_another_seed_s_differs() {
    let hash = |seed| {
        reconsim_kube::selfcheck::twice(|trace| world(seed, trace).sim, SimTime::from_ms(40_000))
            .unwrap_or_else(|d| panic!("seed {seed}: {d}"))
    };
    assert_ne!(hash(1), hash(2));
}
