//! The invariants by name, and the checker each one runs.
//!
//! Scenario files name invariants in snake_case; [`Invariant::checker`] makes the
//! checker (with its own state) for one run. Adding an invariant: a variant here and in
//! [`Invariant::ALL`], its checker in the incident's module, one line in each match.
//!
//! Users' own invariants are not variants: a binary registers a [`Check`] by name
//! (`reconsim_scenario::extension::Extensions::invariant`) and each run holds it as
//! [`Checker::Custom`].

use crate::{View, Violation, kcp, machineapi, mco};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariant {
    /// Incident 1: no instance outlives its Machine.
    NoLeakedInstances,
    /// Incident 1: no Machine has two instances; no over-provisioning create.
    NoDuplicateMachines,
    /// Incident 3: no config named by a node, a pool or a booting machine is missing.
    NoMissingReferencedConfig,
    /// Incident 2: no KCP Machine is created while another is being deleted.
    KcpNoCreateWhileDeleting,
    /// Incident 2: owned non-deleting Machines never exceed replicas + 1.
    KcpMaxSurge,
    /// Incident 2: a KCP Machine is created only when one is missing or out of date.
    KcpNoNeedlessCreate,
    /// Incident 2: no etcd member is removed with fewer than 2 control-plane Nodes.
    EtcdRemovalKeepsTwoNodes,
    /// Incident 2: etcd never loses quorum.
    EtcdQuorum,
    /// Incident 2: no etcd member of a joining Machine is removed.
    EtcdKeepsJoiningMembers,
    /// Incident 2: the etcd leadership candidate has a NodeRef.
    EtcdLeaderCandidateHasNodeRef,
}

impl Invariant {
    /// Every builtin invariant, in declaration order (for error messages that list the
    /// known names).
    pub const ALL: [Invariant; 10] = [
        Invariant::NoLeakedInstances,
        Invariant::NoDuplicateMachines,
        Invariant::NoMissingReferencedConfig,
        Invariant::KcpNoCreateWhileDeleting,
        Invariant::KcpMaxSurge,
        Invariant::KcpNoNeedlessCreate,
        Invariant::EtcdRemovalKeepsTwoNodes,
        Invariant::EtcdQuorum,
        Invariant::EtcdKeepsJoiningMembers,
        Invariant::EtcdLeaderCandidateHasNodeRef,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::NoLeakedInstances => machineapi::NoLeakedInstances::NAME,
            Invariant::NoDuplicateMachines => machineapi::NoDuplicateMachines::NAME,
            Invariant::NoMissingReferencedConfig => mco::NoMissingReferencedConfig::NAME,
            Invariant::KcpNoCreateWhileDeleting => kcp::NewMachines::NO_CREATE_WHILE_DELETING,
            Invariant::KcpMaxSurge => kcp::NewMachines::MAX_SURGE,
            Invariant::KcpNoNeedlessCreate => kcp::NewMachines::NO_NEEDLESS_CREATE,
            Invariant::EtcdRemovalKeepsTwoNodes => kcp::EtcdChecker::REMOVAL_KEEPS_TWO_NODES,
            Invariant::EtcdQuorum => kcp::EtcdChecker::QUORUM,
            Invariant::EtcdKeepsJoiningMembers => kcp::EtcdChecker::KEEPS_JOINING_MEMBERS,
            Invariant::EtcdLeaderCandidateHasNodeRef => {
                kcp::EtcdChecker::LEADER_CANDIDATE_HAS_NODE_REF
            }
        }
    }

    /// A fresh checker for one run.
    pub fn checker(self) -> Checker {
        match self {
            Invariant::NoLeakedInstances => Checker::Leaks(machineapi::NoLeakedInstances::new(0)),
            Invariant::NoDuplicateMachines => {
                Checker::Duplicates(machineapi::NoDuplicateMachines::default())
            }
            Invariant::NoMissingReferencedConfig => {
                Checker::MissingConfig(mco::NoMissingReferencedConfig::default())
            }
            Invariant::KcpNoCreateWhileDeleting => {
                Checker::KcpNewMachines(kcp::NewMachines::no_create_while_deleting())
            }
            Invariant::KcpMaxSurge => Checker::KcpNewMachines(kcp::NewMachines::max_surge()),
            Invariant::KcpNoNeedlessCreate => {
                Checker::KcpNewMachines(kcp::NewMachines::no_needless_create())
            }
            Invariant::EtcdRemovalKeepsTwoNodes => {
                Checker::Etcd(kcp::EtcdChecker::new(kcp::EtcdRule::RemovalKeepsTwoNodes))
            }
            Invariant::EtcdQuorum => Checker::Etcd(kcp::EtcdChecker::new(kcp::EtcdRule::Quorum)),
            Invariant::EtcdKeepsJoiningMembers => {
                Checker::Etcd(kcp::EtcdChecker::new(kcp::EtcdRule::KeepsJoiningMembers))
            }
            Invariant::EtcdLeaderCandidateHasNodeRef => Checker::Etcd(kcp::EtcdChecker::new(
                kcp::EtcdRule::LeaderCandidateHasNodeRef,
            )),
        }
    }
}

/// One invariant's checker and its memory between events.
#[derive(Clone, Debug)]
pub enum Checker {
    Leaks(machineapi::NoLeakedInstances),
    Duplicates(machineapi::NoDuplicateMachines),
    MissingConfig(mco::NoMissingReferencedConfig),
    KcpNewMachines(kcp::NewMachines),
    Etcd(kcp::EtcdChecker),
    /// A user's invariant, registered under `name`: every violation it reports carries
    /// that name, whatever its `invariant` field said.
    Custom {
        name: String,
        check: Box<dyn Check>,
    },
}

/// A user's invariant: the same shape as the builtin checkers. `check` runs after every
/// event that can change what checkers read (the API server's writes, the cloud, faults)
/// and keeps whatever memory it needs in `self`; the first `Some` stops the run. Read
/// only the [`View`]: ground truth, never a controller's cache. Derive `Clone` and
/// `Debug` and [`CheckClone`] comes for free.
pub trait Check: CheckClone + std::fmt::Debug {
    fn check(&mut self, view: &View<'_>) -> Option<Violation>;
}

/// Cloning a boxed [`Check`]; implemented for every `Check + Clone`.
pub trait CheckClone {
    fn clone_box(&self) -> Box<dyn Check>;
}

impl<T: Check + Clone + 'static> CheckClone for T {
    fn clone_box(&self) -> Box<dyn Check> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Check> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl Checker {
    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        match self {
            Checker::Leaks(c) => c.check(view),
            Checker::Duplicates(c) => c.check(view),
            Checker::MissingConfig(c) => c.check(view),
            Checker::KcpNewMachines(c) => c.check(view),
            Checker::Etcd(c) => c.check(view),
            Checker::Custom { name, check } => check.check(view).map(|mut v| {
                v.invariant.clone_from(name);
                v
            }),
        }
    }
}
