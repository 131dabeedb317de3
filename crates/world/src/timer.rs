//! Every timer of the world: each core component's own enum, and [`Timer`], which tags
//! a fired timer with the component that set it so its process can route it.
//!
//! A leaf below the messages ([`crate::msg`]) that names no component: a component
//! imports its timers from here (its module re-exports them as `Timer`). Trace hashes
//! come from these types' derived `Hash`: the variants' order and their fields' order
//! are the hashes, so they never change (a new variant goes last).

use crate::object::{ObjectKey, Uid};
use crate::payload::Payload;
use serde::Serialize;

/// A timer, tagged with the component that set it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {
    ApiServer(ApiServerTimer),
    Kubelet(KubeletTimer),
    Lifecycle(LifecycleTimer),
    Workloads(WorkloadsTimer),
    Informer(InformerTimer),
    Leader(LeaderTimer),
    Manager(ManagerTimer),
    Script(ScriptTimer),
    /// A family component's own timer.
    Family(Payload),
}

/// The API server's timers (`apiserver::ApiServer`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ApiServerTimer {
    /// Run the garbage collector's sweep.
    GcSweep,
    /// Send the held watch events that are due.
    ReleaseWatch,
    /// Watch `watch_id`'s next bookmark, or its end ([`crate::api::WatchOptions`]).
    WatchTick { watch_id: u64 },
    /// The namespace controller's pass over the namespaces being terminated.
    NamespaceSweep,
}

/// A kubelet's timers, and its containers' (`kubelet::Kubelet`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum KubeletTimer {
    /// Renew the node Lease (the periodic heartbeat).
    RenewLease { epoch: u32 },
    /// Retry a failed Lease renew.
    RetryLease { epoch: u32 },
    /// Node status and pod housekeeping.
    Sync { epoch: u32 },
    /// A crash-looping container's back-off is over.
    Restart {
        epoch: u32,
        namespace: String,
        name: String,
        uid: Uid,
    },
    /// A container process with an exit time exits (`kubelet::Container`).
    ContainerExit,
    /// Look at the bootstrap CSR again (or make a new one).
    CsrPoll { epoch: u32 },
    /// A terminating pod's grace period is over: kill its container.
    Kill {
        epoch: u32,
        namespace: String,
        name: String,
        uid: Uid,
    },
}

/// The node lifecycle controller's timers (`lifecycle::NodeLifecycle`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LifecycleTimer {
    /// node-monitor-period.
    Monitor,
    /// The earliest pending toleration runs out.
    Evict,
}

/// The Deployment controller's and scheduler's timer (`workloads::Workloads`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum WorkloadsTimer {
    /// Periodic full pass (retries unschedulable pods, expired expectations).
    Resync,
}

/// An informer's timers, in whichever process hosts it (`informer::Informer`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum InformerTimer {
    /// The connection health check of informer `id`.
    Health { id: u32 },
    /// Retry the list of reflector `index` of informer `id`.
    Relist { id: u32, index: u32 },
    /// Request `req` of reflector `index` of informer `id` is overdue if still pending.
    Request { id: u32, index: u32, req: u64 },
    /// Watch `watch_id` of reflector `index` of informer `id` reached its timeout.
    WatchEnd { id: u32, index: u32, watch_id: u64 },
}

/// The timers of an elector (and of its `leader::Candidate` host). `epoch` ties a timer to
/// one run of the elector, so timers of a run that ended (lost leadership, reset) do nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LeaderTimer {
    /// The next tryAcquireOrRenew of the acquire loop, or the next poll inside a renew window.
    Attempt { epoch: u64 },
    /// Start the next renew window (`wait.Until`'s period after a successful window).
    RenewWindow { epoch: u64 },
    /// Renew window `window` ends: leadership is lost unless it succeeded.
    RenewDeadline { epoch: u64, window: u64 },
    /// Give up waiting for the answer to request `req`.
    RequestTimeout { req: u64 },
    /// `Candidate` only: rejoin the election after losing it (a restarted container).
    Rejoin,
    /// Send the GET of request `req` again: its connection was reset
    /// (docs/semantics.md 4.12).
    RetryGet { req: u64 },
}

/// The controller host's timers (`manager::Manager`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ManagerTimer {
    /// A delayed add of `key` to controller `ctrl`'s queue; `token` names the delay it
    /// was set for (only the key's pending one adds).
    Requeue {
        ctrl: u16,
        key: ObjectKey,
        token: u64,
    },
    /// Request `req` of controller `ctrl` timed out unless answered.
    RequestTimeout { ctrl: u16, req: u64 },
    /// Sleep `req` of controller `ctrl` is over.
    Wake { ctrl: u16, req: u64 },
    /// The informer of the `kind`-th watched kind resyncs, every `period_ms`.
    Resync { kind: u16, period_ms: u64 },
    /// Watch events held by a `WorldFault::WatchStall` are due.
    ReleaseWatch,
    /// The new leader's fence is over.
    FenceOver,
    /// Controller `ctrl`'s read `req`, failed by a connection reset, is sent again.
    Retry { ctrl: u16, req: u64 },
}

/// A scripted client's timer (`script::Script`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ScriptTimer {
    /// Send step `n` of the script.
    Step(usize),
    /// A retrying script's request `req` for step `step` has had no answer for its
    /// timeout: it failed.
    Timeout { step: usize, req: u64 },
}

/// Hashed by hand so that `Step` hashes as it did when it was the only variant (derived
/// `Hash` writes no discriminant for a one-variant enum: its field alone), and every
/// trace hash recorded before stays; `Timeout` writes first a tag no `Step` writes.
impl std::hash::Hash for ScriptTimer {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            ScriptTimer::Step(n) => n.hash(state),
            ScriptTimer::Timeout { step, req } => {
                usize::MAX.hash(state);
                step.hash(state);
                req.hash(state);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_sim::StableHasher;

    /// The trace folds these hashes in: a reordered variant or field changes every
    /// recorded trace hash, so it fails here first.
    #[test]
    fn timers_hash_as_they_always_did() {
        let hashes = [
            Timer::ApiServer(ApiServerTimer::ReleaseWatch),
            Timer::Kubelet(KubeletTimer::CsrPoll { epoch: 3 }),
            Timer::Lifecycle(LifecycleTimer::Evict),
            Timer::Workloads(WorkloadsTimer::Resync),
            Timer::Informer(InformerTimer::WatchEnd {
                id: 1,
                index: 2,
                watch_id: 3,
            }),
            Timer::Leader(LeaderTimer::RenewDeadline {
                epoch: 4,
                window: 5,
            }),
            Timer::Manager(ManagerTimer::Wake { ctrl: 6, req: 7 }),
            Timer::Script(ScriptTimer::Step(8)),
        ]
        .map(|t| StableHasher::hash_one(&t));
        // Pinned from the enums as they stood in msg.rs and each component (0.6.0).
        assert_eq!(
            hashes,
            [
                0x08328707b4eb6e3a,
                0xd0996218671e8278,
                0x08395307b4f1348c,
                0xaf63be4c8601b992,
                0xdab36b16322f3d50,
                0x3e857555f885d0b9,
                0x1e97756efb43e606,
                0x08285e07b4e2d40a,
            ],
            "{hashes:#018x?}"
        );
    }
}
