//! Integration tests of the kernel, driven by small test actors.
//!
//! One actor type ([`Node`]) plays every part through its [`Role`]; every handler logs
//! what it saw (local time, sender, message) into the actor's own `log`, which the tests
//! read back through `sim.actor(pid)`. Most tests use a fixed latency so that expected
//! times can be written down exactly; the tests about ordering use a latency range.

use rand::Rng;
use reconsim_sim::trace::DropReason;
use reconsim_sim::{
    Actor, Ctx, Fault, FaultPlan, NetConfig, PartitionMode, ProcId, ProcState, Record, RecordKind,
    Sim, SimConfig, SimTime, StepKind, Streams, TimedFault, TimerId, TraceMode,
};
use std::collections::BTreeSet;

// ----- the test actor -----------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Msg {
    Ping(u64),
    Pong(u64),
    /// A numbered message of a stream.
    Seq(u64),
    /// A timer: (incarnation it was set in, number).
    Tick(u32, u64),
    /// A timer that is set once at start and fires late.
    Long(u32),
    /// A labelled timer.
    Label(u64),
    /// A timer: stop that process.
    StopIt(ProcId),
    /// Crash yourself after answering `Pong(0)`, restarting this many ms later.
    CrashMe(u64),
    /// A retransmitting client's transport gave up on its `Seq(n)`.
    GaveUp(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    /// `inc`: how many times this actor has started, counting this one.
    Start {
        now: u64,
        inc: u32,
    },
    Msg {
        now: u64,
        from: ProcId,
        msg: Msg,
    },
    Timer {
        now: u64,
        msg: Msg,
    },
    Fault {
        now: u64,
        fault: String,
        active: bool,
    },
}

#[derive(Clone, Debug)]
enum Role {
    /// Only logs.
    Recorder,
    /// Sends `Ping(0)` at start; answers `Pong(n)` with `Ping(n + 1)` while `n < rounds`.
    Pinger { peer: ProcId, rounds: u64 },
    /// Answers `Ping(n)` with `Pong(n)`.
    Ponger,
    /// Sends `Seq(i)` to every target at `first_ms + i * every_ms` (its own timers),
    /// `count` times.
    Ticker {
        to: Vec<ProcId>,
        first_ms: u64,
        every_ms: u64,
        count: u64,
    },
    /// A periodic timer every `every_ms` (first at `every_ms`), plus one `Long` timer
    /// after `long_ms` if set.
    Clock { every_ms: u64, long_ms: Option<u64> },
    /// Sends `Seq(0..n)` to `to` in one handler at start.
    Burst { to: ProcId, n: u64 },
    /// Random traffic: random timers, random peers, replies; every handler draws.
    Gossip { peers: Vec<ProcId> },
    /// Sets `Label(i)` timers after the given delays at start; cancels the listed labels
    /// right away, and the `cancel_on_fire` pairs (when a fires, cancel b).
    Timers {
        after_ms: Vec<u64>,
        cancel_now: Vec<u64>,
        cancel_on_fire: Vec<(u64, u64)>,
    },
    /// A zero-delay timer that re-arms itself forever.
    Livelock,
    /// Spawns a `Recorder` named "child" on its own host at start and sends it `Seq(0)`;
    /// also a `Clock` child named "ticker" that it stops at `stop_at_ms`, and a
    /// `Recorder` named "remote" on a new host named "new-host".
    Parent { stop_at_ms: u64 },
    /// At `at_ms`, asks `to` to crash itself for `restart_ms`.
    Crasher {
        to: ProcId,
        at_ms: u64,
        restart_ms: u64,
    },
}

#[derive(Debug)]
struct Node {
    role: Role,
    log: Vec<Seen>,
    /// Every random draw, in order (`Gossip` only).
    draws: Vec<u64>,
    starts: u32,
    crashes: u32,
    /// "Memory" that a crash wipes.
    memory: u64,
    timers: Vec<(u64, TimerId)>,
    spawned: Vec<ProcId>,
    /// A client whose connections retransmit under any partition, for this long.
    retransmit_ms: Option<u64>,
}

impl Node {
    fn new(role: Role) -> Self {
        Node {
            role,
            log: Vec::new(),
            draws: Vec::new(),
            starts: 0,
            crashes: 0,
            memory: 0,
            timers: Vec::new(),
            spawned: Vec::new(),
            retransmit_ms: None,
        }
    }

    fn retransmitting(role: Role, ms: u64) -> Self {
        Node {
            retransmit_ms: Some(ms),
            ..Node::new(role)
        }
    }

    fn gossip(&mut self, ctx: &mut Ctx<'_, Self>) {
        let Role::Gossip { peers } = &self.role else {
            return;
        };
        let d = ctx.rng().next_u64();
        self.draws.push(d);
        if !peers.is_empty() {
            let peer = peers[(d % peers.len() as u64) as usize];
            ctx.send(peer, Msg::Ping(d >> 40));
        }
        let delay = ctx.draw_ms(1, 20);
        ctx.set_timer(delay, Msg::Tick(self.starts, d & 0xff));
    }
}

impl Actor for Node {
    type Msg = Msg;
    type Fault = String;

    fn on_start(&mut self, ctx: &mut Ctx<'_, Self>) {
        self.starts += 1;
        self.memory = 1;
        self.log.push(Seen::Start {
            now: ctx.now().as_ms(),
            inc: self.starts,
        });
        match self.role.clone() {
            Role::Recorder | Role::Ponger => {}
            Role::Crasher { at_ms, .. } => {
                ctx.set_timer(at_ms, Msg::Label(0));
            }
            Role::Pinger { peer, .. } => ctx.send(peer, Msg::Ping(0)),
            Role::Ticker { first_ms, .. } => {
                ctx.set_timer(first_ms, Msg::Tick(self.starts, 0));
            }
            Role::Clock { every_ms, long_ms } => {
                ctx.set_timer(every_ms, Msg::Tick(self.starts, 1));
                if let Some(l) = long_ms {
                    ctx.set_timer(l, Msg::Long(self.starts));
                }
            }
            Role::Burst { to, n } => {
                for i in 0..n {
                    ctx.send(to, Msg::Seq(i));
                }
            }
            Role::Gossip { .. } => {
                let d = ctx.draw_ms(1, 20);
                self.draws.push(d);
                ctx.set_timer(d, Msg::Tick(self.starts, 0));
            }
            Role::Timers {
                after_ms,
                cancel_now,
                ..
            } => {
                for (label, after) in after_ms.iter().enumerate() {
                    let id = ctx.set_timer(*after, Msg::Label(label as u64));
                    self.timers.push((label as u64, id));
                }
                for label in cancel_now {
                    let id = self.timer(label);
                    ctx.cancel_timer(id);
                }
            }
            Role::Livelock => {
                ctx.set_timer(0, Msg::Tick(self.starts, 0));
            }
            Role::Parent { stop_at_ms } => {
                let host = ctx.host();
                let child = ctx.spawn(host, "child", Node::new(Role::Recorder));
                ctx.send(child, Msg::Seq(0));
                let ticker = ctx.spawn(
                    host,
                    "ticker",
                    Node::new(Role::Clock {
                        every_ms: 10,
                        long_ms: None,
                    }),
                );
                let remote = ctx.spawn_on("new-host", "remote", Node::new(Role::Recorder));
                self.spawned = vec![child, ticker, remote];
                ctx.set_timer(stop_at_ms, Msg::StopIt(ticker));
            }
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut Ctx<'_, Self>) {
        self.log.push(Seen::Msg {
            now: ctx.now().as_ms(),
            from,
            msg: msg.clone(),
        });
        match (&self.role, msg) {
            (Role::Pinger { rounds, .. }, Msg::Pong(n)) if n < *rounds => {
                ctx.send(from, Msg::Ping(n + 1));
            }
            (Role::Ponger, Msg::Ping(n)) => ctx.send(from, Msg::Pong(n)),
            (_, Msg::CrashMe(restart_ms)) => {
                ctx.send(from, Msg::Pong(0));
                ctx.crash_self(restart_ms);
                // Asked for after the crash: never sent.
                ctx.send(from, Msg::Pong(1));
            }
            (Role::Gossip { .. }, Msg::Ping(n)) => {
                let d = ctx.draw_ms(0, 3);
                self.draws.push(d);
                if d == 0 {
                    ctx.send(from, Msg::Pong(n));
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, _timer: TimerId, msg: Msg, ctx: &mut Ctx<'_, Self>) {
        self.log.push(Seen::Timer {
            now: ctx.now().as_ms(),
            msg: msg.clone(),
        });
        if let (Role::Crasher { to, restart_ms, .. }, Msg::Label(0)) = (&self.role, &msg) {
            ctx.send(*to, Msg::CrashMe(*restart_ms));
        }
        match (self.role.clone(), msg) {
            (
                Role::Ticker {
                    to,
                    every_ms,
                    count,
                    ..
                },
                Msg::Tick(inc, i),
            ) => {
                for t in &to {
                    ctx.send(*t, Msg::Seq(i));
                }
                if i + 1 < count {
                    ctx.set_timer(every_ms, Msg::Tick(inc, i + 1));
                }
            }
            (Role::Clock { every_ms, .. }, Msg::Tick(inc, i)) => {
                ctx.set_timer(every_ms, Msg::Tick(inc, i + 1));
            }
            (Role::Gossip { .. }, Msg::Tick(..)) => self.gossip(ctx),
            (Role::Timers { cancel_on_fire, .. }, Msg::Label(l)) => {
                for (a, b) in cancel_on_fire {
                    if a == l {
                        let id = self.timer(b);
                        ctx.cancel_timer(id);
                    }
                }
            }
            (Role::Livelock, Msg::Tick(inc, i)) => {
                ctx.set_timer(0, Msg::Tick(inc, i + 1));
            }
            (Role::Parent { .. }, Msg::StopIt(p)) => ctx.stop(p),
            _ => {}
        }
    }

    fn on_crash(&mut self) {
        self.crashes += 1;
        self.memory = 0;
    }

    fn retransmits_ms(&self, _msg: &Msg, _sent: bool) -> Option<u64> {
        self.retransmit_ms
    }

    fn gave_up(msg: &Msg) -> Option<Msg> {
        match msg {
            Msg::Seq(n) => Some(Msg::GaveUp(*n)),
            _ => None,
        }
    }

    fn on_fault(&mut self, fault: &String, active: bool, ctx: &mut Ctx<'_, Self>) {
        self.log.push(Seen::Fault {
            now: ctx.now().as_ms(),
            fault: fault.clone(),
            active,
        });
    }
}

impl Node {
    fn timer(&self, label: u64) -> TimerId {
        self.timers
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, id)| *id)
            .expect("label set")
    }
}

// ----- helpers ------------------------------------------------------------------------

fn config(seed: u64, lo: u64, hi: u64, trace: TraceMode) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.net = NetConfig {
        latency_ms_min: lo,
        latency_ms_max: hi,
        ..Default::default()
    };
    c.trace = trace;
    c
}

fn new_sim(config: SimConfig, faults: Vec<TimedFault<String>>) -> Sim<Node> {
    Sim::new(config, FaultPlan::new(faults))
}

fn timed(at_ms: u64, duration_ms: Option<u64>, fault: Fault<String>) -> TimedFault<String> {
    TimedFault {
        at_ms,
        duration_ms,
        fault,
        on: None,
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn partition(a: &[&str], b: &[&str], mode: PartitionMode, one_way: bool) -> Fault<String> {
    Fault::Partition {
        hosts_a: names(a),
        hosts_b: names(b),
        mode,
        one_way,
    }
}

fn log(sim: &Sim<Node>, p: ProcId) -> &[Seen] {
    &sim.actor(p).log
}

/// The `Seq` numbers `p` received from `from`, with their arrival times.
fn seqs_from(sim: &Sim<Node>, p: ProcId, from: ProcId) -> Vec<(u64, u64)> {
    log(sim, p)
        .iter()
        .filter_map(|s| match s {
            Seen::Msg {
                now,
                from: f,
                msg: Msg::Seq(i),
            } if *f == from => Some((*now, *i)),
            _ => None,
        })
        .collect()
}

fn records(sim: &Sim<Node>) -> &[Record<Msg>] {
    sim.trace().records()
}

/// Times of `Dropped` records from `from` to `to` for `reason`.
fn drops(sim: &Sim<Node>, from: ProcId, to: ProcId, reason: DropReason) -> Vec<u64> {
    records(sim)
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Dropped {
                from: f,
                to: t,
                reason: why,
            } if *f == from && *t == to && *why == reason => Some(r.time.as_ms()),
            _ => None,
        })
        .collect()
}

fn fault_records(sim: &Sim<Node>) -> Vec<(u64, usize, bool, bool)> {
    records(sim)
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Fault {
                index,
                active,
                applied,
            } => Some((r.time.as_ms(), index, active, applied)),
            _ => None,
        })
        .collect()
}

fn is_sorted_by_seq(v: &[(u64, u64)]) -> bool {
    v.windows(2).all(|w| w[0].1 < w[1].1)
}

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

// ----- ordering -----------------------------------------------------------------------

#[test]
fn same_instant_events_are_ordered_by_the_seeded_tiebreak() {
    let run = |seed: u64| -> (Vec<u64>, Vec<ProcId>) {
        let mut sim = new_sim(config(seed, 1, 1, TraceMode::Full), vec![]);
        let h = sim.add_host("h");
        // One process with eight timers due at the same instant...
        let p = sim.spawn(
            h,
            "timers",
            Node::new(Role::Timers {
                after_ms: vec![10; 8],
                cancel_now: vec![],
                cancel_on_fire: vec![],
            }),
        );
        // ...and eight processes with a timer each at that instant.
        for i in 0..8 {
            sim.spawn(
                h,
                &format!("c{i}"),
                Node::new(Role::Clock {
                    every_ms: 10,
                    long_ms: None,
                }),
            );
        }
        sim.run_until(SimTime::from_ms(10));
        let labels = log(&sim, p)
            .iter()
            .filter_map(|s| match s {
                Seen::Timer {
                    now: 10,
                    msg: Msg::Label(l),
                } => Some(*l),
                _ => None,
            })
            .collect::<Vec<_>>();
        let procs = records(&sim)
            .iter()
            .filter_map(|r| match r.kind {
                RecordKind::Timer { proc, .. } if r.time.as_ms() == 10 && proc != p => Some(proc),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert_eq!(labels.len(), 8);
        assert_eq!(procs.len(), 8);
        (labels, procs)
    };
    let mut label_orders = BTreeSet::new();
    let mut proc_orders = BTreeSet::new();
    for seed in 0..20 {
        let first = run(seed);
        assert_eq!(first, run(seed), "seed {seed} is not reproducible");
        label_orders.insert(first.0);
        proc_orders.insert(first.1);
    }
    // 8! orders: twenty seeds give (nearly) twenty different ones, never insertion order
    // alone.
    assert!(label_orders.len() >= 15, "{label_orders:?}");
    assert!(proc_orders.len() >= 15, "{proc_orders:?}");
}

#[test]
fn a_fifo_link_never_reorders_a_burst() {
    for seed in 0..5 {
        let mut sim = new_sim(config(seed, 1, 100, TraceMode::Hash), vec![]);
        let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
        let b = sim.spawn(hb, "b", Node::new(Role::Recorder));
        let a = sim.spawn(ha, "a", Node::new(Role::Burst { to: b, n: 1000 }));
        sim.run_until(SimTime::from_secs(10));
        let got = seqs_from(&sim, b, a);
        let order: Vec<u64> = got.iter().map(|(_, i)| *i).collect();
        assert_eq!(order, (0..1000).collect::<Vec<_>>(), "seed {seed}");
        // The latencies did differ (the burst was spread over time), so only the FIFO
        // rule kept the order.
        let times: BTreeSet<u64> = got.iter().map(|(t, _)| *t).collect();
        assert!(times.len() > 1, "seed {seed}: {times:?}");
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

#[test]
fn a_fifo_link_keeps_order_for_a_stream_over_time() {
    // One message every millisecond with 1..50 ms latency: later messages would often
    // overtake earlier ones without the FIFO rule.
    let mut sim = new_sim(config(7, 1, 50, TraceMode::Hash), vec![]);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let b = sim.spawn(hb, "b", Node::new(Role::Recorder));
    let a = sim.spawn(
        ha,
        "a",
        Node::new(Role::Ticker {
            to: vec![b],
            first_ms: 1,
            every_ms: 1,
            count: 1000,
        }),
    );
    sim.run_until(SimTime::from_secs(10));
    let order: Vec<u64> = seqs_from(&sim, b, a).iter().map(|(_, i)| *i).collect();
    assert_eq!(order, (0..1000).collect::<Vec<_>>());
}

// ----- partitions ---------------------------------------------------------------------

/// `s` on host a1 ticks `Seq(i)` every 10 ms (at 5, 15, ..., 595) to `r_same` on a2 and
/// to `r_other` on b; latency is a fixed 3 ms, so `Seq(i)` arrives at `8 + 10 i`.
fn partition_world(fault: Fault<String>, at: u64, dur: u64) -> (Sim<Node>, [ProcId; 3]) {
    let mut sim = new_sim(
        config(3, 3, 3, TraceMode::Full),
        vec![timed(at, Some(dur), fault)],
    );
    let (a1, a2, b) = (sim.add_host("a1"), sim.add_host("a2"), sim.add_host("b"));
    let r_same = sim.spawn(a2, "r_same", Node::new(Role::Recorder));
    let r_other = sim.spawn(b, "r_other", Node::new(Role::Recorder));
    let s = sim.spawn(
        a1,
        "s",
        Node::new(Role::Ticker {
            to: vec![r_same, r_other],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    (sim, [s, r_same, r_other])
}

#[test]
fn drop_partition_loses_crossing_messages_only_and_heals() {
    let fault = partition(&["a1", "a2"], &["b"], PartitionMode::Drop, false);
    let (sim, [s, r_same, r_other]) = partition_world(fault, 100, 200);
    // Within side a: everything flows.
    let same = seqs_from(&sim, r_same, s);
    assert_eq!(same, (0..60).map(|i| (8 + 10 * i, i)).collect::<Vec<_>>());
    // Across: messages arriving in [100, 300) are lost and recorded as such...
    let other = seqs_from(&sim, r_other, s);
    let expected: Vec<(u64, u64)> = (0..60)
        .map(|i| (8 + 10 * i, i))
        .filter(|(t, _)| !(100..300).contains(t))
        .collect();
    assert_eq!(other, expected);
    let dropped = drops(&sim, s, r_other, DropReason::Partition);
    assert_eq!(dropped, (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>());
    // ...and after the heal delivery resumes (the last message arrived at 598).
    assert_eq!(other.last(), Some(&(598, 59)));
    assert_eq!(
        fault_records(&sim),
        vec![(100, 0, true, true), (300, 0, false, true)]
    );
}

#[test]
fn hold_partition_delivers_held_messages_in_order_after_heal() {
    let fault = partition(&["a1", "a2"], &["b"], PartitionMode::Hold, false);
    let (sim, [s, r_same, r_other]) = partition_world(fault, 100, 200);
    assert_eq!(seqs_from(&sim, r_same, s).len(), 60);
    let other = seqs_from(&sim, r_other, s);
    // Nothing lost, nothing reordered, nothing handled while the partition stands.
    assert_eq!(
        other.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
        (0..60).collect::<Vec<_>>()
    );
    assert!(
        other.iter().all(|(t, _)| !(100..300).contains(t)),
        "{other:?}"
    );
    // The twenty held ones come out, in order, at the instant the partition heals (they
    // already crossed the network).
    let released: Vec<(u64, u64)> = other
        .iter()
        .copied()
        .filter(|(_, i)| (10..30).contains(i))
        .collect();
    assert_eq!(released, (10..30).map(|i| (300, i)).collect::<Vec<_>>());
    let held = records(&sim)
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::Held { from, to } if from == s && to == r_other))
        .map(|r| r.time.as_ms())
        .collect::<Vec<_>>();
    assert_eq!(held, (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>());
    assert!(drops(&sim, s, r_other, DropReason::Partition).is_empty());
}

/// A ticker on `a` sending every 10 s from 5 s to a recorder on `b`, a holding partition
/// between them over [1 s, 201 s), and maybe a crash of the sender at `crash_at_ms`.
fn long_hold_world(crash_at_ms: Option<u64>) -> (Sim<Node>, ProcId, ProcId) {
    cut_world(PartitionMode::Hold, crash_at_ms, None)
}

/// [`long_hold_world`] under either mode, with a sender whose connections retransmit
/// for `retransmit_ms` if set.
fn cut_world(
    mode: PartitionMode,
    crash_at_ms: Option<u64>,
    retransmit_ms: Option<u64>,
) -> (Sim<Node>, ProcId, ProcId) {
    let mut faults = vec![timed(
        1_000,
        Some(200_000),
        partition(&["a"], &["b"], mode, false),
    )];
    if let Some(at) = crash_at_ms {
        faults.push(timed(
            at,
            None,
            Fault::Crash {
                process: "s".into(),
            },
        ));
    }
    let mut sim = new_sim(config(5, 3, 3, TraceMode::Full), faults);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let r = sim.spawn(hb, "r", Node::new(Role::Recorder));
    let ticker = Role::Ticker {
        to: vec![r],
        first_ms: 5_000,
        every_ms: 10_000,
        count: 30,
    };
    let node = match retransmit_ms {
        Some(ms) => Node::retransmitting(ticker, ms),
        None => Node::new(ticker),
    };
    let s = sim.spawn(ha, "s", node);
    sim.run_until(SimTime::from_secs(400));
    (sim, s, r)
}

/// The numbers of the `Seq` messages delivered at `at_ms` (a heal's release).
fn released_at(got: &[(u64, u64)], at_ms: u64) -> Vec<u64> {
    got.iter()
        .filter(|(t, _)| *t == at_ms)
        .map(|(_, i)| *i)
        .collect()
}

#[test]
fn a_hold_delivers_only_what_tcp_still_retransmits() {
    // Held at 5.003 s, 15.003 s, ..., 195.003 s; the heal at 201 s delivers those held
    // at most 145 s before (from 65 s on) and drops the older ones as expired.
    let (sim, s, r) = long_hold_world(None);
    let got = seqs_from(&sim, r, s);
    let released = released_at(&got, 201_000);
    assert_eq!(released, (6..20).collect::<Vec<_>>(), "{got:?}");
    let expired = drops(&sim, s, r, DropReason::Expired);
    assert_eq!(expired, vec![201_000; 6], "held at 5..55 s");
    assert!(
        got.iter().all(|(_, i)| *i >= 6),
        "nothing older arrives: {got:?}"
    );
}

#[test]
fn a_crashed_senders_held_messages_die_with_its_orphaned_sockets() {
    // The sender crashes at 90 s: its sockets are orphaned and retransmit ~102 s more,
    // to 192.2 s, before the 201 s heal: nothing it sent into the partition arrives.
    let (sim, s, r) = long_hold_world(Some(90_000));
    let got = seqs_from(&sim, r, s);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(
        drops(&sim, s, r, DropReason::Expired).len(),
        9,
        "held at 5..85 s"
    );
}

#[test]
fn a_retransmitting_client_keeps_its_data_across_either_partition_until_it_gives_up() {
    for mode in [PartitionMode::Drop, PartitionMode::Hold] {
        // Held at 5.003 s, 15.003 s, ..., 195.003 s. The client gives up 100 s after
        // each: on those held at 5..95 s (hearing of each at once, from itself); the
        // 201 s heal delivers the rest, in order, and nothing is lost to the partition.
        let (sim, s, r) = cut_world(mode, None, Some(100_000));
        let got = seqs_from(&sim, r, s);
        let released = released_at(&got, 201_000);
        assert_eq!(released, (10..20).collect::<Vec<_>>(), "{mode:?}: {got:?}");
        assert!(got.iter().all(|(_, i)| *i >= 10), "{mode:?}: {got:?}");
        assert!(
            drops(&sim, s, r, DropReason::Partition).is_empty(),
            "{mode:?}"
        );
        let gave_up: Vec<(u64, u64)> = log(&sim, s)
            .iter()
            .filter_map(|seen| match seen {
                Seen::Msg {
                    now,
                    from,
                    msg: Msg::GaveUp(n),
                } if *from == s => Some((*now, *n)),
                _ => None,
            })
            .collect();
        let want: Vec<(u64, u64)> = (0..10).map(|i| (105_003 + 10_000 * i, i)).collect();
        assert_eq!(gave_up, want, "{mode:?}");
        assert_eq!(drops(&sim, s, r, DropReason::Expired).len(), 10, "{mode:?}");
    }
}

#[test]
fn hold_partition_keeps_link_order_with_messages_in_flight_at_heal() {
    // A message every millisecond with 1..10 ms latency: when the partition heals, some
    // messages are still in flight; the held ones, sent earlier, must still come first.
    for seed in 0..20 {
        let mut sim = new_sim(
            config(seed, 1, 10, TraceMode::Hash),
            vec![timed(
                100,
                Some(200),
                partition(&["a"], &["b"], PartitionMode::Hold, false),
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
        assert_eq!(
            got.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
            (0..500).collect::<Vec<_>>(),
            "seed {seed}"
        );
    }
}

#[test]
fn one_way_partition_cuts_one_direction_only() {
    let mut sim = new_sim(
        config(5, 3, 3, TraceMode::Full),
        vec![timed(
            100,
            Some(200),
            partition(&["a"], &["b"], PartitionMode::Drop, true),
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let ra = sim.spawn(ha, "ra", Node::new(Role::Recorder));
    let rb = sim.spawn(hb, "rb", Node::new(Role::Recorder));
    let ticker = |to| {
        Node::new(Role::Ticker {
            to: vec![to],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        })
    };
    let sa = sim.spawn(ha, "sa", ticker(rb));
    let sb = sim.spawn(hb, "sb", ticker(ra));
    sim.run_until(SimTime::from_secs(2));
    // b -> a: untouched.
    assert_eq!(seqs_from(&sim, ra, sb).len(), 60);
    assert!(drops(&sim, sb, ra, DropReason::Partition).is_empty());
    // a -> b: cut for [100, 300).
    let a_to_b = seqs_from(&sim, rb, sa);
    assert_eq!(a_to_b.len(), 40);
    assert!(a_to_b.iter().all(|(t, _)| !(100..300).contains(t)));
    assert_eq!(drops(&sim, sa, rb, DropReason::Partition).len(), 20);
}

// ----- slow links ---------------------------------------------------------------------

#[test]
fn slow_link_adds_its_extra_latency_while_active() {
    let mut sim = new_sim(
        config(9, 2, 2, TraceMode::Hash),
        vec![timed(
            100,
            Some(200),
            Fault::SlowLink {
                hosts_a: names(&["a"]),
                hosts_b: names(&["b"]),
                extra_latency_ms: 100,
                one_way: false,
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let near = sim.spawn(ha, "near", Node::new(Role::Recorder));
    let far = sim.spawn(hb, "far", Node::new(Role::Recorder));
    // Sends Seq(i) at 5 + 10 i.
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![near, far],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    // Same host: never slowed.
    for (t, i) in seqs_from(&sim, near, s) {
        assert_eq!(t, 5 + 10 * i + 2);
    }
    let far_got = seqs_from(&sim, far, s);
    assert_eq!(far_got.len(), 60);
    for (t, i) in far_got {
        let sent = 5 + 10 * i;
        let expected = if (100..300).contains(&sent) {
            sent + 102
        } else if !(100..=400).contains(&sent) {
            sent + 2
        } else {
            // Sent after the heal but queued behind slow messages on the FIFO link.
            (sent + 2).max(295 + 102)
        };
        assert_eq!(t, expected, "Seq({i}) sent at {sent}");
    }
}

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

// ----- crash --------------------------------------------------------------------------

#[test]
fn a_process_that_crashes_itself_sends_first_then_restarts_cold_later() {
    // s ticks Seq(i) to c at 5 + 10 i; at 50 ms a third process asks c to crash itself
    // for 100 ms. What c sent in that handler goes out; what reaches it while down is
    // dropped; it restarts at the crash + 100 ms as a new incarnation.
    let mut sim = new_sim(config(7, 1, 1, TraceMode::Full), vec![]);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(hb, "c", Node::new(Role::Recorder));
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 30,
        }),
    );
    let k = sim.spawn(
        ha,
        "k",
        Node::new(Role::Crasher {
            to: c,
            at_ms: 49,
            restart_ms: 100,
        }),
    );
    sim.run_until(SimTime::from_secs(1));
    let a = sim.actor(c);
    assert_eq!((a.crashes, a.starts), (1, 2));
    let crashed_at = records(&sim)
        .iter()
        .find_map(|r| match r.kind {
            RecordKind::Crashed {
                proc,
                restart_after_ms: 100,
            } if proc == c => Some(r.time.as_ms()),
            _ => None,
        })
        .expect("a Crashed record");
    let restarted = a
        .log
        .iter()
        .find_map(|e| match e {
            Seen::Start { now, inc: 2 } => Some(*now),
            _ => None,
        })
        .expect("a second start");
    assert_eq!(restarted, crashed_at + 100);
    // The Pong sent in the crashing handler reached k.
    assert!(sim.actor(k).log.iter().any(|e| matches!(
        e,
        Seen::Msg {
            msg: Msg::Pong(0),
            ..
        }
    )));
    // Seqs that arrived while c was down were dropped, the others delivered.
    let got = seqs_from(&sim, c, s).len();
    let dropped = drops(&sim, s, c, DropReason::ReceiverDown).len();
    assert_eq!(got + dropped, 30);
    assert_eq!(dropped, 10, "Seq(5)..Seq(14) arrive in [51, 151)");
}

#[test]
fn crash_loses_memory_messages_and_timers_and_restarts_cold() {
    // c ticks every 10 ms and set a Long timer for 500 ms at start; s sends it Seq(i) at
    // 5 + 10 i (arriving 3 ms later). c is down over [100, 300).
    let mut sim = new_sim(
        config(13, 3, 3, TraceMode::Full),
        vec![timed(
            100,
            Some(200),
            Fault::Crash {
                process: "c".into(),
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(
        hb,
        "c",
        Node::new(Role::Clock {
            every_ms: 10,
            long_ms: Some(500),
        }),
    );
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 60,
        }),
    );
    sim.run_until(SimTime::from_ms(200));
    assert_eq!(sim.proc_state(c), ProcState::Crashed);
    assert_eq!(sim.actor(c).crashes, 1);
    assert_eq!(sim.actor(c).memory, 0, "on_crash wiped the memory");
    sim.run_until(SimTime::from_secs(2));
    assert_eq!(sim.proc_state(c), ProcState::Running);
    let a = sim.actor(c);
    assert_eq!(a.crashes, 1);
    assert_eq!(a.starts, 2);
    assert_eq!(a.memory, 1);
    let l = &a.log;
    // Started twice: at 0 and, as a new incarnation, at the restart.
    let starts: Vec<&Seen> = l
        .iter()
        .filter(|s| matches!(s, Seen::Start { .. }))
        .collect();
    assert_eq!(
        starts,
        vec![
            &Seen::Start { now: 0, inc: 1 },
            &Seen::Start { now: 300, inc: 2 }
        ]
    );
    // Messages to the dead process are dropped, and recorded so.
    assert_eq!(
        drops(&sim, s, c, DropReason::ReceiverDown),
        (10..30).map(|i| 8 + 10 * i).collect::<Vec<_>>()
    );
    let got: Vec<u64> = seqs_from(&sim, c, s).iter().map(|(_, i)| *i).collect();
    assert_eq!(got, (0..10).chain(30..60).collect::<Vec<_>>());
    // The old incarnation's timers never fire: neither its ticks nor its Long timer (due
    // at 500, after the restart). The new incarnation's Long timer fires at 300 + 500.
    let timers: Vec<(u64, &Msg)> = l
        .iter()
        .filter_map(|s| match s {
            Seen::Timer { now, msg } => Some((*now, msg)),
            _ => None,
        })
        .collect();
    assert!(timers.iter().all(|(t, m)| match m {
        Msg::Tick(1, _) | Msg::Long(1) => *t < 100,
        Msg::Tick(2, _) | Msg::Long(2) => *t >= 300,
        _ => false,
    }));
    assert!(!timers.iter().any(|(_, m)| **m == Msg::Long(1)));
    assert!(timers.contains(&(800, &Msg::Long(2))));
    assert!(timers.contains(&(310, &Msg::Tick(2, 1))));
}

/// c (host b) pings srv (host a) once at each start; srv answers at once; latency 50.
fn reply_world(crash_at: u64, crash_for: u64, slow: bool) -> (Sim<Node>, ProcId, ProcId) {
    let mut plan = vec![timed(
        crash_at,
        Some(crash_for),
        Fault::Crash {
            process: "c".into(),
        },
    )];
    if slow {
        plan.push(timed(
            40,
            Some(30),
            Fault::SlowLink {
                hosts_a: names(&["a"]),
                hosts_b: names(&["b"]),
                extra_latency_ms: 200,
                one_way: true,
            },
        ));
    }
    let mut sim = new_sim(config(17, 50, 50, TraceMode::Full), plan);
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let srv = sim.spawn(ha, "srv", Node::new(Role::Ponger));
    // A Pinger with 0 rounds pings once per start.
    let c = sim.spawn(
        hb,
        "c",
        Node::new(Role::Pinger {
            peer: srv,
            rounds: 0,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    (sim, srv, c)
}

fn msgs(sim: &Sim<Node>, p: ProcId) -> Vec<(u64, ProcId, Msg)> {
    log(sim, p)
        .iter()
        .filter_map(|s| match s {
            Seen::Msg { now, from, msg } => Some((*now, *from, msg.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn replies_to_the_old_incarnation_are_dropped() {
    // Answered before the crash, delayed past the restart by a slow link: c pings at 0,
    // srv answers at 50 (+200 ms slow: due at 300); c is down over [60, 160) and pings
    // again at 160 (answered at 210, due at 260).
    let (sim, srv, c) = reply_world(60, 100, true);
    assert_eq!(
        msgs(&sim, srv),
        vec![(50, c, Msg::Ping(0)), (210, c, Msg::Ping(0))]
    );
    assert_eq!(msgs(&sim, c), vec![(260, srv, Msg::Pong(0))]);
    assert_eq!(drops(&sim, srv, c, DropReason::ReceiverDown), vec![300]);

    // Answered while c is down, due after its restart: c pings at 0, is down over
    // [30, 90), srv answers at 50 (due at 100, after the restart at 90). The answer was
    // meant for the dead incarnation. The new one pings at 90 and gets its answer at 190.
    let (sim, srv, c) = reply_world(30, 60, false);
    assert_eq!(
        msgs(&sim, srv),
        vec![(50, c, Msg::Ping(0)), (140, c, Msg::Ping(0))]
    );
    assert_eq!(msgs(&sim, c), vec![(190, srv, Msg::Pong(0))]);
    assert_eq!(drops(&sim, srv, c, DropReason::ReceiverDown), vec![100]);
}

#[test]
fn messages_sent_to_a_crashed_process_are_dropped_even_if_they_arrive_after_restart() {
    // s sends to c every 10 ms (at 5, 15, ...) with 50 ms latency; c is down over [100,
    // 130). Messages sent while c is down arrive after it restarted, but were addressed
    // to a dead process (a connection that cannot exist): dropped.
    let mut sim = new_sim(
        config(19, 50, 50, TraceMode::Full),
        vec![timed(
            100,
            Some(30),
            Fault::Crash {
                process: "c".into(),
            },
        )],
    );
    let (ha, hb) = (sim.add_host("a"), sim.add_host("b"));
    let c = sim.spawn(hb, "c", Node::new(Role::Recorder));
    let s = sim.spawn(
        ha,
        "s",
        Node::new(Role::Ticker {
            to: vec![c],
            first_ms: 5,
            every_ms: 10,
            count: 30,
        }),
    );
    sim.run_until(SimTime::from_secs(2));
    let got: Vec<(u64, u64)> = seqs_from(&sim, c, s);
    // Seq(i) is sent at 5 + 10 i. Sent before the crash (i <= 9) or while down
    // (i = 10, 11, 12: at 105, 115, 125): all dropped. Sent after the restart: delivered.
    assert_eq!(
        got,
        (0..5)
            .chain(13..30)
            .map(|i| (55 + 10 * i, i))
            .collect::<Vec<_>>()
    );
    // Those sent before the crash but arriving while down (i = 5..=9) and those sent
    // while down (arriving 155..175): 8 drops. i < 5 arrived before the crash.
    let dropped = drops(&sim, s, c, DropReason::ReceiverDown);
    assert_eq!(dropped, (5..13).map(|i| 55 + 10 * i).collect::<Vec<_>>());
    assert_eq!(
        log(&sim, c)
            .iter()
            .filter(|s| matches!(s, Seen::Msg { now, .. } if *now < 100))
            .count(),
        5
    );
}

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

// ----- spawn and stop -----------------------------------------------------------------

#[test]
fn handlers_can_spawn_and_stop_processes() {
    let mut sim = new_sim(config(31, 1, 1, TraceMode::Full), vec![]);
    let h = sim.add_host("h");
    let parent = sim.spawn(h, "parent", Node::new(Role::Parent { stop_at_ms: 55 }));
    // The parent's children will be p2 ("child") and p3 ("ticker"); s writes to p3
    // every 10 ms from 3 on (arriving at 4, 14, ...).
    let s = sim.spawn(
        h,
        "s",
        Node::new(Role::Ticker {
            to: vec![ProcId(3)],
            first_ms: 3,
            every_ms: 10,
            count: 20,
        }),
    );
    sim.run_until(SimTime::from_secs(1));
    assert_eq!(sim.proc_count(), 5);
    let [child, ticker, remote] = sim.actor(parent).spawned[..] else {
        panic!("three spawned")
    };
    assert_eq!((child, ticker, remote), (ProcId(2), ProcId(3), ProcId(4)));
    // spawn_on added the named host.
    let new_host = sim.host_by_name("new-host").expect("host added");
    assert_ne!(new_host, h);
    assert_eq!(sim.proc_host(remote), new_host);
    assert_eq!(log(&sim, remote), &[Seen::Start { now: 0, inc: 1 }]);
    assert_eq!(sim.proc_by_name("child"), Some(child));
    assert_eq!(sim.proc_by_name("ticker"), Some(ticker));
    assert_eq!(sim.proc_host(child), h);
    // The child started (its own event), then got the parent's message.
    assert_eq!(
        log(&sim, child),
        &[
            Seen::Start { now: 0, inc: 1 },
            Seen::Msg {
                now: 1,
                from: parent,
                msg: Msg::Seq(0)
            }
        ]
    );
    // The ticker ran until the parent stopped it at 55: ticks at 10..50, then nothing;
    // messages to it after the stop are dropped.
    assert_eq!(sim.proc_state(ticker), ProcState::Stopped);
    let ticks: Vec<u64> = log(&sim, ticker)
        .iter()
        .filter_map(|s| match s {
            Seen::Timer { now, .. } => Some(*now),
            _ => None,
        })
        .collect();
    assert_eq!(ticks, vec![10, 20, 30, 40, 50]);
    assert_eq!(
        seqs_from(&sim, ticker, s),
        (0..6).map(|i| (4 + 10 * i, i)).collect::<Vec<_>>()
    );
    assert_eq!(
        drops(&sim, s, ticker, DropReason::ReceiverDown),
        (6..20).map(|i| 4 + 10 * i).collect::<Vec<_>>()
    );
    assert_eq!(sim.proc_state(parent), ProcState::Running);
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
