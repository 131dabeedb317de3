//! The client's connections as kube-client 5's hyper-util legacy pool keeps them, so
//! the bridge knows which of its requests open a new connection and which go on an
//! open one: under a partition they fail differently (docs/semantics.md 4.8).
//!
//! Facts, at the pinned versions: kube-client enables hyper's `http1` only, so a
//! connection carries one request (or one watch) at a time; hyper-util's legacy
//! `Builder` keeps an idle connection `Some(Duration::from_secs(90))` and hands out the
//! most recently idled first (`IdlePopper::pop` takes from the end of its list,
//! skipping expired ones); kube's `Config` sets `connect_timeout: Some(30 s)` and
//! `read_timeout: None` (kube-client `src/config/mod.rs`, `DEFAULT_CONNECT_TIMEOUT`).

use reconsim_sim::SimTime;
use reconsim_sim::network::RETRANSMIT_OPEN_MS;

/// hyper-util's legacy pool: how long an idle connection is kept for reuse.
pub const POOL_IDLE_MS: u64 = 90_000;
/// kube-client's `DEFAULT_CONNECT_TIMEOUT`: how long a new connection keeps trying.
pub const CONNECT_TIMEOUT_MS: u64 = 30_000;
/// More idle connections than this are closed as they come back (hyper's own bound,
/// `max_idle_per_host`, is unbounded; a program never has this many at once).
const IDLE_MAX: usize = 256;

/// Which connection a request goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    /// A connection of the pool, open already.
    Pooled,
    /// A new connection: the request's first bytes follow the handshake.
    New,
}

impl Conn {
    /// How long the connection keeps trying across a partition: kube's connect timeout
    /// for a new one; TCP's retransmissions (`tcp_retries2`) for an open one, since no
    /// read timeout or health check closes it first.
    pub fn retransmits_ms(self) -> u64 {
        match self {
            Conn::New => CONNECT_TIMEOUT_MS,
            Conn::Pooled => RETRANSMIT_OPEN_MS,
        }
    }
}

/// A connection's number, its lane on the network ([`reconsim_sim::Actor::lane`]):
/// each connection is a FIFO link of its own. Never 0, the lane of everything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// The idle connections, by when each became idle (latest last).
#[derive(Debug, Default)]
pub struct Pool {
    idle: Vec<(SimTime, ConnId)>,
    opened: u32,
}

impl Pool {
    /// A connection for a request sent at `now`: the most recently idled one that has
    /// not expired, or a new one.
    pub fn checkout(&mut self, now: SimTime) -> (Conn, ConnId) {
        while let Some((idle_at, id)) = self.idle.pop() {
            if now.since(idle_at) <= POOL_IDLE_MS {
                return (Conn::Pooled, id);
            }
        }
        self.opened = self.opened.wrapping_add(1).max(1);
        (Conn::New, ConnId(self.opened))
    }

    /// A connection whose response was read whole goes back to the pool.
    pub fn checkin(&mut self, now: SimTime, id: ConnId) {
        if self.idle.len() < IDLE_MAX {
            self.idle.push((now, id));
        }
    }

    /// Every idle connection broke (the server's host reset them).
    pub fn clear(&mut self) {
        self.idle.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_latest_idle_connection_within_ninety_seconds() {
        let mut pool = Pool::default();
        let (conn, first) = pool.checkout(SimTime::from_ms(0));
        assert_eq!((conn, first), (Conn::New, ConnId(1)));
        let (_, second) = pool.checkout(SimTime::from_ms(0));
        assert_eq!(second, ConnId(2));
        pool.checkin(SimTime::from_ms(1_000), first);
        pool.checkin(SimTime::from_ms(50_000), second);
        // The latest (idle since 50 s) is taken first; the older one is still there.
        assert_eq!(
            pool.checkout(SimTime::from_ms(120_000)),
            (Conn::Pooled, second)
        );
        // Idle since 1 s: expired at 121 s, dropped, so the request opens a new one.
        assert_eq!(
            pool.checkout(SimTime::from_ms(121_000)),
            (Conn::New, ConnId(3))
        );
    }

    #[test]
    fn a_new_connection_gives_up_at_the_connect_timeout_an_open_one_at_tcp_retries2() {
        assert_eq!(Conn::New.retransmits_ms(), 30_000);
        assert_eq!(Conn::Pooled.retransmits_ms(), 924_600);
    }
}
