//! Faults anchored to events: a handler's send is counted against the armed anchors, and
//! a fault whose event it is fires right there, inside the effect loop that sent it.

use super::faults::FaultAction;
use super::proc::ProcState;
use super::wire::{Broken, End};
use super::{Actor, Sim};
use crate::anchor::Position;
use crate::fault::Fault;
use crate::id::ProcId;
use crate::trace::{DropReason, RecordKind};

impl<A: Actor> Sim<A> {
    /// Send a message a handler asked for: lose it if it is an answer a fault loses,
    /// count it for anchors (firing any whose event it is) and record it as a decision.
    pub(super) fn send(&mut self, from: ProcId, to: ProcId, msg: A::Msg) {
        if !self.lost_answers.is_empty() && self.lose_answer(from, to, &msg) {
            return;
        }
        if self.armed.is_empty() && self.recorder.is_none() && self.signature.is_none() {
            return self.transmit(from, to, msg, 0);
        }
        let Some(class) = A::classify(&msg) else {
            return self.transmit(from, to, msg, 0);
        };
        let anchor_proc = if class.counted_at_receiver() {
            to
        } else {
            from
        };
        if self.recorder.is_some() {
            self.record(from, to, anchor_proc, class, &msg);
        }
        if self.signature.is_some() {
            self.sign(anchor_proc, class, &msg);
        }
        let mut fired: Vec<usize> = Vec::new();
        let (plan, procs) = (&self.plan, &self.procs);
        self.armed.retain_mut(|(index, seen)| {
            let a = plan.faults[*index]
                .on
                .as_ref()
                .expect("armed faults are anchored");
            if a.event != class || procs[anchor_proc.index()].name != a.process {
                return true;
            }
            *seen += 1;
            if *seen < a.nth {
                return true;
            }
            fired.push(*index);
            false
        });
        if fired.is_empty() {
            return self.transmit(from, to, msg, 0);
        }
        let sender_running = self.procs[from.index()].state == ProcState::Running;
        let (mut extra_ms, mut drop, mut lose) = (0u64, false, false);
        for &i in &fired {
            let f = &self.plan.faults[i];
            match f.fault {
                Fault::DropMessage => drop = true,
                Fault::DelayMessage { extra_ms: e } => extra_ms = extra_ms.saturating_add(e),
                Fault::LoseAnswer => lose = true,
                _ => {
                    if f.on
                        .as_ref()
                        .is_some_and(|a| a.position == Position::Before)
                    {
                        self.fire(i);
                    }
                    continue;
                }
            }
            self.fired_at[i] = Some(self.now);
            self.fired += 1;
            self.trace.push(
                self.now,
                RecordKind::Fault {
                    index: i,
                    active: true,
                    applied: true,
                },
            );
        }
        if lose && let Some(id) = A::request_id(&msg) {
            self.lost_answers.push((to, from, id));
        }
        let sender = self.procs[from.index()].state;
        if drop || (sender_running && sender == ProcState::Crashed) {
            // Lost, or never sent: its sender died just before.
            self.dropped_by_fault(from, to);
            if drop {
                self.broken_on_send(from, to, &msg, extra_ms);
            }
        } else if sender_running && sender == ProcState::Paused {
            self.procs[from.index()].deferred.push((to, msg, true));
        } else {
            self.transmit(from, to, msg, extra_ms);
        }
        for &i in &fired {
            let f = &self.plan.faults[i];
            if !f.fault.is_message_fault()
                && f.on.as_ref().is_some_and(|a| a.position == Position::After)
            {
                self.fire(i);
            }
        }
    }

    /// Drop `msg` if it answers a request whose answer a fault loses.
    fn lose_answer(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) -> bool {
        let Some(id) = A::answer_id(msg) else {
            return false;
        };
        let Some(k) = self
            .lost_answers
            .iter()
            .position(|&(callee, caller, rid)| callee == from && caller == to && rid == id)
        else {
            return false;
        };
        self.lost_answers.swap_remove(k);
        self.dropped_by_fault(from, to);
        self.broken_on_send(from, to, msg, 0);
        true
    }

    /// A fault lost `msg` as `from` sent it: its connection broke (wire.rs). A
    /// request's sender hears at once; a receiver hears over the link, after what was
    /// sent to it before (FIFO), as the reset of its connection.
    fn broken_on_send(&mut self, from: ProcId, to: ProcId, msg: &A::Msg, extra_ms: u64) {
        let Some(Broken { end, notice, whole }) = self.broken_notice(from, to, msg) else {
            return;
        };
        if whole {
            self.net.reset(from, to);
        }
        match end {
            End::Sender => self.notify(from, notice),
            End::Receiver => self.transmit(from, to, notice, extra_ms),
        }
    }

    fn dropped_by_fault(&mut self, from: ProcId, to: ProcId) {
        self.trace.push(
            self.now,
            RecordKind::Dropped {
                from,
                to,
                reason: DropReason::Fault,
            },
        );
    }

    /// An anchored fault's event came: it takes effect now, and reverts `duration_ms`
    /// from now.
    fn fire(&mut self, index: usize) {
        self.fired_at[index] = Some(self.now);
        self.fired += 1;
        self.apply_fault(FaultAction {
            time: self.now,
            index,
            active: true,
        });
        if let Some(d) = self.plan.faults[index].duration_ms {
            let revert = FaultAction {
                time: self.now.plus_ms(d),
                index,
                active: false,
            };
            let order = |a: &FaultAction| (a.time, a.index, !a.active);
            let at = self.next_action
                + self.actions[self.next_action..].partition_point(|a| order(a) <= order(&revert));
            self.actions.insert(at, revert);
        }
    }
}
