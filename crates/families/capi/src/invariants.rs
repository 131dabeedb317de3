//! Invariants of seed incident 2 (Cluster API KubeadmControlPlane scales up while a
//! machine is being deleted; SEED-FACTS.md section 2).
//!
//! Ground truth: the API server's store (Machines, Nodes, the KubeadmControlPlane) and
//! the etcd model's state and log ([`crate::etcd::Etcd`]), found among the
//! processes of the [`View`].
//!
//! - `kcp_no_create_while_deleting`: no Machine owned by a KubeadmControlPlane appears
//!   while another Machine of the same KCP has a deletionTimestamp (judged when the new
//!   Machine is first seen in the store, right after the write that created it).
//! - `kcp_max_surge`: the owned, non-deleting Machines never exceed replicas + 1 (the
//!   KCP's max surge of 1), judged when a Machine appears.
//! - `kcp_no_needless_create`: a new Machine is needed: among the other owned Machines,
//!   the non-deleting ones are fewer than replicas or one of them is at another version
//!   than the KCP's. This is the report's "scales up one more time" seen from the
//!   outcome: a reconcile that counted a deleting machine as needing an upgrade may
//!   create after that machine is gone (its health check re-reads the cache), when
//!   `kcp_no_create_while_deleting` no longer sees a deleting machine.
//! - `etcd_removal_keeps_two_nodes`: no etcd member is removed while fewer than 2
//!   workload control-plane Nodes exist. The removal happens in the etcd process, whose
//!   steps are not followed by a check, so the checker keeps the history of the Node
//!   count (it changes only in API server steps, each followed by a check) and judges each
//!   removal of the etcd log by the count at its time; when the count changed in the same
//!   millisecond, the larger value is taken (the benefit of the doubt).
//! - `etcd_quorum`: the etcd cluster never loses quorum.
//! - `etcd_keeps_joining_members`: no etcd member is removed while its Machine exists,
//!   is not being deleted and is still joining (no NodeRef yet, or its Node not yet
//!   labelled control-plane by kubeadm). This is DESIGN.md section 6's "etcd membership
//!   never drops a member whose machine exists" for the case the reviewer asked about
//!   (ReconcileEtcdMembers removing a joining machine's member); a scale down removes
//!   the member of a joined machine it is about to delete, which is allowed. Judged right
//!   after the etcd step that removed it: the member's node name leads to its instance
//!   (the cloud), the instance to the Machine by providerID.
//! - `etcd_leader_candidate_has_node_ref`: ForwardEtcdLeadership is never asked to move
//!   leadership to a candidate without a NodeRef (the upstream nil dereference, a panic).
//! - convergence: every owned Machine at the KCP's version, not deleting, with a NodeRef;
//!   as many as replicas; every workload Node belongs to one of them (a deleted Machine's
//!   Node is deleted); etcd has quorum and its members and the kubeadm ClusterStatus
//!   endpoints are exactly the Machines' Nodes.

use crate::etcd::{Etcd, EtcdEvent};
use crate::kinds::KubeadmControlPlane;
use crate::kinds::Machine;
use crate::kinds::{
    is_control_plane_node, is_workload_node, machine_version, node_ref, owned_machines,
};
use reconsim_check::{NamedCheck, Reads, View, Violation};
use reconsim_sim::{ProcId, SimTime};
use reconsim_world::object::Uid;
use reconsim_world::object::{Node, Resource};
use std::collections::{BTreeSet, VecDeque};

fn workload_nodes(view: &View<'_>) -> usize {
    view.api
        .list(Node::KIND)
        .filter(|n| is_workload_node(n))
        .count()
}

/// Which judgement of a new Machine a [`NewMachines`] checker reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NewMachineRule {
    NoCreateWhileDeleting,
    MaxSurge,
    NoNeedlessCreate,
}

/// `kcp_no_create_while_deleting`, `kcp_max_surge` and `kcp_no_needless_create`: each
/// judges every new Machine.
#[derive(Clone, Debug)]
pub struct NewMachines {
    rule: NewMachineRule,
    seen: BTreeSet<Uid>,
}

impl NewMachines {
    pub const NO_CREATE_WHILE_DELETING: &'static str = "kcp_no_create_while_deleting";
    pub const MAX_SURGE: &'static str = "kcp_max_surge";
    pub const NO_NEEDLESS_CREATE: &'static str = "kcp_no_needless_create";

    fn new(rule: NewMachineRule) -> Self {
        NewMachines {
            rule,
            seen: BTreeSet::new(),
        }
    }

    pub fn no_create_while_deleting() -> Self {
        Self::new(NewMachineRule::NoCreateWhileDeleting)
    }

    pub fn max_surge() -> Self {
        Self::new(NewMachineRule::MaxSurge)
    }

    pub fn no_needless_create() -> Self {
        Self::new(NewMachineRule::NoNeedlessCreate)
    }

    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        for kcp in view.api.list(KubeadmControlPlane::KIND) {
            let owned = owned_machines(view.api.list(Machine::KIND), kcp.meta.uid);
            let fresh: Vec<_> = owned
                .iter()
                .filter(|m| !self.seen.contains(&m.meta.uid))
                .cloned()
                .collect();
            for m in &fresh {
                self.seen.insert(m.meta.uid);
            }
            let Some(new) = fresh.iter().find(|m| !m.meta.is_deleting()) else {
                continue;
            };
            let names = |f: &dyn Fn(&reconsim_world::Object) -> bool| -> Vec<String> {
                owned
                    .iter()
                    .filter(|m| f(m))
                    .map(|m| format!("Machine {}", m.meta.name))
                    .collect()
            };
            let replicas = kcp
                .typed::<KubeadmControlPlane>()
                .map_or(0, |k| k.spec.replicas) as usize;
            match self.rule {
                NewMachineRule::MaxSurge => {
                    let active = owned.iter().filter(|m| !m.meta.is_deleting()).count();
                    if active > replicas + 1 {
                        return Some(Violation {
                            invariant: Self::MAX_SURGE.into(),
                            time: view.now,
                            message: format!(
                                "Machine {} makes {active} non-deleting Machines of KubeadmControlPlane {} (replicas {replicas}, max surge 1)",
                                new.meta.name, kcp.meta.name
                            ),
                            objects: names(&|m| !m.meta.is_deleting()),
                        });
                    }
                }
                NewMachineRule::NoCreateWhileDeleting => {
                    if let Some(del) = owned.iter().find(|m| m.meta.is_deleting()) {
                        return Some(Violation {
                            invariant: Self::NO_CREATE_WHILE_DELETING.into(),
                            time: view.now,
                            message: format!(
                                "Machine {} was created while Machine {} of KubeadmControlPlane {} was being deleted",
                                new.meta.name, del.meta.name, kcp.meta.name
                            ),
                            objects: vec![
                                format!("Machine {}", new.meta.name),
                                format!("Machine {}", del.meta.name),
                            ],
                        });
                    }
                }
                NewMachineRule::NoNeedlessCreate => {
                    let version = kcp
                        .typed::<KubeadmControlPlane>()
                        .map(|k| k.spec.version.as_str());
                    let others: Vec<_> = owned
                        .iter()
                        .filter(|m| m.meta.uid != new.meta.uid && !m.meta.is_deleting())
                        .collect();
                    let outdated = others.iter().any(|m| machine_version(m) != version);
                    if others.len() >= replicas && !outdated {
                        return Some(Violation {
                            invariant: Self::NO_NEEDLESS_CREATE.into(),
                            time: view.now,
                            message: format!(
                                "Machine {} was created although KubeadmControlPlane {} already had {} non-deleting Machines at {} (replicas {replicas})",
                                new.meta.name,
                                kcp.meta.name,
                                others.len(),
                                version.unwrap_or("?")
                            ),
                            objects: {
                                let mut o = names(&|_| true);
                                o.push(format!("KubeadmControlPlane {}", kcp.meta.name));
                                o
                            },
                        });
                    }
                }
            }
        }
        None
    }
}

/// The etcd invariants: which one a checker reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdRule {
    RemovalKeepsTwoNodes,
    Quorum,
    LeaderCandidateHasNodeRef,
    KeepsJoiningMembers,
}

/// `etcd_removal_keeps_two_nodes`, `etcd_quorum`, `etcd_leader_candidate_has_node_ref`.
#[derive(Clone, Debug)]
pub struct EtcdChecker {
    rule: EtcdRule,
    pid: Option<ProcId>,
    /// Log entries already judged.
    judged: usize,
    /// (time, workload Node count from then on), changes only; bounded to the last 64.
    nodes: VecDeque<(SimTime, usize)>,
}

impl EtcdChecker {
    pub const REMOVAL_KEEPS_TWO_NODES: &'static str = "etcd_removal_keeps_two_nodes";
    pub const QUORUM: &'static str = "etcd_quorum";
    pub const LEADER_CANDIDATE_HAS_NODE_REF: &'static str = "etcd_leader_candidate_has_node_ref";
    pub const KEEPS_JOINING_MEMBERS: &'static str = "etcd_keeps_joining_members";

    pub fn new(rule: EtcdRule) -> Self {
        EtcdChecker {
            rule,
            pid: None,
            judged: 0,
            nodes: VecDeque::new(),
        }
    }

    /// The Node count in effect at `t` (the larger one if it changed at `t`).
    fn nodes_at(&self, t: SimTime) -> usize {
        let before = self
            .nodes
            .iter()
            .rev()
            .find(|(at, _)| *at < t)
            .map_or(0, |(_, n)| *n);
        self.nodes
            .iter()
            .filter(|(at, _)| *at == t)
            .map(|(_, n)| *n)
            .fold(before, usize::max)
    }

    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        if self.rule == EtcdRule::RemovalKeepsTwoNodes {
            let n = workload_nodes(view);
            if self.nodes.back().is_none_or(|(_, last)| *last != n) {
                self.nodes.push_back((view.now, n));
                if self.nodes.len() > 64 {
                    self.nodes.pop_front();
                }
            }
        }
        let etcd = view.find_cached::<Etcd>(&mut self.pid)?;
        let log = etcd.log();
        while self.judged < log.len() {
            let (at, event) = &log[self.judged];
            self.judged += 1;
            let found = match (self.rule, event) {
                (EtcdRule::RemovalKeepsTwoNodes, EtcdEvent::Removed { name, members }) => {
                    let nodes = self.nodes_at(*at);
                    (nodes < 2).then(|| Violation {
                        invariant: Self::REMOVAL_KEEPS_TWO_NODES.into(),
                        time: view.now,
                        message: format!(
                            "etcd member {name} was removed at {at} (of {members} members) while {nodes} control-plane Node(s) existed"
                        ),
                        objects: vec![format!("etcd member {name}")],
                    })
                }
                (EtcdRule::Quorum, EtcdEvent::QuorumLost { up, members }) => Some(Violation {
                    invariant: Self::QUORUM.into(),
                    time: view.now,
                    message: format!("etcd lost quorum at {at}: {up} of {members} members up"),
                    objects: etcd
                        .members()
                        .map(|m| format!("etcd member {} (up: {})", m.name, m.up))
                        .collect(),
                }),
                (EtcdRule::KeepsJoiningMembers, EtcdEvent::Removed { name, .. }) => {
                    joining_machine_of(view, name).map(|machine| Violation {
                        invariant: Self::KEEPS_JOINING_MEMBERS.into(),
                        time: view.now,
                        message: format!(
                            "etcd member {name} was removed at {at} while its Machine {machine} was joining the control plane"
                        ),
                        objects: vec![format!("etcd member {name}"), format!("Machine {machine}")],
                    })
                }
                (
                    EtcdRule::LeaderCandidateHasNodeRef,
                    EtcdEvent::NilLeaderCandidate { leaving },
                ) => Some(Violation {
                    invariant: Self::LEADER_CANDIDATE_HAS_NODE_REF.into(),
                    time: view.now,
                    message: format!(
                        "at {at} the KCP forwarded etcd leadership from {leaving} to the newest Machine, which has no NodeRef (a nil dereference: the upstream panic)"
                    ),
                    objects: vec![format!("etcd member {leaving}")],
                }),
                _ => None,
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }
}

/// The name of the non-deleting, still joining Machine whose instance registers as Node
/// `node`, if any: it has no NodeRef, or its Node is not a control-plane Node yet.
fn joining_machine_of(view: &View<'_>, node: &str) -> Option<String> {
    let instance = reconsim_cloud::instances(view, &mut None).find(|i| i.node_name() == node)?;
    let provider_id = instance.provider_id();
    let machine = view.api.list(Machine::KIND).find(|m| {
        !m.meta.is_deleting()
            && m.typed::<Machine>()
                .is_some_and(|x| x.spec.provider_id.as_deref() == Some(provider_id.as_str()))
    })?;
    let joined = node_ref(machine).is_some_and(|n| {
        view.api
            .list(Node::KIND)
            .any(|o| o.meta.name == n && is_control_plane_node(o))
    });
    (!joined).then(|| machine.meta.name.clone())
}

/// The KubeadmControlPlane desired state; `Err` says what is missing.
pub fn converged(view: &View<'_>) -> Result<(), String> {
    let mut wanted_nodes: BTreeSet<String> = BTreeSet::new();
    for kcp in view.api.list(KubeadmControlPlane::KIND) {
        let spec = &kcp
            .typed::<KubeadmControlPlane>()
            .expect("a KubeadmControlPlane")
            .spec;
        let owned = owned_machines(view.api.list(Machine::KIND), kcp.meta.uid);
        if owned.len() != spec.replicas as usize {
            return Err(format!(
                "KubeadmControlPlane {} has {} Machines, wants {}",
                kcp.meta.name,
                owned.len(),
                spec.replicas
            ));
        }
        for m in &owned {
            if m.meta.is_deleting() {
                return Err(format!("Machine {} is still being deleted", m.meta.name));
            }
            if machine_version(m) != Some(spec.version.as_str()) {
                return Err(format!(
                    "Machine {} runs {:?}, not {}",
                    m.meta.name,
                    machine_version(m),
                    spec.version
                ));
            }
            let Some(node) = node_ref(m) else {
                return Err(format!("Machine {} has no NodeRef", m.meta.name));
            };
            wanted_nodes.insert(node.to_string());
        }
    }
    let nodes: BTreeSet<String> = view
        .api
        .list(Node::KIND)
        .filter(|n| is_workload_node(n))
        .map(|n| n.meta.name.clone())
        .collect();
    if let Some(extra) = nodes.difference(&wanted_nodes).next() {
        return Err(format!(
            "Node {extra} belongs to no Machine: a deleted Machine's Node was left behind"
        ));
    }
    if let Some(missing) = wanted_nodes.difference(&nodes).next() {
        return Err(format!("Node {missing} of a Machine does not exist"));
    }
    if let Some((_, etcd)) = view.find::<Etcd>() {
        if !etcd.has_quorum() {
            return Err("etcd has no quorum".into());
        }
        let members: BTreeSet<String> = etcd.members().map(|m| m.name.clone()).collect();
        if members != wanted_nodes {
            return Err(format!(
                "etcd members {members:?} are not the Machines' Nodes {wanted_nodes:?}"
            ));
        }
        let endpoints: BTreeSet<String> = etcd.cluster_status().map(str::to_string).collect();
        if endpoints != wanted_nodes {
            return Err(format!(
                "kubeadm ClusterStatus endpoints {endpoints:?} are not the Machines' Nodes {wanted_nodes:?}"
            ));
        }
    }
    Ok(())
}

impl reconsim_check::Check for NewMachines {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        NewMachines::check(self, view)
    }
    fn reads(&self) -> Reads {
        Reads::kinds([KubeadmControlPlane::KIND, Machine::KIND])
    }
}

impl reconsim_check::Check for EtcdChecker {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        EtcdChecker::check(self, view)
    }
    /// The Node count's history, the etcd log, and (judging a removal) the instance,
    /// Machine and Node of the member removed.
    fn reads(&self) -> Reads {
        Reads::kinds([Node::KIND, Machine::KIND])
            .component::<Etcd>()
            .component::<reconsim_cloud::Cloud>()
    }
}

/// The family's invariants, by name.
pub fn invariants() -> Vec<NamedCheck> {
    vec![
        NamedCheck::new(NewMachines::NO_CREATE_WHILE_DELETING, || {
            Box::new(NewMachines::no_create_while_deleting())
        }),
        NamedCheck::new(
            NewMachines::MAX_SURGE,
            || Box::new(NewMachines::max_surge()),
        ),
        NamedCheck::new(NewMachines::NO_NEEDLESS_CREATE, || {
            Box::new(NewMachines::no_needless_create())
        }),
        NamedCheck::new(EtcdChecker::REMOVAL_KEEPS_TWO_NODES, || {
            Box::new(EtcdChecker::new(EtcdRule::RemovalKeepsTwoNodes))
        }),
        NamedCheck::new(EtcdChecker::QUORUM, || {
            Box::new(EtcdChecker::new(EtcdRule::Quorum))
        }),
        NamedCheck::new(EtcdChecker::KEEPS_JOINING_MEMBERS, || {
            Box::new(EtcdChecker::new(EtcdRule::KeepsJoiningMembers))
        }),
        NamedCheck::new(EtcdChecker::LEADER_CANDIDATE_HAS_NODE_REF, || {
            Box::new(EtcdChecker::new(EtcdRule::LeaderCandidateHasNodeRef))
        }),
    ]
}
