//! The builtin families' invariants by name: what scenario files name in `invariants`
//! besides the ones a binary registers ([`crate::extension`]).
//!
//! Each checker lives in its family's crate (crates/families/*/src/invariants.rs) and
//! implements [`reconsim_check::Check`]; this table names them for scenario files.

use reconsim_capi::invariants as kcp;
use reconsim_check::{Check, Checker};
use reconsim_machineapi::invariants as machineapi;
use reconsim_mco::invariants as mco;
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
        let check: Box<dyn Check> = match self {
            Invariant::NoLeakedInstances => Box::new(machineapi::NoLeakedInstances::new(0)),
            Invariant::NoDuplicateMachines => Box::new(machineapi::NoDuplicateMachines::default()),
            Invariant::NoMissingReferencedConfig => {
                Box::new(mco::NoMissingReferencedConfig::default())
            }
            Invariant::KcpNoCreateWhileDeleting => {
                Box::new(kcp::NewMachines::no_create_while_deleting())
            }
            Invariant::KcpMaxSurge => Box::new(kcp::NewMachines::max_surge()),
            Invariant::KcpNoNeedlessCreate => Box::new(kcp::NewMachines::no_needless_create()),
            Invariant::EtcdRemovalKeepsTwoNodes => {
                Box::new(kcp::EtcdChecker::new(kcp::EtcdRule::RemovalKeepsTwoNodes))
            }
            Invariant::EtcdQuorum => Box::new(kcp::EtcdChecker::new(kcp::EtcdRule::Quorum)),
            Invariant::EtcdKeepsJoiningMembers => {
                Box::new(kcp::EtcdChecker::new(kcp::EtcdRule::KeepsJoiningMembers))
            }
            Invariant::EtcdLeaderCandidateHasNodeRef => Box::new(kcp::EtcdChecker::new(
                kcp::EtcdRule::LeaderCandidateHasNodeRef,
            )),
        };
        Checker::new(self.name(), check)
    }
}
