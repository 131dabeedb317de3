//! The world as checkers see it: ground truth, not any controller's view.

use reconsim_sim::{ProcId, Sim, SimTime};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::{Component, Proc};

#[derive(Clone, Copy)]
pub struct View<'a> {
    pub now: SimTime,
    pub api: &'a ApiServer,
    /// Every process, for checkers that read a component's ground truth (a cloud's
    /// instances, etcd membership, a config server's hand-outs).
    pub sim: &'a Sim<Proc>,
}

impl<'a> View<'a> {
    /// The first component of type `T` and its process, if the world runs one.
    pub fn find<T: Component>(&self) -> Option<(ProcId, &'a T)> {
        self.sim
            .actors()
            .find_map(|(pid, p)| Some((pid, p.component::<T>()?)))
    }

    /// The component of type `T`, looked up once and then by the process id kept in
    /// `cache` (a checker's own memory): no scan on every event.
    pub fn find_cached<T: Component>(&self, cache: &mut Option<ProcId>) -> Option<&'a T> {
        if let Some(pid) = *cache
            && let Some(c) = self.sim.actor(pid).component::<T>()
        {
            return Some(c);
        }
        let (pid, c) = self.find::<T>()?;
        *cache = Some(pid);
        Some(c)
    }
}
