//! Watch fan-out: events per second of wall time when one writer's changes reach N
//! informers through the simulated API server (hash-only traces, single core).
//!
//! `cargo bench -p reconsim-world --bench watch`
//!
//! A Script patches a label of one Widget (a small custom kind defined here) every 10 ms
//! of simulated time; N processes each run an informer on Widgets. Every write is one
//! request, one response and N watch events, each handled by its receiver. The wall
//! clock is read here, between runs, never inside one.

use reconsim_sim::{FaultPlan, Sim, SimConfig, SimTime, TraceMode};
use reconsim_world::Proc;
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::informer::{Informer, Watcher};
use reconsim_world::object::{Body, Object, ObjectKey, ObjectMeta};
use reconsim_world::object::{Kind, KindInfo, Resource};
use reconsim_world::script::{Script, Step};
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct WidgetSpec {
    provider_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct WidgetStatus {
    phase: Option<String>,
    instance_id: Option<String>,
}

/// The written object: a custom kind with a status subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct Widget {
    spec: WidgetSpec,
    status: WidgetStatus,
}

impl Resource for Widget {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "bench.reconsim.dev",
        "v1",
        "Widget",
        "widgets",
    ));
    reconsim_world::status_subresource!();
}

const WRITES: u64 = 20_000;
const WRITE_EVERY_MS: u64 = 10;

fn run(informers: usize, seed: u64) -> (u64, f64, u64) {
    let mut config = SimConfig::new(seed);
    config.trace = TraceMode::Hash;
    let mut sim: Sim<Proc> = Sim::new(config, FaultPlan::default());
    let api_host = sim.add_host("api");
    let mut server = ApiServer::new(Default::default());
    server.seed_object(Object::new(
        ObjectMeta::named("ns", "m"),
        Body::new(Widget::default()),
    ));
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    for i in 0..informers {
        let host = sim.add_host(&format!("node-{i}"));
        let informer = Informer::new(0, &[Widget::KIND], api);
        sim.spawn(
            host,
            &format!("watcher-{i}"),
            Proc::new(Watcher::new(informer)),
        );
    }
    let key = ObjectKey::new(Widget::KIND, "ns", "m");
    let steps = (1..=WRITES)
        .map(|i| Step {
            at_ms: 1_000 + i * WRITE_EVERY_MS,
            op: ApiOp::Patch {
                key: key.clone(),
                ops: vec![PatchOp::SetLabel("n".into(), Some(i.to_string()))],
                resource_version: None,
            },
        })
        .collect();
    let writer_host = sim.add_host("writer");
    sim.spawn(writer_host, "writer", Proc::new(Script::new(api, steps)));
    let end = SimTime::from_ms(2_000 + WRITES * WRITE_EVERY_MS);
    let start = Instant::now();
    sim.run_until(end);
    let secs = start.elapsed().as_secs_f64();
    (sim.handled(), secs, sim.trace().hash())
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for n in [1usize, 10, 100] {
        let name = format!("watch-fanout-{n}");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let (mut events, mut secs) = (0u64, 0f64);
        let mut seed = 0;
        while secs < 2.0 {
            let (e, s, hash) = run(n, seed);
            std::hint::black_box(hash);
            events += e;
            secs += s;
            seed += 1;
        }
        println!(
            "{name}: {:.2} M events/s ({events} events in {secs:.2} s, {seed} runs)",
            events as f64 / secs / 1e6
        );
    }
}
