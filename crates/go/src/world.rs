//! A world for one Go program: the simulated API server on one host and the
//! program's process on another, so every request crosses the network. The program
//! runs once ([`GoBridge::once`]): how it ended is what a test reads.

use crate::bridge::GoBridge;
use crate::guest::Program;
use reconsim_kube::Kinds;
use reconsim_sim::{FaultPlan, ProcId, Sim, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;
use reconsim_world::fault::WorldFault;
use reconsim_world::proc::Proc;

/// A Go program's world for a test.
pub struct GoWorld {
    pub sim: Sim<Proc>,
    pub apiserver: ProcId,
    pub program: ProcId,
}

impl GoWorld {
    /// The world under a fault plan (hosts `api` and `user`, processes `apiserver`
    /// and `go-program`).
    pub fn new(
        seed: u64,
        trace: TraceMode,
        apiserver: ApiServerConfig,
        kinds: Kinds,
        program: Program,
        faults: FaultPlan<WorldFault>,
    ) -> Self {
        let (mut sim, apiserver, user_host) =
            reconsim_kube::world::cluster(seed, trace, apiserver, faults);
        let program = sim.spawn(
            user_host,
            "go-program",
            Proc::from(
                GoBridge::new(apiserver, kinds, program, "go-program")
                    .once()
                    .recording()
                    .boxed(),
            ),
        );
        GoWorld {
            sim,
            apiserver,
            program,
        }
    }

    /// The program's process, for its results, requests and lines.
    pub fn bridge(&self) -> &GoBridge {
        self.sim
            .actor(self.program)
            .component::<GoBridge>()
            .expect("the program's process is a GoBridge")
    }
}
