//! Faults of the world that the kernel does not know: they reach the named process's
//! `on_fault` through `reconsim_sim::Fault::Inject`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorldFault {
    /// The kubelet process stops (target: a kubelet). Its containers keep running.
    KubeletStop,
    /// New instances stay invisible to DescribeInstances for this much longer
    /// (target: the cloud).
    CloudDescribeLag { lag_ms: u64 },
    /// Booted instances take this much longer to register their Node (target: the cloud).
    NodeJoinDelay { extra_ms: u64 },
    /// Watch events leave this much later than the write's response (target: the API
    /// server; its watch cache lags etcd).
    WatchLag { lag_ms: u64 },
}
