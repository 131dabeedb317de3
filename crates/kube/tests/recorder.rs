//! kube-runtime's event `Recorder` in a run: it names and stamps each event with the
//! wall clock (`{object}.{nanoseconds:x}`, `eventTime`), which inside a run is the run's,
//! so the same seed gives the same events and trace, while a seed whose requests take
//! other latencies publishes at another instant.

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use reconsim_kube::{Kinds, KubeWorld, Program, intercept};
use reconsim_sim::{SimTime, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Create a ConfigMap, publish an event about it, and answer with the stored events'
/// names and times.
fn program() -> Program {
    Arc::new(|client: kube::Client| {
        Box::pin(async move {
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some("settings".into());
            let cm = match cms.create(&PostParams::default(), &cm).await {
                Ok(cm) => cm,
                Err(e) => return format!("create: {e}"),
            };
            let recorder = Recorder::new(client.clone(), Reporter::from("recorder-test"));
            let reference: ObjectReference = cm.object_ref(&());
            let event = Event {
                type_: EventType::Normal,
                reason: "Seen".into(),
                note: Some("a settings ConfigMap".into()),
                action: "Observe".into(),
                secondary: None,
            };
            if let Err(e) = recorder.publish(&event, &reference).await {
                return format!("publish: {e}");
            }
            let events: Api<K8sEvent> = Api::namespaced(client, "default");
            match events.list(&ListParams::default()).await {
                Ok(list) => list
                    .items
                    .iter()
                    .map(|e| {
                        let time = e.event_time.as_ref().map(|t| t.0.to_string());
                        format!(
                            "{} at {}",
                            e.metadata.name.clone().unwrap_or_default(),
                            time.unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                Err(e) => format!("list: {e}"),
            }
        })
    })
}

fn run(seed: u64) -> (String, u64) {
    intercept::on_own_thread(seed, || {
        let mut w = KubeWorld::new(
            seed,
            TraceMode::Hash,
            ApiServerConfig::default(),
            Kinds::new().core::<ConfigMap>().core::<K8sEvent>(),
            program(),
        );
        w.sim.run_until(SimTime::from_secs(10));
        (w.bridge().results.join("\n"), w.sim.trace().hash())
    })
}

#[test]
fn a_recorder_event_is_named_and_stamped_by_the_runs_clock() {
    let mut seen = BTreeSet::new();
    for seed in 0..6 {
        let (a, hash_a) = run(seed);
        let (b, hash_b) = run(seed);
        assert_eq!(a, b, "seed {seed}");
        assert_eq!(hash_a, hash_b, "seed {seed}");
        // One event, named for its object and the run's clock: 2026-01-01, a few ms in.
        let (name, time) = a.split_once(" at ").unwrap_or_else(|| panic!("{a}"));
        assert!(name.starts_with("settings."), "{a}");
        assert!(time.starts_with("2026-01-01T00:00:00.0"), "{a}");
        seen.insert(a);
    }
    assert!(
        seen.len() > 1,
        "every seed published at one instant: {seen:?}"
    );
}
