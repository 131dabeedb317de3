//! Invariants of seed incident 3 (machine-config-operator: a rendered MachineConfig goes
//! missing while a node still boots; issue #301).
//!
//! - `no_missing_referenced_config`, after every event: every config named by a Node's
//!   currentConfig or desiredConfig annotation, by a pool's spec or status
//!   configuration, or handed by a config server to a machine that is still booting
//!   (served, annotations not yet on its Node), exists in the API server. One allowance,
//!   the daemon's own: a name that has never existed yet may be referenced for up to the
//!   daemon's 5 minutes of polling (the bootstrap render names a config the in-cluster
//!   render controller creates only some seconds later, and the daemon waits for it).
//!   A config that existed and is gone while referenced is a violation at once; a name
//!   still not created after 5 minutes is one too (the daemon goes Degraded then).
//! - convergence: every pool has a target; every machine's Node carries current ==
//!   desired == its pool's target with state Done; no machine is Degraded.

use crate::model::{DAEMON_CONFIG_TIMEOUT_MS, STATE_DONE, node_config};
use crate::model::{MachineConfig, MachineConfigPool, McoMachine};
use reconsim_check::{NamedCheck, Reads, View, Violation};
use reconsim_sim::SimTime;
use reconsim_world::object::ObjectKey;
use reconsim_world::object::{Node, Resource};
use std::collections::{BTreeMap, BTreeSet};

/// no_missing_referenced_config.
#[derive(Clone, Debug)]
pub struct NoMissingReferencedConfig {
    /// How long a never-created name may be referenced.
    pub not_yet_created_grace_ms: u64,
    /// Every config name ever seen in the store.
    existed: BTreeSet<String>,
    /// The live configs' names, sorted, as of `live_at_writes`.
    live: Vec<String>,
    /// The store's MachineConfig writes when `live` and `existed` were last brought up
    /// to date: no write since, no new name.
    live_at_writes: Option<u64>,
    /// The names the Nodes' annotations give, as of that many Node writes.
    by_nodes: KindRefs,
    /// The names the pools' spec and status give, as of that many pool writes.
    by_pools: KindRefs,
    /// The names machines still booting were served, and the machines, in process order
    /// (none before the first check).
    by_machines: Option<Vec<(String, String)>>,
    /// The last check found nothing: one that sees the same names before a grace runs
    /// out finds nothing either.
    quiet: bool,
    /// Never-created names referenced now, since when.
    pending_since: BTreeMap<String, SimTime>,
}

/// One kind's references, kept while the store has no new write of the kind: a check
/// after a machine's step (half of them) lists no kind (issue 33).
#[derive(Clone, Debug, Default)]
struct KindRefs {
    at_writes: Option<u64>,
    /// In the order the kind lists (by name), each object's fields in order.
    refs: Vec<Ref>,
}

/// A config name and who names it.
#[derive(Clone, Debug)]
struct Ref {
    config: String,
    owner: String,
    /// The annotation or field that names it.
    field: &'static str,
}

impl KindRefs {
    /// Bring the references up to date with the store's `writes` of their kind; false
    /// if they were.
    fn refresh<'a>(
        &mut self,
        writes: u64,
        read: impl FnOnce(&mut dyn FnMut(&'a str, &'a str, &'static str)),
    ) -> bool {
        if self.at_writes == Some(writes) {
            return false;
        }
        self.refs.clear();
        read(&mut |config, owner, field| {
            self.refs.push(Ref {
                config: config.to_string(),
                owner: owner.to_string(),
                field,
            })
        });
        self.at_writes = Some(writes);
        true
    }
}

impl Default for NoMissingReferencedConfig {
    fn default() -> Self {
        NoMissingReferencedConfig {
            not_yet_created_grace_ms: DAEMON_CONFIG_TIMEOUT_MS,
            existed: BTreeSet::new(),
            live: Vec::new(),
            live_at_writes: None,
            by_nodes: KindRefs::default(),
            by_pools: KindRefs::default(),
            by_machines: None,
            quiet: false,
            pending_since: BTreeMap::new(),
        }
    }
}

impl NoMissingReferencedConfig {
    pub const NAME: &'static str = "no_missing_referenced_config";

    /// Objects seeded into the store come before the first check (the kept lists follow
    /// `ApiServer::kind_writes`, which seeding does not move).
    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let writes = view.api.kind_writes(MachineConfig::KIND);
        let mut changed = self.live_at_writes != Some(writes);
        if changed {
            // In key order, so sorted by name (cluster-scoped: one namespace).
            self.live.clear();
            for mc in view.api.list(MachineConfig::KIND) {
                let name = mc.meta.name.as_str();
                self.live.push(name.to_string());
                if !self.existed.contains(name) {
                    self.existed.insert(name.to_string());
                }
            }
            self.live_at_writes = Some(writes);
        }
        changed |= self
            .by_nodes
            .refresh(view.api.kind_writes(Node::KIND), |refer| {
                for n in view.api.list(Node::KIND) {
                    let (c, d, _) = node_config(n);
                    if let Some(c) = c {
                        refer(c, &n.meta.name, "currentConfig");
                    }
                    if let Some(d) = d {
                        refer(d, &n.meta.name, "desiredConfig");
                    }
                }
            });
        changed |= self
            .by_pools
            .refresh(view.api.kind_writes(MachineConfigPool::KIND), |refer| {
                for p in view.api.list(MachineConfigPool::KIND) {
                    let mcp = p.typed::<MachineConfigPool>().expect("a pool");
                    if let Some(s) = &mcp.spec.configuration {
                        refer(s, &p.meta.name, "spec");
                    }
                    if let Some(s) = &mcp.status.configuration {
                        refer(s, &p.meta.name, "status");
                    }
                }
            });
        let machines = || {
            view.sim.actors().filter_map(|(_, proc)| {
                let m = proc.component::<McoMachine>()?;
                Some((m.booting_config()?, m.name()))
            })
        };
        let same = self.by_machines.as_ref().is_some_and(|by| {
            let mut kept = by.iter();
            machines().all(|(c, m)| kept.next().is_some_and(|k| k.0 == c && k.1 == m))
                && kept.next().is_none()
        });
        if !same {
            let by = self.by_machines.get_or_insert_default();
            by.clear();
            for (c, m) in machines() {
                by.push((c.to_string(), m.to_string()));
            }
            changed = true;
        }
        if !changed && self.quiet && self.grace_ends().is_none_or(|due| view.now < due) {
            return None;
        }
        // Who names a config, formatted only for a report.
        enum Who<'a> {
            Node(&'a Ref),
            Pool(&'a Ref),
            Machine(&'a str),
        }
        let describe = |w: &Who<'_>| match w {
            Who::Node(r) => format!("Node {} {}", r.owner, r.field),
            Who::Pool(r) => format!("MachineConfigPool {} {}", r.owner, r.field),
            Who::Machine(m) => format!("machine {m} (booting, served it)"),
        };
        let machines =
            (self.by_machines.iter().flatten()).map(|(c, m)| (c.as_str(), Who::Machine(m)));
        let refs = (self.by_nodes.refs.iter())
            .map(|r| (r.config.as_str(), Who::Node(r)))
            .chain((self.by_pools.refs.iter()).map(|r| (r.config.as_str(), Who::Pool(r))))
            .chain(machines);
        // The never-created names named now, each with when it was first named: the
        // names of `pending_since` still named keep their time, and a new one starts now.
        let mut named: Vec<&str> = Vec::new();
        let mut found = None;
        // Most names are live, and a node's two names are mostly one: the last live name
        // is compared before the search (issue 33).
        let mut last_live: Option<&str> = None;
        for (name, who) in refs {
            if last_live == Some(name) {
                continue;
            }
            if self.live.binary_search_by(|l| l.as_str().cmp(name)).is_ok() {
                last_live = Some(name);
                continue;
            }
            if found.is_some() {
                continue;
            }
            if self.existed.contains(name) {
                let who = describe(&who);
                found = Some(Violation {
                    invariant: Self::NAME.into(),
                    time: view.now,
                    message: format!("MachineConfig {name} is gone but {who} names it"),
                    objects: vec![format!("MachineConfig {name}"), who],
                });
                continue;
            }
            let since = *self.pending_since.get(name).unwrap_or(&view.now);
            named.push(name);
            if view.now.since(since) >= self.not_yet_created_grace_ms {
                let who = describe(&who);
                found = Some(Violation {
                    invariant: Self::NAME.into(),
                    time: view.now,
                    message: format!(
                        "MachineConfig {name} was never created, yet {who} has named it for {} s",
                        view.now.since(since) / 1000
                    ),
                    objects: vec![format!("MachineConfig {name}"), who],
                });
            }
        }
        named.sort_unstable();
        self.pending_since
            .retain(|name, _| named.binary_search(&name.as_str()).is_ok());
        for name in named {
            if !self.pending_since.contains_key(name) {
                self.pending_since.insert(name.to_string(), view.now);
            }
        }
        self.quiet = found.is_none();
        found
    }

    /// Forget what the last check kept (the lists it read, and that it found nothing):
    /// the next check reads everything again. What it remembers of the run (the names
    /// that existed, since when a name is pending) stays. A test holds the check that
    /// keeps to one that forgets before each check (tests/gating.rs).
    pub fn forget(&mut self) {
        self.live_at_writes = None;
        self.by_nodes.at_writes = None;
        self.by_pools.at_writes = None;
        self.by_machines = None;
        self.quiet = false;
    }

    /// When the oldest never-created name's grace runs out.
    fn grace_ends(&self) -> Option<SimTime> {
        let oldest = self.pending_since.values().min()?;
        Some(SimTime(
            oldest.as_ms().saturating_add(self.not_yet_created_grace_ms),
        ))
    }
}

/// The MCO desired state; `Err` says what is missing.
pub fn converged(view: &View<'_>) -> Result<(), String> {
    let pools: BTreeMap<&str, Option<&str>> = view
        .api
        .list(MachineConfigPool::KIND)
        .map(|p| {
            let mcp = p.typed::<MachineConfigPool>().expect("a pool");
            (p.meta.name.as_str(), mcp.status.configuration.as_deref())
        })
        .collect();
    for (name, target) in &pools {
        if target.is_none() {
            return Err(format!("MachineConfigPool {name} has no configuration"));
        }
    }
    for (_, proc) in view.sim.actors() {
        let Some(m) = proc.component::<McoMachine>() else {
            continue;
        };
        if m.is_degraded() {
            return Err(format!("machine {} is Degraded: {:?}", m.name(), m.phase()));
        }
        let target = pools.get(m.pool()).copied().flatten();
        let Some(node) = view.api.get(&ObjectKey::new(Node::KIND, "", m.name())) else {
            return Err(format!(
                "machine {} has no Node ({:?})",
                m.name(),
                m.phase()
            ));
        };
        let (c, d, s) = node_config(node);
        if c.is_none() || c != d || c != target || s != Some(STATE_DONE) {
            return Err(format!(
                "Node {}: current {c:?}, desired {d:?}, state {s:?}; pool {} targets {target:?}",
                m.name(),
                m.pool()
            ));
        }
    }
    Ok(())
}

impl reconsim_check::Check for NoMissingReferencedConfig {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        NoMissingReferencedConfig::check(self, view)
    }
    /// The three kinds that name configs or are them, and each machine's hand-out (the
    /// kubelets' Lease renewals, most of a run's writes, touch none of them).
    fn reads(&self) -> Reads {
        Reads::kinds([MachineConfig::KIND, Node::KIND, MachineConfigPool::KIND])
            .component::<McoMachine>()
    }
    /// The oldest never-created name's grace runs out.
    fn due(&self) -> Option<SimTime> {
        self.grace_ends()
    }
}

/// The family's invariants, by name.
pub fn invariants() -> Vec<NamedCheck> {
    vec![NamedCheck::new(NoMissingReferencedConfig::NAME, || {
        Box::new(NoMissingReferencedConfig::default())
    })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ANNOTATION_CURRENT;
    use reconsim_sim::{FaultPlan, Sim, SimConfig};
    use reconsim_world::Proc;
    use reconsim_world::apiserver::ApiServer;
    use reconsim_world::object::{Object, ObjectMeta};

    /// A name is judged whatever it is, the empty one too: a node that names a config
    /// no one created fails once the grace runs out.
    #[test]
    fn a_never_created_name_fails_after_its_grace_even_if_empty() {
        for name in ["", "rendered-worker-1"] {
            let mut api = ApiServer::new(Default::default());
            let mut meta = ObjectMeta::named("", "worker-0");
            meta.annotations
                .insert(ANNOTATION_CURRENT.to_string(), name.to_string());
            api.seed_object(Object::new(meta, Node::default()));
            let sim: Sim<Proc> = Sim::new(SimConfig::new(7), FaultPlan::new(Vec::new()));
            let mut check = NoMissingReferencedConfig::default();
            let at = |ms| View {
                now: SimTime(ms),
                api: &api,
                sim: &sim,
            };
            assert!(check.check(&at(0)).is_none(), "{name:?}");
            let failed = check
                .check(&at(DAEMON_CONFIG_TIMEOUT_MS))
                .unwrap_or_else(|| panic!("{name:?} was never created"));
            assert!(
                failed.message.contains("was never created"),
                "{}",
                failed.message
            );
        }
    }
}
