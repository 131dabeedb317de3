//! Messages on the wire: a send's latency and FIFO link, the messages a partition
//! holds until its heal, TCP's bounds on them and a retransmitting client's give-up,
//! and the broken connection a lost message is.

use super::event::{DUE_EARLIER, Event};
use super::proc::ProcState;
use super::{Actor, Sim, StepKind};
use crate::id::ProcId;
use crate::time::SimTime;
use crate::trace::{DropReason, RecordKind};
use rand::Rng;

pub(super) struct Held<M> {
    from: ProcId,
    to: ProcId,
    inc: u32,
    /// Its connection's generation at the send (`Network::conn`).
    conn: u32,
    msg: M,
    /// When the partition caught it, and the sender's incarnation then.
    held_at: SimTime,
    from_inc: u32,
    /// For a message whose client retransmits ([`Actor::retransmits_ms`]): its number,
    /// for the give-up, and when the client gives up on it.
    retransmitted: Option<(u64, SimTime)>,
}

/// Which end of a connection hears that a lost message broke it.
pub(super) enum End {
    /// A request's sender: its request failed.
    Sender,
    /// A stream's or an answer's receiver: its stream ended, or its request failed.
    Receiver,
}

/// What a lost message does to its connection: who hears of it, what, and whether the
/// whole connection between the two processes broke (a client that multiplexes every
/// request and watch on one connection, [`Actor::broken_by_drop`]) or only the lost
/// message's own ([`Actor::gave_up`]).
pub(super) struct Broken<M> {
    pub end: End,
    pub notice: M,
    pub whole: bool,
}

impl<A: Actor> Sim<A> {
    /// Which end of a lost `msg` from `from` to `to` is its connection's client, and
    /// what that end hears: TCP never loses one message of a connection silently, it
    /// breaks the connection (docs/semantics.md 4.12). A request's sender, or an
    /// answer's or a stream's receiver, hears what it says it would
    /// ([`Actor::broken_by_drop`]), else what [`Actor::gave_up`] says. `None` when
    /// neither says anything.
    pub(super) fn broken_notice(
        &self,
        from: ProcId,
        to: ProcId,
        msg: &A::Msg,
    ) -> Option<Broken<A::Msg>> {
        let (end, client) = if A::request_id(msg).is_some() {
            (End::Sender, from)
        } else {
            (End::Receiver, to)
        };
        if let Some(notice) = self.procs[client.index()].actor.broken_by_drop(msg) {
            return Some(Broken {
                end,
                notice,
                whole: true,
            });
        }
        A::gave_up(msg).map(|notice| Broken {
            end,
            notice,
            whole: false,
        })
    }

    /// A dropping partition lost `msg` on arrival: its client end hears at once that
    /// the connection broke (the messages before it on the link already arrived).
    pub(super) fn break_connection(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) {
        let Some(Broken { end, notice, whole }) = self.broken_notice(from, to, msg) else {
            return;
        };
        if whole {
            self.net.reset(from, to);
        }
        let client = match end {
            End::Sender => from,
            End::Receiver => to,
        };
        self.notify(client, notice);
    }

    /// Tell `client` at once, from itself, what its transport found (a connection that
    /// broke or gave up); nothing if it is down.
    pub(super) fn notify(&mut self, client: ProcId, notice: A::Msg) {
        let slot = &self.procs[client.index()];
        if matches!(slot.state, ProcState::Crashed | ProcState::Stopped) {
            return;
        }
        let inc = slot.incarnation;
        self.deliver_to_itself(client, inc, notice);
    }

    /// Deliver `notice` now to incarnation `inc` of `client`, from itself (its own
    /// transport's word: no link, no partition, before anything else due now).
    fn deliver_to_itself(&mut self, client: ProcId, inc: u32, notice: A::Msg) {
        self.enqueue_with(
            self.now,
            DUE_EARLIER,
            Event::deliver(client, client, inc, self.net.conn(client, client), notice),
        );
    }

    /// `p` ended (a crash, or an exit with its host up): its host's kernel closes its
    /// sockets, so every peer it had a connection with hears [`Actor::closed`] from it
    /// after the link's latency, behind what it sent before (FIFO); a partition holds
    /// or loses that as any segment. New connections to it are refused
    /// ([`Sim::refused`]). A host shut down closes nothing: its peers find out by their
    /// own timeouts. Its links are forgotten: a new incarnation has new connections.
    pub(super) fn close_sockets(&mut self, p: ProcId) {
        let host = self.procs[p.index()].host;
        if !self.hosts_down.contains(&host)
            && let Some(notice) = A::closed()
        {
            for q in self.net.peers(p) {
                let peer = &self.procs[q.index()];
                if !matches!(peer.state, ProcState::Running | ProcState::Paused) {
                    continue;
                }
                let (inc, to_host) = (peer.incarnation, peer.host);
                let latency = self.net.latency.draw(&mut self.closed_rng)
                    + self.net.extra_latency_ms(host, to_host);
                let tb = self.closed_rng.next_u32().max(DUE_EARLIER + 1);
                let lane = self.procs[p.index()].actor.lane(&notice);
                let (at, tb) = self.net.fifo(p, q, lane, self.now.plus_ms(latency), tb);
                let conn = self.net.conn(p, q);
                self.enqueue_with(at, tb, Event::deliver(p, q, inc, conn, notice.clone()));
            }
        }
        self.net.forget(p);
    }

    /// A request reached a process that is not there (down, or a later incarnation than
    /// the one it was sent to) on a host that is up: its kernel answers the connection
    /// with a reset ("connection refused" for a new one), which reaches the sender one
    /// link latency later. The sender hears what a broken connection tells it
    /// ([`Sim::broken_notice`]). Nothing for a host shut down or a message that is not a
    /// request.
    pub(super) fn refused(&mut self, from: ProcId, to: ProcId, msg: &A::Msg) {
        let host = self.procs[to.index()].host;
        if A::request_id(msg).is_none() || self.hosts_down.contains(&host) {
            return;
        }
        let Some(Broken { notice, .. }) = self.broken_notice(from, to, msg) else {
            return;
        };
        let slot = &self.procs[from.index()];
        if matches!(slot.state, ProcState::Crashed | ProcState::Stopped) {
            return;
        }
        let inc = slot.incarnation;
        let (fh, th) = (slot.host, host);
        let latency =
            self.net.latency.draw(&mut self.closed_rng) + self.net.extra_latency_ms(th, fh);
        let tb = self.closed_rng.next_u32().max(DUE_EARLIER + 1);
        let conn = self.net.conn(from, from);
        self.enqueue_with(
            self.now.plus_ms(latency),
            tb,
            Event::deliver(from, from, inc, conn, notice),
        );
    }

    /// Put a message on the network, `extra_ms` later than its link would.
    pub(super) fn transmit(&mut self, from: ProcId, to: ProcId, msg: A::Msg, extra_ms: u64) {
        let Some(receiver) = self.procs.get(to.index()) else {
            panic!("process {from} sent to unknown process {to}");
        };
        let inc = receiver.incarnation;
        let (fh, th) = (self.procs[from.index()].host, receiver.host);
        let latency = self.net.latency.draw(&mut self.net_rng);
        let earliest = self
            .now
            .plus_ms(latency + self.net.extra_latency_ms(fh, th))
            .plus_ms(extra_ms);
        let tb = self.draw_tiebreak();
        let lane = self.procs[from.index()].actor.lane(&msg);
        let (at, tb) = self.net.fifo(from, to, lane, earliest, tb);
        let conn = self.net.conn(from, to);
        self.enqueue_with(at, tb, Event::deliver(from, to, inc, conn, msg));
    }

    /// Deliver now, in their original order, the held messages whose link is whole again.
    /// They already crossed the network, and they go before anything else due now: a
    /// message sent after them and still in flight at the heal must not overtake them.
    /// One whose receiver died meanwhile is dropped (and recorded) on delivery.
    pub(super) fn release_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        for h in held {
            let (fh, th) = (
                self.procs[h.from.index()].host,
                self.procs[h.to.index()].host,
            );
            if self.net.cut(fh, th).is_some() {
                self.held.push(h);
                continue;
            }
            // TCP's bounds: an open socket's data for hold_open_ms, an exited sender's
            // for hold_orphan_ms after its exit (network.rs).
            let sender = &self.procs[h.from.index()];
            let mut deadline = match h.retransmitted {
                Some((_, give_up_at)) => give_up_at,
                None => h.held_at.plus_ms(self.net.config.hold_open_ms),
            };
            if sender.incarnation != h.from_inc {
                deadline = deadline.min(sender.down_at.plus_ms(self.net.config.hold_orphan_ms));
            }
            let Held {
                from,
                to,
                inc,
                conn,
                msg,
                ..
            } = h;
            if self.now > deadline {
                self.expired(from, to);
                continue;
            }
            self.enqueue_with(
                self.now,
                DUE_EARLIER,
                Event::deliver(from, to, inc, conn, msg),
            );
        }
    }

    /// A held message lost because TCP stopped retransmitting it.
    fn expired(&mut self, from: ProcId, to: ProcId) {
        self.trace.push(
            self.now,
            RecordKind::Dropped {
                from,
                to,
                reason: DropReason::Expired,
            },
        );
    }

    /// Park a message a partition caught, until the heal releases it.
    pub(super) fn hold(
        &mut self,
        from: ProcId,
        to: ProcId,
        (inc, conn): (u32, u32),
        msg: A::Msg,
        retransmitted: Option<(u64, SimTime)>,
    ) {
        self.trace.push(self.now, RecordKind::Held { from, to });
        let from_inc = self.procs[from.index()].incarnation;
        self.held.push(Held {
            from,
            to,
            inc,
            conn,
            msg,
            held_at: self.now,
            from_inc,
            retransmitted,
        });
    }

    /// Which end of the link `from -> to` retransmits `msg` under a partition, and for
    /// how long: the sender if its transport says so, else the receiver.
    pub(super) fn retransmitted_by(
        &self,
        from: ProcId,
        to: ProcId,
        msg: &A::Msg,
    ) -> Option<(ProcId, u64)> {
        if let Some(ms) = self.procs[from.index()].actor.retransmits_ms(msg, true) {
            return Some((from, ms));
        }
        self.procs[to.index()]
            .actor
            .retransmits_ms(msg, false)
            .map(|ms| (to, ms))
    }

    /// A client's transport gives up on a message still held: it is lost, and the
    /// client hears of it (its request failed, its stream broke) at once, from itself.
    pub(super) fn give_up(&mut self, client: ProcId, number: u64) -> Option<StepKind> {
        let at = self
            .held
            .iter()
            .position(|h| h.retransmitted.is_some_and(|(n, _)| n == number))?;
        let Held {
            from,
            to,
            inc,
            msg,
            from_inc,
            ..
        } = self.held.remove(at);
        self.expired(from, to);
        let client_inc = if client == from { from_inc } else { inc };
        if let Some(notice) = A::gave_up(&msg) {
            self.deliver_to_itself(client, client_inc, notice);
        }
        Some(StepKind::Lost(client))
    }
}
