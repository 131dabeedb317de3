//! `controllers.custom`: the entries of registered controllers, each one process on its
//! node's host, with the objects, actions and convergence their hooks give.

use super::Extensions;
use super::custom::{Parsed, Registration};
use crate::build::PAUSE_IMAGE;
use crate::format::known;
use reconsim_check::View;
use reconsim_family::{Context, FamilySection, LeaseSpec, ParamError, Services, WorkloadAction};
use reconsim_sim::Sim;
use reconsim_world::Proc;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::informer::RelistNotify;
use reconsim_world::kubelet::{Container, Images};
use reconsim_world::manager::{Manager, ManagerConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The namespace of custom controllers' leader election Leases.
pub const LEASE_NAMESPACE: &str = "default";

/// One entry of `controllers.custom`: a registered controller, run as one process on
/// `node`'s host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomSpec {
    /// The name the binary registered the controller under.
    pub name: String,
    /// The topology node whose host runs the process.
    pub node: String,
    /// The process name (a fault target); default: `name`. Two entries of one
    /// controller (two replicas with leader election) need two names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// The controller's params as the file has them (parsed once, into the type its
    /// [`super::Custom`] names, when the section is).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Leader election on the Lease `default/<name>` with these timings; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaseSpec>,
}

impl CustomSpec {
    /// The process's name.
    pub fn process_name(&self) -> &str {
        self.process.as_deref().unwrap_or(&self.name)
    }
}

/// A `custom` workload action's params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomAction {
    controller: String,
    #[serde(default)]
    params: Value,
}

/// `controllers.custom`: the entries, with their params parsed.
#[derive(Clone, Debug)]
pub struct CustomSection {
    pub entries: Vec<CustomSpec>,
    /// `entries[i]`'s params, as its controller's type.
    parsed: Vec<Parsed>,
    extensions: Extensions,
}

/// Written as its entries.
impl Serialize for CustomSection {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries.serialize(s)
    }
}

impl CustomSection {
    /// The entries of `section`, each naming a controller `extensions` registers, with
    /// its params parsed into that controller's type (errors at `[i].name`,
    /// `[i].params...`).
    pub(super) fn parse(section: &Value, extensions: Extensions) -> Result<Self, ParamError> {
        let entries: Vec<CustomSpec> = reconsim_family::params::parse(section)?;
        let mut parsed = Vec::with_capacity(entries.len());
        for (i, c) in entries.iter().enumerate() {
            let Some(registered) = extensions.registered(&c.name) else {
                return Err(ParamError::at(
                    format!("[{i}].name"),
                    format!(
                        "a controller this binary registers (known: {}), not `{}`",
                        known(&extensions.controller_names()),
                        c.name
                    ),
                ));
            };
            let params = registered
                .parse(&c.params)
                .map_err(|e| e.under(&format!("[{i}].params")))?;
            parsed.push(params);
        }
        Ok(CustomSection {
            entries,
            parsed,
            extensions,
        })
    }

    /// Each entry with its params and its controller.
    fn each(&self) -> impl Iterator<Item = (&CustomSpec, &Parsed, &dyn Registration)> {
        self.entries.iter().zip(&self.parsed).map(|(c, p)| {
            let registered = self
                .extensions
                .registered(&c.name)
                .expect("parsing found every entry's controller");
            (c, p, registered)
        })
    }
}

impl FamilySection for CustomSection {
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        let mut processes = BTreeSet::new();
        let mut keys = BTreeSet::new();
        if self.entries.is_empty() {
            return Err(ParamError::at("", "at least one entry"));
        }
        for (i, (c, params, registered)) in self.each().enumerate() {
            let at = |field: &str| format!("[{i}].{field}");
            context.node(&at("node"), &c.node)?;
            let process = c.process_name();
            if process.is_empty()
                || context.processes.iter().any(|p| p == process)
                || !processes.insert(process)
            {
                return Err(ParamError::at(
                    at("process"),
                    format!(
                        "a unique process name, not `{process}` (set `process` to tell two entries apart)"
                    ),
                ));
            }
            if let Some(l) = c.leader_election {
                l.check(&at("leader_election"))?;
            }
            if registered.is_program() {
                if c.leader_election.is_some() {
                    return Err(ParamError::at(
                        at("leader_election"),
                        "no leader_election for a program entry (the program elects its own leader)",
                    ));
                }
            } else if registered.reconcilers(params).is_empty() {
                return Err(ParamError::at(
                    at("params"),
                    "params that make at least one reconciler",
                ));
            }
            let objects = registered
                .objects(params)
                .map_err(|e| e.under(&at("params")))?;
            for o in objects {
                if o.meta.name.is_empty() || !keys.insert(o.key()) {
                    return Err(ParamError::at(
                        at("params"),
                        format!("objects with unique, non-empty names; `{}` is not", o.key()),
                    ));
                }
            }
        }
        Ok(())
    }

    fn processes(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|c| c.process_name().to_string())
            .collect()
    }

    fn seed(&self, server: &mut ApiServer) {
        for (_, params, registered) in self.each() {
            for o in registered.objects(params).expect("validated params") {
                server.seed_object(o);
            }
        }
    }

    /// The idling container users' pods run, and every registered image, each a
    /// component made afresh at each container start.
    fn images(&self, images: Images, services: &Services) -> Images {
        let mut images = images.with(PAUSE_IMAGE, Container::image(None));
        for (name, make) in &self.extensions.images {
            let make = make.clone();
            let services = *services;
            images = images.with(name, move |env| Proc::from(make(env, &services)));
        }
        images
    }

    /// One process per entry on its node's host: its program, or a manager hosting its
    /// reconcilers.
    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        for (c, params, registered) in self.each() {
            let host = sim.host_by_name(&c.node).expect("validated node");
            let process = c.process_name();
            if let Some(component) = registered.program(params, services) {
                sim.spawn(host, process, Proc::from(component));
                continue;
            }
            let leader = c
                .leader_election
                .map(|l| l.leader(LEASE_NAMESPACE, &c.name));
            sim.spawn(
                host,
                process,
                Proc::new(Manager::new(
                    ManagerConfig {
                        identity: process.to_string(),
                        leader,
                        kubelet: None,
                        pod: None,
                        // Users' controllers are kube-rs code (kube-runtime's watcher).
                        relist_notify: RelistNotify::Every,
                        fence_ms: c.leader_election.map_or(0, |l| l.fence_ms),
                        ..Default::default()
                    },
                    services.endpoints,
                    registered.reconcilers(params),
                )),
            );
        }
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        for (_, _, registered) in self.each() {
            registered.converged(view)?;
        }
        Ok(())
    }

    /// `custom`: the API call the action hook of the entry it names makes (the first
    /// entry of that controller's params).
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let CustomAction { controller, params } = a.params()?;
                let Some((_, entry, registered)) =
                    self.each().find(|(c, _, _)| c.name == controller)
                else {
                    return Err(ParamError::at(
                        a.path(".controller"),
                        format!("the name of a controllers.custom entry, not `{controller}`"),
                    ));
                };
                let Some(made) = registered.action(entry, &params) else {
                    return Err(ParamError::at(
                        a.path(".controller"),
                        format!("a controller with an action hook; `{controller}` has none"),
                    ));
                };
                made.map_err(|e| e.under(&a.path(".params")))
            })
            .collect()
    }
}
