//! What several of this crate's tests share: a program's world run for a minute.

use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{SimTime, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;

/// Run `program` in a world of its own serving `kinds` for a minute of virtual time:
/// its result, line by line.
pub fn result_lines(
    seed: u64,
    apiserver: ApiServerConfig,
    kinds: Kinds,
    program: Program,
) -> Vec<String> {
    let mut w = KubeWorld::new(seed, TraceMode::Hash, apiserver, kinds, program);
    w.sim.run_until(SimTime(60_000));
    w.bridge()
        .results
        .join("\n")
        .lines()
        .map(str::to_string)
        .collect()
}
