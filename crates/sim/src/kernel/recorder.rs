//! A reference run's record of its decision points ([`Recorder`]): every classified
//! message as it leaves, with the answer it follows, for search to pick faults from.

use super::{Actor, Sim};
use crate::anchor::{DecisionPoint, EventClass};
use crate::id::{ProcId, TimerId};
use std::collections::BTreeMap;

/// A reference run's record of its decision points.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    pub(super) points: Vec<DecisionPoint>,
    /// Events of each class so far, by process name (as anchors count them).
    pub(super) counts: BTreeMap<String, [u32; EventClass::ALL.len()]>,
    /// Requests awaiting their answer: (caller, callee, id) -> decision.
    pub(super) pending: BTreeMap<(u32, u32, u64), usize>,
    /// The decision whose answer the running handler is handling.
    pub(super) cause: Option<usize>,
    /// Pending timers that continue a handler's work ([`Actor::continues`]): their
    /// handler's cause.
    pub(super) timer_cause: BTreeMap<TimerId, usize>,
}

/// A run's abstract signature, folded in as messages are sent ([`crate::signature`]).
#[derive(Debug, Default)]
pub(super) struct Signature {
    /// Each process's previous step, by process index (0: none yet).
    last: Vec<u64>,
    /// The pairs reached; sorted and deduplicated from `sorted` on.
    pairs: Vec<u64>,
    sorted: usize,
}

impl Signature {
    /// Sorted and deduplicated once the unsorted tail is as long as the sorted part, so
    /// the vector stays within twice the distinct pairs.
    fn push(&mut self, pair: u64) {
        self.pairs.push(pair);
        if self.pairs.len() >= 2 * self.sorted.max(512) {
            self.settle();
        }
    }

    fn settle(&mut self) {
        self.pairs.sort_unstable();
        self.pairs.dedup();
        self.sorted = self.pairs.len();
    }

    pub(super) fn pairs(&mut self) -> &[u64] {
        self.settle();
        &self.pairs
    }
}

impl<A: Actor> Sim<A> {
    /// Fold a classified message into the run's signature.
    pub(super) fn sign(&mut self, anchor_proc: ProcId, class: EventClass, msg: &A::Msg) {
        let label = A::describe(msg);
        let step = crate::signature::step(
            crate::signature::role(&self.procs[anchor_proc.index()].name),
            class,
            &label,
        );
        let sig = self.signature.as_mut().expect("signing");
        let i = anchor_proc.index();
        if sig.last.len() <= i {
            sig.last.resize(i + 1, 0);
        }
        let previous = std::mem::replace(&mut sig.last[i], step);
        sig.push(crate::signature::pair(previous, step));
    }

    pub(super) fn record(
        &mut self,
        from: ProcId,
        to: ProcId,
        anchor_proc: ProcId,
        class: EventClass,
        msg: &A::Msg,
    ) {
        let process = self.procs[anchor_proc.index()].name.clone();
        let peer_proc = if anchor_proc == from { to } else { from };
        let peer = self.procs[peer_proc.index()].name.clone();
        let time_ms = self.now.as_ms();
        let rec = self.recorder.as_mut().expect("recording");
        let counts = rec.counts.entry(process.clone()).or_default();
        counts[class.index()] += 1;
        let nth = counts[class.index()];
        let index = rec.points.len();
        rec.points.push(DecisionPoint {
            time_ms,
            process,
            peer,
            event: class,
            nth,
            label: A::describe(msg),
            subject: A::subject(msg),
            after_answer_of: if class.counted_at_receiver() {
                None
            } else {
                rec.cause
            },
        });
        if let Some(id) = A::request_id(msg) {
            rec.pending.insert((from.0, to.0, id), index);
        }
    }
}
