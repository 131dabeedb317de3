//! The event loop: [`Sim::step_until`] takes the next fault action or event, and
//! dispatch hands an event to its process (or parks, holds or drops it).

use super::event::{Event, Origin, Source};
use super::proc::ProcState;
use super::{Actor, Sim, StepKind};
use crate::fault::PartitionMode;
use crate::id::ProcId;
use crate::time::SimTime;
use crate::trace::{DropReason, RecordKind, TraceMode};

impl<A: Actor> Sim<A> {
    /// Handle the next event due at or before `end`; `None` when there is none or the
    /// event budget is spent. Faults due at an instant go before events at that instant.
    pub fn step_until(&mut self, end: SimTime) -> Option<StepKind> {
        loop {
            if self.budget_exhausted() {
                return None;
            }
            let fault_t = self.actions.get(self.next_action).map(|a| a.time);
            let event_t = self.queue.peek_time();
            let take_fault = match (fault_t, event_t) {
                (Some(f), Some(e)) => f <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            let t = if take_fault { fault_t } else { event_t }.expect("checked above");
            if t > end {
                return None;
            }
            self.now = t;
            if take_fault {
                let action = self.actions[self.next_action];
                self.next_action += 1;
                if action.active && self.plan.faults[action.index].on.is_some() {
                    // Armed: it waits for its event, silently (no step, no trace).
                    self.armed.push((action.index, 0));
                    continue;
                }
                self.apply_fault(action);
                self.handled += 1;
                return Some(StepKind::Fault {
                    index: action.index,
                    active: action.active,
                });
            }
            let (_, event) = self.queue.pop().expect("peeked");
            if let Some(kind) = self.dispatch(event) {
                self.handled += 1;
                return Some(kind);
            }
        }
    }

    /// Run to `end` (or until nothing is left), without looking at the steps.
    pub fn run_until(&mut self, end: SimTime) {
        while self.step_until(end).is_some() {}
    }

    /// Handle one popped event; `None` if it was silently void (a stale or cancelled timer,
    /// an event parked for a paused process).
    fn dispatch(&mut self, event: Event<A::Msg>) -> Option<StepKind> {
        let target = event.target();
        let slot = &self.procs[target.index()];
        let (inc, state, to_host) = (slot.incarnation, slot.state, slot.host);
        match event {
            Event::Restart { proc, inc: ev_inc } => {
                // A fault's restart (or another crash) may have come first.
                if ev_inc == inc && state == ProcState::Crashed {
                    self.restart(proc);
                }
                None
            }
            Event::GiveUp { proc, held } => self.give_up(proc, held),
            Event::Start { proc, inc: ev_inc } => {
                if ev_inc != inc || matches!(state, ProcState::Crashed | ProcState::Stopped) {
                    return None;
                }
                if state == ProcState::Paused {
                    self.procs[proc.index()]
                        .pending
                        .push_back(Event::Start { proc, inc: ev_inc });
                    return None;
                }
                self.trace.push(self.now, RecordKind::Start { proc });
                self.with_ctx(proc, |a, ctx| a.on_start(ctx));
                if !self.awaiting_start.is_empty() && ev_inc == 0 {
                    self.deliver_awaiting_start(proc);
                }
                Some(StepKind::Handled(proc))
            }
            Event::Msg {
                to,
                inc: ev_inc,
                origin,
                msg,
            } => match origin.source() {
                Source::Timer(id) => {
                    let proc = to;
                    // Forget a cancellation as soon as its timer comes due, whatever else
                    // voids it, so the set only holds timers still pending.
                    let cancelled = !self.cancelled.is_empty() && self.cancelled.remove(&id);
                    if cancelled
                        || ev_inc != inc
                        || matches!(state, ProcState::Crashed | ProcState::Stopped)
                    {
                        return None;
                    }
                    if state == ProcState::Paused {
                        return self.park(proc, ev_inc, origin, msg);
                    }
                    if self.trace.mode() == TraceMode::Full {
                        self.trace.push(
                            self.now,
                            RecordKind::Timer {
                                proc,
                                msg: msg.clone(),
                            },
                        );
                    } else {
                        self.trace_hash_only_timer(proc, &msg);
                    }
                    if let Some(rec) = &mut self.recorder {
                        rec.cause = rec.timer_cause.remove(&id);
                    }
                    self.with_ctx(proc, |a, ctx| a.on_timer(id, msg, ctx));
                    if let Some(rec) = &mut self.recorder {
                        rec.cause = None;
                    }
                    Some(StepKind::Handled(proc))
                }
                Source::Sent { from, conn } => {
                    if ev_inc != inc || matches!(state, ProcState::Crashed | ProcState::Stopped) {
                        self.trace.push(
                            self.now,
                            RecordKind::Dropped {
                                from,
                                to,
                                reason: DropReason::ReceiverDown,
                            },
                        );
                        // Its host answers with a reset, if the reset can get back.
                        let from_host = self.procs[from.index()].host;
                        if self.net.cut(to_host, from_host).is_none() {
                            self.refused(from, to, &msg);
                        }
                        return Some(StepKind::Lost(to));
                    }
                    if conn != self.net.conn(from, to) {
                        // Still in flight when its connection was reset: lost with it.
                        self.trace.push(
                            self.now,
                            RecordKind::Dropped {
                                from,
                                to,
                                reason: DropReason::Reset,
                            },
                        );
                        return Some(StepKind::Lost(to));
                    }
                    let from_host = self.procs[from.index()].host;
                    let cut = self.net.cut(from_host, to_host);
                    if cut.is_some()
                        && let Some((client, bound_ms)) = self.retransmitted_by(from, to, &msg)
                    {
                        // Under either mode: its client's TCP keeps trying until the heal
                        // or until it gives up (docs/semantics.md 4.8).
                        self.next_held += 1;
                        let number = self.next_held;
                        let give_up_at = self.now.plus_ms(bound_ms);
                        self.hold(from, to, (ev_inc, conn), msg, Some((number, give_up_at)));
                        self.enqueue(
                            give_up_at,
                            Event::GiveUp {
                                proc: client,
                                held: number,
                            },
                        );
                        return Some(StepKind::Lost(to));
                    }
                    match cut {
                        Some(PartitionMode::Drop) => {
                            self.trace.push(
                                self.now,
                                RecordKind::Dropped {
                                    from,
                                    to,
                                    reason: DropReason::Partition,
                                },
                            );
                            self.break_connection(from, to, &msg);
                            return Some(StepKind::Lost(to));
                        }
                        Some(PartitionMode::Hold) => {
                            self.hold(from, to, (ev_inc, conn), msg, None);
                            return Some(StepKind::Lost(to));
                        }
                        None => {}
                    }
                    if state == ProcState::Paused {
                        return self.park(to, ev_inc, origin, msg);
                    }
                    if self.trace.mode() == TraceMode::Full {
                        self.trace.push(
                            self.now,
                            RecordKind::Deliver {
                                from,
                                to,
                                msg: msg.clone(),
                            },
                        );
                    } else {
                        self.trace_hash_only_deliver(from, to, &msg);
                    }
                    if let Some(rec) = &mut self.recorder {
                        rec.cause = A::answer_id(&msg)
                            .and_then(|id| rec.pending.remove(&(to.0, from.0, id)));
                    }
                    self.with_ctx(to, |a, ctx| a.on_msg(from, msg, ctx));
                    if let Some(rec) = &mut self.recorder {
                        rec.cause = None;
                    }
                    Some(StepKind::Handled(to))
                }
            },
        }
    }

    /// Keep a message or timer come due while `to` is paused, for when it resumes.
    fn park(&mut self, to: ProcId, inc: u32, origin: Origin, msg: A::Msg) -> Option<StepKind> {
        self.procs[to.index()].pending.push_back(Event::Msg {
            to,
            inc,
            origin,
            msg,
        });
        None
    }

    // Hash-only traces never keep the message, so they need no clone of it.
    fn trace_hash_only_timer(&mut self, proc: ProcId, msg: &A::Msg) {
        self.trace.push_ref_timer(self.now, proc, msg);
    }

    fn trace_hash_only_deliver(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) {
        self.trace.push_ref_deliver(self.now, from, to, msg);
    }
}
