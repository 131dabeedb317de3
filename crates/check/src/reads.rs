//! What a checker reads, so that a run checks it only after a step that changed some of
//! it (issue 33): most of a run's steps are heartbeats and reads that touch nothing an
//! invariant looks at, and a checker asked again about unchanged inputs answers as before.
//!
//! A [`Reads`] names the API server's kinds a checker lists and the component types whose
//! ground truth it reads. The [`Gate`] keeps, per input, the change count seen at the
//! last check: the API server's writes of each kind ([`ApiServer::kind_writes`]) and each
//! matching process's [`Component::changes`] (a process that does not count is read as
//! changed after every step). `Reads::everything()`, the default, checks after every step
//! that changed anything, as before.
//!
//! [`ApiServer::kind_writes`]: reconsim_world::apiserver::ApiServer::kind_writes
//! [`Component::changes`]: reconsim_world::Component::changes

use crate::View;
use reconsim_sim::ProcId;
use reconsim_world::Component;
use reconsim_world::object::Kind;
use std::any::TypeId;

/// The inputs of a checker ([`crate::Check::reads`]).
///
/// ```
/// use reconsim_check::Reads;
/// use reconsim_world::apiserver::ApiServer;
/// use reconsim_world::object::{Node, Pod, Resource};
///
/// // Lists Pods and Nodes, and reads nothing of any process but the API server's store.
/// let reads = Reads::kinds([Pod::KIND, Node::KIND]);
/// assert!(!reads.is_everything());
/// // A checker that also reads a component's own state names its type.
/// let _ = Reads::kinds([Pod::KIND]).component::<ApiServer>();
/// ```
#[derive(Clone, Debug, Default)]
pub struct Reads {
    /// `None`: anything in the world.
    only: Option<Inputs>,
}

#[derive(Clone, Debug, Default)]
struct Inputs {
    kinds: Vec<Kind>,
    components: Vec<TypeId>,
}

impl Reads {
    /// Anything: checked after every step that changed something (the default).
    pub fn everything() -> Self {
        Reads { only: None }
    }

    /// Only the stored objects of these kinds (add components with [`Reads::component`]).
    pub fn kinds(kinds: impl IntoIterator<Item = Kind>) -> Self {
        Reads {
            only: Some(Inputs {
                kinds: kinds.into_iter().collect(),
                components: Vec::new(),
            }),
        }
    }

    /// These inputs and the state of every process running a `T`.
    pub fn component<T: Component>(mut self) -> Self {
        if let Some(only) = &mut self.only {
            only.components.push(TypeId::of::<T>());
        }
        self
    }

    pub fn is_everything(&self) -> bool {
        self.only.is_none()
    }
}

/// A checker's memory of its inputs' change counts at its last check.
#[derive(Clone, Debug)]
pub struct Gate {
    inputs: Inputs,
    /// The processes running one of the component types, in id order.
    procs: Vec<ProcId>,
    /// Processes looked at so far (processes are only ever added).
    scanned: usize,
    /// Per kind, then per process in `procs`: the count at the last check.
    last: Vec<u64>,
}

/// A count no input starts at: the first look is a change.
const UNSEEN: u64 = u64::MAX - 1;

impl Gate {
    /// `None` for a checker that reads everything.
    pub fn new(reads: Reads) -> Option<Gate> {
        let inputs = reads.only?;
        let last = vec![UNSEEN; inputs.kinds.len()];
        Some(Gate {
            inputs,
            procs: Vec::new(),
            scanned: 0,
            last,
        })
    }

    /// Whether any input changed since the last call (the first call: yes). Every
    /// count is brought up to date, so the next call compares against this one.
    pub fn changed(&mut self, view: &View<'_>) -> bool {
        let count = view.sim.proc_count();
        if self.scanned < count && !self.inputs.components.is_empty() {
            for i in self.scanned..count {
                let pid = ProcId(i as u32);
                if self
                    .inputs
                    .components
                    .contains(&view.sim.actor(pid).component_type())
                {
                    self.procs.push(pid);
                    self.last.push(UNSEEN);
                }
            }
        }
        self.scanned = count;
        let mut changed = false;
        let (kinds, procs) = self.last.split_at_mut(self.inputs.kinds.len());
        for (kind, last) in self.inputs.kinds.iter().zip(kinds) {
            let now = view.api.kind_writes(*kind);
            changed |= std::mem::replace(last, now) != now;
        }
        for (pid, last) in self.procs.iter().zip(procs) {
            // A process that does not count its changes may have changed at any step.
            let now = view.sim.actor(*pid).changes().unwrap_or(UNSEEN);
            changed |= now == UNSEEN || std::mem::replace(last, now) != now;
        }
        changed
    }
}
