//! The spike of issue 15: unmodified kube-rs calls (`Api::<ConfigMap>::create`, `get`,
//! `get_opt`) inside one simulated run, through the simulated API server, the same
//! trace hash on every run.

use k8s_openapi::api::core::v1::ConfigMap as WireConfigMap;
use kube::api::{Api, PostParams};
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::TraceMode;
use reconsim_world::apiserver::ApiServer;
use reconsim_world::object::ObjectKey;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a kube-rs user writes: no reconsim in it.
async fn create_then_read(client: kube::Client) -> Result<String, kube::Error> {
    let api: Api<WireConfigMap> = Api::namespaced(client, "default");
    let mut cm = WireConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.data = Some(BTreeMap::from([("mode".to_string(), "fast".to_string())]));
    let created = api.create(&PostParams::default(), &cm).await?;
    let again = api.create(&PostParams::default(), &cm).await;
    let got = api.get("settings").await?;
    let missing = api.get_opt("nothing").await?;
    Ok(format!(
        "created rv {}; again: {}; got {:?}; missing: {}",
        created.metadata.resource_version.unwrap_or_default(),
        match again {
            Err(kube::Error::Api(s)) => format!("{} {}", s.code, s.reason),
            other => format!("{other:?}"),
        },
        got.data.unwrap_or_default(),
        missing.is_none()
    ))
}

fn program() -> Program {
    Arc::new(|client| {
        Box::pin(async move {
            match create_then_read(client).await {
                Ok(s) => s,
                Err(e) => format!("error: {e}"),
            }
        })
    })
}

fn world(seed: u64, trace: TraceMode, program: Program) -> KubeWorld {
    KubeWorld::new(
        seed,
        trace,
        Default::default(),
        Kinds::new().core::<WireConfigMap>(),
        program,
    )
}

#[test]
fn kube_rs_code_creates_and_reads_a_config_map_through_the_simulated_api_server() {
    let mut w = world(7, TraceMode::Hash, program());
    w.sim.run_until(UNTIL);
    let results = &w.bridge().results;
    assert_eq!(
        results,
        &[
            r#"created rv 1; again: 409 AlreadyExists; got {"mode": "fast"}; missing: true"#
                .to_string()
        ]
    );
    assert_eq!(w.bridge().requests.len(), 4);
    // It is in the simulated API server's store, as the world's own ConfigMap.
    let Some(api) = w.sim.actor(w.apiserver).component::<ApiServer>() else {
        panic!()
    };
    let key = ObjectKey {
        kind: reconsim_kube::kinds::kind_of::<WireConfigMap>(),
        namespace: "default".into(),
        name: "settings".into(),
    };
    let stored = api.get(&key).expect("stored");
    let cm: WireConfigMap = reconsim_kube::wire::decode(stored).expect("a ConfigMap");
    assert_eq!(cm.data.unwrap()["mode"], "fast");
    // Its requests took virtual time: each crossed the network there and back.
    assert!(w.sim.now().as_ms() > 0);
}

const UNTIL: reconsim_sim::SimTime = reconsim_sim::SimTime(10_000);

#[test]
fn the_same_seed_gives_the_same_trace_hash_twice_and_another_seed_another() {
    let hash = |seed| {
        reconsim_kube::selfcheck::twice(|trace| world(seed, trace, program()).sim, UNTIL)
            .unwrap_or_else(|d| panic!("{d}"))
    };
    assert_eq!(hash(3), hash(3));
    assert_ne!(hash(3), hash(4), "latencies are drawn from the seed");
}

/// A program whose request depends on a std `HashMap`'s iteration order, which is
/// seeded at random per map: the hazard kube-runtime's own store and runner carry.
async fn hash_map_order(client: kube::Client) -> String {
    let keys: std::collections::HashMap<String, ()> =
        (0..12).map(|i| (format!("k{i}"), ())).collect();
    let name: Vec<&str> = keys.keys().map(String::as_str).collect();
    let api: Api<WireConfigMap> = Api::namespaced(client, "default");
    let mut cm = WireConfigMap::default();
    cm.metadata.name = Some(name.join("-"));
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => "created".into(),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn the_self_check_names_the_first_event_where_a_nondeterministic_program_parts() {
    // Two runs agree on a name only if two random orders of 12 keys do (1 in 479
    // million).
    let divergence = reconsim_kube::selfcheck::twice(
        |trace| {
            let p: Program = Arc::new(|client| Box::pin(hash_map_order(client)));
            world(1, trace, p).sim
        },
        UNTIL,
    )
    .expect_err("the runs part");
    // The first difference is the create itself, as it reaches the API server.
    assert!(divergence.first.contains("Create"), "{divergence}");
    assert!(divergence.second.contains("Create"), "{divergence}");
    assert!(divergence.to_string().contains("part at event #"));
}
