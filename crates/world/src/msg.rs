//! Everything processes of the world send each other, and the timers they set.
//!
//! The core's own messages (the API protocol, container exits, connection resets) are
//! typed variants, so every message hashes into the trace as itself; a family's
//! messages travel in the three payload envelopes (`Request`, `Response`, `Family`) as
//! [`Payload`]s. Each component owns its own timer enum ([`crate::timer`]); [`Timer`]
//! routes a fired timer back to the component that set it. This module names no
//! component, so that every component can import it.

use crate::api::{ApiRequest, ApiResponse, WatchEvent};
use crate::payload::{Message, Payload};
pub use crate::timer::Timer;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Msg {
    Api(ApiRequest),
    ApiResp(ApiResponse),
    Watch(WatchEvent),
    /// A call to a family's service process (a cloud API, an etcd model): `id` is the
    /// caller's, to match the [`Msg::Response`].
    Request {
        id: u64,
        body: Payload,
    },
    /// A service's answer to the [`Msg::Request`] with the same `id`.
    Response {
        id: u64,
        body: Payload,
    },
    /// A one-way message between a family's own processes.
    Family(Payload),
    /// A client-go client's one connection to the API server broke (a lost message of
    /// it, or the server's host closed it: [`crate::Component::on_peer_closed`]); sent
    /// by the kernel to the client itself. Every watch on it ends, every request on it
    /// fails.
    ConnectionReset,
    /// A container process tells its kubelet it exited (same host, never partitioned);
    /// the kubelet knows the container by its process.
    ContainerExited,
    /// SIGTERM: the kubelet asks a container process to exit (a pod being deleted).
    /// Every process exits at once ([`crate::Proc`] answers it): Go's default for the
    /// signal, and what controller-runtime before 0.7 and client-go programs do.
    Terminate,
    Timer(Timer),
    /// A client's own transport gave up on one connection under a partition (its
    /// connect timeout, or TCP's retransmissions, ran out): sent by the kernel to the
    /// client itself ([`reconsim_sim::Actor::gave_up`]), for clients whose connections
    /// retransmit ([`crate::component::Component::retransmits_ms`]). Last, so the
    /// variants before it hash as they did (trace hashes stay put).
    ConnectionLost(Lost),
    /// A bookmark on watch `watch_id`: the watch cache is at `resource_version` and the
    /// watch has had every event up to it (a watch opened with
    /// [`crate::api::WatchOptions::bookmarks`]; docs/semantics.md 3.18).
    WatchBookmark {
        watch_id: u64,
        resource_version: u64,
    },
    /// The server ended watch `watch_id`: its `timeoutSeconds` ran out. Its client
    /// re-watches from the last resourceVersion it heard.
    WatchEnd {
        watch_id: u64,
    },
    /// The sender ended (crashed, or exited with its host up) and its host closed every
    /// connection it had with the receiver: sent by the kernel as from the ended
    /// process ([`reconsim_sim::Actor::closed`]), handed to
    /// [`crate::Component::on_peer_closed`].
    PeerClosed,
}

/// What a connection that gave up carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Lost {
    /// The request with this id failed (it, or its answer, never arrived).
    Request(u64),
    /// The watch with this id broke.
    Watch(u64),
}

/// The payload envelopes, built from a family's own message.
impl Msg {
    /// A call of `request` to a service; `id` matches its [`Msg::response`].
    pub fn request<T: Message>(id: u64, request: T) -> Msg {
        Msg::Request {
            id,
            body: Payload::new(request),
        }
    }

    /// A service's answer to the request with `id`.
    pub fn response<T: Message>(id: u64, answer: T) -> Msg {
        Msg::Response {
            id,
            body: Payload::new(answer),
        }
    }

    /// A one-way message between a family's own processes.
    pub fn family<T: Message>(message: T) -> Msg {
        Msg::Family(Payload::new(message))
    }

    /// A family's timer, to set with `ctx.set_timer`.
    pub fn family_timer<T: Message>(timer: T) -> Msg {
        Msg::Timer(Timer::Family(Payload::new(timer)))
    }
}

/// Request ids: the high 16 bits name the component inside a process that sent the
/// request, so a process with several clients (informers, an elector, a reconciler) can
/// route each response to its owner.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ReqIds {
    tag: u16,
    next: u64,
}

impl ReqIds {
    pub const fn new(tag: u16) -> Self {
        ReqIds { tag, next: 0 }
    }

    /// A fresh request id.
    pub fn issue(&mut self) -> u64 {
        self.next += 1;
        (u64::from(self.tag) << 48) | (self.next & 0xffff_ffff_ffff)
    }

    pub fn owns(&self, id: u64) -> bool {
        (id >> 48) as u16 == self.tag
    }
}

/// Well-known request-id tags of the core's components; a family picks its own from
/// 0x0800 up (the tag only has to differ from the others of the same process).
pub mod tags {
    /// Informer streams use `INFORMER + stream`.
    pub const INFORMER: u16 = 0x0100;
    pub const LEADER: u16 = 0x0200;
    pub const RECONCILER: u16 = 0x0300;
    pub const KUBELET: u16 = 0x0400;
    pub const LIFECYCLE: u16 = 0x0500;
    pub const WORKLOADS: u16 = 0x0600;
    pub const SCRIPT: u16 = 0x0700;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages sit in the kernel's queue by value: keep them small.
    #[test]
    fn messages_stay_small() {
        assert!(
            std::mem::size_of::<Msg>() <= 128,
            "{}",
            std::mem::size_of::<Msg>()
        );
    }
}
