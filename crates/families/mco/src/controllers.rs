//! The machine-config-controller's render and node controllers (seed incident 3,
//! openshift/machine-config-operator issue #301; SEED-FACTS.md section 3), with the
//! garbage-collection policies for rendered configs as one parameter, [`GcPolicy`].
//!
//! Both are async reconciles in kube-runtime's shape ([`reconsim_world::runtime`]:
//! `Controller::new::<MachineConfigPool>(..).watches::<W>(mapper).run(..)`), keyed by
//! pool. Each request below is one await, so one interleaving point; reads of the cache
//! are synchronous. A failed request ends the reconcile in error ([`Unexpected`]: the
//! step and the answer), retried with the work queue's per-item backoff, as a Go
//! controller's `syncHandler` error is. [`RenderController`] and [`NodeController`] are
//! the controllers as a manager hosts them.
//!
//! Render controller (pkg/controller/render/render_controller.go, 2019 shape:
//! `syncMachineConfigPool` -> `syncGeneratedMachineConfig` -> `garbageCollectRenderedConfigs`),
//! one reconcile of a pool, step by step:
//! 1. from the cache: the MachineConfigs its machineConfigSelector matches; none -> done;
//! 2. merge them in name order and name the result `rendered-<pool>-<hash>`
//!    ([`crate::model::rendered_name`]), a pure function of the content;
//! 3. if the cache does not hold that name, create it with a controller reference to the
//!    pool (AlreadyExists is fine);
//! 4. if the pool's `status.configuration` differs, write it (an UpdateStatus: a PUT
//!    conditional on the pool's resourceVersion, so a concurrent write makes it 409 and
//!    the key is retried with backoff);
//! 5. apply the GC policy to the pool's other rendered configs.
//!
//! The sources appear one after another at bring-up, so rendered configs churn, as in
//! the report's log. `render_delay_ms` models the later 5 s render delay (d902c1f93): the
//! reconcile of a cached pool waits that long, then reads the pool again from the cache
//! (gone by then: done); 0 is the code of the incident.
//!
//! GC policies (what each one deletes among this pool's rendered configs that are not
//! its target):
//! - `none`: nothing (upstream since b29a104f4: `garbageCollectRenderedConfigs` returns nil);
//! - `orphan`: the 2019 code's intent (PR #318): patch the pool's ownerReference away.
//!   That orphans the config; the API server's collector never deletes an object with no
//!   owner references (semantics.md 3.9);
//! - `keep-latest-only`: every one (the policy cgwalters described as today's);
//! - `older-than-1h`: those created more than an hour ago (the proposed stop-gap);
//! - `in-use`: `oc adm prune renderedmachineconfigs`' rule: keep every pool's spec and
//!   status targets and every node's currentConfig and desiredConfig;
//! - `in-use-and-in-flight`: `in-use`, plus every config the server recorded as handed to
//!   a machine whose Node does not yet carry a currentConfig annotation; records of
//!   machines whose Node does are removed (a patch conditional on the pool's version).
//!   Not enough when configs change seconds apart: the node controller can point a Node
//!   at a config the GC, its Node cache not showing that patch yet, deletes
//!   (docs/seeds/mco.md, "Operations at the wrong moment");
//! - `in-use-and-recorded`: `in-use-and-in-flight`, plus every config the node
//!   controller recorded on the pool as the one it is pointing a Node at. It writes the
//!   record before the Node, in its pool write conditional on the version it read the
//!   target from, so the record and the render controller's write of a new target are
//!   ordered, as the server's hand-out records are. A Node's record lists every config
//!   it was pointed at since it was last Done, oldest first (its daemon may still be
//!   updating to an older one when the node controller, from a cache that does not
//!   show it Working yet, moves it again); the GC trims it once its cache shows the
//!   Node Done at one of them.
//!
//! The GC's writes are made one after another; a failed one does not stop the rest, and
//! the reconcile ends with the first failure.
//!
//! Node controller (pkg/controller/node/node_controller.go): per pool, the Nodes its
//! nodeSelector matches; writes machineCount / updatedMachineCount /
//! degradedMachineCount, then moves at most maxUnavailable (1) nodes at a time to the
//! target by setting their desiredConfig. A node is unavailable until its daemon reports
//! Done with current == desired (a node with no annotations yet counts as unavailable).

use crate::model::{
    ANNOTATION_DESIRED, ANNOTATION_POINTED_AT_PREFIX, ANNOTATION_SERVED_TO_PREFIX, LABEL_ROLE,
    STATE_DEGRADED, STATE_DONE, merge, node_config, pointed_records, rendered_name,
    rendered_object, served_records,
};
use crate::model::{MachineConfig, MachineConfigPool};
use reconsim_world::api::PatchOp;
use reconsim_world::manager::{ReconcileCtx, Reconciler, Step};
use reconsim_world::object::{Kind, Node, Object, ObjectKey, Resource, Uid, selector_matches};
use reconsim_world::reconcile_error::Unexpected;
use reconsim_world::runtime::{
    Action, Api, Client, Controller, DeleteParams, Error, Mapper, PatchParams, PostParams,
};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

/// The stop-gap's age threshold.
pub const ONE_HOUR_MS: u64 = 3_600_000;
/// The node controller's maxUnavailable (the pool default).
pub const MAX_UNAVAILABLE: usize = 1;
/// The node-role label prefix: the pools the node belongs to by convention.
const NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";

/// What the render controller deletes after a render.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    None,
    Orphan,
    KeepLatestOnly,
    #[serde(rename = "older-than-1h")]
    OlderThan1h,
    InUse,
    InUseAndInFlight,
    InUseAndRecorded,
}

impl GcPolicy {
    /// Whether the Machine Config Server must record its hand-outs for this policy.
    pub fn records_hand_outs(self) -> bool {
        matches!(
            self,
            GcPolicy::InUseAndInFlight | GcPolicy::InUseAndRecorded
        )
    }

    /// Whether the node controller must record the config it points a Node at.
    pub fn records_pointing(self) -> bool {
        self == GcPolicy::InUseAndRecorded
    }

    /// Whether the policy reads Nodes.
    fn reads_nodes(self) -> bool {
        matches!(
            self,
            GcPolicy::InUse | GcPolicy::InUseAndInFlight | GcPolicy::InUseAndRecorded
        )
    }
}

/// A reconcile's error rate-limits its key, as a Go controller's does.
fn rate_limited<C>(_: Arc<Object>, _: &Unexpected, _: Arc<C>) -> Action {
    Action::rate_limited()
}

/// The pools a node belongs to by its role labels.
fn pools_of_node(node: &Object, keys: &mut Vec<ObjectKey>) {
    for k in node.meta.labels.keys() {
        if let Some(pool) = k.strip_prefix(NODE_ROLE_PREFIX) {
            keys.push(ObjectKey::new(MachineConfigPool::KIND, "", pool));
        }
    }
}

// ----- the render controller -------------------------------------------------------------

/// The render controller, as a manager hosts it: the async controller, and the names of
/// the configs it deleted since its process last started (an observation for tests).
#[derive(Debug)]
pub struct RenderController {
    policy: GcPolicy,
    controller: Box<dyn Reconciler>,
    /// Where the reconcile leaves the names of the configs it deleted.
    deletions: Rc<RefCell<Vec<String>>>,
    /// Configs this controller deleted (observation for tests).
    pub deleted: Vec<String>,
}

/// The render controller's context: its client, its parameters, its observation.
struct RenderCtx {
    client: Client,
    policy: GcPolicy,
    render_delay_ms: u64,
    deletions: Rc<RefCell<Vec<String>>>,
}

impl RenderController {
    pub fn new(policy: GcPolicy, render_delay_ms: u64) -> Self {
        let deletions = Rc::new(RefCell::new(Vec::new()));
        let shared = deletions.clone();
        // Nodes are watched for the cache either way; they trigger a render only under
        // a policy that reads them.
        let nodes: Mapper = if policy.reads_nodes() {
            pools_of_node
        } else {
            |_, _| {}
        };
        let controller = Controller::new::<MachineConfigPool>("render-controller")
            .watches::<MachineConfig>(pool_of_config)
            .watches::<Node>(nodes)
            .run(render, rate_limited, move |client: Client| RenderCtx {
                client,
                policy,
                render_delay_ms,
                deletions: shared.clone(),
            });
        RenderController {
            policy,
            controller,
            deletions,
            deleted: Vec::new(),
        }
    }

    pub fn policy(&self) -> GcPolicy {
        self.policy
    }
}

/// A source names its pool by role (the pools' selectors); a rendered config by its
/// controller.
fn pool_of_config(mc: &Object, keys: &mut Vec<ObjectKey>) {
    if let Some(role) = mc.meta.labels.get(LABEL_ROLE) {
        keys.push(ObjectKey::new(MachineConfigPool::KIND, "", role));
    } else if let Some(owner) = mc.meta.controller_ref() {
        keys.push(ObjectKey::new(MachineConfigPool::KIND, "", &owner.name));
    }
}

/// One write of the GC.
#[derive(Clone, Debug)]
enum GcOp {
    Delete(ObjectKey, Uid),
    Orphan(ObjectKey, Uid),
    /// Set (or, `None`, remove) these record annotations of the pool, in one write.
    Records(Vec<(String, Option<String>)>),
}

/// One reconcile of a pool (the module's doc lists the steps).
async fn render(pool: Arc<Object>, ctx: Arc<RenderCtx>) -> Result<Action, Unexpected> {
    let client = &ctx.client;
    let pool = if ctx.render_delay_ms > 0 {
        client.sleep(ctx.render_delay_ms).await;
        match client.store::<MachineConfigPool>().get("", &pool.meta.name) {
            Some(p) => p,
            None => return Ok(Action::await_change()),
        }
    } else {
        pool
    };
    let spec = &pool.typed::<MachineConfigPool>().expect("a pool key").spec;
    if spec.machine_config_selector.is_empty() {
        // "SelectingAll": a non-empty selector is required.
        return Ok(Action::await_change());
    }
    let configs = client.store::<MachineConfig>();
    let cached = configs.state();
    let sources: Vec<(&str, &MachineConfig)> = cached
        .iter()
        .filter(|mc| {
            !mc.meta.is_deleting()
                && selector_matches(&spec.machine_config_selector, &mc.meta.labels)
        })
        .map(|mc| {
            (
                mc.meta.name.as_str(),
                mc.typed::<MachineConfig>().expect("an MC"),
            )
        })
        .collect();
    if sources.is_empty() {
        return Ok(Action::await_change());
    }
    let content = merge(sources);
    let name = rendered_name(&pool.meta.name, &content);
    drop(cached);
    if configs.get("", &name).is_none() {
        let object = rendered_object(&pool, content);
        let mcs: Api<MachineConfig> = Api::all(client.clone());
        match mcs.create(&PostParams::default(), object).await {
            Ok(_) => {}
            Err(Error::Api(r)) if r.reason == "AlreadyExists" => {}
            Err(e) => return Err(Unexpected::new(format!("creating {name}"), &e)),
        }
    }
    let status = &pool.typed::<MachineConfigPool>().expect("a pool").status;
    let pool = if status.configuration.as_deref() == Some(name.as_str()) {
        pool
    } else {
        let mut next = (*pool).clone();
        next.typed_mut::<MachineConfigPool>()
            .expect("a pool")
            .status
            .configuration = Some(name.clone());
        let pools: Api<MachineConfigPool> = Api::all(client.clone());
        pools
            .replace(&PostParams::default(), next)
            .await
            .map_err(|e| Unexpected::new("updating pool status", &e))?
    };
    collect(&ctx, &pool, &name).await
}

/// garbageCollectRenderedConfigs under the policy: its writes one after another, ending
/// with the first failure.
async fn collect(ctx: &RenderCtx, pool: &Object, name: &str) -> Result<Action, Unexpected> {
    let ops = gc_ops(ctx, pool, name);
    let client = &ctx.client;
    let mcs: Api<MachineConfig> = Api::all(client.clone());
    let mut error = None;
    for op in ops {
        let written = match &op {
            GcOp::Delete(key, uid) => {
                let params = DeleteParams {
                    uid: Some(*uid),
                    grace_period_seconds: None,
                };
                mcs.delete(&key.name, &params).await.map(drop)
            }
            GcOp::Orphan(key, owner) => {
                let ops = vec![PatchOp::RemoveOwnerReference(*owner)];
                mcs.patch(&key.name, &PatchParams::default(), ops)
                    .await
                    .map(drop)
            }
            GcOp::Records(records) => {
                let ops = records
                    .iter()
                    .map(|(k, v)| PatchOp::SetAnnotation(k.clone(), v.clone()))
                    .collect();
                let pools: Api<MachineConfigPool> = Api::all(client.clone());
                let rv = pool.meta.resource_version;
                pools
                    .patch_conditional(&pool.meta.name, rv, &PatchParams::default(), ops)
                    .await
                    .map(drop)
            }
        };
        match (op, written) {
            (GcOp::Delete(key, _), Ok(())) => ctx.deletions.borrow_mut().push(key.name),
            (GcOp::Delete(key, _), Err(e)) if e.code() == Some(404) => {
                ctx.deletions.borrow_mut().push(key.name)
            }
            (_, Ok(())) => {}
            (_, Err(e)) if e.code() == Some(404) => {}
            (op, Err(e)) => {
                error.get_or_insert_with(|| Unexpected::new(format!("gc {op:?}"), &e));
            }
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Action::await_change()),
    }
}

/// The GC's writes, from the cache: `pool` as this reconcile last wrote it, `name` its
/// target.
fn gc_ops(ctx: &RenderCtx, pool: &Object, name: &str) -> Vec<GcOp> {
    let client = &ctx.client;
    let policy = ctx.policy;
    let mut ops = Vec::new();
    if policy != GcPolicy::None {
        let pools = client.store::<MachineConfigPool>().state();
        let nodes = if policy.reads_nodes() {
            client.store::<Node>().state()
        } else {
            Vec::new()
        };
        let mut keep: BTreeSet<&str> = BTreeSet::new();
        for p in &pools {
            // The pool as this reconcile last wrote it is fresher than the cache.
            let p: &Object = if p.meta.uid == pool.meta.uid { pool } else { p };
            let mcp = p.typed::<MachineConfigPool>().expect("a pool");
            keep.extend(mcp.spec.configuration.as_deref());
            keep.extend(mcp.status.configuration.as_deref());
            if policy.records_hand_outs() {
                keep.extend(served_records(p).map(|(_, c)| c));
            }
            if policy.records_pointing() {
                keep.extend(pointed_records(p).flat_map(|(_, list)| list.split(' ')));
            }
        }
        keep.insert(name);
        for n in &nodes {
            let (c, d, _) = node_config(n);
            keep.extend(c);
            keep.extend(d);
        }
        let now = client.now();
        for mc in client.store::<MachineConfig>().state() {
            let owned = mc
                .meta
                .controller_ref()
                .is_some_and(|r| r.uid == pool.meta.uid);
            if !owned || mc.meta.is_deleting() {
                continue;
            }
            let protected = match policy {
                GcPolicy::None => true,
                GcPolicy::Orphan | GcPolicy::KeepLatestOnly => mc.meta.name == name,
                GcPolicy::OlderThan1h => {
                    mc.meta.name == name
                        || keep_by_target(pool, &mc.meta.name)
                        || now < mc.meta.creation_timestamp.plus_ms(ONE_HOUR_MS)
                }
                GcPolicy::InUse | GcPolicy::InUseAndInFlight | GcPolicy::InUseAndRecorded => {
                    keep.contains(mc.meta.name.as_str())
                }
            };
            if protected {
                continue;
            }
            ops.push(if policy == GcPolicy::Orphan {
                GcOp::Orphan(mc.key(), pool.meta.uid)
            } else {
                GcOp::Delete(mc.key(), mc.meta.uid)
            });
        }
    }
    if policy.records_hand_outs() {
        let nodes = client.store::<Node>();
        let mut landed: Vec<(String, Option<String>)> = served_records(pool)
            .filter(|(machine, _)| {
                nodes
                    .get("", machine)
                    .is_some_and(|n| node_config(&n).0.is_some())
            })
            .map(|(m, _)| (format!("{ANNOTATION_SERVED_TO_PREFIX}{m}"), None))
            .collect();
        // The configs a Node was pointed at, oldest first: its daemon may still be
        // updating to any of them (the node controller can move a Node again before it
        // is done, from a cache that does not show it Working). Once the Node is Done at
        // one of them, it needs none before it, nor that one (the Node keeps it).
        for (node, list) in pointed_records(pool) {
            let Some(n) = nodes.get("", node) else {
                continue;
            };
            let (current, desired, state) = node_config(&n);
            if state != Some(STATE_DONE) || current != desired {
                continue;
            }
            let configs: Vec<&str> = list.split(' ').collect();
            let Some(i) = configs.iter().position(|c| Some(*c) == current) else {
                continue;
            };
            let rest = configs[i + 1..].join(" ");
            let key = format!("{ANNOTATION_POINTED_AT_PREFIX}{node}");
            landed.push((key, (!rest.is_empty()).then_some(rest)));
        }
        if !landed.is_empty() {
            ops.push(GcOp::Records(landed));
        }
    }
    ops
}

/// Whether `name` is one of the pool's own targets.
fn keep_by_target(pool: &Object, name: &str) -> bool {
    let p = pool.typed::<MachineConfigPool>().expect("a pool");
    p.spec.configuration.as_deref() == Some(name) || p.status.configuration.as_deref() == Some(name)
}

impl Reconciler for RenderController {
    fn name(&self) -> &str {
        self.controller.name()
    }

    fn watches(&self) -> Vec<Kind> {
        self.controller.watches()
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        self.controller.keys_for(object, keys)
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let step = self.controller.reconcile(ctx);
        let mut deletions = self.deletions.borrow_mut();
        if !deletions.is_empty() {
            self.deleted.append(&mut deletions);
        }
        step
    }

    /// A crash: the reconcile in progress and what this process observed are gone.
    fn reset(&mut self) {
        self.controller.reset();
        self.deletions.borrow_mut().clear();
        self.deleted.clear();
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// ----- the node controller ---------------------------------------------------------------

/// The node controller: pool counts and the rollout of the target. It keeps nothing
/// between reconciles: its context is its client, and whether it records the config it
/// points a Node at (`in-use-and-recorded`).
#[derive(Debug)]
pub struct NodeController(Box<dyn Reconciler>);

/// The node controller's context.
struct NodeCtx {
    client: Client,
    record: bool,
}

impl NodeController {
    pub fn new() -> Self {
        Self::recording(false)
    }

    /// A node controller that, if `record`, writes on the pool which config it is about
    /// to point each Node at, before it does ([`GcPolicy::records_pointing`]).
    pub fn recording(record: bool) -> Self {
        NodeController(
            Controller::new::<MachineConfigPool>("node-controller")
                .watches::<Node>(pools_of_node)
                .run(rollout, rate_limited, move |client| NodeCtx {
                    client,
                    record,
                }),
        )
    }
}

impl Default for NodeController {
    fn default() -> Self {
        Self::new()
    }
}

/// One reconcile of a pool: its counts, then at most maxUnavailable moves.
async fn rollout(pool: Arc<Object>, ctx: Arc<NodeCtx>) -> Result<Action, Unexpected> {
    let client = &ctx.client;
    let mcp = pool.typed::<MachineConfigPool>().expect("a pool key");
    let Some(target) = mcp.status.configuration.as_deref() else {
        return Ok(Action::await_change());
    };
    let cached = client.store::<Node>().state();
    let nodes: Vec<&Arc<Object>> = cached
        .iter()
        .filter(|n| selector_matches(&mcp.spec.node_selector, &n.meta.labels))
        .collect();
    let done = |n: &Object| {
        let (c, d, s) = node_config(n);
        c.is_some() && c == d && s == Some(STATE_DONE)
    };
    let machine_count = nodes.len() as u32;
    let updated = nodes
        .iter()
        .filter(|n| done(n) && node_config(n).0 == Some(target))
        .count() as u32;
    let degraded = nodes
        .iter()
        .filter(|n| node_config(n).2 == Some(STATE_DEGRADED))
        .count() as u32;
    let unavailable = nodes.iter().filter(|n| !done(n)).count();
    let capacity = MAX_UNAVAILABLE.saturating_sub(unavailable);
    let moves: Vec<&str> = nodes
        .iter()
        .filter(|n| done(n) && node_config(n).1 != Some(target))
        .take(capacity)
        .map(|n| n.meta.name.as_str())
        .collect();
    let s = &mcp.status;
    // Recorded before any Node is pointed, in the same write as the counts: conditional
    // on the version the target was read from, so a new target written meanwhile makes
    // it 409 and no Node is pointed at the old one.
    // The record is the list of configs the Node was pointed at and has not yet been
    // Done at, oldest first (the GC trims it).
    let records: Vec<(String, String)> = if ctx.record {
        moves
            .iter()
            .filter_map(|n| {
                let key = format!("{ANNOTATION_POINTED_AT_PREFIX}{n}");
                let list = pool.meta.annotations.get(&key).map_or("", String::as_str);
                if list.split(' ').any(|c| c == target) {
                    return None;
                }
                let list = if list.is_empty() {
                    target.to_string()
                } else {
                    format!("{list} {target}")
                };
                Some((key, list))
            })
            .collect()
    } else {
        Vec::new()
    };
    if (
        s.machine_count,
        s.updated_machine_count,
        s.degraded_machine_count,
    ) != (machine_count, updated, degraded)
        || !records.is_empty()
    {
        let mut next = (*pool).clone();
        for (k, list) in records {
            next.meta.annotations.insert(k, list);
        }
        let st = &mut next
            .typed_mut::<MachineConfigPool>()
            .expect("a pool")
            .status;
        st.machine_count = machine_count;
        st.updated_machine_count = updated;
        st.degraded_machine_count = degraded;
        let pools: Api<MachineConfigPool> = Api::all(client.clone());
        // A stale pool (the render controller wrote it): start over.
        pools
            .replace(&PostParams::default(), next)
            .await
            .map_err(|e| Unexpected::new("updating pool status", &e))?;
    }
    let api: Api<Node> = Api::all(client.clone());
    let mut error = None;
    for node in moves {
        let ops = vec![PatchOp::SetAnnotation(
            ANNOTATION_DESIRED.into(),
            Some(target.to_string()),
        )];
        if let Err(e) = api.patch(node, &PatchParams::default(), ops).await {
            error.get_or_insert_with(|| Unexpected::new("setting desiredConfig", &e));
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Action::await_change()),
    }
}

impl Reconciler for NodeController {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn watches(&self) -> Vec<Kind> {
        self.0.watches()
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        self.0.keys_for(object, keys)
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        self.0.reconcile(ctx)
    }

    fn reset(&mut self) {
        self.0.reset()
    }
}
