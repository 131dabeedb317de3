//! What the kernel's test files share: one test actor ([`Node`]) that plays every part
//! through its [`Role`], and the helpers that build a run and read its logs and trace.
//!
//! Every handler logs what it saw (local time, sender, message) into the actor's own
//! `log`, which the tests read back through `sim.actor(pid)`. Most tests use a fixed
//! latency so that expected times can be written down exactly; the tests about ordering
//! use a latency range.

#![allow(dead_code)] // each test file uses part of it

use rand::Rng;
use reconsim_sim::trace::DropReason;
use reconsim_sim::{
    Actor, Ctx, Fault, FaultPlan, NetConfig, PartitionMode, ProcId, Record, RecordKind, Sim,
    SimConfig, TimedFault, TimerId, TraceMode,
};

// ----- the test actor -----------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Msg {
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
pub enum Seen {
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
pub enum Role {
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
pub struct Node {
    pub role: Role,
    pub log: Vec<Seen>,
    /// Every random draw, in order (`Gossip` only).
    pub draws: Vec<u64>,
    pub starts: u32,
    pub crashes: u32,
    /// "Memory" that a crash wipes.
    pub memory: u64,
    pub timers: Vec<(u64, TimerId)>,
    pub spawned: Vec<ProcId>,
    /// A client whose connections retransmit under any partition, for this long.
    pub retransmit_ms: Option<u64>,
}

impl Node {
    pub fn new(role: Role) -> Self {
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

    pub fn retransmitting(role: Role, ms: u64) -> Self {
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

pub fn config(seed: u64, lo: u64, hi: u64, trace: TraceMode) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.net = NetConfig {
        latency_ms_min: lo,
        latency_ms_max: hi,
        ..Default::default()
    };
    c.trace = trace;
    c
}

pub fn new_sim(config: SimConfig, faults: Vec<TimedFault<String>>) -> Sim<Node> {
    Sim::new(config, FaultPlan::new(faults))
}

pub fn timed(at_ms: u64, duration_ms: Option<u64>, fault: Fault<String>) -> TimedFault<String> {
    TimedFault {
        at_ms,
        duration_ms,
        fault,
        on: None,
    }
}

pub fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub fn partition(a: &[&str], b: &[&str], mode: PartitionMode, one_way: bool) -> Fault<String> {
    Fault::Partition {
        hosts_a: names(a),
        hosts_b: names(b),
        mode,
        one_way,
    }
}

pub fn log(sim: &Sim<Node>, p: ProcId) -> &[Seen] {
    &sim.actor(p).log
}

/// The `Seq` numbers `p` received from `from`, with their arrival times.
pub fn seqs_from(sim: &Sim<Node>, p: ProcId, from: ProcId) -> Vec<(u64, u64)> {
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

pub fn records(sim: &Sim<Node>) -> &[Record<Msg>] {
    sim.trace().records()
}

/// Times of `Dropped` records from `from` to `to` for `reason`.
pub fn drops(sim: &Sim<Node>, from: ProcId, to: ProcId, reason: DropReason) -> Vec<u64> {
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

pub fn fault_records(sim: &Sim<Node>) -> Vec<(u64, usize, bool, bool)> {
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

pub fn is_sorted_by_seq(v: &[(u64, u64)]) -> bool {
    v.windows(2).all(|w| w[0].1 < w[1].1)
}
