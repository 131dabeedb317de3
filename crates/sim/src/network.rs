//! The simulated network between hosts.
//!
//! Every message gets a seeded latency in `[latency_ms_min, latency_ms_max]` plus the extra
//! latency of any slow link it crosses. Links (sender process -> receiver process) are FIFO,
//! as a TCP connection or an HTTP/2 stream is: a message never overtakes an earlier one on
//! the same link. A sender that keeps several connections to one receiver (a kube-rs
//! client over HTTP/1.1: a connection per request in flight) names each a lane
//! ([`crate::Actor::lane`]); each lane is its own FIFO link, so messages on two lanes may
//! arrive in either order. Messages between processes on one host are never cut. Partitions are
//! checked when a message arrives, so one sent just before a partition starts is caught by
//! it. A `Drop` partition loses the message with its connection, never silently: the
//! connection's client end hears of it at once (a reset; docs/semantics.md 4.12). A
//! `Hold` partition parks messages and releases them, in order, when it heals, but
//! only within TCP's real bounds (docs/semantics.md 4.6): the sender's kernel
//! retransmits unacknowledged data while the socket is open, and a client-go client
//! closes a dead connection about 45 s in (its HTTP/2 health check), after which the
//! orphaned socket retransmits for `tcp_orphan_retries` (about 102 s); a sender that
//! exits orphans its sockets at once. So a held message is delivered at the heal only if
//! it was held at most `hold_open_ms` (145 s) ago, and at most `hold_orphan_ms` (102 s)
//! after its sender went down; later, it is dropped.

use crate::fault::PartitionMode;
use crate::id::{HostId, ProcId};
use crate::rng::UniformSpan;
use crate::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Latency bounds of the network, and how long a held message can still arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    pub latency_ms_min: u64,
    pub latency_ms_max: u64,
    /// A held message older than this at the heal is lost: the client closed the dead
    /// connection after its health check (30 s + 15 s) and the orphaned socket gave up
    /// retransmitting (`tcp_orphan_retries`, ~102 s).
    #[serde(default = "hold_open_ms")]
    pub hold_open_ms: u64,
    /// A held message is lost this long after its sender crashed or stopped (its
    /// sockets were orphaned at the exit).
    #[serde(default = "hold_orphan_ms")]
    pub hold_orphan_ms: u64,
}

/// 45 s of HTTP/2 health check, then tcp_orphan_retries' ~100 s.
pub const HOLD_OPEN_MS: u64 = 145_000;
/// tcp_orphan_retries (8 when 0, the default): RTO 200 ms doubling, 0.2 s x 511.
pub const HOLD_ORPHAN_MS: u64 = 102_200;

/// `tcp_retries2` (15): how long Linux retransmits an open socket's data before the
/// connection fails, "a hypothetical timeout of 924.6 seconds" (docs/semantics.md 4.6).
/// What a client with no health check or read timeout waits under a partition.
pub const RETRANSMIT_OPEN_MS: u64 = 924_600;

fn hold_open_ms() -> u64 {
    HOLD_OPEN_MS
}

fn hold_orphan_ms() -> u64 {
    HOLD_ORPHAN_MS
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency_ms_min: 1,
            latency_ms_max: 5,
            hold_open_ms: HOLD_OPEN_MS,
            hold_orphan_ms: HOLD_ORPHAN_MS,
        }
    }
}

/// A cut or slowed set of links between two groups of hosts, while its fault is active.
#[derive(Clone, Debug)]
pub(crate) struct LinkRule {
    /// Index of the fault in the plan: the rule's identity, so its revert removes it.
    pub fault: usize,
    pub hosts_a: Vec<HostId>,
    pub hosts_b: Vec<HostId>,
    pub one_way: bool,
}

impl LinkRule {
    fn matches(&self, from: HostId, to: HostId) -> bool {
        (self.hosts_a.contains(&from) && self.hosts_b.contains(&to))
            || (!self.one_way && self.hosts_b.contains(&from) && self.hosts_a.contains(&to))
    }
}

#[derive(Debug)]
pub(crate) struct Network {
    pub config: NetConfig,
    /// The config's latency bounds, ready to draw from.
    pub latency: UniformSpan,
    partitions: Vec<(LinkRule, PartitionMode)>,
    slow: Vec<(LinkRule, u64)>,
    /// Last scheduled delivery on each link (sender, receiver, the sender's lane):
    /// (time, tie-break). Looked up on every send and never iterated, so it hashes with
    /// foldhash's fixed seed rather than SipHash (a third of the kernel's transmit).
    links: HashMap<(ProcId, ProcId, u32), (SimTime, u32), foldhash::fast::FixedState>,
    /// How many times the connection between two processes (the lower id first) was
    /// reset: a message carries the count at its send, and one sent before a reset is
    /// lost with the connection. Empty until a reset, and a few pairs after: a scan of
    /// it is cheaper than hashing every message's pair.
    resets: Vec<((ProcId, ProcId), u32)>,
}

impl Network {
    pub fn new(config: NetConfig) -> Self {
        Network {
            config,
            latency: UniformSpan::inclusive(config.latency_ms_min, config.latency_ms_max),
            partitions: Vec::new(),
            slow: Vec::new(),
            links: HashMap::default(),
            resets: Vec::new(),
        }
    }

    pub fn add_partition(&mut self, rule: LinkRule, mode: PartitionMode) {
        self.partitions.push((rule, mode));
    }

    pub fn add_slow(&mut self, rule: LinkRule, extra_ms: u64) {
        self.slow.push((rule, extra_ms));
    }

    /// Remove the rules a fault installed; true if a partition went away.
    pub fn remove(&mut self, fault: usize) -> bool {
        let before = self.partitions.len();
        self.partitions.retain(|(r, _)| r.fault != fault);
        self.slow.retain(|(r, _)| r.fault != fault);
        before != self.partitions.len()
    }

    /// How a message from `from` to `to` is cut right now, if it is.
    pub fn cut(&self, from: HostId, to: HostId) -> Option<PartitionMode> {
        if from == to {
            return None;
        }
        // Drop wins over Hold when two partitions cover one link.
        let mut found = None;
        for (rule, mode) in &self.partitions {
            if rule.matches(from, to) {
                if *mode == PartitionMode::Drop {
                    return Some(PartitionMode::Drop);
                }
                found = Some(*mode);
            }
        }
        found
    }

    pub fn extra_latency_ms(&self, from: HostId, to: HostId) -> u64 {
        if from == to || self.slow.is_empty() {
            return 0;
        }
        self.slow
            .iter()
            .filter(|(r, _)| r.matches(from, to))
            .map(|(_, ms)| *ms)
            .sum()
    }

    /// Schedule a delivery on a FIFO link: never before the link's last delivery, and at
    /// the same instant, after it (same tie-break, so the sequence number decides).
    pub fn fifo(
        &mut self,
        from: ProcId,
        to: ProcId,
        lane: u32,
        earliest: SimTime,
        tiebreak: u32,
    ) -> (SimTime, u32) {
        let slot = self
            .links
            .entry((from, to, lane))
            .or_insert((SimTime::ZERO, 0));
        let at = if earliest > slot.0 {
            (earliest, tiebreak)
        } else {
            (slot.0, slot.1)
        };
        *slot = at;
        at
    }

    /// The generation of the connection between `a` and `b`: how many times it was
    /// reset ([`Network::reset`]).
    pub fn conn(&self, a: ProcId, b: ProcId) -> u32 {
        if self.resets.is_empty() {
            return 0;
        }
        let pair = (a.min(b), a.max(b));
        self.resets
            .iter()
            .find(|(p, _)| *p == pair)
            .map_or(0, |(_, n)| *n)
    }

    /// The connection between `a` and `b` broke: what is in flight on it is lost.
    pub fn reset(&mut self, a: ProcId, b: ProcId) {
        let pair = (a.min(b), a.max(b));
        match self.resets.iter_mut().find(|(p, _)| *p == pair) {
            Some((_, n)) => *n = n.wrapping_add(1),
            None => self.resets.push((pair, 1)),
        }
    }

    /// The processes `proc` has a link with (it sent them something, or they it, since
    /// either last ended), in id order.
    pub fn peers(&self, proc: ProcId) -> Vec<ProcId> {
        let mut out: Vec<ProcId> = self
            .links
            .keys()
            .filter_map(|&(a, b, _)| match (a == proc, b == proc) {
                (true, false) => Some(b),
                (false, true) => Some(a),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Forget a link's history (a process restarted: new connections).
    pub fn forget(&mut self, proc: ProcId) {
        self.links.retain(|(a, b, _), _| *a != proc && *b != proc);
    }
}
