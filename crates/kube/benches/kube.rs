//! Runs/s of real kube-rs code in a simulated run, side by side with a baseline in one
//! process: a program that creates, gets, lists, patches and deletes ConfigMaps through
//! `kube::Api` (10 requests), each run a world of its own (its tokio runtime and client
//! built anew), against the same 10 operations sent as plain API messages by a world
//! script (no kube, no HTTP, no JSON at the client). The ratio is the real-code path's
//! cost; rounds alternate, so a noisy machine shifts both alike.
//! `cargo bench -p reconsim-kube --bench kube`.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use reconsim_kube::kinds::kind_of;
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{FaultPlan, Sim, SimConfig, SimTime, TraceMode};
use reconsim_world::api::ApiOp;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::object::ObjectKey;
use reconsim_world::proc::Proc;
use reconsim_world::script::{Script, Step};
use std::sync::Arc;
use std::time::Instant;

const RUNS: u64 = 2_000;
const ROUNDS: usize = 3;
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

/// The same 10 operations as plain API messages from a script, 20 ms apart (each is
/// answered well within that, so the server sees them in the program's order).
fn script_world(seed: u64, kinds: &Kinds) -> Sim<Proc> {
    let kind = kind_of::<ConfigMap>();
    let served = kinds.served(kind).expect("served");
    let key = |i: u32| ObjectKey::new(kind, "default", &format!("cm-{i}"));
    let mut ops = Vec::new();
    for i in 0..3 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.metadata.namespace = Some("default".into());
        ops.push(ApiOp::Create(Box::new(
            kinds.object(&cm).expect("a ConfigMap"),
        )));
    }
    ops.push(ApiOp::Get(key(0)));
    ops.push(ApiOp::List {
        kind,
        namespace: Some("default".into()),
        from_watch_cache: false,
    });
    for i in 0..3 {
        ops.push(reconsim_kube::write::merge(
            served,
            key(i),
            &serde_json::json!({"data": {"k": "v"}}),
        ));
    }
    ops.push(ApiOp::Delete {
        key: key(1),
        uid: None,
        grace_period_seconds: None,
        options: Default::default(),
    });
    ops.push(ApiOp::Get(key(1)));
    let steps = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| Step {
            at_ms: 20 * i as u64,
            op,
        })
        .collect();
    let mut config = SimConfig::new(seed);
    config.trace = TraceMode::Hash;
    let mut sim = Sim::new(config, FaultPlan::new(Vec::new()));
    let api_host = sim.add_host("api");
    let user_host = sim.add_host("user");
    let api = sim.spawn(
        api_host,
        "apiserver",
        Proc::new(ApiServer::new(Default::default())),
    );
    sim.spawn(user_host, "script", Proc::new(Script::new(api, steps)));
    sim
}

fn main() {
    let p: Program = Arc::new(|client| {
        Box::pin(async move { format!("{:?}", program(client).await.map_err(|e| e.to_string())) })
    });
    let kinds = Kinds::new().core::<ConfigMap>();
    let (mut kube_s, mut script_s) = (0.0, 0.0);
    let (mut kube_events, mut script_events) = (0, 0);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for seed in 0..RUNS {
            let mut w = KubeWorld::new(
                seed,
                TraceMode::Hash,
                Default::default(),
                kinds.clone(),
                p.clone(),
            );
            w.sim.run_until(SimTime(60_000));
            assert_eq!(w.bridge().results, ["Ok(())"]);
            kube_events += w.sim.trace().events();
        }
        kube_s += start.elapsed().as_secs_f64();
        let start = Instant::now();
        for seed in 0..RUNS {
            let mut sim = script_world(seed, &kinds);
            sim.run_until(SimTime(60_000));
            script_events += sim.trace().events();
        }
        script_s += start.elapsed().as_secs_f64();
    }
    let runs = (RUNS * ROUNDS as u64) as f64;
    println!(
        "plain API messages (10 operations): {:.0} runs/s, {:.0} events/s",
        runs / script_s,
        script_events as f64 / script_s
    );
    println!(
        "kube-rs program (10 requests): {:.0} runs/s, {:.0} events/s, {:.1} us per request; {:.2}x the plain messages' run time",
        runs / kube_s,
        kube_events as f64 / kube_s,
        kube_s * 1e6 / (runs * REQUESTS),
        kube_s / script_s
    );
}
