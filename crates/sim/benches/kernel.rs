//! Kernel throughput: events per second of wall time, single core, hash-only traces.
//!
//! `cargo bench -p reconsim-sim --bench kernel`
//!
//! - pingpong: two processes on two hosts bounce one message back and forth.
//! - fanout-N: one process, on a 1 ms timer, sends each message to N receivers on other
//!   hosts (a kernel-level stand-in for watch fan-out); the receivers only count.
//!
//! And the workloads of the peers in ../shared/peers/kernel-baseline (a bare loop of a
//! BinaryHeap and ChaCha8, and turmoil), for a like-for-like ratio: every message's
//! latency uniform in 1..=50 ms, every process on a host of its own (links are FIFO, as
//! TCP; the bare loop has no links, so no message waits behind another):
//! - peer-pingpong: two processes bounce one message;
//! - peer-fanout32: process 0 sends each round to 32 receivers, each replies, and the
//!   next round starts when all 32 replies are in (64 deliveries a round);
//! - peer-pairs1024: 1,024 independent ping-pong pairs (a queue of 1,024).
//!
//! The wall clock is read here, between slices of simulated time, never inside a run.

use reconsim_sim::{Actor, Ctx, FaultPlan, ProcId, Sim, SimConfig, SimTime, TimerId, TraceMode};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Hash)]
enum Msg {
    Ball(u64),
    Tick,
    Event(u64),
}

#[derive(Debug)]
enum Bench {
    Player {
        peer: Option<ProcId>,
        hits: u64,
    },
    Source {
        to: Vec<ProcId>,
        sent: u64,
    },
    Sink {
        got: u64,
    },
    /// peer-fanout32's process 0: a round to every receiver, the next when all replied.
    Hub {
        to: Vec<ProcId>,
        waiting: usize,
        round: u64,
    },
    /// peer-fanout32's receivers: reply to every event.
    Echo,
}

impl Actor for Bench {
    type Msg = Msg;
    type Fault = ();

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        match self {
            Bench::Player {
                peer: Some(peer), ..
            } => ctx.send(*peer, Msg::Ball(0)),
            Bench::Source { .. } => {
                ctx.set_timer(1, Msg::Tick);
            }
            Bench::Hub { to, waiting, round } => {
                *waiting = to.len();
                for t in to.iter() {
                    ctx.send(*t, Msg::Event(*round));
                }
            }
            _ => {}
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut Ctx<'_, Self>) {
        match (self, msg) {
            (Bench::Player { hits, .. }, Msg::Ball(n)) => {
                *hits += 1;
                ctx.send(from, Msg::Ball(n + 1));
            }
            (Bench::Sink { got }, Msg::Event(_)) => *got += 1,
            (Bench::Echo, Msg::Event(n)) => ctx.send(from, Msg::Event(n)),
            (Bench::Hub { to, waiting, round }, Msg::Event(_)) => {
                *waiting -= 1;
                if *waiting == 0 {
                    *round += 1;
                    *waiting = to.len();
                    for t in to.iter() {
                        ctx.send(*t, Msg::Event(*round));
                    }
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _: TimerId, _: Msg, ctx: &mut Ctx<'_, Self>) {
        if let Bench::Source { to, sent } = self {
            *sent += 1;
            for t in to.iter() {
                ctx.send(*t, Msg::Event(*sent));
            }
            ctx.set_timer(1, Msg::Tick);
        }
    }
}

fn config() -> SimConfig {
    let mut c = SimConfig::new(1);
    c.trace = TraceMode::Hash;
    c.max_events = u64::MAX;
    c
}

/// The peers' network: latency uniform in 1..=50 ms.
fn peer_config() -> SimConfig {
    let mut c = config();
    c.net.latency_ms_min = 1;
    c.net.latency_ms_max = 50;
    c
}

/// `pairs` ping-pong pairs, every process on a host of its own.
fn peer_pairs(pairs: u32) -> Sim<Bench> {
    let mut sim = Sim::new(peer_config(), FaultPlan::default());
    for i in 0..pairs {
        let (a, b) = (
            sim.add_host(&format!("a{i}")),
            sim.add_host(&format!("b{i}")),
        );
        let pong = sim.spawn(
            b,
            &format!("pong{i}"),
            Bench::Player {
                peer: None,
                hits: 0,
            },
        );
        sim.spawn(
            a,
            &format!("ping{i}"),
            Bench::Player {
                peer: Some(pong),
                hits: 0,
            },
        );
    }
    sim
}

/// A hub and 32 echoes, every process on a host of its own.
fn peer_fanout32() -> Sim<Bench> {
    let mut sim = Sim::new(peer_config(), FaultPlan::default());
    let to = (0..32)
        .map(|i| {
            let h = sim.add_host(&format!("e{i}"));
            sim.spawn(h, &format!("echo{i}"), Bench::Echo)
        })
        .collect();
    let hub = sim.add_host("hub");
    sim.spawn(
        hub,
        "hub",
        Bench::Hub {
            to,
            waiting: 0,
            round: 0,
        },
    );
    sim
}

fn pingpong() -> Sim<Bench> {
    let mut sim = Sim::new(config(), FaultPlan::default());
    let (a, b) = (sim.add_host("a"), sim.add_host("b"));
    let pong = sim.spawn(
        b,
        "pong",
        Bench::Player {
            peer: None,
            hits: 0,
        },
    );
    sim.spawn(
        a,
        "ping",
        Bench::Player {
            peer: Some(pong),
            hits: 0,
        },
    );
    sim
}

fn fanout(n: u32) -> Sim<Bench> {
    let mut sim = Sim::new(config(), FaultPlan::default());
    let src_host = sim.add_host("src");
    // Receivers spread over 10 hosts, so messages cross the network.
    let hosts: Vec<_> = (0..10).map(|i| sim.add_host(&format!("h{i}"))).collect();
    let to = (0..n)
        .map(|i| {
            sim.spawn(
                hosts[i as usize % 10],
                &format!("sink{i}"),
                Bench::Sink { got: 0 },
            )
        })
        .collect();
    sim.spawn(src_host, "src", Bench::Source { to, sent: 0 });
    sim
}

/// Run `sim` in slices of simulated time until at least `min` of wall time has passed.
fn measure(name: &str, mut sim: Sim<Bench>, slice_ms: u64, min: Duration) {
    // Warm up (allocations of the queue and link table settle).
    sim.run_until(SimTime::from_ms(slice_ms));
    let (e0, t0) = (sim.handled(), Instant::now());
    let mut end = slice_ms;
    while t0.elapsed() < min {
        end += slice_ms;
        sim.run_until(SimTime::from_ms(end));
    }
    let secs = t0.elapsed().as_secs_f64();
    let events = sim.handled() - e0;
    black_box(sim.trace().hash());
    println!(
        "{name}: {:.1} M events/s ({events} events in {secs:.2} s, {:.0} simulated s, trace hash {:016x})",
        events as f64 / secs / 1e6,
        sim.now().as_ms() as f64 / 1000.0,
        sim.trace().hash(),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would not run us for long.
    // Other arguments filter by name: `cargo bench -p reconsim-sim --bench kernel -- fanout`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let min = if args.iter().any(|a| a == "--bench") {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(50)
    };
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    if wanted("pingpong") {
        measure("pingpong", pingpong(), 100_000, min);
    }
    if wanted("fanout-10") {
        measure("fanout-10", fanout(10), 10_000, min);
    }
    if wanted("fanout-100") {
        measure("fanout-100", fanout(100), 1_000, min);
    }
    if wanted("peer-pingpong") {
        measure("peer-pingpong", peer_pairs(1), 1_000_000, min);
    }
    if wanted("peer-fanout32") {
        measure("peer-fanout32", peer_fanout32(), 100_000, min);
    }
    if wanted("peer-pairs1024") {
        measure("peer-pairs1024", peer_pairs(1024), 1_000, min);
    }
}
