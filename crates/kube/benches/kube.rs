//! Runs/s of real kube-rs code in a simulated run: a program that creates, gets, lists,
//! patches and deletes ConfigMaps through `kube::Api` (10 requests), each run a world of
//! its own (its tokio runtime and client built anew). No baseline yet: the figure is
//! absolute, so it holds only for the machine and the hour it was taken on.
//! `cargo bench -p reconsim-kube --bench kube`.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{SimTime, TraceMode};
use std::sync::Arc;
use std::time::Instant;

const RUNS: u64 = 2_000;
const REQUESTS: f64 = 10.0;

async fn program(client: kube::Client) -> Result<(), kube::Error> {
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..3 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        api.create(&pp, &cm).await?;
    }
    api.get("cm-0").await?;
    api.list(&ListParams::default()).await?;
    let patch = serde_json::json!({"data": {"k": "v"}});
    for i in 0..3 {
        api.patch(
            &format!("cm-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    api.delete("cm-1", &DeleteParams::default()).await?;
    api.get_opt("cm-1").await?;
    Ok(())
}

fn main() {
    let p: Program = Arc::new(|client| {
        Box::pin(async move { format!("{:?}", program(client).await.map_err(|e| e.to_string())) })
    });
    let start = Instant::now();
    let mut events = 0;
    for seed in 0..RUNS {
        let mut w = KubeWorld::new(
            seed,
            TraceMode::Hash,
            Default::default(),
            Kinds::new().core::<ConfigMap>(),
            p.clone(),
        );
        w.sim.run_until(SimTime(60_000));
        assert_eq!(w.bridge().results, ["Ok(())"]);
        events += w.sim.trace().events();
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "kube-rs program (10 requests): {RUNS} runs in {s:.2} s: {:.0} runs/s, {:.0} events/s, {:.1} us per request",
        RUNS as f64 / s,
        events as f64 / s,
        s * 1e6 / (RUNS as f64 * REQUESTS)
    );
}
