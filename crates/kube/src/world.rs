//! A world for one kube-rs program: the simulated API server on one host and the
//! program's process on another, so every request crosses the network. The program
//! runs once (`KubeBridge::once`): its result is what a test reads.

use crate::bridge::{KubeBridge, Program};
use crate::kinds::Kinds;
use reconsim_sim::{FaultPlan, ProcId, Sim, SimConfig, TraceMode};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::fault::WorldFault;
use reconsim_world::proc::Proc;

pub struct KubeWorld {
    pub sim: Sim<Proc>,
    pub apiserver: ProcId,
    pub program: ProcId,
}

impl KubeWorld {
    pub fn new(
        seed: u64,
        trace: TraceMode,
        apiserver: ApiServerConfig,
        kinds: Kinds,
        program: Program,
    ) -> Self {
        Self::with_faults(
            seed,
            trace,
            apiserver,
            kinds,
            program,
            FaultPlan::new(Vec::new()),
        )
    }

    /// The same world under a fault plan (hosts `api` and `user`, processes
    /// `apiserver` and `kube-program`).
    pub fn with_faults(
        seed: u64,
        trace: TraceMode,
        apiserver: ApiServerConfig,
        kinds: Kinds,
        program: Program,
        faults: FaultPlan<WorldFault>,
    ) -> Self {
        let mut config = SimConfig::new(seed);
        config.trace = trace;
        let mut sim = Sim::new(config, faults);
        let api_host = sim.add_host("api");
        let user_host = sim.add_host("user");
        let apiserver = sim.spawn(
            api_host,
            "apiserver",
            Proc::ApiServer(ApiServer::new(apiserver)),
        );
        let program = sim.spawn(
            user_host,
            "kube-program",
            Proc::Component(
                KubeBridge::new(apiserver, kinds, program)
                    .once()
                    .recording()
                    .boxed(),
            ),
        );
        KubeWorld {
            sim,
            apiserver,
            program,
        }
    }

    /// The program's process, for its results and requests.
    pub fn bridge(&self) -> &KubeBridge {
        let Proc::Component(c) = self.sim.actor(self.program) else {
            unreachable!("the program's process is a component")
        };
        c.as_any()
            .downcast_ref::<KubeBridge>()
            .expect("the program's process is a KubeBridge")
    }
}
