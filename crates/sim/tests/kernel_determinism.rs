//! Kernel tests of determinism: a seed fixes the whole history (the trace hash), full and
//! hash-only traces agree, and removing a late fault leaves the earlier history alone.

use rand::Rng;
use reconsim_sim::{
    Fault, PartitionMode, ProcId, RecordKind, Sim, SimTime, Streams, TimedFault, TraceMode,
};
use std::collections::BTreeSet;

mod common;
use common::*;

// ----- determinism --------------------------------------------------------------------

/// A busy little world: five gossiping processes on three hosts, with one of each kernel
/// fault.
fn gossip_run(seed: u64, trace: TraceMode) -> Sim<Node> {
    let plan = vec![
        timed(
            300,
            Some(400),
            partition(&["h0"], &["h1", "h2"], PartitionMode::Drop, false),
        ),
        timed(
            900,
            Some(300),
            partition(&["h1"], &["h2"], PartitionMode::Hold, false),
        ),
        timed(
            500,
            Some(250),
            Fault::Pause {
                process: "g1".into(),
            },
        ),
        timed(
            1300,
            Some(200),
            Fault::Crash {
                process: "g2".into(),
            },
        ),
        timed(
            200,
            Some(1000),
            Fault::ClockSkew {
                process: "g3".into(),
                offset_ms: -150,
            },
        ),
        timed(
            100,
            Some(500),
            Fault::SlowLink {
                hosts_a: names(&["h2"]),
                hosts_b: names(&["h0"]),
                extra_latency_ms: 40,
                one_way: true,
            },
        ),
        timed(
            700,
            Some(100),
            Fault::Inject {
                process: "g4".into(),
                fault: "flaky".into(),
            },
        ),
    ];
    let mut sim = new_sim(config(seed, 1, 9, trace), plan);
    let hosts = [sim.add_host("h0"), sim.add_host("h1"), sim.add_host("h2")];
    let ids: Vec<ProcId> = (0..5u32).map(ProcId).collect();
    for i in 0..5 {
        let peers = ids.iter().copied().filter(|p| p.0 != i as u32).collect();
        sim.spawn(
            hosts[i % 3],
            &format!("g{i}"),
            Node::new(Role::Gossip { peers }),
        );
    }
    sim.run_until(SimTime::from_secs(3));
    sim
}

#[test]
fn same_seed_same_hash_different_seeds_different_hashes() {
    let mut hashes = BTreeSet::new();
    for seed in 0..100 {
        let a = gossip_run(seed, TraceMode::Hash);
        let b = gossip_run(seed, TraceMode::Hash);
        assert!(a.trace().events() > 1000, "the workload is not trivial");
        assert_eq!(a.trace().hash(), b.trace().hash(), "seed {seed}");
        assert_eq!(a.trace().events(), b.trace().events(), "seed {seed}");
        assert_eq!(a.handled(), b.handled(), "seed {seed}");
        hashes.insert(a.trace().hash());
    }
    // Different seeds give different histories (all of them, in practice).
    assert!(hashes.len() >= 99, "only {} distinct hashes", hashes.len());
}

#[test]
fn full_and_hash_traces_agree() {
    for seed in [1, 2, 3] {
        let h = gossip_run(seed, TraceMode::Hash);
        let f = gossip_run(seed, TraceMode::Full);
        assert_eq!(h.trace().hash(), f.trace().hash());
        assert!(h.trace().records().is_empty());
        assert!(f.trace().records().len() as u64 >= f.trace().events());
    }
}

// ----- fault removal ------------------------------------------------------------------

fn removal_plan() -> Vec<TimedFault<String>> {
    vec![
        timed(
            200,
            Some(300),
            partition(&["h0"], &["h1"], PartitionMode::Hold, false),
        ),
        // The late fault: index 1 in the plan, effective from 1500.
        timed(
            1500,
            Some(400),
            Fault::Crash {
                process: "g0".into(),
            },
        ),
        timed(
            600,
            Some(300),
            Fault::Pause {
                process: "g2".into(),
            },
        ),
        timed(
            900,
            Some(500),
            partition(&["h1"], &["h2"], PartitionMode::Drop, false),
        ),
    ]
}

/// Five gossipers on three hosts, plus `solo`, which only draws on its own timers.
fn removal_run(seed: u64, plan: Vec<TimedFault<String>>) -> Sim<Node> {
    let mut sim = new_sim(config(seed, 1, 9, TraceMode::Full), plan);
    let hosts = [sim.add_host("h0"), sim.add_host("h1"), sim.add_host("h2")];
    let ids: Vec<ProcId> = (0..5u32).map(ProcId).collect();
    for i in 0..5 {
        let peers = ids.iter().copied().filter(|p| p.0 != i as u32).collect();
        sim.spawn(
            hosts[i % 3],
            &format!("g{i}"),
            Node::new(Role::Gossip { peers }),
        );
    }
    sim.spawn(hosts[0], "solo", Node::new(Role::Gossip { peers: vec![] }));
    sim.run_until(SimTime::from_secs(3));
    sim
}

/// Records before `until`, rendered with `Debug`; fault indices above `removed` are
/// shifted down so that the two plans name the same fault by the same index.
fn rendered_before(sim: &Sim<Node>, until: u64, removed: Option<usize>) -> Vec<String> {
    records(sim)
        .iter()
        .filter(|r| r.time.as_ms() < until)
        .map(|r| match r.kind {
            RecordKind::Fault {
                index,
                active,
                applied,
            } => {
                let index = match removed {
                    Some(k) if index > k => index - 1,
                    _ => index,
                };
                format!("{:?} Fault({index}, {active}, {applied})", r.time)
            }
            ref other => format!("{:?} {other:?}", r.time),
        })
        .collect()
}

#[test]
fn removing_a_late_fault_leaves_the_earlier_history_and_the_streams_alone() {
    for seed in [0, 1, 2, 42] {
        let full = removal_run(seed, removal_plan());
        let mut plan = removal_plan();
        plan.remove(1);
        let without = removal_run(seed, plan);
        let a = rendered_before(&full, 1500, Some(1));
        let b = rendered_before(&without, 1500, None);
        assert!(a.len() > 1000, "seed {seed}: too short to mean much");
        assert_eq!(a, b, "seed {seed}");
        // The fault did change what came after.
        assert_ne!(full.trace().hash(), without.trace().hash(), "seed {seed}");
        // Process streams: `solo` talks to nobody, so its draws do not depend on the
        // plan at all, before or after the fault.
        let solo = full.proc_by_name("solo").unwrap();
        assert_eq!(full.actor(solo).draws, without.actor(solo).draws);
        assert!(full.actor(solo).draws.len() > 100);
        // And a process's stream is exactly the named stream of (seed, "proc/<name>").
        let mut expected = Streams::new(seed).stream("proc/solo");
        let first = full.actor(solo).draws[0];
        assert_eq!(first, 1 + expected.next_u64() % 20);
    }
}
