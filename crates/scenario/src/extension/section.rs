//! `controllers.custom`: the entries of registered controllers, each a Deployment whose
//! pods the kubelets run (pod `<name>-<i>` on the entry's i-th node), with the objects,
//! actions and convergence their hooks give.

use super::Extensions;
use super::custom::{Parsed, Registration};
use super::manifests::{self, Manifests, Verb};
use crate::build::PAUSE_IMAGE;
use crate::format::known;
use crate::limits;
use reconsim_check::View;
use reconsim_family::{
    Context, FamilySection, LeaseSpec, ObjectName, ParamError, ServiceProcess, Services,
    WorkloadAction,
};
use reconsim_sim::Sim;
use reconsim_world::Proc;
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::informer::RelistNotify;
use reconsim_world::kubelet::{Container, ContainerEnv, Images};
use reconsim_world::manager::{Manager, ManagerConfig};
use reconsim_world::object::{
    Deployment, Object, PodSpec, Resource, TAINT_MASTER, TAINT_NOT_READY, TAINT_UNREACHABLE,
    TaintEffect, Toleration,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The namespace of custom controllers' Deployments, pods and leader election Leases.
pub const LEASE_NAMESPACE: &str = "default";
/// The image of an entry's pods: `<prefix><name>` (no registered image may start so).
pub const IMAGE_PREFIX: &str = "reconsim.dev/custom/";
/// The label of an entry's Deployment, its selector and its pods.
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// One entry of `controllers.custom`: a registered controller, run as the pods of a
/// Deployment of its name in `default`, one per node listed: pod `<name>-<i>` on the
/// i-th (a fault target by that name), a replacement the Deployment controller makes
/// `<name>-<random>` wherever the scheduler puts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomSpec {
    /// The name the binary registered the controller under: the Deployment's name.
    pub name: String,
    /// The node of its one pod (`nodes` for more replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node of each pod, one per replica (a node may be listed twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// The controller's params as the file has them (parsed once, into the type its
    /// [`super::Custom`] names, when the section is).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Objects in the API server at t = 0, as manifests (`apiVersion`, `kind`,
    /// `metadata`, the body) of kinds the controller's client serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
    /// Leader election on the Lease `default/<name>` with these timings; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaseSpec>,
    /// Before 0.7 an entry was one process named here; refused with the migration.
    #[serde(default, skip_serializing)]
    process: Option<Value>,
}

impl CustomSpec {
    /// The nodes of its pods, in pod order.
    pub fn pod_nodes(&self) -> Vec<&str> {
        match (&self.node, &self.nodes) {
            (Some(n), _) => vec![n.as_str()],
            (None, Some(ns)) => ns.iter().map(String::as_str).collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Its pods' names: `<name>-0`, `<name>-1`, ... (also their processes' names).
    pub fn pod_names(&self) -> Vec<String> {
        (0..self.pod_nodes().len())
            .map(|i| format!("{}-{i}", self.name))
            .collect()
    }

    /// The image its pods run.
    pub fn image(&self) -> String {
        format!("{IMAGE_PREFIX}{}", self.name)
    }
}

/// A `custom` workload action's params: the controller's action hook's `params`, or a
/// manifest to `create`, `patch` or `delete`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomAction {
    controller: String,
    #[serde(default)]
    params: Value,
    #[serde(default)]
    create: Option<Value>,
    #[serde(default)]
    patch: Option<Value>,
    #[serde(default)]
    delete: Option<Value>,
}

impl CustomAction {
    /// Its manifest and what to do with it; `None` for an action hook's params.
    fn manifest(&self, at: impl Fn(&str) -> String) -> Result<Option<(Verb, &Value)>, ParamError> {
        let mut given = [
            (Verb::Create, &self.create),
            (Verb::Patch, &self.patch),
            (Verb::Delete, &self.delete),
        ]
        .into_iter()
        .filter_map(|(verb, m)| Some((verb, m.as_ref()?)));
        let Some(first) = given.next() else {
            return Ok(None);
        };
        if let Some((second, _)) = given.next() {
            return Err(ParamError::at(
                at(second.field()),
                "one of `create`, `patch` and `delete` per action",
            ));
        }
        if !self.params.is_null() {
            return Err(ParamError::at(
                at(first.0.field()),
                "either `params` (the controller's action hook) or a manifest, not both",
            ));
        }
        Ok(Some(first))
    }
}

/// `controllers.custom`: the entries, with their params parsed.
#[derive(Clone, Debug)]
pub struct CustomSection {
    pub entries: Vec<CustomSpec>,
    /// `entries[i]`'s params, as its controller's type.
    parsed: Vec<Parsed>,
    /// `entries[i]`'s `objects` manifests, read by its controller's kinds.
    manifest_objects: Vec<Vec<Object>>,
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
        let mut manifest_objects = Vec::with_capacity(entries.len());
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
            manifest_objects.push(seed_manifests(i, c, registered)?);
        }
        Ok(CustomSection {
            entries,
            parsed,
            manifest_objects,
            extensions,
        })
    }

    /// How the controller named `controller` reads manifests, and the manifests its
    /// entry seeds: what generated operations act on (`None`: no such entry, or one
    /// that reads no manifests).
    pub(crate) fn operation_source(
        &self,
        controller: &str,
    ) -> Option<(Arc<dyn Manifests>, &[Value])> {
        let (c, _, registered) = self.each().find(|(c, _, _)| c.name == controller)?;
        Some((registered.manifests()?.clone(), &c.objects))
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

/// The objects entry `i`'s `objects` manifests describe, read by its controller's kinds.
fn seed_manifests(
    i: usize,
    c: &CustomSpec,
    registered: &dyn Registration,
) -> Result<Vec<Object>, ParamError> {
    if c.objects.is_empty() {
        return Ok(Vec::new());
    }
    let Some(kinds) = registered.manifests() else {
        return Err(ParamError::at(
            format!("[{i}].objects"),
            format!(
                "no `objects`: controller `{}` reads no manifests (register them with \
                 `Custom::manifests`, or seed objects with its `objects` hook)",
                c.name
            ),
        ));
    };
    c.objects
        .iter()
        .enumerate()
        .map(|(j, m)| {
            manifests::object(&**kinds, m).map_err(|e| e.under(&format!("[{i}].objects[{j}]")))
        })
        .collect()
}

/// An entry's placement: one of `node` and `nodes`, every node known, no `process`.
fn validate_placement(i: usize, c: &CustomSpec, context: &Context<'_>) -> Result<(), ParamError> {
    let at = |field: &str| format!("[{i}].{field}");
    if c.process.is_some() {
        return Err(ParamError::at(
            at("process"),
            format!(
                "no `process` (gone in 0.7.0): an entry is a Deployment whose pods are `{0}-0`, \
                 `{0}-1`, ...; list one node per replica in `nodes` and name those pods in faults",
                c.name
            ),
        ));
    }
    match (&c.node, &c.nodes) {
        (Some(node), None) => context.node(&at("node"), node).map(|_| ()),
        (None, Some(nodes)) => {
            if nodes.is_empty() || nodes.len() as u64 > limits::REPLICAS_MAX {
                return Err(ParamError::at(
                    at("nodes"),
                    format!(
                        "1 to {} nodes, one per pod, not {}",
                        limits::REPLICAS_MAX,
                        nodes.len()
                    ),
                ));
            }
            for (j, node) in nodes.iter().enumerate() {
                context.node(&at(&format!("nodes[{j}]")), node)?;
            }
            Ok(())
        }
        (Some(_), Some(_)) => Err(ParamError::at(
            at("nodes"),
            "either `node` (one pod) or `nodes` (one pod per node), not both",
        )),
        (None, None) => Err(ParamError::at(
            at("node"),
            "the node of the entry's pod (`node`), or of each of its pods (`nodes`)",
        )),
    }
}

impl FamilySection for CustomSection {
    /// Each entry's name: its Deployment's (and its Lease's, its pods' stem).
    fn object_names(&self) -> Vec<ObjectName> {
        (self.entries.iter().enumerate())
            .map(|(i, c)| ObjectName::new(format!("[{i}].name"), Deployment::KIND, &c.name))
            .collect()
    }

    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        let mut names = BTreeMap::new();
        let mut keys = BTreeSet::new();
        if self.entries.is_empty() {
            return Err(ParamError::at("", "at least one entry"));
        }
        for (i, (c, params, registered)) in self.each().enumerate() {
            let at = |field: &str| format!("[{i}].{field}");
            if let Some(j) = names.insert(c.name.as_str(), i) {
                return Err(ParamError::at(
                    at("name"),
                    format!(
                        "one entry per controller (`{}` is entry [{j}] too): list a node per \
                         replica in that entry's `nodes`",
                        c.name
                    ),
                ));
            }
            validate_placement(i, c, context)?;
            if let Some(pod) = c
                .pod_names()
                .into_iter()
                .find(|p| context.processes.iter().any(|q| q == p))
            {
                return Err(ParamError::at(
                    at("name"),
                    format!("a name whose pods no other process has; `{pod}` is taken"),
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
            for (j, o) in self.manifest_objects[i].iter().enumerate() {
                if !keys.insert(o.key()) {
                    return Err(ParamError::at(
                        at(&format!("objects[{j}].metadata.name")),
                        format!("objects with unique names; `{}` is seeded twice", o.key()),
                    ));
                }
            }
        }
        Ok(())
    }

    fn processes(&self) -> Vec<String> {
        self.entries
            .iter()
            .flat_map(CustomSpec::pod_names)
            .collect()
    }

    /// The entries' objects, then each entry's Deployment with its pods bound to their
    /// nodes (as a Deployment's first pods are once scheduled).
    fn seed(&self, server: &mut ApiServer) {
        for ((_, params, registered), manifests) in self.each().zip(&self.manifest_objects) {
            for o in registered.objects(params).expect("validated params") {
                server.seed_object(o);
            }
            for o in manifests {
                server.seed_object(o.clone());
            }
        }
        for c in &self.entries {
            seed_deployment(server, c);
        }
    }

    /// The idling container users' pods run, every registered image, and each entry's
    /// own: components made afresh at each container start.
    fn images(&self, images: Images, services: &Services) -> Images {
        let mut images = images.with(PAUSE_IMAGE, Container::image(None));
        for (name, make) in &self.extensions.images {
            let make = make.clone();
            let services = services.clone();
            images = images.with(name, move |env| Proc::from(make(env, &services)));
        }
        // One copy of the section for every entry's image, not one each.
        let section = Arc::new(self.clone());
        for (i, c) in self.entries.iter().enumerate() {
            let section = section.clone();
            let services = services.clone();
            images = images.with(&c.image(), move |env| section.container(i, env, &services));
        }
        images
    }

    /// The user's services ([`Extensions::service`]), in name order.
    fn services(&self) -> Vec<ServiceProcess> {
        self.extensions
            .services
            .iter()
            .map(|(name, make)| ServiceProcess {
                name: name.clone(),
                make: make.clone(),
            })
            .collect()
    }

    /// Nothing: the kubelets start the entries' pods.
    fn spawn(&self, _: &mut Sim<Proc>, _: &Services) {}

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        for (_, _, registered) in self.each() {
            registered.converged(view)?;
        }
        Ok(())
    }

    /// `custom`: the API call the action hook of the entry it names makes.
    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let action: CustomAction = a.params()?;
                let controller = &action.controller;
                let Some((_, entry, registered)) =
                    self.each().find(|(c, _, _)| &c.name == controller)
                else {
                    return Err(ParamError::at(
                        a.path(".controller"),
                        format!("the name of a controllers.custom entry, not `{controller}`"),
                    ));
                };
                if let Some((verb, manifest)) = action.manifest(|f| a.path(f))? {
                    let Some(kinds) = registered.manifests() else {
                        return Err(ParamError::at(
                            a.path(".controller"),
                            format!(
                                "a controller that reads manifests; `{controller}` does not \
                                 (register them with `Custom::manifests`)"
                            ),
                        ));
                    };
                    return manifests::action(&**kinds, verb, manifest)
                        .map_err(|e| e.under(&a.path(verb.field())));
                }
                let Some(made) = registered.action(entry, &action.params) else {
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

impl CustomSection {
    /// The process of a container of entry `i`'s pod: its program, or a manager of its
    /// reconcilers electing as the pod (`<pod>_<start>`), exiting through its kubelet.
    fn container(&self, i: usize, env: &ContainerEnv, services: &Services) -> Proc {
        let (c, params, registered) = self.each().nth(i).expect("an entry of this section");
        let services = Services {
            endpoints: env.endpoints,
            ..services.clone()
        };
        if let Some(component) = registered.program(params, env, &services) {
            return Proc::from(component);
        }
        let leader = c
            .leader_election
            .map(|l| l.leader(LEASE_NAMESPACE, &c.name));
        Proc::new(Manager::new(
            ManagerConfig {
                identity: env.pod_name.clone(),
                leader,
                kubelet: Some(env.kubelet),
                pod: Some(env.pod_name.clone()),
                // Users' controllers are kube-rs code (kube-runtime's watcher).
                relist_notify: RelistNotify::Every,
                fence_ms: c.leader_election.map_or(0, |l| l.fence_ms),
                ..Default::default()
            },
            env.endpoints,
            registered.reconcilers(params),
        ))
    }
}

/// The tolerationSeconds the API server's DefaultTolerationSeconds admission gives a pod
/// for the not-ready and unreachable taints (kube-apiserver's default, 300 s; semantics
/// 5.9): a seeded pod was admitted once, so it carries them too.
const DEFAULT_TOLERATION_SECONDS: u64 = 300;

/// Entry `c`'s Deployment and its pods, bound to their nodes. The pod template tolerates
/// the masters' NoSchedule taint (entries are placed on control-plane nodes, and a
/// replacement may land there too) and, as admission made it, a lost node for 300 s.
fn seed_deployment(server: &mut ApiServer, c: &CustomSpec) {
    let labels = BTreeMap::from([(APP_LABEL.to_string(), c.name.clone())]);
    let mut tolerations = vec![Toleration {
        key: TAINT_MASTER.to_string(),
        effect: TaintEffect::NoSchedule,
        toleration_seconds: None,
    }];
    tolerations.extend([TAINT_NOT_READY, TAINT_UNREACHABLE].map(|key| Toleration {
        key: key.to_string(),
        effect: TaintEffect::NoExecute,
        toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
    }));
    let template = PodSpec {
        node_name: None,
        image: c.image(),
        tolerations,
        ..Default::default()
    };
    let pods: Vec<(String, String)> = c
        .pod_names()
        .into_iter()
        .zip(c.pod_nodes().into_iter().map(str::to_string))
        .collect();
    reconsim_family::deployment::seed(server, LEASE_NAMESPACE, &c.name, &labels, &template, &pods);
}
