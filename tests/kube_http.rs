//! A program's own external service over HTTP (issue 28's seam): the user's SDK is
//! generic over a tower `Service`, as kube's `Client` is; in a run it gets
//! `reconsim_kube::http::HttpClient`, whose requests travel the simulated network to a
//! service the binary registered (`Extensions::service`), on a host of its own:
//! - the program's charges reach the service, the service's answers reach the program
//!   (its idempotency key honoured), and the program writes what it read into the API
//!   server; every seed run twice gives one trace hash;
//! - a partition between the program's node and the service's host holds its request
//!   until the partition heals, as for any host;
//! - a service named as a node is refused, naming both.

mod common;

use common::{HOLDS, Holds};
use reconsim::scenario::Scenario;
use reconsim::scenario::build::World;
use reconsim::scenario::extension::Extensions;
use reconsim::scenario::faults::generate;
use reconsim::scenario::runner::run_world;
use reconsim::sim::{SimTime, TraceMode};
use reconsim::world::object::ObjectKey;
use reconsim_kube::Kinds;
use reconsim_kube::http::{Handler, HttpClient, HttpServer};
use reconsim_kube::kinds::kind_of;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The user's program and SDK, as they ship them: no reconsim import.
mod user {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    use std::fmt::Display;
    use tower::{Service, ServiceExt};

    /// The payments SDK: any HTTP service will do (hyper's client in production).
    #[derive(Clone)]
    pub struct Payments<S> {
        http: S,
    }

    impl<S, B> Payments<S>
    where
        S: Service<http::Request<String>, Response = http::Response<B>> + Clone,
        S::Error: Display,
        B: http_body::Body<Data = Bytes>,
        B::Error: Display,
    {
        pub fn new(http: S) -> Self {
            Payments { http }
        }

        async fn send(&self, request: http::Request<String>) -> Result<String, String> {
            let response = self
                .http
                .clone()
                .oneshot(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            let body = String::from_utf8_lossy(&body).into_owned();
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{status}: {body}"))
            }
        }

        /// POST /v1/charges: the charge's id.
        pub async fn charge(&self, order: &str, key: &str) -> Result<String, String> {
            let request = http::Request::post("/v1/charges")
                .header("idempotency-key", key)
                .body(order.to_string())
                .map_err(|e| e.to_string())?;
            self.send(request).await
        }

        /// GET /v1/charges: every charge, one `id order` a line.
        pub async fn charges(&self) -> Result<String, String> {
            let request = http::Request::get("/v1/charges")
                .body(String::new())
                .map_err(|e| e.to_string())?;
            self.send(request).await
        }
    }

    /// Charge two orders (the first twice, as a retry with the same key), then record
    /// what the service says it charged in the ConfigMap `charges`.
    pub async fn shop<S, B>(client: kube::Client, payments: Payments<S>)
    where
        S: Service<http::Request<String>, Response = http::Response<B>> + Clone,
        S::Error: Display,
        B: http_body::Body<Data = Bytes>,
        B::Error: Display,
    {
        let first = payments.charge("order-a", "key-a").await;
        let second = payments.charge("order-b", "key-b").await;
        let retry = payments.charge("order-a", "key-a").await;
        let listed = payments.charges().await;
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("charges".into());
        cm.data = Some(
            [
                ("first".to_string(), format!("{first:?}")),
                ("second".to_string(), format!("{second:?}")),
                ("retry".to_string(), format!("{retry:?}")),
                ("listed".to_string(), format!("{listed:?}")),
            ]
            .into(),
        );
        let cms: Api<ConfigMap> = Api::default_namespaced(client);
        let _ = cms.create(&PostParams::default(), &cm).await;
        std::future::pending::<()>().await;
    }
}

const SHOP: &str = "shop";
const PAYMENTS: &str = "payments";

/// The simulated payments API: a charge per new idempotency key, the same answer for a
/// key seen before (Stripe's rule); its ledger is in its database, so a crash keeps it.
#[derive(Debug, Default)]
struct Ledger {
    /// Idempotency key -> (charge id, order), in charge order by id.
    charges: BTreeMap<String, (String, String)>,
    /// When each charge was made.
    at: Vec<SimTime>,
}

impl Handler for Ledger {
    fn handle(
        &mut self,
        request: http::Request<bytes::Bytes>,
        now: SimTime,
    ) -> http::Response<bytes::Bytes> {
        let reply = |status: u16, body: String| {
            let mut r = http::Response::new(bytes::Bytes::from(body));
            *r.status_mut() = http::StatusCode::from_u16(status).expect("a status");
            r
        };
        match (request.method().as_str(), request.uri().path()) {
            ("POST", "/v1/charges") => {
                let Some(key) = request.headers().get("idempotency-key") else {
                    return reply(400, "an idempotency-key header".into());
                };
                let key = String::from_utf8_lossy(key.as_bytes()).into_owned();
                let order = String::from_utf8_lossy(request.body()).into_owned();
                let n = self.charges.len();
                let (id, _) = self.charges.entry(key).or_insert_with(|| {
                    self.at.push(now);
                    (format!("ch_{n}"), order)
                });
                reply(200, id.clone())
            }
            ("GET", "/v1/charges") => {
                let mut lines: Vec<String> = self
                    .charges
                    .values()
                    .map(|(id, order)| format!("{id} {order}"))
                    .collect();
                lines.sort();
                reply(200, lines.join("\n"))
            }
            _ => reply(404, "no such route".into()),
        }
    }
}

fn extensions() -> Extensions {
    Extensions::new()
        .controller(reconsim_kube::custom(
            SHOP,
            Kinds::new(),
            |_: &(), _, client| {
                let http = HttpClient::to(PAYMENTS).expect("the payments service is registered");
                user::shop(client, user::Payments::new(http))
            },
        ))
        .service(PAYMENTS, |_| HttpServer::boxed(Ledger::default()))
        .invariant(HOLDS, || Box::new(Holds))
        .host(reconsim_kube::intercept::host)
}

fn doc(faults: Value, workers: Value) -> Value {
    json!({
        "name": "kube-http",
        "description": "a program's own HTTP service",
        "expect": "clean",
        "seeds": 4,
        "duration_ms": 120000,
        "net": { "latency_ms": [1, 10] },
        "topology": { "control_plane_nodes": ["master-0"], "worker_nodes": workers },
        "controllers": { "custom": [ { "name": SHOP, "node": "master-0" } ] },
        "faults": faults,
        "invariants": [HOLDS],
    })
}

fn load(doc: &Value) -> Result<Scenario, String> {
    let families = reconsim::families::builtin().with(extensions());
    Scenario::from_value("kube_http", "", doc, &families).map_err(|e| e.to_string())
}

/// What the program wrote, and when.
fn charges(world: &World) -> Option<(BTreeMap<String, String>, SimTime)> {
    let key = ObjectKey::new(
        kind_of::<k8s_openapi::api::core::v1::ConfigMap>(),
        "default",
        "charges",
    );
    let o = world.api().get(&key)?;
    let cm: k8s_openapi::api::core::v1::ConfigMap = reconsim_kube::wire::decode(o)?;
    Some((cm.data.unwrap_or_default(), o.meta.creation_timestamp))
}

fn ledger(world: &World) -> &Ledger {
    let process = world
        .sim
        .proc_by_name(PAYMENTS)
        .expect("the service's process");
    world
        .sim
        .actor(process)
        .component::<HttpServer<Ledger>>()
        .expect("an HTTP server")
        .handler()
}

#[test]
fn a_programs_sdk_calls_its_own_service_through_a_tower_service() {
    let s = load(&doc(json!([]), json!([]))).expect("loads");
    for seed in 0..s.seeds {
        let (outcome, world) = run_world(&s, seed, generate(&s, seed), TraceMode::Hash);
        assert_eq!(outcome.violation, None);
        let (data, _) = charges(&world).expect("the program wrote what it read");
        assert_eq!(data["first"], r#"Ok("ch_0")"#);
        assert_eq!(data["second"], r#"Ok("ch_1")"#);
        // The retry with the first key is the first charge again, not a third.
        assert_eq!(data["retry"], r#"Ok("ch_0")"#);
        assert_eq!(data["listed"], r#"Ok("ch_0 order-a\nch_1 order-b")"#);
        assert_eq!(ledger(&world).at.len(), 2);
        let (again, _) = run_world(&s, seed, generate(&s, seed), TraceMode::Hash);
        assert_eq!(outcome.trace_hash, again.trace_hash, "seed {seed}");
    }
}

#[test]
fn a_partition_holds_the_request_until_it_heals() {
    let cut = json!([{
        "count": [1, 1], "at_ms": [0, 0], "duration_ms": [30000, 30000],
        "fault": { "partition": {
            "hosts_a": ["master-0"], "hosts_b": [PAYMENTS], "mode": "hold"
        } }
    }]);
    let s = load(&doc(cut, json!([]))).expect("a partition may name the service's host");
    let (outcome, world) = run_world(&s, 0, generate(&s, 0), TraceMode::Hash);
    assert_eq!(outcome.violation, None);
    let (data, written) = charges(&world).expect("the program wrote after the heal");
    assert_eq!(data["first"], r#"Ok("ch_0")"#);
    let first = ledger(&world).at[0];
    assert!(
        first >= SimTime::from_ms(30000),
        "charged at {first:?}, inside the partition"
    );
    assert!(written >= first);
}

#[test]
fn the_service_is_a_fault_target_by_its_name() {
    let pause = json!([{
        "count": [1, 1], "at_ms": [0, 0], "duration_ms": [20000, 20000],
        "fault": { "pause": { "processes": [PAYMENTS] } }
    }]);
    let s = load(&doc(pause, json!([]))).expect("a pause may name the service's process");
    let (outcome, world) = run_world(&s, 0, generate(&s, 0), TraceMode::Hash);
    assert_eq!(outcome.violation, None);
    // Paused, it answers nothing until it resumes.
    assert!(ledger(&world).at[0] >= SimTime::from_ms(20000));
    let e = load(&doc(
        json!([{ "count": [1, 1], "at_ms": [0, 0], "duration_ms": [1, 1],
                 "fault": { "pause": { "processes": ["billing"] } } }]),
        json!([]),
    ))
    .unwrap_err();
    assert!(e.contains("payments"), "the known processes name it: {e}");
}

#[test]
fn a_service_named_as_a_node_a_host_or_a_process_of_the_cluster_is_refused() {
    let e = load(&doc(json!([]), json!([PAYMENTS]))).unwrap_err();
    assert!(e.contains(".topology") && e.contains("`payments`"), "{e}");
    // The cluster's host `cloud`, and the shop's own pod `shop-0`.
    for taken in ["cloud", "shop-0"] {
        let families = reconsim::families::builtin()
            .with(extensions().service(taken, |_| HttpServer::boxed(Ledger::default())));
        let e = Scenario::from_value("kube_http", "", &doc(json!([]), json!([])), &families)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(".controllers") && e.contains(&format!("`{taken}`")),
            "{e}"
        );
    }
}
