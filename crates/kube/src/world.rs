//! A world for one kube-rs program: the simulated API server on one host and the
//! program's process on another, so every request crosses the network. The program
//! runs once (`KubeBridge::once`): its result is what a test reads.

use crate::bridge::{KubeBridge, Program};
use crate::kinds::Kinds;
use reconsim_sim::{FaultPlan, HostId, ProcId, Sim, SimConfig, TraceMode};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::fault::WorldFault;
use reconsim_world::proc::Proc;

/// A program's cluster for a test: the API server (with namespace admission, as a
/// real one has) on host `api`, and host `user` for the program's process.
pub fn cluster(
    seed: u64,
    trace: TraceMode,
    apiserver: ApiServerConfig,
    faults: FaultPlan<WorldFault>,
) -> (Sim<Proc>, ProcId, HostId) {
    let mut config = SimConfig::new(seed);
    config.trace = trace;
    let mut sim = Sim::new(config, faults);
    let api_host = sim.add_host("api");
    let user_host = sim.add_host("user");
    // A real API server's admission: a program's namespace must exist.
    let apiserver = ApiServerConfig {
        namespace_lifecycle: true,
        ..apiserver
    };
    let apiserver = sim.spawn(api_host, "apiserver", Proc::new(ApiServer::new(apiserver)));
    (sim, apiserver, user_host)
}

/// A kube-rs program's world for a test: run it for a while of virtual time and read
/// what it returned, or what the API server holds.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
/// use reconsim_kube::{Kinds, KubeWorld, Program};
/// use reconsim_sim::{SimTime, TraceMode};
/// use reconsim_world::apiserver::ApiServerConfig;
/// use std::sync::Arc;
///
/// // What a user's code does with its client: here, one create and one read back.
/// let program: Program = Arc::new(|client| {
///     Box::pin(async move {
///         let api: Api<ConfigMap> = Api::namespaced(client, "default");
///         let mut cm = ConfigMap::default();
///         cm.metadata.name = Some("settings".into());
///         api.create(&PostParams::default(), &cm).await.expect("created");
///         let back = api.get("settings").await.expect("read back");
///         format!("uid {}", back.metadata.uid.unwrap_or_default())
///     })
/// });
/// let mut world = KubeWorld::new(
///     7,
///     TraceMode::Hash,
///     ApiServerConfig::default(),
///     Kinds::new().core::<ConfigMap>(),
///     program,
/// );
/// world.sim.run_until(SimTime(10_000));
/// assert_eq!(world.bridge().results, ["uid 00000000-0000-4000-8000-000000000001"]);
/// ```
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
        let (mut sim, apiserver, user_host) = cluster(seed, trace, apiserver, faults);
        let program = sim.spawn(
            user_host,
            "kube-program",
            Proc::from(
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
        self.sim
            .actor(self.program)
            .component::<KubeBridge>()
            .expect("the program's process is a KubeBridge")
    }
}
