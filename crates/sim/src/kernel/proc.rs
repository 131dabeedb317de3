//! The process table: each process's slot ([`ProcSlot`]) and lifecycle state
//! ([`ProcState`]), and the transitions between them (pause, resume, stop, crash, restart).

use super::event::{DUE_EARLIER, Event};
use super::{Actor, Sim};
use crate::id::{HostId, ProcId};
use crate::rng::SimRng;
use crate::time::SimTime;
use std::collections::VecDeque;

/// A process's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcState {
    Running,
    Paused,
    Crashed,
    Stopped,
}

#[derive(Debug)]
pub(super) struct ProcSlot<A: Actor> {
    pub(super) name: String,
    pub(super) host: HostId,
    pub(super) actor: A,
    pub(super) state: ProcState,
    pub(super) incarnation: u32,
    pub(super) rng: SimRng,
    pub(super) clock_offset_ms: i64,
    /// Events that came due while paused, in order.
    pub(super) pending: VecDeque<Event<A::Msg>>,
    /// When it last crashed or stopped (its sockets were orphaned then).
    pub(super) down_at: SimTime,
    /// Sends of a handler an anchored pause caught, sent when it resumes; `true` for a
    /// message already counted for anchors.
    pub(super) deferred: Vec<(ProcId, A::Msg, bool)>,
}

impl<A: Actor> Sim<A> {
    /// Pause a running process. True if it changed state.
    pub fn pause(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Running {
            return false;
        }
        slot.state = ProcState::Paused;
        true
    }

    /// Resume a paused process: everything that came due meanwhile is due now, in the
    /// order it came due, before anything else due at this instant.
    pub fn resume(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Paused {
            return false;
        }
        slot.state = ProcState::Running;
        let pending = std::mem::take(&mut slot.pending);
        let deferred = std::mem::take(&mut slot.deferred);
        for ev in pending {
            self.enqueue_with(self.now, DUE_EARLIER, ev);
        }
        // What an anchored pause caught mid-handler leaves now, in order.
        for (to, msg, counted) in deferred {
            if counted {
                self.transmit(p, to, msg, 0);
            } else {
                self.send(p, to, msg);
            }
        }
        true
    }

    /// End a process for good (idempotent). With its host up, its host closes its
    /// sockets; a host shut down (`hosts_down`) closes nothing.
    pub(super) fn stop(&mut self, p: ProcId) {
        let slot = &mut self.procs[p.index()];
        if slot.state == ProcState::Stopped {
            return;
        }
        let was_running = slot.state != ProcState::Crashed;
        slot.state = ProcState::Stopped;
        slot.incarnation += 1;
        slot.pending.clear();
        slot.deferred.clear();
        slot.down_at = self.now;
        if was_running {
            self.close_sockets(p);
        }
    }

    /// Kill a process: its memory, timers and connections are gone.
    pub fn crash(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if !matches!(slot.state, ProcState::Running | ProcState::Paused) {
            return false;
        }
        slot.state = ProcState::Crashed;
        slot.incarnation += 1;
        slot.pending.clear();
        slot.deferred.clear();
        slot.down_at = self.now;
        slot.actor.on_crash();
        self.close_sockets(p);
        true
    }

    /// Restart a crashed process cold, as a new incarnation: anything addressed to it
    /// while it was down was meant for the dead one.
    pub fn restart(&mut self, p: ProcId) -> bool {
        let slot = &mut self.procs[p.index()];
        if slot.state != ProcState::Crashed {
            return false;
        }
        slot.state = ProcState::Running;
        slot.incarnation += 1;
        let inc = slot.incarnation;
        self.enqueue_with(self.now, DUE_EARLIER, Event::Start { proc: p, inc });
        true
    }
}
