//! The kernel's events ([`Event`]) and their order in the queue: a time, a seeded
//! tie-break (never [`DUE_EARLIER`], kept for what came due earlier) and a sequence number.

use super::{Actor, Sim};
use crate::id::{ProcId, TimerId};
use crate::time::SimTime;
use rand::Rng;

#[derive(Debug)]
pub(super) enum Event<M> {
    Start {
        proc: ProcId,
        inc: u32,
    },
    /// A message for incarnation `inc` of `to`: one sent to it ([`Source::Sent`]) or its
    /// own timer come due ([`Source::Timer`]). One variant for both, with the source in
    /// one word, so an event is its message and 16 bytes: no more than 128 bytes, which
    /// the queue's copies of it keep inline (a copy of more is a call to `memcpy`).
    Msg {
        to: ProcId,
        inc: u32,
        origin: Origin,
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

/// Where an [`Event::Msg`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Sent by `from` on the connection of generation `conn` between sender and
    /// receiver when it was sent (`Network::conn`): a reset since voids it.
    Sent {
        from: ProcId,
        conn: u32,
    },
    Timer(TimerId),
}

/// A [`Source`] in one word: a timer's id with the top bit set, or the sender (below
/// 2^31) and the connection's generation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Origin(u64);

const TIMER_BIT: u64 = 1 << 63;

impl Origin {
    #[inline]
    pub(super) fn sent(from: ProcId, conn: u32) -> Origin {
        assert!(from.0 < 1 << 31, "more than 2^31 processes in a run");
        Origin((u64::from(from.0) << 32) | u64::from(conn))
    }

    #[inline]
    pub(super) fn timer(id: TimerId) -> Origin {
        assert!(id.0 < TIMER_BIT, "more than 2^63 timers in a run");
        Origin(id.0 | TIMER_BIT)
    }

    #[inline]
    pub(super) fn source(self) -> Source {
        if self.0 & TIMER_BIT != 0 {
            Source::Timer(TimerId(self.0 & !TIMER_BIT))
        } else {
            Source::Sent {
                from: ProcId((self.0 >> 32) as u32),
                conn: self.0 as u32,
            }
        }
    }
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source().fmt(f)
    }
}

impl<M> Event<M> {
    /// `msg` sent by `from` to incarnation `inc` of `to` on connection generation `conn`.
    pub(super) fn deliver(from: ProcId, to: ProcId, inc: u32, conn: u32, msg: M) -> Self {
        Event::Msg {
            to,
            inc,
            origin: Origin::sent(from, conn),
            msg,
        }
    }

    /// Timer `id` of incarnation `inc` of `proc`, carrying `msg`.
    pub(super) fn timer(proc: ProcId, inc: u32, id: TimerId, msg: M) -> Self {
        Event::Msg {
            to: proc,
            inc,
            origin: Origin::timer(id),
            msg,
        }
    }

    pub(super) fn target(&self) -> ProcId {
        match self {
            Event::Start { proc, .. }
            | Event::Restart { proc, .. }
            | Event::GiveUp { proc, .. } => *proc,
            Event::Msg { to, .. } => *to,
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
        self.queue.push(time, tiebreak, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_gives_back_its_source() {
        for (from, conn) in [(0, 0), (7, u32::MAX), ((1 << 31) - 1, 3)] {
            let o = Origin::sent(ProcId(from), conn);
            assert_eq!(
                o.source(),
                Source::Sent {
                    from: ProcId(from),
                    conn
                }
            );
        }
        for id in [0, 1, TIMER_BIT - 1] {
            assert_eq!(
                Origin::timer(TimerId(id)).source(),
                Source::Timer(TimerId(id))
            );
        }
    }

    /// A message of 112 bytes with spare tag values (as the world's `Msg`): its event is
    /// 16 bytes more, and a queue slot no larger.
    #[test]
    fn an_event_is_its_message_and_16_bytes() {
        #[allow(dead_code)]
        enum Msg {
            Big([u64; 13]),
            Small(u32),
        }
        assert_eq!(size_of::<Msg>(), 112);
        assert_eq!(size_of::<Event<Msg>>(), 128);
        assert_eq!(size_of::<Option<Event<Msg>>>(), 128);
    }
}
