//! A machine's steps: Ignition's fetch, the first boot, the kubelet's registration, the
//! daemon's load, checks and updates, and the API answers that advance them.

use super::machine::{After, McoMachine, Phase};
use super::messages::{
    DAEMON_CONFIG_TIMEOUT_MS, DAEMON_POLL_MS, FETCH_RETRY_MS, MACHINE_REQUEST_TIMEOUT_MS,
    MachineTimer, McoMsg, Timer,
};
use super::objects::{
    ANNOTATION_CURRENT, ANNOTATION_DESIRED, ANNOTATION_REASON, ANNOTATION_STATE, MachineConfig,
    STATE_DEGRADED, STATE_DONE, STATE_WORKING, node_config, node_labels,
};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest, PatchOp};
use reconsim_world::msg::Msg;
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, ConditionStatus, Node, NodeStatus, Object, ObjectKey, ObjectMeta,
};
use reconsim_world::proc::WorldCtx;

impl McoMachine {
    pub(super) fn node_key(&self) -> ObjectKey {
        ObjectKey::new(Node::KIND, "", &self.spec.name)
    }

    pub(super) fn fetch(&mut self, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.req = Some(id);
        ctx.send(
            self.spec.server,
            Msg::family(McoMsg::GetConfig {
                id,
                machine: self.spec.name.clone(),
                pool: self.spec.pool.clone(),
            }),
        );
        self.arm_timeout(id, ctx);
    }

    fn call(&mut self, op: ApiOp, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        self.req = Some(id);
        ctx.send(self.endpoints.apiserver, Msg::Api(ApiRequest { id, op }));
        self.arm_timeout(id, ctx);
    }

    /// The request under way got its answer: forget it and its timeout.
    pub(super) fn answered(&mut self, ctx: &mut WorldCtx<'_>) {
        self.req = None;
        if let Some(t) = self.timeout.take() {
            ctx.cancel_timer(t);
        }
    }

    /// Running: start an update if the cached Node wants another config.
    pub(super) fn look(&mut self, ctx: &mut WorldCtx<'_>) {
        let desired = self
            .node
            .as_ref()
            .and_then(|n| node_config(n).1.map(str::to_string));
        if let Some(d) = desired
            && Some(&d) != self.current.as_ref()
        {
            ctx.note(|| format!("daemon: update to {d}"));
            self.desired = Some(d.clone());
            self.check(vec![d], After::Apply, ctx);
        }
    }

    fn arm_timeout(&mut self, req: u64, ctx: &mut WorldCtx<'_>) {
        self.timeout = Some(ctx.set_timer(
            MACHINE_REQUEST_TIMEOUT_MS,
            Msg::family_timer(Timer::Machine(MachineTimer::Timeout { req })),
        ));
    }

    /// Run [`Self::next`] after `ms`.
    pub(super) fn after(&mut self, ms: u64, ctx: &mut WorldCtx<'_>) {
        self.step += 1;
        let step = self.step;
        ctx.set_timer(
            ms,
            Msg::family_timer(Timer::Machine(MachineTimer::Next { step })),
        );
    }

    /// The current step's request failed or got no answer: try it again later.
    pub(super) fn failed(&mut self, ctx: &mut WorldCtx<'_>) {
        match self.phase {
            Phase::Fetching => {
                ctx.set_timer(
                    FETCH_RETRY_MS,
                    Msg::family_timer(Timer::Machine(MachineTimer::Fetch)),
                );
            }
            Phase::Running | Phase::Degraded { .. } | Phase::Off => {}
            _ => self.after(DAEMON_POLL_MS, ctx),
        }
    }

    /// A timed step is due (or a failed request is retried).
    pub(super) fn next(&mut self, ctx: &mut WorldCtx<'_>) {
        match self.phase.clone() {
            Phase::FirstBoot => {
                self.phase = Phase::Joining;
                let (lo, hi) = self.spec.timing.join_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            Phase::Joining | Phase::Registering => {
                // The kubelet registers the Node (no annotations yet).
                self.phase = Phase::Registering;
                let mut meta = ObjectMeta::named("", &self.spec.name);
                meta.labels = node_labels(&self.spec.pool);
                let node = Node {
                    spec: Default::default(),
                    status: NodeStatus {
                        ready: ConditionStatus::True,
                        ready_since: Some(ctx.now()),
                        ..Default::default()
                    },
                };
                self.call(
                    ApiOp::Create(Box::new(Object::new(meta, Body::new(node)))),
                    ctx,
                );
            }
            Phase::DaemonPending | Phase::Loading => {
                self.phase = Phase::Loading;
                let key = self.node_key();
                self.call(ApiOp::Get(key), ctx);
            }
            Phase::Annotating => self.annotate(ctx),
            Phase::Checking { names, idx, .. } => {
                let key = ObjectKey::new(MachineConfig::KIND, "", &names[idx]);
                self.call(ApiOp::Get(key), ctx);
            }
            Phase::Working => self.write_state(STATE_WORKING, None, ctx),
            Phase::Applying => {
                // The update's reboot is over: the daemon starts again and reads its
                // current and desired configs.
                let names = [self.current.clone(), self.desired.clone()]
                    .into_iter()
                    .flatten()
                    .collect();
                self.check(names, After::Finish, ctx);
            }
            Phase::Finishing => self.finish(ctx),
            Phase::Running | Phase::Off | Phase::Fetching | Phase::Degraded { .. } => {}
        }
    }

    fn annotate(&mut self, ctx: &mut WorldCtx<'_>) {
        self.phase = Phase::Annotating;
        let name = self.served.clone().expect("served before the daemon runs");
        let key = self.node_key();
        self.call(
            ApiOp::Patch {
                key,
                ops: vec![
                    PatchOp::SetAnnotation(ANNOTATION_CURRENT.into(), Some(name.clone())),
                    PatchOp::SetAnnotation(ANNOTATION_DESIRED.into(), Some(name)),
                    PatchOp::SetAnnotation(ANNOTATION_STATE.into(), Some(STATE_DONE.into())),
                ],
                resource_version: None,
            },
            ctx,
        );
    }

    fn write_state(&mut self, state: &str, reason: Option<String>, ctx: &mut WorldCtx<'_>) {
        let key = self.node_key();
        let mut ops = vec![PatchOp::SetAnnotation(
            ANNOTATION_STATE.into(),
            Some(state.into()),
        )];
        if let Some(r) = reason {
            ops.push(PatchOp::SetAnnotation(ANNOTATION_REASON.into(), Some(r)));
        }
        self.call(
            ApiOp::Patch {
                key,
                ops,
                resource_version: None,
            },
            ctx,
        );
    }

    fn finish(&mut self, ctx: &mut WorldCtx<'_>) {
        self.phase = Phase::Finishing;
        let desired = self
            .desired
            .clone()
            .expect("an update has a desired config");
        let key = self.node_key();
        self.call(
            ApiOp::Patch {
                key,
                ops: vec![
                    PatchOp::SetAnnotation(ANNOTATION_CURRENT.into(), Some(desired)),
                    PatchOp::SetAnnotation(ANNOTATION_STATE.into(), Some(STATE_DONE.into())),
                ],
                resource_version: None,
            },
            ctx,
        );
    }

    fn check(&mut self, names: Vec<String>, after: After, ctx: &mut WorldCtx<'_>) {
        if names.is_empty() {
            return self.proceed(after, ctx);
        }
        self.phase = Phase::Checking {
            names,
            idx: 0,
            since: ctx.now(),
            after,
        };
        self.next(ctx);
    }

    fn proceed(&mut self, after: After, ctx: &mut WorldCtx<'_>) {
        match after {
            After::Run => {
                self.phase = Phase::Running;
                self.has_run = true;
                self.look(ctx);
            }
            After::Apply => {
                self.phase = Phase::Working;
                self.write_state(STATE_WORKING, None, ctx);
            }
            After::Finish => self.finish(ctx),
        }
    }

    fn degrade(&mut self, reason: String, ctx: &mut WorldCtx<'_>) {
        ctx.note(|| format!("daemon: Degraded: {reason}"));
        self.degraded_at = Some(ctx.now());
        self.phase = Phase::Degraded {
            reason: reason.clone(),
        };
        // Fire and forget: the state is also on the process for checkers.
        self.write_state(STATE_DEGRADED, Some(reason), ctx);
    }

    pub(super) fn on_api(&mut self, result: Result<ApiOk, ApiError>, ctx: &mut WorldCtx<'_>) {
        match (self.phase.clone(), result) {
            (Phase::Registering, result @ (Ok(_) | Err(ApiError::AlreadyExists))) => {
                ctx.note(|| "kubelet: node registered".into());
                if let Ok(ApiOk::Object(node)) = result {
                    self.node_uid = Some(node.meta.uid);
                }
                self.start_heartbeat(ctx);
                self.phase = Phase::DaemonPending;
                let (lo, hi) = self.spec.timing.daemon_start_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            (Phase::Loading, Ok(ApiOk::Object(node))) => {
                if !self.watching {
                    // The daemon's node informer, as a plain watch from what it read.
                    self.watching = true;
                    let id = self.ids.issue();
                    ctx.send(
                        self.endpoints.apiserver,
                        Msg::Api(ApiRequest {
                            id,
                            op: ApiOp::Watch {
                                stream: 0,
                                kinds: vec![Node::KIND],
                                from_rv: node.meta.resource_version,
                                options: Default::default(),
                            },
                        }),
                    );
                }
                self.node = Some(node.clone());
                let (current, desired, _) = node_config(&node);
                match (current, desired) {
                    (Some(c), Some(d)) => {
                        // Already annotated (a daemon restart): nothing to load.
                        self.current = Some(c.to_string());
                        self.desired = Some(d.to_string());
                        self.annotated = true;
                        let c = c.to_string();
                        self.check(vec![c], After::Run, ctx);
                    }
                    _ => self.annotate(ctx),
                }
            }
            (Phase::Annotating, Ok(_)) => {
                self.annotated = true;
                self.current = self.served.clone();
                self.desired = self.served.clone();
                let c = self.current.clone().expect("served");
                self.check(vec![c], After::Run, ctx);
            }
            (
                Phase::Checking {
                    names,
                    idx,
                    since,
                    after,
                },
                result,
            ) => match result {
                Ok(_) if idx + 1 < names.len() => {
                    self.phase = Phase::Checking {
                        names,
                        idx: idx + 1,
                        since,
                        after,
                    };
                    self.next(ctx);
                }
                Ok(_) => self.proceed(after, ctx),
                Err(e) => {
                    if !self.has_run && e == ApiError::NotFound {
                        self.boot_not_found += 1;
                        self.first_boot_not_found_at.get_or_insert(ctx.now());
                    }
                    if ctx.now().since(since) >= DAEMON_CONFIG_TIMEOUT_MS {
                        let reason = format!(
                            "machineconfig {:?} not found after {} s: {e:?}",
                            names[idx],
                            DAEMON_CONFIG_TIMEOUT_MS / 1000
                        );
                        self.degrade(reason, ctx);
                    } else {
                        self.phase = Phase::Checking {
                            names,
                            idx,
                            since,
                            after,
                        };
                        self.after(DAEMON_POLL_MS, ctx);
                    }
                }
            },
            (Phase::Working, Ok(_)) => {
                self.phase = Phase::Applying;
                let (lo, hi) = self.spec.timing.update_ms;
                self.after(ctx.draw_ms(lo, hi), ctx);
            }
            (Phase::Finishing, Ok(_)) => {
                self.current = self.desired.clone();
                ctx.note(|| {
                    format!(
                        "daemon: Done at {}",
                        self.current.clone().unwrap_or_default()
                    )
                });
                self.phase = Phase::Running;
                self.has_run = true;
                self.look(ctx);
            }
            (Phase::Degraded { .. }, _) => {}
            // Any other failure: retry the step.
            _ => self.failed(ctx),
        }
    }
}
