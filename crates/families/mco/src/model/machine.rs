//! One machine's process ([`McoMachine`]): its timing, its phases, its state, and how
//! messages and timers reach its steps.
//!
//! [`McoMachine`]: one machine's first boot and its machine-config-daemon. Power on,
//! fetch the config (retry every 5 s on error, as Ignition retries), reboot, the kubelet
//! registers the Node after a join delay, the daemon pod starts, loads the served
//! annotations onto its Node if it has none (loadNodeAnnotations), then reads its
//! currentConfig, polling every 10 s for up to 5 min before going Degraded (SEED-FACTS
//! section 3). Afterwards a new desiredConfig on its Node is fetched,
//! state Working, applied with a reboot (`update_ms`), and after the reboot the daemon
//! starts again and reads its current and desired configs (the same 5 min rule), then
//! writes current = desired, state Done. The daemon follows its Node with a watch on
//! Nodes opened from the version it read (the real daemon's node informer, without the
//! HTTP/2 health check: machines' links are never cut in these scenarios, and the
//! pings were most of a run's events).

use super::lease::{LeaseReq, kubelet_timing};
use super::messages::{MCO_TAG, MachineTimer, McoMsg, Timer};
use reconsim_sim::{ProcId, SimTime, TimerId};
use reconsim_world::component::Component;
use reconsim_world::msg::{Msg, ReqIds, Timer as AnyTimer};
use reconsim_world::object::{Object, Uid};
use reconsim_world::proc::{Endpoints, WorldCtx};
use serde::Serialize;
use std::sync::Arc;

/// A machine's durations, each drawn uniformly from `[lo, hi]` ms by the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineTiming {
    /// Power-on time (absolute).
    pub boot_at_ms: (u64, u64),
    /// Ignition's first boot: write the config, reboot.
    pub reboot_ms: (u64, u64),
    /// From the reboot to the kubelet's registration.
    pub join_ms: (u64, u64),
    /// From registration to the daemon pod running.
    pub daemon_start_ms: (u64, u64),
    /// An update: drain, write, reboot.
    pub update_ms: (u64, u64),
}

impl Default for MachineTiming {
    fn default() -> Self {
        MachineTiming {
            boot_at_ms: (0, 0),
            reboot_ms: (30_000, 60_000),
            join_ms: (60_000, 180_000),
            daemon_start_ms: (10_000, 60_000),
            update_ms: (120_000, 300_000),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MachineConfigSpec {
    /// The machine's (and its Node's) name.
    pub name: String,
    pub pool: String,
    /// The config server it boots from.
    pub server: ProcId,
    pub timing: MachineTiming,
}

/// What the daemon does once every config of a check is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum After {
    /// Start polling the Node.
    Run,
    /// Write state Working and apply the update.
    Apply,
    /// Write current = desired, state Done.
    Finish,
}

/// Where a machine is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Off,
    Fetching,
    FirstBoot,
    Joining,
    Registering,
    DaemonPending,
    Loading,
    Annotating,
    /// Reading `names` (from `idx`); gives up `DAEMON_CONFIG_TIMEOUT_MS` after `since`.
    Checking {
        names: Vec<String>,
        idx: usize,
        since: SimTime,
        after: After,
    },
    Running,
    Working,
    Applying,
    Finishing,
    Degraded {
        reason: String,
    },
}

/// One machine: Ignition's first boot, the kubelet's registration, the daemon.
#[derive(Debug)]
pub struct McoMachine {
    pub(super) spec: MachineConfigSpec,
    pub(super) endpoints: Endpoints,
    pub(super) ids: ReqIds,
    pub(super) phase: Phase,
    /// The request under way and its timeout timer.
    pub(super) req: Option<u64>,
    pub(super) timeout: Option<TimerId>,
    /// The daemon's view of its Node, kept by a watch on Nodes opened when it starts.
    pub(super) node: Option<Arc<Object>>,
    pub(super) watching: bool,
    /// Bumped whenever a step's timer must be forgotten.
    pub(super) step: u64,
    /// The config the server handed out (what Ignition wrote).
    pub(super) served: Option<String>,
    /// The daemon wrote the served annotations onto the Node: no longer booting.
    pub(super) annotated: bool,
    pub(super) current: Option<String>,
    pub(super) desired: Option<String>,
    /// When the daemon went Degraded.
    pub degraded_at: Option<SimTime>,
    /// The kubelet's heartbeat: started once the Node is registered.
    pub(super) heartbeating: bool,
    /// The registered Node's uid (the Lease's owner), if the create answered it.
    pub(super) node_uid: Option<Uid>,
    /// The node Lease as last read or written, and the Lease request under way.
    pub(super) lease: Option<Arc<Object>>,
    pub(super) lease_req: Option<(u64, LeaseReq)>,
    pub(super) lease_backoff_ms: u64,
    /// Successful Lease writes so far (observation for tests).
    pub heartbeats: u64,
    /// The daemon has reached Running once: from then on the machine is no longer booting.
    pub(super) has_run: bool,
    /// Reads of its config by the daemon, before it first ran, that the API server answered
    /// NotFound (observation for tests): the report's "secondary masters that were still
    /// booting and expecting to be able to find that MC", counted rather than inferred
    /// from the invariant, which stops at the first violation.
    pub boot_not_found: u64,
    /// When the first of those answers came: tells a bring-up miss from a late joiner's.
    pub first_boot_not_found_at: Option<SimTime>,
    /// What checkers read of it, as of its last step ([`Seen`]), and how often that
    /// changed (`Component::changes`): its heartbeats and retries change none of it.
    seen: Seen,
    changes: u64,
}

/// What a checker may read of a machine: its phase (with a check's progress), whether it
/// was served and whether it annotated its Node. The counters `heartbeats` and
/// `boot_not_found` are observations for tests, not for checkers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    phase: std::mem::Discriminant<Phase>,
    checking_idx: usize,
    served: bool,
    annotated: bool,
}

impl McoMachine {
    pub fn new(spec: MachineConfigSpec, endpoints: Endpoints) -> Self {
        McoMachine {
            spec,
            endpoints,
            ids: ReqIds::new(MCO_TAG),
            phase: Phase::Off,
            req: None,
            timeout: None,
            node: None,
            watching: false,
            step: 0,
            served: None,
            annotated: false,
            current: None,
            desired: None,
            degraded_at: None,
            heartbeating: false,
            node_uid: None,
            lease: None,
            lease_req: None,
            lease_backoff_ms: kubelet_timing().lease_retry_ms_min,
            heartbeats: 0,
            has_run: false,
            boot_not_found: 0,
            first_boot_not_found_at: None,
            seen: Seen {
                phase: std::mem::discriminant(&Phase::Off),
                checking_idx: 0,
                served: false,
                annotated: false,
            },
            changes: 0,
        }
    }

    /// Counts a change of what checkers read, after a step.
    fn after_step(&mut self) {
        let seen = Seen {
            phase: std::mem::discriminant(&self.phase),
            checking_idx: match &self.phase {
                Phase::Checking { idx, .. } => *idx,
                _ => 0,
            },
            served: self.served.is_some(),
            annotated: self.annotated,
        };
        if seen != self.seen {
            self.seen = seen;
            self.changes += 1;
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn pool(&self) -> &str {
        &self.spec.pool
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn served(&self) -> Option<&str> {
        self.served.as_deref()
    }

    /// The config handed to this machine while it is still booting: served, and the
    /// daemon has not yet written it onto the Node.
    pub fn booting_config(&self) -> Option<&str> {
        if self.annotated {
            None
        } else {
            self.served.as_deref()
        }
    }

    /// The daemon has loaded its annotations (the node is MCO-managed).
    pub fn annotated(&self) -> bool {
        self.annotated
    }

    pub fn is_degraded(&self) -> bool {
        matches!(self.phase, Phase::Degraded { .. })
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        // A machine is powered on once; a restart of the process models nothing else.
        if self.phase == Phase::Off {
            let (lo, hi) = self.spec.timing.boot_at_ms;
            let at = ctx.draw_ms(lo, hi);
            let delay = at.saturating_sub(ctx.now().as_ms());
            ctx.set_timer(
                delay,
                Msg::family_timer(Timer::Machine(MachineTimer::Fetch)),
            );
        }
    }

    fn on_crash(&mut self) {
        self.req = None;
        self.timeout = None;
        self.lease_req = None;
        self.lease = None;
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let t = match t {
            AnyTimer::Family(p) => match p.take::<Timer>() {
                Ok(Timer::Machine(t)) => t,
                _ => return,
            },
            _ => return,
        };
        match t {
            MachineTimer::Fetch => {
                if matches!(self.phase, Phase::Off | Phase::Fetching) {
                    self.phase = Phase::Fetching;
                    self.fetch(ctx);
                }
            }
            MachineTimer::Timeout { req } if self.req == Some(req) => {
                self.req = None;
                self.timeout = None;
                self.failed(ctx);
            }
            MachineTimer::Next { step } if step == self.step => self.next(ctx),
            MachineTimer::RenewLease => {
                self.renew_lease(ctx);
                let t = kubelet_timing();
                let jitter = ctx.draw_ms(0, t.lease_renew_jitter_ms);
                ctx.set_timer(
                    t.lease_renew_interval_ms + jitter,
                    Msg::family_timer(Timer::Machine(MachineTimer::RenewLease)),
                );
            }
            MachineTimer::RetryLease => self.renew_lease(ctx),
            _ => {}
        }
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::Watch(ev) => {
                let newer = self
                    .node
                    .as_ref()
                    .is_none_or(|n| n.meta.resource_version < ev.object.meta.resource_version);
                if ev.object.is(&self.node_key()) && newer {
                    self.node = Some(ev.object);
                    if self.phase == Phase::Running {
                        self.look(ctx);
                    }
                }
            }
            Msg::Family(m) => {
                let Some(McoMsg::Config { id, result }) = m.typed::<McoMsg>() else {
                    return;
                };
                if self.req != Some(*id) {
                    return;
                }
                self.answered(ctx);
                match result.clone() {
                    Ok(name) => {
                        ctx.note(|| format!("ignition: got {name}, rebooting"));
                        self.served = Some(name);
                        self.phase = Phase::FirstBoot;
                        let (lo, hi) = self.spec.timing.reboot_ms;
                        self.after(ctx.draw_ms(lo, hi), ctx);
                    }
                    Err(e) => {
                        ctx.note(|| format!("ignition: fetch failed: {e}"));
                        self.failed(ctx);
                    }
                }
            }
            Msg::ApiResp(resp) if self.lease_req.is_some_and(|(id, _)| id == resp.id) => {
                let (_, req) = self.lease_req.take().expect("checked");
                self.on_lease_resp(req, resp.result, ctx);
            }
            Msg::ApiResp(resp) if self.req == Some(resp.id) => {
                self.answered(ctx);
                self.on_api(resp.result, ctx);
            }
            _ => {}
        }
    }
}

impl Component for McoMachine {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_start(self, ctx);
        self.after_step();
    }
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_msg(self, from, msg, ctx);
        self.after_step();
    }
    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        McoMachine::on_timer(self, t, ctx);
        self.after_step();
    }
    fn on_crash(&mut self) {
        McoMachine::on_crash(self);
        self.after_step();
    }
    /// Its phase, hand-out and annotation changes ([`Seen`]).
    fn changes(&self) -> Option<u64> {
        Some(self.changes)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
