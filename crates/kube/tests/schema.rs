//! A custom resource's structural schema at the simulated API server, as
//! apiextensions-apiserver applies the one kube-derive emits: unknown fields pruned,
//! defaults filled, and a write the schema forbids refused with 422 and its field path
//! (docs/semantics.md 4.17).

use kube::CustomResource;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

mod common;

#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "test.reconsim.dev",
    version = "v1",
    kind = "Gadget",
    namespaced
)]
struct GadgetSpec {
    #[schemars(range(min = 1, max = 5))]
    replicas: u32,
    #[serde(default = "safe")]
    mode: Mode,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
enum Mode {
    Fast,
    Safe,
}

fn safe() -> Mode {
    Mode::Safe
}

fn code<T>(r: Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

async fn gadgets(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let raw: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::erase::<Gadget>(&()),
    );
    let mut out = Vec::new();
    // Created from JSON with no mode and a field the schema does not know.
    let mut g: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.reconsim.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"replicas": 1, "colour": "red"},
    }))
    .expect("a DynamicObject");
    g.metadata.namespace = Some("default".into());
    let created = raw.create(&PostParams::default(), &g).await?;
    out.push(format!("created spec: {}", created.data["spec"]));
    let pp = PatchParams::default();
    for patch in [
        json!({"spec": {"replicas": 9}}),
        json!({"spec": {"mode": "Slow"}}),
        json!({"spec": {"replicas": "two"}}),
        json!({"spec": {"replicas": 3, "extra": 1}}),
    ] {
        let r = raw.patch("g", &pp, &Patch::Merge(&patch)).await;
        out.push(format!("{patch}: {}", code(r)));
    }
    out.push(format!("stored spec: {}", raw.get("g").await?.data["spec"]));
    Ok(out)
}

#[test]
fn the_crds_schema_prunes_defaults_and_validates_every_write() {
    let program: Program = Arc::new(|client| {
        Box::pin(async move {
            match gadgets(client).await {
                Ok(lines) => lines.join("\n"),
                Err(e) => format!("error: {e}"),
            }
        })
    });
    let kinds = Kinds::new().crd::<Gadget>();
    let lines = common::result_lines(1, ApiServerConfig::default(), kinds, program);
    assert_eq!(
        lines,
        [
            r#"created spec: {"mode":"Safe","replicas":1}"#,
            r#"{"spec":{"replicas":9}}: 422 Invalid: Gadget.test.reconsim.dev "g" is invalid: spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5"#,
            r#"{"spec":{"mode":"Slow"}}: 422 Invalid: Gadget.test.reconsim.dev "g" is invalid: spec.mode: Unsupported value: "Slow": supported values: "Fast", "Safe""#,
            r#"{"spec":{"replicas":"two"}}: 422 Invalid: Gadget.test.reconsim.dev "g" is invalid: spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            r#"{"spec":{"extra":1,"replicas":3}}: ok"#,
            r#"stored spec: {"mode":"Safe","replicas":3}"#,
        ]
    );
}
