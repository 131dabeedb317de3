//! Invariants of seed incident 1 (OpenShift machine-api, duplicate controllers).
//!
//! - `no_duplicate_machines`: no Machine ever has two non-terminated instances (by the
//!   `Name` tag), and no MachineSet controller creates a Machine while the set already
//!   has `replicas` owned, non-deleting Machines (over-provisioning, judged at the moment
//!   each new Machine appears in the store).
//! - `no_leaked_instances`: every cluster-tagged instance that is pending, running,
//!   stopping or stopped belongs to a Machine of the same name that still exists
//!   (instances shutting down are being cleaned up). A leak is reported once it has
//!   lasted `grace_ms` (0: at once, since a correct controller removes a Machine only
//!   after its instance is gone).
//! - convergence: every MachineSet has exactly `replicas` Machines, none being deleted,
//!   each with exactly one instance and that one running, and no instance is orphaned.

use crate::kinds::{Machine, MachineSet};
use reconsim_check::{NamedCheck, Reads, View, Violation};
use reconsim_cloud::{Cloud, Instance, InstanceState, instances};
use reconsim_sim::{ProcId, SimTime};
use reconsim_world::object::Resource;
use reconsim_world::object::{Object, Uid};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The tag that names an instance's Machine.
pub const NAME_TAG: &str = "Name";
/// The tag every instance of the simulated cluster carries.
pub const CLUSTER_TAG: &str = "kubernetes.io/cluster/reconsim";

fn cluster_instance(i: &Instance) -> Option<&str> {
    i.tags.get(CLUSTER_TAG)?;
    i.tags.get(NAME_TAG).map(String::as_str)
}

/// Machines by name (all namespaces: instance names are cluster-unique in practice).
fn machines_by_name<'a>(view: &View<'a>) -> BTreeMap<&'a str, &'a Arc<Object>> {
    view.api
        .list(Machine::KIND)
        .map(|m| (m.meta.name.as_str(), m))
        .collect()
}

/// no_duplicate_machines.
#[derive(Clone, Debug, Default)]
pub struct NoDuplicateMachines {
    /// Machines already judged for over-provisioning.
    seen: BTreeSet<Uid>,
    cloud: Option<ProcId>,
}

impl NoDuplicateMachines {
    pub const NAME: &'static str = "no_duplicate_machines";

    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        // Two live instances for one Machine name.
        let mut live: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for i in instances(view, &mut self.cloud) {
            if i.state == InstanceState::Terminated {
                continue;
            }
            if let Some(name) = cluster_instance(i) {
                live.entry(name).or_default().push(&i.id);
            }
        }
        if let Some((name, ids)) = live.iter().find(|(_, ids)| ids.len() > 1) {
            return Some(Violation {
                invariant: Self::NAME.into(),
                time: view.now,
                message: format!(
                    "Machine {name} has {} non-terminated instances: {}",
                    ids.len(),
                    ids.join(", ")
                ),
                objects: std::iter::once(format!("Machine {name}"))
                    .chain(ids.iter().map(|id| format!("instance {id}")))
                    .collect(),
            });
        }
        // A Machine created while its set already had enough.
        for m in view.api.list(Machine::KIND) {
            if !self.seen.insert(m.meta.uid) {
                continue;
            }
            let Some(owner) = m.meta.controller_ref() else {
                continue;
            };
            let Some(ms) = view.api.by_uid(owner.uid) else {
                continue;
            };
            let replicas = ms.typed::<MachineSet>().map_or(0, |s| s.spec.replicas) as usize;
            let active: Vec<&Arc<Object>> = view
                .api
                .list(Machine::KIND)
                .filter(|o| {
                    !o.meta.is_deleting()
                        && o.meta.controller_ref().is_some_and(|r| r.uid == owner.uid)
                })
                .collect();
            if !m.meta.is_deleting() && active.len() > replicas {
                return Some(Violation {
                    invariant: Self::NAME.into(),
                    time: view.now,
                    message: format!(
                        "Machine {} was created while MachineSet {} already had {} of {} replicas: now {} Machines",
                        m.meta.name,
                        ms.meta.name,
                        active.len() - 1,
                        replicas,
                        active.len()
                    ),
                    objects: std::iter::once(format!("MachineSet {}", ms.meta.name))
                        .chain(active.iter().map(|o| format!("Machine {}", o.meta.name)))
                        .collect(),
                });
            }
        }
        None
    }
}

/// no_leaked_instances.
#[derive(Clone, Debug, Default)]
pub struct NoLeakedInstances {
    pub grace_ms: u64,
    /// When each orphan was first seen.
    orphans_since: BTreeMap<String, reconsim_sim::SimTime>,
    cloud: Option<ProcId>,
}

impl NoLeakedInstances {
    pub const NAME: &'static str = "no_leaked_instances";

    pub fn new(grace_ms: u64) -> Self {
        NoLeakedInstances {
            grace_ms,
            orphans_since: BTreeMap::new(),
            cloud: None,
        }
    }

    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let machines = machines_by_name(view);
        let mut still = BTreeMap::new();
        let mut found = None;
        for i in instances(view, &mut self.cloud) {
            let live = matches!(
                i.state,
                InstanceState::Pending
                    | InstanceState::Running
                    | InstanceState::Stopping
                    | InstanceState::Stopped
            );
            let Some(name) = cluster_instance(i) else {
                continue;
            };
            if !live || machines.contains_key(name) {
                continue;
            }
            let since = *self.orphans_since.get(&i.id).unwrap_or(&view.now);
            still.insert(i.id.clone(), since);
            if found.is_none() && view.now.since(since) >= self.grace_ms {
                found = Some(Violation {
                    invariant: Self::NAME.into(),
                    time: view.now,
                    message: format!(
                        "instance {} ({:?}, tagged Name={name}) belongs to no Machine: Machine {name} is gone",
                        i.id, i.state
                    ),
                    objects: vec![format!("instance {}", i.id), format!("Machine {name}")],
                });
            }
        }
        self.orphans_since = still;
        found
    }
}

/// The machine-api desired state; `Err` says what is missing.
pub fn converged(view: &View<'_>) -> Result<(), String> {
    let mut by_machine: BTreeMap<&str, Vec<&Instance>> = BTreeMap::new();
    for i in instances(view, &mut None) {
        if matches!(
            i.state,
            InstanceState::Terminated | InstanceState::ShuttingDown
        ) {
            continue;
        }
        if let Some(name) = cluster_instance(i) {
            by_machine.entry(name).or_default().push(i);
        }
    }
    let machines = machines_by_name(view);
    for ms in view.api.list(MachineSet::KIND) {
        let replicas = ms.typed::<MachineSet>().map_or(0, |s| s.spec.replicas) as usize;
        let owned: Vec<&Arc<Object>> = view
            .api
            .list(Machine::KIND)
            .filter(|m| {
                m.meta
                    .controller_ref()
                    .is_some_and(|r| r.uid == ms.meta.uid)
            })
            .collect();
        if owned.len() != replicas {
            return Err(format!(
                "MachineSet {} has {} Machines, wants {replicas}",
                ms.meta.name,
                owned.len()
            ));
        }
        for m in owned {
            if m.meta.is_deleting() {
                return Err(format!("Machine {} is still being deleted", m.meta.name));
            }
            let mine = by_machine
                .get(m.meta.name.as_str())
                .map_or(&[][..], |v| v.as_slice());
            match mine {
                [] => return Err(format!("Machine {}: no instance", m.meta.name)),
                [one] if one.state == InstanceState::Running => {}
                [one] => {
                    return Err(format!(
                        "Machine {}: instance {} is {:?}, not running",
                        m.meta.name, one.id, one.state
                    ));
                }
                many => {
                    return Err(format!(
                        "Machine {}: {} instances ({})",
                        m.meta.name,
                        many.len(),
                        many.iter()
                            .map(|i| i.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
    }
    if let Some((name, list)) = by_machine.iter().find(|(n, _)| !machines.contains_key(*n)) {
        return Err(format!(
            "instance {} (Name={name}) has no Machine",
            list[0].id
        ));
    }
    Ok(())
}

impl reconsim_check::Check for NoDuplicateMachines {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        NoDuplicateMachines::check(self, view)
    }
    fn reads(&self) -> Reads {
        Reads::kinds([Machine::KIND, MachineSet::KIND]).component::<Cloud>()
    }
}

impl reconsim_check::Check for NoLeakedInstances {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        NoLeakedInstances::check(self, view)
    }
    fn reads(&self) -> Reads {
        Reads::kinds([Machine::KIND]).component::<Cloud>()
    }
    /// The oldest orphan's grace runs out.
    fn due(&self) -> Option<SimTime> {
        let oldest = self.orphans_since.values().min()?;
        Some(SimTime(oldest.as_ms().saturating_add(self.grace_ms)))
    }
}

/// The family's invariants, by name.
pub fn invariants() -> Vec<NamedCheck> {
    vec![
        NamedCheck::new(NoLeakedInstances::NAME, || {
            Box::new(NoLeakedInstances::new(0))
        }),
        NamedCheck::new(NoDuplicateMachines::NAME, || {
            Box::new(NoDuplicateMachines::default())
        }),
    ]
}
