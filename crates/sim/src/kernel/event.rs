//! The kernel's events ([`Event`]) and their order in the queue: a time, a seeded
//! tie-break (never [`DUE_EARLIER`], kept for what came due earlier) and a sequence number.

use super::{Actor, Sim};
use crate::id::{ProcId, TimerId};
use crate::queue::Key;
use crate::time::SimTime;
use rand::Rng;

#[derive(Debug)]
pub(super) enum Event<M> {
    Start {
        proc: ProcId,
        inc: u32,
    },
    Deliver {
        from: ProcId,
        to: ProcId,
        inc: u32,
        /// The generation of the connection between sender and receiver when it was
        /// sent (`Network::conn`): a reset since voids it.
        conn: u32,
        msg: M,
    },
    Timer {
        proc: ProcId,
        inc: u32,
        id: TimerId,
        msg: M,
    },
    /// Restart the incarnation `inc` crashed by [`Ctx::crash_self`](super::Ctx::crash_self),
    /// if it is still down.
    Restart {
        proc: ProcId,
        inc: u32,
    },
    /// The transport of `proc`, the client end of a held message's connection, gives up
    /// on it if it is still held ([`Actor::retransmits_ms`]).
    GiveUp {
        proc: ProcId,
        held: u64,
    },
}

impl<M> Event<M> {
    pub(super) fn target(&self) -> ProcId {
        match self {
            Event::Start { proc, .. }
            | Event::Timer { proc, .. }
            | Event::Restart { proc, .. }
            | Event::GiveUp { proc, .. } => *proc,
            Event::Deliver { to, .. } => *to,
        }
    }
}

/// The tie-break of events that came due before the instant they are handled at (events
/// parked while their process was paused, messages held by a partition): they go before
/// everything else due at that instant, in their original order, so no FIFO link is
/// overtaken by a message sent after them. Drawn tie-breaks are never this value.
pub(super) const DUE_EARLIER: u32 = 0;

impl<A: Actor> Sim<A> {
    pub(super) fn enqueue(&mut self, time: SimTime, event: Event<A::Msg>) {
        let tiebreak = self.draw_tiebreak();
        self.enqueue_with(time, tiebreak, event);
    }

    /// A seeded tie-break, never [`DUE_EARLIER`].
    pub(super) fn draw_tiebreak(&mut self) -> u32 {
        self.tiebreak_rng.next_u32().max(DUE_EARLIER + 1)
    }

    // Inlined, with the queue's push, so the event is built in its queue slot.
    #[inline(always)]
    pub(super) fn enqueue_with(&mut self, time: SimTime, tiebreak: u32, event: Event<A::Msg>) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(
            Key {
                time,
                tiebreak,
                seq,
            },
            event,
        );
    }
}
