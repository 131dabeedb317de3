//! The machine-config-operator's objects, the annotations and labels they carry, and the
//! pure functions over them (names, merges, selectors, constructors).
//!
//! - [`MachineConfig`]: a source config (labelled `machineconfiguration.openshift.io/role`)
//!   or a rendered one, named `rendered-<pool>-<hash>` by [`rendered_name`], a pure
//!   function of the merged content (upstream uses an md5 of the spec; here the
//!   project's documented [`StableHasher`], FNV-1a over 64-bit words, of the content map).
//! - [`MachineConfigPool`]: which nodes and which source configs belong to a pool, and
//!   its target (`status.configuration`, written by the render controller as the 2019
//!   code did with UpdateStatus), with the node controller's machine counts.
//! - Node annotations with the real keys ([`ANNOTATION_CURRENT`], [`ANNOTATION_DESIRED`],
//!   [`ANNOTATION_STATE`]).

use reconsim_sim::StableHasher;
use reconsim_world::object::{Body, Kind, Object, ObjectMeta};
use reconsim_world::object::{KindInfo, Resource};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The node annotation naming the config the node runs.
pub const ANNOTATION_CURRENT: &str = "machineconfiguration.openshift.io/currentConfig";
/// The node annotation naming the config the node should run.
pub const ANNOTATION_DESIRED: &str = "machineconfiguration.openshift.io/desiredConfig";
/// The node annotation with the daemon's state: Done, Working, Degraded.
pub const ANNOTATION_STATE: &str = "machineconfiguration.openshift.io/state";
/// Why the daemon is Degraded.
pub const ANNOTATION_REASON: &str = "machineconfiguration.openshift.io/reason";
/// Rendered configs carry this annotation (`oc adm prune` selects on it).
pub const ANNOTATION_GENERATED_BY: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";
/// Source configs name their pool with this label (the pools' machineConfigSelector).
pub const LABEL_ROLE: &str = "machineconfiguration.openshift.io/role";
/// The in-flight record of a hand-out on the pool: `<prefix><machine>` = config name
/// (this project's proposal; nothing upstream records hand-outs).
pub const ANNOTATION_SERVED_TO_PREFIX: &str = "machineconfiguration.openshift.io/served-to.";
/// The node controller's record, on the pool, of the configs it pointed a Node at
/// (`in-use-and-recorded`): `<prefix><node>` = the configs since the Node was last Done,
/// oldest first, space-separated; each written before the Node.
pub const ANNOTATION_POINTED_AT_PREFIX: &str = "machineconfiguration.openshift.io/pointing-at.";
/// Nodes managed by the MCO carry this label (RHCOS); the pools select on it besides
/// the role, so the scenario's infra node (which runs the controllers) is in no pool.
pub const LABEL_OS_ID: &str = "node.openshift.io/os_id";
pub const STATE_DONE: &str = "Done";
pub const STATE_WORKING: &str = "Working";
pub const STATE_DEGRADED: &str = "Degraded";

/// A MachineConfig: source or rendered. Has no status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfig {
    /// The merged content, as key -> value pairs (files, osImageURL, ssh keys...).
    pub content: BTreeMap<String, String>,
}

impl Resource for MachineConfig {
    /// A MachineConfig has no status: every change is a spec change.
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
    ));
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolSpec {
    /// spec.nodeSelector (matchLabels).
    pub node_selector: BTreeMap<String, String>,
    /// spec.machineConfigSelector (matchLabels).
    pub machine_config_selector: BTreeMap<String, String>,
    /// spec.configuration.name: the rendered config the pool should run (today's
    /// render controller writes it; the 2019 one wrote only the status).
    pub configuration: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPoolStatus {
    /// status.configuration.name: the pool's target.
    pub configuration: Option<String>,
    pub machine_count: u32,
    pub updated_machine_count: u32,
    pub degraded_machine_count: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineConfigPool {
    pub spec: MachineConfigPoolSpec,
    pub status: MachineConfigPoolStatus,
}

impl Resource for MachineConfigPool {
    const KIND: Kind = Kind::new(&KindInfo::cluster_scoped(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigPool",
        "machineconfigpools",
    ));
    reconsim_world::status_subresource!();

    /// What the incident turns on: the pool's rendered config and its machines' progress.
    fn summary(&self) -> Option<String> {
        Some(format!(
            "status.configuration={} updated={}/{}",
            self.status.configuration.as_deref().unwrap_or("-"),
            self.status.updated_machine_count,
            self.status.machine_count
        ))
    }
}

/// The name of the rendered config of `pool` with `content`: `rendered-<pool>-<16 hex>`,
/// the [`StableHasher`] of the content map through its derived `Hash`: the entry count
/// as one word, then per entry in key order the key and the value, each as its bytes
/// (StableHasher::write: 8-byte words, the remainder, the length) and std's 0xff str
/// terminator. Upstream names by an md5 of the spec; only "pure function of content"
/// matters here.
pub fn rendered_name(pool: &str, content: &BTreeMap<String, String>) -> String {
    format!("rendered-{pool}-{:016x}", StableHasher::hash_one(content))
}

/// Merge source configs as MergeMachineConfigs does: in name order, a later config's
/// key overrides an earlier one's.
pub fn merge<'a>(mut configs: Vec<(&'a str, &'a MachineConfig)>) -> BTreeMap<String, String> {
    configs.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = BTreeMap::new();
    for (_, c) in configs {
        for (k, v) in &c.content {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// The label selector a pool uses for its source configs.
pub fn role_selector(pool: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_ROLE.to_string(), pool.to_string())])
}

/// The labels of a node of `pool` (and the pool's node selector).
pub fn node_labels(pool: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("node-role.kubernetes.io/{pool}"), String::new()),
        (LABEL_OS_ID.to_string(), "rhcos".to_string()),
    ])
}

/// A node's (current, desired, state) annotations.
pub fn node_config(node: &Object) -> (Option<&str>, Option<&str>, Option<&str>) {
    let a = &node.meta.annotations;
    (
        a.get(ANNOTATION_CURRENT).map(String::as_str),
        a.get(ANNOTATION_DESIRED).map(String::as_str),
        a.get(ANNOTATION_STATE).map(String::as_str),
    )
}

/// The in-flight records on a pool: (machine, config).
pub fn served_records(pool: &Object) -> impl Iterator<Item = (&str, &str)> {
    pool.meta
        .annotations
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(ANNOTATION_SERVED_TO_PREFIX)?, v.as_str())))
}

/// The node controller's records on a pool: (node, its configs, space-separated).
pub fn pointed_records(pool: &Object) -> impl Iterator<Item = (&str, &str)> {
    pool.meta
        .annotations
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(ANNOTATION_POINTED_AT_PREFIX)?, v.as_str())))
}

/// A rendered config object for `pool` with `content`, owned by the pool (uid) as its
/// controller, as the render controller creates it.
pub fn rendered_object(pool: &Object, content: BTreeMap<String, String>) -> Object {
    let mut meta = ObjectMeta::named("", &rendered_name(&pool.meta.name, &content));
    meta.owner_references = vec![reconsim_world::object::OwnerReference {
        kind: MachineConfigPool::KIND,
        name: pool.meta.name.clone(),
        uid: pool.meta.uid,
        controller: Some(true),
        block_owner_deletion: None,
    }];
    meta.annotations
        .insert(ANNOTATION_GENERATED_BY.into(), "reconsim".into());
    Object::new(meta, Body::new(MachineConfig { content }))
}

/// A source config of `pool`.
pub fn source_object(name: &str, pool: &str, content: BTreeMap<String, String>) -> Object {
    let mut meta = ObjectMeta::named("", name);
    meta.labels = role_selector(pool);
    Object::new(meta, Body::new(MachineConfig { content }))
}

/// A pool object selecting `node_labels(name)` and `role_selector(name)`.
pub fn pool_object(name: &str) -> Object {
    Object::new(
        ObjectMeta::named("", name),
        Body::new(MachineConfigPool {
            spec: MachineConfigPoolSpec {
                node_selector: node_labels(name),
                machine_config_selector: role_selector(name),
                configuration: None,
            },
            status: Default::default(),
        }),
    )
}
