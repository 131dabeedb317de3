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

impl<A: Actor> Sim<A> {
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
