//! Everything processes of the world send each other, and the timers they set.
//!
//! One enum for the whole world keeps dispatch static (no boxing on the hot path) and
//! lets the kernel hash every message into the trace. Each component owns its own timer
//! enum; [`Timer`] routes a fired timer back to the component that set it.

use crate::api::{ApiRequest, ApiResponse, WatchEvent};
use crate::cloud::{CloudRequest, CloudResponse};
use crate::etcd::{EtcdRequest, EtcdResponse};
use crate::{
    apiserver, cloud, etcd, informer, kubelet, leader, lifecycle, manager, script, workloads,
};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Msg {
    Api(ApiRequest),
    ApiResp(ApiResponse),
    Watch(WatchEvent),
    Cloud(CloudRequest),
    CloudResp(CloudResponse),
    /// A call to the workload cluster's etcd model (incident 2).
    Etcd(EtcdRequest),
    EtcdResp(EtcdResponse),
    /// A booting machine and a Machine Config Server (incident 3).
    Mco(crate::mco::McoMsg),
    /// The API server's host reset the connections of its crashed process: sent to every
    /// process that had a watch open, when the server starts again (the OS answers a
    /// dead process's connections with a reset; a client's next read fails at once).
    ConnectionReset,
    /// A container process tells its kubelet it exited (same host, never partitioned).
    ContainerExited {
        pod: String,
    },
    Timer(Timer),
}

/// A timer, tagged with the component that set it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    ApiServer(apiserver::Timer),
    Cloud(cloud::Timer),
    Kubelet(kubelet::Timer),
    Lifecycle(lifecycle::Timer),
    Workloads(workloads::Timer),
    Informer(informer::Timer),
    Leader(leader::Timer),
    Manager(manager::Timer),
    Script(script::Timer),
    Etcd(etcd::Timer),
    Mco(crate::mco::Timer),
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

/// Well-known request-id tags.
pub mod tags {
    /// Informer streams use `INFORMER + stream`.
    pub const INFORMER: u16 = 0x0100;
    pub const LEADER: u16 = 0x0200;
    pub const RECONCILER: u16 = 0x0300;
    pub const KUBELET: u16 = 0x0400;
    pub const LIFECYCLE: u16 = 0x0500;
    pub const WORKLOADS: u16 = 0x0600;
    pub const SCRIPT: u16 = 0x0700;
    pub const CLOUD_CLIENT: u16 = 0x0800;
    /// The etcd model's cloud polls.
    pub const ETCD: u16 = 0x0900;
    /// Machine Config Servers and booting machines (incident 3).
    pub const MCO: u16 = 0x0a00;
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
