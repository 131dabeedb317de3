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
    /// Someone outside the cluster terminates one instance (target: the cloud): a user in
    /// the console, a spot interruption, a cleanup script. The instance is the
    /// `launch`-th launched (from 1), or without `launch` the oldest not yet terminated,
    /// and if `tag` is given it must carry it (`key=value`, or `key` for any value). It
    /// goes shutting-down -> terminated as by TerminateInstances, its machine shuts
    /// down, and its private address is released for reuse (docs/semantics.md 6.8).
    /// Nothing happens if no such instance is pending or running; the fault's end undoes
    /// nothing (a termination is final).
    TerminateInstance {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag: Option<String>,
    },
    /// Watch events leave this much later than the write's response (target: the API
    /// server; its watch cache lags etcd): every type's, or only `of_kind`'s (the real
    /// server has a watch cache per resource type; crate::watch_cache).
    WatchLag {
        lag_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        of_kind: Option<String>,
    },
    /// This one process's watch events reach it this much later, in order, while its
    /// requests and answers do not wait (target: a manager; a stalled HTTP/2 watch
    /// stream, a slow consumer; docs/semantics.md 4.7).
    WatchStall { lag_ms: u64 },
    /// A periodic resync lands now (target: a manager): every cached object of every
    /// watched kind is offered to the controllers as an update. controller-runtime's
    /// SyncPeriod defaults to 10 hours with 10% jitter, so in a long-lived process a
    /// resync can land at any moment; search places one at an event.
    Resync,
    /// Arm the failpoint `name` of a controller host (target: a manager process): its
    /// `hit`-th hit (from 1, counted from when this fault starts) does `action`. Hits
    /// after the fault ends do nothing.
    Failpoint {
        name: String,
        hit: u32,
        action: FailpointAction,
    },
    /// A user's operation on an object (target: the user's client, `user`): sent when
    /// the fault starts, and its undo (a rollback, a re-create, a label removed) when it
    /// ends. Generated from the object's schema (Acto's operations, SOSP'23).
    Operation(Operation),
}

/// Whether a plan's fault is a user's operation: a run whose plan holds one judges
/// what a spec change may legitimately leave in flight (`AtMostReplicas`), and is not
/// compared with an operation-free run's end.
pub fn is_operation(fault: &reconsim_sim::Fault<WorldFault>) -> bool {
    matches!(
        fault,
        reconsim_sim::Fault::Inject {
            fault: WorldFault::Operation(_),
            ..
        }
    )
}

/// One user operation on one object, as plain data: saved in failure files, shrunk
/// and replayed as is. Values are JSON text, so the operation stays hashable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// The object, as `kubectl` names it with its namespace: `ConfigSet default/web`
    /// (empty for a family's workload action, which names its own).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub object: String,
    pub action: OperationAction,
}

/// What an [`Operation`] does at its start and at its end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OperationAction {
    /// Merge-patch `field` (a dotted path, `spec.replicas`) to `value`; with `back_to`,
    /// patch it back to that (its declared value; `null`: unset) when the fault ends.
    Set {
        field: String,
        value: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        back_to: Option<String>,
    },
    /// Two clients set `field` at the same moment, to `first` and to `second`.
    Concurrent {
        field: String,
        first: String,
        second: String,
    },
    /// Delete the object; with `recreate`, create it again from its declared manifest,
    /// same name, when the fault ends.
    Delete {
        #[serde(default)]
        recreate: bool,
    },
    /// Add label `key` = `value`; remove it when the fault ends.
    Label { key: String, value: String },
    /// A workload action of the scenario's families (`{"create_machine_config": {..}}`,
    /// JSON text), made as the workload makes it, at the fault's time.
    Workload { action: String },
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.object;
        match &self.action {
            OperationAction::Set {
                field,
                value,
                back_to: None,
            } => write!(f, "set {field} of {o} to {value}"),
            OperationAction::Set {
                field,
                value,
                back_to: Some(back),
            } => write!(
                f,
                "set {field} of {o} to {value}, back to {back} at the end"
            ),
            OperationAction::Concurrent {
                field,
                first,
                second,
            } => write!(
                f,
                "two clients set {field} of {o} at once, to {first} and to {second}"
            ),
            OperationAction::Delete { recreate: false } => write!(f, "delete {o}"),
            OperationAction::Delete { recreate: true } => {
                write!(f, "delete {o}, create it again at the end")
            }
            OperationAction::Label { key, value } => {
                write!(f, "label {o} {key}={value}, removed at the end")
            }
            OperationAction::Workload { action } => write!(f, "the workload action {action}"),
        }
    }
}

/// What an armed failpoint does when its hit comes (FoundationDB's BUGGIFY, the fail
/// crate's actions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FailpointAction {
    /// The process crashes right there, and restarts cold this much later.
    Crash { restart_after_ms: u64 },
    /// The failpoint returns an error to the reconcile.
    Error,
    /// The reconcile stalls there this long (a GC pause, a slow disk), then goes on.
    Stall { ms: u64 },
}

impl std::fmt::Display for FailpointAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailpointAction::Crash { restart_after_ms } => {
                write!(f, "crash (restart after {restart_after_ms} ms)")
            }
            FailpointAction::Error => f.write_str("error"),
            FailpointAction::Stall { ms } => write!(f, "stall {ms} ms"),
        }
    }
}

/// The failpoints the fault plan armed in one process ([`WorldFault::Failpoint`]), with
/// their hits: a manager's, or a real program's (reconsim-kube's bridge). Not the process's memory: a crash keeps them, as the plan is outside the
/// process, so a crash at a failpoint's hit does not come again at the next start.
#[derive(Clone, Debug, Default)]
pub struct Failpoints {
    armed: Vec<Armed>,
}

#[derive(Clone, Debug)]
struct Armed {
    name: String,
    hit: u32,
    action: FailpointAction,
    hits: u32,
}

impl Failpoints {
    pub fn arm(&mut self, name: &str, hit: u32, action: FailpointAction) {
        self.armed.push(Armed {
            name: name.to_string(),
            hit,
            action,
            hits: 0,
        });
    }

    pub fn disarm(&mut self, name: &str, hit: u32, action: FailpointAction) {
        if let Some(i) = self
            .armed
            .iter()
            .position(|a| a.name == name && a.hit == hit && a.action == action)
        {
            self.armed.remove(i);
        }
    }

    /// Count a hit of `name`; the first armed failpoint whose hit it is fires: (hit
    /// number, action).
    pub fn hit(&mut self, name: &str) -> Option<(u32, FailpointAction)> {
        let mut fired = None;
        for a in self.armed.iter_mut().filter(|a| a.name == name) {
            a.hits += 1;
            if a.hits == a.hit && fired.is_none() {
                fired = Some((a.hits, a.action));
            }
        }
        fired
    }
}
