//! The machine-config-controller's render and node controllers (seed incident 3,
//! openshift/machine-config-operator issue #301; SEED-FACTS.md section 3), with the
//! garbage-collection policies for rendered configs as one parameter, [`GcPolicy`].
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
//! the report's log. `render_delay_ms` models the later 5 s render delay (d902c1f93); 0
//! is the code of the incident.
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
//!
//! Node controller (pkg/controller/node/node_controller.go): per pool, the Nodes its
//! nodeSelector matches; writes machineCount / updatedMachineCount /
//! degradedMachineCount, then moves at most maxUnavailable (1) nodes at a time to the
//! target by setting their desiredConfig. A node is unavailable until its daemon reports
//! Done with current == desired (a node with no annotations yet counts as unavailable).

use crate::model::{
    ANNOTATION_DESIRED, ANNOTATION_SERVED_TO_PREFIX, STATE_DEGRADED, STATE_DONE, merge,
    node_config, rendered_name, rendered_object, served_records,
};
use crate::model::{MachineConfig, MachineConfigPool};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp};
use reconsim_world::manager::{Call, ReconcileCtx, Reconciler, Reply, Step, enqueue_for};
use reconsim_world::object::{Kind, Object, ObjectKey, selector_matches};
use reconsim_world::object::{Node, Resource};
use reconsim_world::reconcile_error::Unexpected;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
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
}

impl GcPolicy {
    /// Whether the Machine Config Server must record its hand-outs for this policy.
    pub fn records_hand_outs(self) -> bool {
        self == GcPolicy::InUseAndInFlight
    }

    /// Whether the policy reads Nodes.
    fn reads_nodes(self) -> bool {
        matches!(self, GcPolicy::InUse | GcPolicy::InUseAndInFlight)
    }
}

/// One write of the GC.
#[derive(Clone, Debug)]
enum GcOp {
    Delete(ObjectKey, reconsim_world::object::Uid),
    Orphan(ObjectKey, reconsim_world::object::Uid),
    /// Remove the in-flight records of these machines from the pool.
    ClearRecords(Vec<String>),
}

#[derive(Clone, Debug, Default)]
enum Phase {
    #[default]
    Idle,
    Delaying,
    Creating,
    Targeting,
    Collecting {
        ops: Vec<GcOp>,
        next: usize,
    },
}

/// The render controller.
#[derive(Clone, Debug)]
pub struct RenderController {
    policy: GcPolicy,
    render_delay_ms: u64,
    phase: Phase,
    pool: Option<Arc<Object>>,
    name: String,
    content: std::collections::BTreeMap<String, String>,
    error: Option<Unexpected>,
    /// Configs this controller deleted (observation for tests).
    pub deleted: Vec<String>,
}

impl RenderController {
    pub fn new(policy: GcPolicy, render_delay_ms: u64) -> Self {
        RenderController {
            policy,
            render_delay_ms,
            phase: Phase::Idle,
            pool: None,
            name: String::new(),
            content: Default::default(),
            error: None,
            deleted: Vec::new(),
        }
    }

    pub fn policy(&self) -> GcPolicy {
        self.policy
    }

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        self.phase = Phase::Idle;
        self.error = None;
        let Some(pool) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        let spec = &pool.typed::<MachineConfigPool>().expect("a pool key").spec;
        if spec.machine_config_selector.is_empty() {
            // "SelectingAll": a non-empty selector is required.
            return Step::done();
        }
        let sources: Vec<(&str, &crate::model::MachineConfig)> = ctx
            .cache
            .list(MachineConfig::KIND)
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
            return Step::done();
        }
        self.content = merge(sources);
        self.name = rendered_name(&pool.meta.name, &self.content);
        self.pool = Some(pool);
        let key = ObjectKey::new(MachineConfig::KIND, "", &self.name);
        if ctx.cache.get(&key).is_none() {
            self.phase = Phase::Creating;
            let pool = self.pool.as_ref().expect("set");
            let object = rendered_object(pool, self.content.clone());
            return Step::Call(Call::Api(ApiOp::Create(Box::new(object))));
        }
        self.target(ctx)
    }

    fn target(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let pool = self.pool.clone().expect("set");
        let status = &pool.typed::<MachineConfigPool>().expect("a pool").status;
        if status.configuration.as_deref() == Some(self.name.as_str()) {
            return self.collect(ctx);
        }
        self.phase = Phase::Targeting;
        let mut next = (*pool).clone();
        next.typed_mut::<MachineConfigPool>()
            .expect("a pool")
            .status
            .configuration = Some(self.name.clone());
        Step::Call(Call::Api(ApiOp::Update {
            object: Box::new(next),
            precondition: true,
        }))
    }

    /// garbageCollectRenderedConfigs under the policy.
    fn collect(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let pool = self.pool.clone().expect("set");
        let mut ops = Vec::new();
        if self.policy != GcPolicy::None {
            let mut keep: BTreeSet<&str> = BTreeSet::new();
            for p in ctx.cache.list(MachineConfigPool::KIND) {
                // The pool as this reconcile last wrote it is fresher than the cache.
                let p = if p.meta.uid == pool.meta.uid {
                    &pool
                } else {
                    p
                };
                let mcp = p.typed::<MachineConfigPool>().expect("a pool");
                keep.extend(mcp.spec.configuration.as_deref());
                keep.extend(mcp.status.configuration.as_deref());
                if self.policy == GcPolicy::InUseAndInFlight {
                    keep.extend(served_records(p).map(|(_, c)| c));
                }
            }
            keep.insert(self.name.as_str());
            if self.policy.reads_nodes() {
                for n in ctx.cache.list(Node::KIND) {
                    let (c, d, _) = node_config(n);
                    keep.extend(c);
                    keep.extend(d);
                }
            }
            for mc in ctx.cache.list(MachineConfig::KIND) {
                let owned = mc
                    .meta
                    .controller_ref()
                    .is_some_and(|r| r.uid == pool.meta.uid);
                if !owned || mc.meta.is_deleting() {
                    continue;
                }
                let protected = match self.policy {
                    GcPolicy::None => true,
                    GcPolicy::Orphan | GcPolicy::KeepLatestOnly => mc.meta.name == self.name,
                    GcPolicy::OlderThan1h => {
                        mc.meta.name == self.name
                            || keep_by_target(&pool, &mc.meta.name)
                            || ctx.now < mc.meta.creation_timestamp.plus_ms(ONE_HOUR_MS)
                    }
                    GcPolicy::InUse | GcPolicy::InUseAndInFlight => {
                        keep.contains(mc.meta.name.as_str())
                    }
                };
                if protected {
                    continue;
                }
                ops.push(if self.policy == GcPolicy::Orphan {
                    GcOp::Orphan(mc.key(), pool.meta.uid)
                } else {
                    GcOp::Delete(mc.key(), mc.meta.uid)
                });
            }
        }
        if self.policy == GcPolicy::InUseAndInFlight {
            let landed: Vec<String> = served_records(&pool)
                .filter(|(machine, _)| {
                    ctx.cache
                        .get(&ObjectKey::new(Node::KIND, "", machine))
                        .is_some_and(|n| node_config(n).0.is_some())
                })
                .map(|(m, _)| m.to_string())
                .collect();
            if !landed.is_empty() {
                ops.push(GcOp::ClearRecords(landed));
            }
        }
        if ops.is_empty() {
            return self.finish();
        }
        self.phase = Phase::Collecting { ops, next: 0 };
        self.gc_next()
    }

    fn gc_next(&mut self) -> Step {
        let Phase::Collecting { ops, next } = &self.phase else {
            unreachable!()
        };
        let pool = self.pool.as_ref().expect("set");
        Step::Call(Call::Api(match &ops[*next] {
            GcOp::Delete(key, uid) => ApiOp::Delete {
                key: key.clone(),
                uid: Some(*uid),
                grace_period_seconds: None,
            },
            GcOp::Orphan(key, owner) => ApiOp::Patch {
                key: key.clone(),
                ops: vec![PatchOp::RemoveOwnerReference(*owner)],
                resource_version: None,
            },
            GcOp::ClearRecords(machines) => ApiOp::Patch {
                key: pool.key(),
                ops: machines
                    .iter()
                    .map(|m| {
                        PatchOp::SetAnnotation(format!("{ANNOTATION_SERVED_TO_PREFIX}{m}"), None)
                    })
                    .collect(),
                resource_version: Some(pool.meta.resource_version),
            },
        }))
    }

    fn finish(&mut self) -> Step {
        self.phase = Phase::Idle;
        match self.error.take() {
            Some(e) => Step::error(e),
            None => Step::done(),
        }
    }
}

/// Whether `name` is one of the pool's own targets.
fn keep_by_target(pool: &Object, name: &str) -> bool {
    let p = pool.typed::<MachineConfigPool>().expect("a pool");
    p.spec.configuration.as_deref() == Some(name) || p.status.configuration.as_deref() == Some(name)
}

/// The pools a node belongs to by its role labels.
fn pools_of_node(node: &Object, keys: &mut Vec<ObjectKey>) {
    for k in node.meta.labels.keys() {
        if let Some(pool) = k.strip_prefix(NODE_ROLE_PREFIX) {
            keys.push(ObjectKey::new(MachineConfigPool::KIND, "", pool));
        }
    }
}

impl Reconciler for RenderController {
    fn name(&self) -> &str {
        "render-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![MachineConfigPool::KIND, MachineConfig::KIND, Node::KIND]
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        let kind = object.kind();
        if kind == MachineConfigPool::KIND {
            enqueue_for(object, MachineConfigPool::KIND, keys)
        } else if kind == MachineConfig::KIND {
            // A source names its pool by role (the pools' selectors); a rendered
            // config by its controller.
            if let Some(role) = object.meta.labels.get(crate::model::LABEL_ROLE) {
                keys.push(ObjectKey::new(MachineConfigPool::KIND, "", role));
            } else if let Some(owner) = object.meta.controller_ref() {
                keys.push(ObjectKey::new(MachineConfigPool::KIND, "", &owner.name));
            }
        } else if kind == Node::KIND && self.policy.reads_nodes() {
            pools_of_node(object, keys)
        }
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Some(reply) = ctx.reply.take() else {
            if self.render_delay_ms > 0 {
                self.phase = Phase::Delaying;
                return Step::Sleep {
                    ms: self.render_delay_ms,
                };
            }
            return self.start(ctx);
        };
        match std::mem::take(&mut self.phase) {
            Phase::Idle => Step::protocol("reply without a reconcile in progress"),
            Phase::Delaying => self.start(ctx),
            Phase::Creating => match reply {
                Reply::Api(Ok(_)) | Reply::Api(Err(ApiError::AlreadyExists)) => self.target(ctx),
                other => Step::error(Unexpected::new(format!("creating {}", self.name), &other)),
            },
            Phase::Targeting => match reply {
                Reply::Api(Ok(ApiOk::Object(pool))) => {
                    self.pool = Some(pool);
                    self.collect(ctx)
                }
                other => Step::error(Unexpected::new("updating pool status", &other)),
            },
            Phase::Collecting { ops, next } => {
                match (&ops[next], reply) {
                    (GcOp::Delete(key, _), Reply::Api(Ok(_) | Err(ApiError::NotFound))) => {
                        self.deleted.push(key.name.clone());
                    }
                    (_, Reply::Api(Ok(_) | Err(ApiError::NotFound))) => {}
                    (op, other) => {
                        self.error
                            .get_or_insert_with(|| Unexpected::new(format!("gc {op:?}"), &other));
                    }
                }
                if next + 1 < ops.len() {
                    self.phase = Phase::Collecting {
                        ops,
                        next: next + 1,
                    };
                    return self.gc_next();
                }
                self.finish()
            }
        }
    }

    fn reset(&mut self) {
        *self = RenderController::new(self.policy, self.render_delay_ms);
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// ----- the node controller ---------------------------------------------------------------

#[derive(Clone, Debug, Default)]
enum NodePhase {
    #[default]
    Idle,
    Status,
    Moving {
        nodes: Vec<ObjectKey>,
        next: usize,
    },
}

/// The node controller: pool counts and the rollout of the target.
#[derive(Clone, Debug, Default)]
pub struct NodeController {
    phase: NodePhase,
    pool: Option<Arc<Object>>,
    target: String,
    moves: Vec<ObjectKey>,
    error: Option<Unexpected>,
}

impl NodeController {
    pub fn new() -> Self {
        Self::default()
    }

    fn start(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        *self = Self::default();
        let Some(pool) = ctx.cache.get(ctx.key).cloned() else {
            return Step::done();
        };
        let mcp = pool.typed::<MachineConfigPool>().expect("a pool key");
        let Some(target) = mcp.status.configuration.clone() else {
            return Step::done();
        };
        let nodes: Vec<&Arc<Object>> = ctx
            .cache
            .list(Node::KIND)
            .filter(|n| selector_matches(&mcp.spec.node_selector, &n.meta.labels))
            .collect();
        let done = |n: &Object| {
            let (c, d, s) = node_config(n);
            c.is_some() && c == d && s == Some(STATE_DONE)
        };
        let machine_count = nodes.len() as u32;
        let updated = nodes
            .iter()
            .filter(|n| done(n) && node_config(n).0 == Some(target.as_str()))
            .count() as u32;
        let degraded = nodes
            .iter()
            .filter(|n| node_config(n).2 == Some(STATE_DEGRADED))
            .count() as u32;
        let unavailable = nodes.iter().filter(|n| !done(n)).count();
        let capacity = MAX_UNAVAILABLE.saturating_sub(unavailable);
        self.moves = nodes
            .iter()
            .filter(|n| done(n) && node_config(n).1 != Some(target.as_str()))
            .take(capacity)
            .map(|n| n.key())
            .collect();
        self.target = target;
        self.pool = Some(pool.clone());
        let s = &mcp.status;
        if (
            s.machine_count,
            s.updated_machine_count,
            s.degraded_machine_count,
        ) != (machine_count, updated, degraded)
        {
            let mut next = (*pool).clone();
            let st = &mut next
                .typed_mut::<MachineConfigPool>()
                .expect("a pool")
                .status;
            st.machine_count = machine_count;
            st.updated_machine_count = updated;
            st.degraded_machine_count = degraded;
            self.phase = NodePhase::Status;
            return Step::Call(Call::Api(ApiOp::Update {
                object: Box::new(next),
                precondition: true,
            }));
        }
        self.move_nodes()
    }

    fn move_nodes(&mut self) -> Step {
        if self.moves.is_empty() {
            return self.finish();
        }
        let nodes = std::mem::take(&mut self.moves);
        self.phase = NodePhase::Moving { nodes, next: 0 };
        self.move_next()
    }

    fn move_next(&mut self) -> Step {
        let NodePhase::Moving { nodes, next } = &self.phase else {
            unreachable!()
        };
        Step::Call(Call::Api(ApiOp::Patch {
            key: nodes[*next].clone(),
            ops: vec![PatchOp::SetAnnotation(
                ANNOTATION_DESIRED.into(),
                Some(self.target.clone()),
            )],
            resource_version: None,
        }))
    }

    fn finish(&mut self) -> Step {
        self.phase = NodePhase::Idle;
        match self.error.take() {
            Some(e) => Step::error(e),
            None => Step::done(),
        }
    }
}

impl Reconciler for NodeController {
    fn name(&self) -> &str {
        "node-controller"
    }

    fn watches(&self) -> Vec<Kind> {
        vec![MachineConfigPool::KIND, Node::KIND]
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        let kind = object.kind();
        if kind == MachineConfigPool::KIND {
            keys.push(object.key())
        } else if kind == Node::KIND {
            pools_of_node(object, keys)
        }
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        let Some(reply) = ctx.reply.take() else {
            return self.start(ctx);
        };
        match std::mem::take(&mut self.phase) {
            NodePhase::Idle => Step::protocol("reply without a reconcile in progress"),
            NodePhase::Status => match reply {
                Reply::Api(Ok(_)) => self.move_nodes(),
                // A stale pool (the render controller wrote it): start over.
                other => Step::error(Unexpected::new("updating pool status", &other)),
            },
            NodePhase::Moving { nodes, next } => {
                if !matches!(reply, Reply::Api(Ok(_))) {
                    self.error
                        .get_or_insert_with(|| Unexpected::new("setting desiredConfig", &reply));
                }
                if next + 1 < nodes.len() {
                    self.phase = NodePhase::Moving {
                        nodes,
                        next: next + 1,
                    };
                    return self.move_next();
                }
                self.finish()
            }
        }
    }

    fn reset(&mut self) {
        *self = Self::default();
    }
}
