//! A scripted API client: issues requests at fixed times and keeps every answer.
//!
//! Scenarios use it for user actions ("scale the MachineSet to 2 at t=300 s"); tests use
//! it to drive the API server through the network like any other client.

use crate::api::{ApiOp, ApiRequest, ApiResponse, WatchEvent};
use crate::component::{Component, UNREAD, WorldCtx};
use crate::msg::{Msg, ReqIds, Timer as AnyTimer, tags};
use reconsim_sim::{ProcId, SimTime};
use std::collections::BTreeMap;

pub use crate::timer::ScriptTimer as Timer;

/// One scripted request.
#[derive(Clone, Debug)]
pub struct Step {
    pub at_ms: u64,
    pub op: ApiOp,
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
    /// Request id -> step, for the answers still to come.
    sent: BTreeMap<u64, usize>,
}

impl Script {
    pub fn new(apiserver: ProcId, steps: Vec<Step>) -> Self {
        Script {
            apiserver,
            steps,
            ids: ReqIds::new(tags::SCRIPT),
            responses: Vec::new(),
            events: Vec::new(),
            sent: BTreeMap::new(),
        }
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
                if let Some(step) = self.sent.remove(&resp.id) {
                    self.responses.push((step, ctx.now(), resp));
                }
            }
            Msg::Watch(ev) => self.events.push((ctx.now(), ev)),
            _ => {}
        }
    }

    fn on_timer(&mut self, t: AnyTimer, ctx: &mut WorldCtx<'_>) {
        let AnyTimer::Script(Timer::Step(i)) = t else {
            panic!("timer {t:?} reached the wrong component: a script");
        };
        let id = self.ids.issue();
        self.sent.insert(id, i);
        let op = self.steps[i].op.clone();
        ctx.send(self.apiserver, Msg::Api(ApiRequest { id, op }));
    }

    /// Its responses are for tests, not for checkers.
    fn changes(&self) -> Option<u64> {
        Some(UNREAD)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
