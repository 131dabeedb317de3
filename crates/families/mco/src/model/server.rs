//! The Machine Config Server process ([`MachineConfigServer`]).
//!
//! In the cluster it serves a booting machine the pool's `status.configuration.name`,
//! read live on each request:
//! a Get of the pool, then a Get of that config, as the 2019 `clusterServer.GetConfig`
//! did through a typed clientset with no cache (pkg/server/cluster_server.go
//! @5ea28209; docs/semantics.md 8.1). The answer carries the name that Ignition writes
//! into node-annotations.json as current = desired, state Done.
//! With `record_hand_outs` (the in-flight GC this project proposes) it then records
//! the hand-out on the pool, `machineconfiguration.openshift.io/served-to.<machine>`,
//! with a patch conditional on the resourceVersion of the pool it read, so the record
//! is ordered before any change of the target. In bootstrap mode it serves the names
//! the installer rendered outside the cluster.

use super::messages::{MACHINE_REQUEST_TIMEOUT_MS, MCO_TAG, McoMsg, Timer};
use super::objects::{ANNOTATION_SERVED_TO_PREFIX, MachineConfig, MachineConfigPool};
use reconsim_sim::{ProcId, SimTime, TimerId};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest, PatchOp};
use reconsim_world::component::Component;
use reconsim_world::msg::{Msg, ReqIds, Timer as AnyTimer};
use reconsim_world::object::{Object, ObjectKey, Resource};
use reconsim_world::proc::{Endpoints, WorldCtx};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a server's answers come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMode {
    /// The bootstrap node's server: the installer's renders, by pool.
    Bootstrap { configs: BTreeMap<String, String> },
    /// The in-cluster server: the pool's target, read live from the API server on each
    /// request (the 2019 `clusterServer.GetConfig`; docs/semantics.md 8.1).
    Cluster { record_hand_outs: bool },
}

/// Which read or write of one `GetConfig` a server request is.
#[derive(Clone, Debug)]
enum Stage {
    /// `MachineConfigPools().Get(pool)`.
    Pool,
    /// `MachineConfigs().Get(status.configuration.name)`, with the pool as read.
    Config { pool: Arc<Object>, name: String },
    /// The hand-out record on the pool (the in-flight GC), conditional on the version read.
    Record { name: String },
}

#[derive(Clone, Debug)]
struct Pending {
    from: ProcId,
    id: u64,
    machine: String,
    stage: Stage,
    /// The request's timeout, cancelled when the answer comes.
    timer: TimerId,
}

/// The Machine Config Server process.
///
/// The in-cluster server holds no cache: like the 2019 code (pkg/server/cluster_server.go
/// @5ea28209, a typed clientset, no lister) each `GET /config/<pool>` is a Get of the pool
/// and then a Get of the config its `status.configuration.name` names, each a consistent
/// read over the network with its latency. A lagging watch cannot make it serve a stale
/// target; a config deleted between the two reads makes the request fail (Ignition
/// retries). The informer-backed server is the 2022 change (4031f6c12), not modelled.
#[derive(Debug)]
pub struct MachineConfigServer {
    mode: ServerMode,
    apiserver: ProcId,
    ids: ReqIds,
    pending: BTreeMap<u64, Pending>,
    /// Every hand-out: (time, machine, config). An observation record for tests.
    pub served: Vec<(SimTime, String, String)>,
    /// API requests sent so far (observation for tests: a cache would send none).
    pub api_requests: u64,
}

/// Bound on the hand-out log (an observation record).
const SERVED_LOG_MAX: usize = 4096;
/// Bound on the server's own requests under way.
const SERVER_PENDING_MAX: usize = 256;

impl MachineConfigServer {
    pub fn new(mode: ServerMode, endpoints: Endpoints) -> Self {
        MachineConfigServer {
            mode,
            apiserver: endpoints.apiserver,
            ids: ReqIds::new(MCO_TAG),
            pending: BTreeMap::new(),
            served: Vec::new(),
            api_requests: 0,
        }
    }

    pub fn mode(&self) -> &ServerMode {
        &self.mode
    }

    fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {
        self.pending.clear();
    }

    fn on_crash(&mut self) {
        self.pending.clear();
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::Family(t) = t else {
            return;
        };
        let Some(&Timer::ServerRequest { req }) = t.typed::<Timer>() else {
            return;
        };
        if let Some(p) = self.pending.remove(&req) {
            let what = match p.stage {
                Stage::Pool => "fetching the pool",
                Stage::Config { .. } => "fetching the config",
                Stage::Record { .. } => "recording the hand-out",
            };
            reply(ctx, p.from, p.id, Err(format!("timed out {what}")));
        }
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::Family(m) => {
                if let Some(McoMsg::GetConfig { id, machine, pool }) = m.typed::<McoMsg>() {
                    self.get_config(from, *id, machine.clone(), pool.clone(), ctx)
                }
            }
            Msg::ApiResp(resp) => {
                let Some(p) = self.pending.remove(&resp.id) else {
                    return;
                };
                ctx.cancel_timer(p.timer);
                self.on_api(p, resp.result, ctx);
            }
            _ => {}
        }
    }

    fn get_config(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        pool: String,
        ctx: &mut WorldCtx<'_>,
    ) {
        if let ServerMode::Bootstrap { configs } = &self.mode {
            match configs.get(&pool) {
                Some(name) => {
                    let name = name.clone();
                    self.hand_out(from, id, machine, name, ctx);
                }
                None => reply(ctx, from, id, Err(format!("no pool {pool}"))),
            }
            return;
        }
        if self.pending.len() >= SERVER_PENDING_MAX {
            return reply(ctx, from, id, Err("busy".into()));
        }
        let key = ObjectKey::new(MachineConfigPool::KIND, "", &pool);
        self.request(from, id, machine, Stage::Pool, ApiOp::Get(key), ctx);
    }

    /// Send `op` to the API server as the `stage` of machine request `id`.
    fn request(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        stage: Stage,
        op: ApiOp,
        ctx: &mut WorldCtx<'_>,
    ) {
        let req = self.ids.issue();
        self.api_requests += 1;
        ctx.send(self.apiserver, Msg::Api(ApiRequest { id: req, op }));
        let timer = ctx.set_timer(
            MACHINE_REQUEST_TIMEOUT_MS,
            Msg::family_timer(Timer::ServerRequest { req }),
        );
        self.pending.insert(
            req,
            Pending {
                from,
                id,
                machine,
                stage,
                timer,
            },
        );
    }

    fn on_api(&mut self, p: Pending, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        let Pending {
            from,
            id,
            machine,
            stage,
            ..
        } = p;
        let record = matches!(
            self.mode,
            ServerMode::Cluster {
                record_hand_outs: true
            }
        );
        match (stage, result) {
            (Stage::Pool, Ok(ApiOk::Object(pool))) => {
                // The 2019 rule: status.configuration.name (the render controller of
                // the time wrote nothing else).
                let Some(name) = pool
                    .typed::<MachineConfigPool>()
                    .and_then(|p| p.status.configuration.clone())
                else {
                    let msg = format!("pool {} has no configuration", pool.meta.name);
                    return reply(ctx, from, id, Err(msg));
                };
                let key = ObjectKey::new(MachineConfig::KIND, "", &name);
                let stage = Stage::Config { pool, name };
                self.request(from, id, machine, stage, ApiOp::Get(key), ctx);
            }
            (Stage::Pool, other) => reply(
                ctx,
                from,
                id,
                Err(format!("could not fetch pool: {other:?}")),
            ),
            (Stage::Config { name, .. }, Ok(_)) if !record => {
                self.hand_out(from, id, machine, name, ctx)
            }
            (Stage::Config { pool, name }, Ok(_)) => {
                // Record first, conditional on the pool version the target was read
                // from: the record lands only if `name` is still the target, before any
                // later change.
                let op = ApiOp::Patch {
                    key: pool.key(),
                    ops: vec![PatchOp::SetAnnotation(
                        format!("{ANNOTATION_SERVED_TO_PREFIX}{machine}"),
                        Some(name.clone()),
                    )],
                    resource_version: Some(pool.meta.resource_version),
                };
                self.request(from, id, machine, Stage::Record { name }, op, ctx);
            }
            (Stage::Config { name, .. }, Err(e)) => reply(
                ctx,
                from,
                id,
                Err(format!("could not fetch config {name}: {e:?}")),
            ),
            (Stage::Record { name }, Ok(_)) => self.hand_out(from, id, machine, name, ctx),
            (Stage::Record { .. }, Err(e)) => {
                reply(ctx, from, id, Err(format!("record failed: {e:?}")))
            }
        }
    }

    fn hand_out(
        &mut self,
        from: ProcId,
        id: u64,
        machine: String,
        name: String,
        ctx: &mut WorldCtx<'_>,
    ) {
        ctx.note(|| format!("mcs: serving {name} to {machine}"));
        if self.served.len() < SERVED_LOG_MAX {
            self.served.push((ctx.now(), machine, name.clone()));
        }
        reply(ctx, from, id, Ok(name));
    }
}

fn reply(ctx: &mut WorldCtx<'_>, to: ProcId, id: u64, result: Result<String, String>) {
    ctx.send(to, Msg::family(McoMsg::Config { id, result }));
}

impl Component for MachineConfigServer {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_start(self, ctx)
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_msg(self, from, msg, ctx)
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        MachineConfigServer::on_timer(self, t, ctx)
    }
    fn on_crash(&mut self) {
        MachineConfigServer::on_crash(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
