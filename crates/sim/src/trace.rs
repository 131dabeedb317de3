//! The trace of a run and its stable hash.
//!
//! Every event the kernel handles is folded into a hash as it happens, so a fuzz campaign
//! pays no memory for traces; `TraceMode::Full` also keeps the records (with the message
//! values) for replay, explain and timelines.
//!
//! The hash is FNV-1a 64 ([`crate::StableHasher`]) over, for each record in order: the
//! time (u64 LE), the record kind tag (u8), the processes involved (u32 LE each) and the
//! message's derived `Hash` encoding (see [`crate::hash`]). Same scenario, same seed: same
//! hash, on every machine, build and `--jobs` setting.

use crate::hash::StableHasher;
use crate::id::ProcId;
use crate::time::SimTime;
use serde::Serialize;
use std::hash::{Hash, Hasher};

/// How much of a run to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceMode {
    /// Only the hash and counters: what fuzzing needs.
    #[default]
    Hash,
    /// The hash and every record.
    Full,
}

/// Why a message did not reach its handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    Partition,
    /// The receiver is crashed or stopped, or restarted since the message was sent.
    ReceiverDown,
    /// Held by a partition longer than TCP keeps retransmitting it (network.rs).
    Expired,
    /// An anchored fault dropped it (the message, an answer, or the send of a process
    /// that crashed just before it).
    Fault,
    /// Its connection was reset after it was sent: a message lost on the connection
    /// broke it, and what was still in flight on it is lost too (docs/semantics.md 4.12).
    Reset,
}

/// One thing that happened.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecordKind<M> {
    Start {
        proc: ProcId,
    },
    Deliver {
        from: ProcId,
        to: ProcId,
        msg: M,
    },
    Timer {
        proc: ProcId,
        msg: M,
    },
    Dropped {
        from: ProcId,
        to: ProcId,
        reason: DropReason,
    },
    Held {
        from: ProcId,
        to: ProcId,
    },
    /// A fault took effect (`active`) or reverted; `index` is its place in the plan.
    Fault {
        index: usize,
        active: bool,
        applied: bool,
    },
    /// A process crashed itself (a failpoint) and restarts `restart_after_ms` later.
    Crashed {
        proc: ProcId,
        restart_after_ms: u64,
    },
    /// A free-form note from a process (only in full traces; not hashed).
    Note {
        proc: ProcId,
        text: String,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct Record<M> {
    pub time: SimTime,
    #[serde(flatten)]
    pub kind: RecordKind<M>,
}

/// The running trace of one simulation.
#[derive(Debug)]
pub struct Trace<M> {
    mode: TraceMode,
    hasher: StableHasher,
    events: u64,
    records: Vec<Record<M>>,
}

impl<M: Hash> Trace<M> {
    pub fn new(mode: TraceMode) -> Self {
        Trace {
            mode,
            hasher: StableHasher::new(),
            events: 0,
            records: Vec::new(),
        }
    }

    pub fn mode(&self) -> TraceMode {
        self.mode
    }

    /// Fold one record's canonical encoding into the hash.
    fn fold(&mut self, time: SimTime, tag: u8, a: u32, b: u32, msg: Option<&M>) {
        let h = &mut self.hasher;
        h.write_u64(time.0);
        h.write_u8(tag);
        h.write_u32(a);
        h.write_u32(b);
        if let Some(m) = msg {
            m.hash(h);
        }
        self.events += 1;
    }

    /// Fold a record into the hash; keep it if the trace is full.
    pub(crate) fn push(&mut self, time: SimTime, kind: RecordKind<M>) {
        match &kind {
            RecordKind::Start { proc } => self.fold(time, 0, proc.0, 0, None),
            RecordKind::Deliver { from, to, msg } => self.fold(time, 1, from.0, to.0, Some(msg)),
            RecordKind::Timer { proc, msg } => self.fold(time, 2, proc.0, 0, Some(msg)),
            RecordKind::Dropped { from, to, reason } => {
                self.fold(time, 3 + 8 * (*reason as u8), from.0, to.0, None)
            }
            RecordKind::Held { from, to } => self.fold(time, 4, from.0, to.0, None),
            RecordKind::Fault {
                index,
                active,
                applied,
            } => {
                let flags = u32::from(*active) | (u32::from(*applied) << 1);
                self.fold(time, 5, *index as u32, flags, None)
            }
            RecordKind::Crashed {
                proc,
                restart_after_ms,
            } => self.fold(time, 6, proc.0, *restart_after_ms as u32, None),
            // Notes describe state already hashed through messages; a hash must not
            // change because someone reworded a note.
            RecordKind::Note { .. } => {}
        }
        if self.mode == TraceMode::Full {
            self.records.push(Record { time, kind });
        }
    }

    /// A delivery, hashed from a borrowed message (hash-only traces never clone it).
    pub(crate) fn push_ref_deliver(&mut self, time: SimTime, from: ProcId, to: ProcId, msg: &M) {
        debug_assert_eq!(self.mode, TraceMode::Hash);
        self.fold(time, 1, from.0, to.0, Some(msg));
    }

    /// A timer, hashed from a borrowed message.
    pub(crate) fn push_ref_timer(&mut self, time: SimTime, proc: ProcId, msg: &M) {
        debug_assert_eq!(self.mode, TraceMode::Hash);
        self.fold(time, 2, proc.0, 0, Some(msg));
    }

    /// The trace hash so far.
    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }

    /// Events recorded (notes excluded).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The records (empty unless the mode is `Full`).
    pub fn records(&self) -> &[Record<M>] {
        &self.records
    }
}
