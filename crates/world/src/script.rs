//! A scripted API client: issues requests at fixed times and keeps every answer.
//!
//! Scenarios use it for user actions ("scale the MachineSet to 2 at t=300 s"); tests use
//! it to drive the API server through the network like any other client. A
//! [`Script::retrying`] one stands for an operator that writes what it must until the
//! server has it (the machine-config-operator's templates): a step whose request failed
//! with its connection is sent again.
//!
//! The user's client also plays the plan's [`WorldFault::Operation`]s: each one's
//! requests, made before the run ([`Script::operations`]), go when the fault starts and
//! its undo's when it ends, as steps of their own.

use crate::api::{ApiOp, ApiRequest, ApiResponse, WatchEvent};
use crate::component::{Component, UNREAD, WorldCtx};
use crate::fault::{Operation, WorldFault};
use crate::manager::REQUEST_TIMEOUT_MS;
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use reconsim_sim::{ProcId, SimTime, TimerId};
use std::collections::BTreeMap;

pub use crate::timer::ScriptTimer as Timer;

/// One scripted request.
#[derive(Clone, Debug)]
pub struct Step {
    pub at_ms: u64,
    pub op: ApiOp,
}

/// A plan's user operation with its requests: `start`'s go when the fault starts,
/// `end`'s when it ends (none for an operation with nothing to undo).
#[derive(Clone, Debug)]
pub struct Played {
    pub operation: Operation,
    pub start: Vec<ApiOp>,
    pub end: Vec<ApiOp>,
}

#[derive(Debug)]
pub struct Script {
    apiserver: ProcId,
    steps: Vec<Step>,
    ids: ReqIds,
    /// Every response, with the step it answers and when it came.
    pub responses: Vec<(usize, SimTime, ApiResponse)>,
    /// Every watch event received (when a step opened a watch).
    pub events: Vec<(SimTime, WatchEvent)>,
    /// Request id -> step (and a retrying script's timeout), for the answers to come.
    sent: BTreeMap<u64, (usize, Option<TimerId>)>,
    /// For a retrying script, each step's failures so far (its backoff); `None` for one
    /// that sends each step once.
    failures: Option<Vec<u32>>,
    /// The plan's operations it plays ([`Script::operations`]).
    operations: Vec<Played>,
    /// Requests on a connection other than the first: the second of two clients.
    lanes: BTreeMap<u64, u32>,
}

/// A retrying script's backoff: client-go's `DefaultControllerRateLimiter` per item,
/// 5 ms doubling to 1000 s (`ItemExponentialFailureRateLimiter(5ms, 1000s)`), as an
/// operator's work queue requeues a sync that failed.
const RETRY_BASE_MS: u64 = 5;
const RETRY_MAX_MS: u64 = 1_000_000;

impl Script {
    pub fn new(apiserver: ProcId, steps: Vec<Step>) -> Self {
        Script {
            apiserver,
            steps,
            ids: ReqIds::new(tags::SCRIPT),
            responses: Vec::new(),
            events: Vec::new(),
            sent: BTreeMap::new(),
            failures: None,
            operations: Vec::new(),
            lanes: BTreeMap::new(),
        }
    }

    /// This script also plays `operations` when the plan's faults name them.
    pub fn operations(mut self, operations: Vec<Played>) -> Self {
        self.operations = operations;
        self
    }

    /// Send step `i`'s request now (with a retrying script's timeout), on connection
    /// `lane`.
    fn send_step(&mut self, i: usize, lane: u32, ctx: &mut WorldCtx<'_>) {
        let id = self.ids.issue();
        if lane != 0 {
            self.lanes.insert(id, lane);
        }
        let op = self.steps[i].op.clone();
        ctx.send(self.apiserver, Msg::Api(ApiRequest { id, op }));
        let timeout = self.failures.is_some().then(|| {
            ctx.set_timer(
                REQUEST_TIMEOUT_MS,
                Msg::Timer(AnyTimer::Script(Timer::Timeout { step: i, req: id })),
            )
        });
        self.sent.insert(id, (i, timeout));
    }

    /// A script that sends a step again, after a backoff, when its request failed
    /// with its connection (a reset, or no answer within [`REQUEST_TIMEOUT_MS`], as a
    /// client-go client's request fails): an operator writing what it must until the
    /// server has it. An answer, even an error, ends the step.
    pub fn retrying(apiserver: ProcId, steps: Vec<Step>) -> Self {
        let failures = Some(vec![0; steps.len()]);
        Script {
            failures,
            ..Script::new(apiserver, steps)
        }
    }

    /// Step `step`'s request failed: send it again after its backoff.
    fn again(&mut self, step: usize, ctx: &mut WorldCtx<'_>) {
        let Some(failures) = &mut self.failures else {
            return;
        };
        let n = failures[step];
        failures[step] = n.saturating_add(1);
        let delay = RETRY_BASE_MS
            .saturating_mul(1u64 << n.min(30))
            .min(RETRY_MAX_MS);
        ctx.set_timer(delay, Msg::Timer(AnyTimer::Script(Timer::Step(step))));
    }

    /// The response to step `n`, if it came.
    pub fn response(&self, step: usize) -> Option<&ApiResponse> {
        self.responses
            .iter()
            .find(|(s, _, _)| *s == step)
            .map(|(_, _, r)| r)
    }
}

/// The scripted client as a process of the world.
impl Component for Script {
    /// The API server's host closed its connection: as a reset of it.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        let now = ctx.now().as_ms();
        for (i, step) in self.steps.iter().enumerate() {
            ctx.set_timer(
                step.at_ms.saturating_sub(now),
                Msg::Timer(AnyTimer::Script(Timer::Step(i))),
            );
        }
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::ApiResp(resp) => {
                self.lanes.remove(&resp.id);
                if let Some((step, timeout)) = self.sent.remove(&resp.id) {
                    if let Some(t) = timeout {
                        ctx.cancel_timer(t);
                    }
                    self.responses.push((step, ctx.now(), resp));
                }
            }
            Msg::Watch(ev) => self.events.push((ctx.now(), ev)),
            // Its connection broke: every request on it failed.
            Msg::ConnectionReset if self.failures.is_some() => {
                for (_, (step, timeout)) in std::mem::take(&mut self.sent) {
                    if let Some(t) = timeout {
                        ctx.cancel_timer(t);
                    }
                    self.again(step, ctx);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        match t {
            AnyTimer::Script(Timer::Step(i)) => self.send_step(i, 0, ctx),
            AnyTimer::Script(Timer::Timeout { step, req }) => {
                if self.sent.remove(&req).is_some() {
                    self.again(step, ctx);
                }
            }
            t => panic!("timer {t:?} reached the wrong component: a script"),
        }
    }

    /// A plan's operation: its requests go now, as steps of their own, each on a
    /// connection of its own (two concurrent clients' edits land in either order).
    fn on_fault(&mut self, fault: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        let WorldFault::Operation(operation) = fault else {
            return;
        };
        let Some(played) = self.operations.iter().find(|p| p.operation == *operation) else {
            return;
        };
        let ops = if active { &played.start } else { &played.end }.clone();
        let now = ctx.now().as_ms();
        for (lane, op) in (0u32..).zip(ops) {
            self.steps.push(Step { at_ms: now, op });
            if let Some(f) = &mut self.failures {
                f.push(0);
            }
            self.send_step(self.steps.len() - 1, lane, ctx);
        }
    }

    fn lane(&self, msg: &Msg) -> u32 {
        match msg {
            Msg::Api(req) => self.lanes.get(&req.id).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Its responses are for tests, not for checkers.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
