//! The ConfigSet example (examples/configset, real kube-rs code) on one core, its two
//! paths side by side in one process, rounds alternating so a noisy machine shifts both
//! alike:
//! - program: the user's `run`, kube-runtime's own `Controller` (watcher, reflector,
//!   scheduler, runner) in a `KubeBridge`, each run hosted on its own thread;
//! - reconcile-only: the same `reconcile` and `error_policy` under reconsim's manager;
//! - Go: examples/configset-go, the same controller written with controller-runtime,
//!   its manager built for wasip1 and run in wasmtime (`controllers.go`; needs Go 1.26,
//!   and its module compiled once before the first round).
//!
//! Each run is the fixed scenario at one seed, faults and convergence check included, as
//! `configset fuzz examples/configset/scenarios/configset-fixed.json --jobs 1` runs it.
//! `cargo bench --bench configset` prints a markdown table (docs/PERFORMANCE.md).

/// As the `reconsim` binary does: a run allocates on every request and every JSON body,
/// and mimalloc's thread-local free lists make that cheaper than glibc's malloc (about
/// 1.2x for this example, docs/PERFORMANCE.md). Allocation addresses never reach an
/// outcome.
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

#[path = "../../../examples/configset/controller.rs"]
mod controller;
#[path = "../../../examples/configset/harness.rs"]
mod harness;
#[path = "../../../examples/configset/reconcile_only.rs"]
mod reconcile_only;

use reconsim::scenario::{Families, Scenario, run};
use std::path::Path;
use std::time::Instant;

/// Seeds a round runs of each path (`RECONSIM_BENCH_SEEDS` to change).
fn seeds() -> u64 {
    std::env::var("RECONSIM_BENCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}
const ROUNDS: usize = 3;

struct Tally {
    runs: u64,
    events: u64,
    sim_ms: u64,
    wall_s: f64,
}

fn round(s: &Scenario) -> Tally {
    let t = Instant::now();
    let (mut events, mut sim_ms) = (0, 0);
    for seed in 0..seeds() {
        let (o, _) = run(s, seed);
        assert!(
            o.violation.is_none(),
            "{} seed {seed}: {:?}",
            s.name,
            o.violation
        );
        events += o.events;
        sim_ms += o.sim_ms;
    }
    Tally {
        runs: seeds(),
        events,
        sim_ms,
        wall_s: t.elapsed().as_secs_f64(),
    }
}

fn main() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/configset/scenarios/configset-fixed.json");
    let load = |families: Families| Scenario::load(&file, &families).expect("the example loads");
    let paths = [
        (
            "program (kube-runtime's Controller)",
            load(reconsim::families::builtin().with(harness::extensions())),
        ),
        (
            "reconcile-only (reconsim's manager)",
            load(reconsim::families::builtin().with(reconcile_only::extensions())),
        ),
        (
            "Go program (controller-runtime, configset-go)",
            Scenario::load(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("examples/configset-go/testdata/configset-go-fixed.json"),
                &reconsim::families::builtin(),
            )
            .expect("the Go example loads (Go 1.26 builds it)"),
        ),
    ];
    println!("| round | path | runs/s | simulated time ratio | events per run | us per event |");
    println!("|---|---|---|---|---|---|");
    for r in 1..=ROUNDS {
        for (name, s) in &paths {
            let t = round(s);
            println!(
                "| {r} | {name} | {:.0} | {:.0}x | {} | {:.2} |",
                t.runs as f64 / t.wall_s,
                t.sim_ms as f64 / 1000.0 / t.wall_s,
                t.events / t.runs,
                t.wall_s * 1e6 / t.events as f64,
            );
        }
    }
}
