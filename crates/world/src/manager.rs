//! STUB: to be implemented.

use crate::fault::WorldFault;
use crate::msg::{Msg, Timer as AnyTimer};
use crate::proc::WorldCtx;
use reconsim_sim::ProcId;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Timer {}

#[derive(Debug, Default)]
pub struct Manager {}

impl Manager {
    pub fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_msg(&mut self, _from: ProcId, _msg: Msg, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_timer(&mut self, _t: AnyTimer, _ctx: &mut WorldCtx<'_>) {}
    pub fn on_crash(&mut self) {}
    pub fn on_fault(&mut self, _f: &WorldFault, _active: bool, _ctx: &mut WorldCtx<'_>) {}
}
