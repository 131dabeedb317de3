//! The world as checkers see it: ground truth, not any controller's view.

use reconsim_sim::{Sim, SimTime};
use reconsim_world::Proc;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::cloud::Cloud;

#[derive(Clone, Copy)]
pub struct View<'a> {
    pub now: SimTime,
    pub api: &'a ApiServer,
    pub cloud: &'a Cloud,
    /// Every process, for checkers that read a component's ground truth (etcd
    /// membership, a config server's hand-outs).
    pub sim: &'a Sim<Proc>,
}
