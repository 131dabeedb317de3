//! The machine-config-operator family in scenario files (`controllers.mco`, seed incident
//! 3): its settings, validation, the objects and processes it adds to a world, and its
//! workload action (`create_machine_config`).
//!
//! A world of this family (docs/seeds/mco.md):
//! - the pools (`master`, `worker`, ...) seeded at t = 0 with the real selectors: nodes by
//!   `node-role.kubernetes.io/<pool>` (and `node.openshift.io/os_id: rhcos`, so the
//!   scenario's own infra node, which hosts the controllers, belongs to no pool), source
//!   configs by `machineconfiguration.openshift.io/role: <pool>`;
//! - `machine-config-operator`: a scripted client on the infra node creating the source
//!   configs at their `at_ms` (bring-up: 00-master, then osimageurl, ssh, kubelet within
//!   seconds); a later config change is a user action, `create_machine_config`, in the
//!   scenario's workload, so convergence is judged from it;
//! - `machine-config-controller`: a manager running the render controller (with the
//!   scenario's GC policy) and the node controller; `machine-config-server`: the
//!   in-cluster config server (recording hand-outs for the `in-use-and-in-flight` policy);
//! - `bootstrap-machine-config-server` on host `bootstrap`, if any machine boots from it:
//!   it serves, per pool, the config the installer rendered from the sources marked
//!   `bootstrap: true` (set osimageurl's to false for the bug of #301, true for PR #355);
//! - one process per machine, on its own host, named as the machine (and its Node).

use crate::controllers::{GcPolicy, NodeController, RenderController};
use crate::model::{
    MachineConfig, MachineConfigPool, MachineConfigServer, MachineConfigSpec, MachineTiming,
    McoMachine, ServerMode, merge, pool_object, rendered_name, source_object,
};
use reconsim_check::{NamedCheck, View};
use reconsim_family::{
    Context, Family, FamilySection, ObjectName, ParamError, Range, Services, WorkloadAction,
};
use reconsim_sim::Sim;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::{Node, Resource};
use reconsim_world::script::{Script, Step};
use reconsim_world::{Endpoints, Proc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The family, for a binary's registry.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mco;

impl Family for Mco {
    fn name(&self) -> &str {
        "mco"
    }

    fn parse(&self, section: &serde_json::Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(reconsim_family::params::parse::<McoSpec>(
            section,
        )?))
    }

    fn actions(&self) -> &[&str] {
        &["create_machine_config"]
    }

    fn invariants(&self) -> Vec<NamedCheck> {
        crate::invariants::invariants()
    }
}

/// `create_machine_config`: a new source MachineConfig of a pool (a config change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateMachineConfig {
    pub name: String,
    pub pool: String,
    pub content: BTreeMap<String, String>,
}

/// The controller process.
pub const CONTROLLER: &str = "machine-config-controller";
/// The in-cluster config server process.
pub const SERVER: &str = "machine-config-server";
/// The process creating the source configs.
pub const OPERATOR: &str = "machine-config-operator";
/// The bootstrap config server process and its host.
pub const BOOTSTRAP_SERVER: &str = "bootstrap-machine-config-server";
pub const BOOTSTRAP_HOST: &str = "bootstrap";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McoSpec {
    /// The render controller's GC policy: none, orphan, keep-latest-only,
    /// older-than-1h, in-use, in-use-and-in-flight.
    pub gc: GcPolicy,
    /// The topology node whose host runs the controller, the server and the operator.
    pub node: String,
    /// Delay before each render (the later 5 s renderDelay); 0 as in the incident.
    #[serde(default)]
    pub render_delay_ms: u64,
    pub pools: Vec<String>,
    pub sources: Vec<SourceSpec>,
    pub machines: Vec<MachineGroup>,
    #[serde(default)]
    pub timing: TimingSpec,
}

/// A source MachineConfig, created at `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    pub name: String,
    pub pool: String,
    pub at_ms: u64,
    pub content: BTreeMap<String, String>,
    /// Whether the installer's bootstrap render sees it.
    #[serde(default = "yes")]
    pub bootstrap: bool,
}

fn yes() -> bool {
    true
}

/// Machines of one pool booting in one window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineGroup {
    pub names: Vec<String>,
    pub pool: String,
    /// Boot from the bootstrap node's server (the first masters) instead of the cluster's.
    #[serde(default)]
    pub from_bootstrap: bool,
    /// Power-on time, drawn per machine.
    pub boot_at_ms: Range,
    /// This group's kubelet join delay (default: `timing.join_ms`).
    #[serde(default)]
    pub join_ms: Option<Range>,
}

/// Durations every machine draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingSpec {
    pub reboot_ms: Range,
    pub join_ms: Range,
    pub daemon_start_ms: Range,
    pub update_ms: Range,
}

impl Default for TimingSpec {
    fn default() -> Self {
        let t = MachineTiming::default();
        let r = |(lo, hi): (u64, u64)| Range { lo, hi };
        TimingSpec {
            reboot_ms: r(t.reboot_ms),
            join_ms: r(t.join_ms),
            daemon_start_ms: r(t.daemon_start_ms),
            update_ms: r(t.update_ms),
        }
    }
}

impl FamilySection for McoSpec {
    /// The pools (MachineConfigPools), the source configs (MachineConfigs, created at
    /// their times) and the machines (each a Node).
    fn object_names(&self) -> Vec<ObjectName> {
        let pools = self
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| ObjectName::new(format!(".pools[{i}]"), MachineConfigPool::KIND, p));
        let sources = self.sources.iter().enumerate().map(|(i, s)| {
            ObjectName::new(format!(".sources[{i}].name"), MachineConfig::KIND, &s.name)
        });
        let machines = self.machines.iter().enumerate().flat_map(|(i, g)| {
            g.names.iter().enumerate().map(move |(j, n)| {
                ObjectName::new(format!(".machines[{i}].names[{j}]"), Node::KIND, n)
            })
        });
        pools.chain(sources).chain(machines).collect()
    }

    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        let err = |path: String, msg: String| Err(ParamError::at(format!(".{path}"), msg));
        context.node(".node", &self.node)?;
        let mut pools = BTreeSet::new();
        for (i, p) in self.pools.iter().enumerate() {
            if p.is_empty() || !pools.insert(p) {
                return err(
                    format!("pools[{i}]"),
                    "a unique, non-empty pool name".into(),
                );
            }
        }
        if pools.is_empty() {
            return err("pools".into(), "at least one pool".into());
        }
        let mut names = BTreeSet::new();
        for (i, s) in self.sources.iter().enumerate() {
            if s.name.is_empty() || !names.insert(&s.name) {
                return err(
                    format!("sources[{i}].name"),
                    "a unique, non-empty MachineConfig name".into(),
                );
            }
            if !pools.contains(&s.pool) {
                return err(
                    format!("sources[{i}].pool"),
                    format!("one of {:?}, not `{}`", self.pools, s.pool),
                );
            }
            if s.at_ms > context.duration_ms {
                return err(
                    format!("sources[{i}].at_ms"),
                    "a time within duration_ms".into(),
                );
            }
        }
        let taken: BTreeSet<String> = context
            .hosts
            .iter()
            .cloned()
            .chain([BOOTSTRAP_HOST.to_string()])
            .chain(self.fixed_processes())
            .collect();
        let mut machines = BTreeSet::new();
        for (i, g) in self.machines.iter().enumerate() {
            if !pools.contains(&g.pool) {
                return err(
                    format!("machines[{i}].pool"),
                    format!("one of {:?}, not `{}`", self.pools, g.pool),
                );
            }
            g.boot_at_ms.check(&format!(".machines[{i}].boot_at_ms"))?;
            if let Some(j) = g.join_ms {
                j.check(&format!(".machines[{i}].join_ms"))?;
            }
            if g.names.is_empty() {
                return err(format!("machines[{i}].names"), "a non-empty list".into());
            }
            for (j, n) in g.names.iter().enumerate() {
                if n.is_empty() || taken.contains(n) || !machines.insert(n) {
                    return err(
                        format!("machines[{i}].names[{j}]"),
                        format!(
                            "a unique machine name clashing with no host or process, not `{n}`"
                        ),
                    );
                }
            }
        }
        let t = &self.timing;
        t.reboot_ms.check(".timing.reboot_ms")?;
        t.join_ms.check(".timing.join_ms")?;
        t.daemon_start_ms.check(".timing.daemon_start_ms")?;
        t.update_ms.check(".timing.update_ms")?;
        Ok(())
    }

    /// The processes this family starts with that faults may target: the controller, the
    /// servers and the operator. Machines are not targets: a machine's life is its own
    /// state machine, and their links are never cut (the daemon's watch has no health
    /// check, see reconsim_mco::model).
    fn processes(&self) -> Vec<String> {
        self.fixed_processes()
    }

    /// The pools.
    fn seed(&self, server: &mut ApiServer) {
        for p in &self.pools {
            server.seed_object(pool_object(p));
        }
    }

    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        self.spawn_on(sim, services.endpoints)
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        crate::invariants::converged(view)
    }

    /// `create_machine_config`: a new source config of a pool (a config change).
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let CreateMachineConfig {
                    name,
                    pool,
                    content,
                } = a.params()?;
                if !self.pools.contains(&pool) {
                    return Err(ParamError::at(
                        a.path(".pool"),
                        format!("one of {:?}, not `{pool}`", self.pools),
                    ));
                }
                if name.is_empty() || self.sources.iter().any(|s| s.name == name) {
                    return Err(ParamError::at(
                        a.path(".name"),
                        "a non-empty name no source config has",
                    ));
                }
                Ok(ApiOp::Create(Box::new(source_object(
                    &name, &pool, content,
                ))))
            })
            .collect()
    }
}

impl McoSpec {
    fn fixed_processes(&self) -> Vec<String> {
        let mut p = vec![
            CONTROLLER.to_string(),
            SERVER.to_string(),
            OPERATOR.to_string(),
        ];
        if self.machines.iter().any(|g| g.from_bootstrap) {
            p.push(BOOTSTRAP_SERVER.to_string());
        }
        p
    }

    /// The config the installer renders for `pool` outside the cluster.
    pub fn bootstrap_config(&self, pool: &str) -> String {
        let configs: Vec<(String, MachineConfig)> = self
            .sources
            .iter()
            .filter(|s| s.pool == pool && s.bootstrap)
            .map(|s| {
                (
                    s.name.clone(),
                    MachineConfig {
                        content: s.content.clone(),
                    },
                )
            })
            .collect();
        let merged = merge(configs.iter().map(|(n, c)| (n.as_str(), c)).collect());
        rendered_name(pool, &merged)
    }

    /// Processes beyond the cluster's own, spawned after them.
    fn spawn_on(&self, sim: &mut Sim<Proc>, endpoints: Endpoints) {
        let infra = sim.host_by_name(&self.node).expect("validated node");
        let bootstrap_server = if self.machines.iter().any(|g| g.from_bootstrap) {
            let host = sim.add_host(BOOTSTRAP_HOST);
            let configs = self
                .pools
                .iter()
                .map(|p| (p.clone(), self.bootstrap_config(p)))
                .collect();
            Some(sim.spawn(
                host,
                BOOTSTRAP_SERVER,
                Proc::new(MachineConfigServer::new(
                    ServerMode::Bootstrap { configs },
                    endpoints,
                )),
            ))
        } else {
            None
        };
        let server = sim.spawn(
            infra,
            SERVER,
            Proc::new(MachineConfigServer::new(
                ServerMode::Cluster {
                    record_hand_outs: self.gc.records_hand_outs(),
                },
                endpoints,
            )),
        );
        sim.spawn(
            infra,
            CONTROLLER,
            Proc::new(Manager::new(
                ManagerConfig {
                    identity: CONTROLLER.into(),
                    leader: None,
                    kubelet: None,
                    pod: None,
                    ..Default::default()
                },
                endpoints,
                vec![
                    Box::new(RenderController::new(self.gc, self.render_delay_ms)),
                    Box::new(NodeController::recording(self.gc.records_pointing())),
                ],
            )),
        );
        let steps = self
            .sources
            .iter()
            .map(|s| Step {
                at_ms: s.at_ms,
                op: ApiOp::Create(Box::new(source_object(&s.name, &s.pool, s.content.clone()))),
            })
            .collect();
        sim.spawn(
            infra,
            OPERATOR,
            Proc::new(Script::retrying(endpoints.apiserver, steps)),
        );
        let t = &self.timing;
        for g in &self.machines {
            let pair = |r: Range| (r.lo, r.hi);
            let timing = MachineTiming {
                boot_at_ms: pair(g.boot_at_ms),
                reboot_ms: pair(t.reboot_ms),
                join_ms: pair(g.join_ms.unwrap_or(t.join_ms)),
                daemon_start_ms: pair(t.daemon_start_ms),
                update_ms: pair(t.update_ms),
            };
            for name in &g.names {
                let host = sim.add_host(name);
                let spec = MachineConfigSpec {
                    name: name.clone(),
                    pool: g.pool.clone(),
                    server: if g.from_bootstrap {
                        bootstrap_server.expect("spawned for bootstrap machines")
                    } else {
                        server
                    },
                    timing,
                };
                sim.spawn(host, name, Proc::new(McoMachine::new(spec, endpoints)));
            }
        }
    }
}
