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

/// A CRD as kubebuilder writes it, with `x-kubernetes-validations` rules (from
/// `+kubebuilder:validation:XValidation` markers): one over two fields, one that moves
/// its error to a field with a reason, and a transition rule.
fn limits_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "limits.test.reconsim.dev"},
        "spec": {
            "group": "test.reconsim.dev",
            "names": {"kind": "Limit", "plural": "limits"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["replicas", "max"],
                            "properties": {
                                "replicas": {"type": "integer"},
                                "max": {"type": "integer"},
                                "tier": {
                                    "type": "string",
                                    "enum": ["gold", "silver"],
                                    "x-kubernetes-validations": [{
                                        "rule": "self == oldSelf",
                                        "message": "tier is immutable"
                                    }]
                                }
                            },
                            "x-kubernetes-validations": [
                                {"rule": "self.replicas <= self.max",
                                 "messageExpression": "'replicas ' + string(self.replicas) + ' over max ' + string(self.max)"},
                                {"rule": "self.max <= 10", "fieldPath": ".max",
                                 "reason": "FieldValueForbidden", "message": "at most 10"}
                            ]
                        }
                    }
                }}
            }]
        }
    })
}

async fn limits(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let resource = ApiResource {
        group: "test.reconsim.dev".into(),
        version: "v1".into(),
        api_version: "test.reconsim.dev/v1".into(),
        kind: "Limit".into(),
        plural: "limits".into(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let mut out = Vec::new();
    let object = |spec: serde_json::Value| -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.reconsim.dev/v1", "kind": "Limit",
            "metadata": {"name": "l", "namespace": "default"}, "spec": spec,
        }))
        .expect("a DynamicObject");
        o.metadata.namespace = Some("default".into());
        o
    };
    let r = raw
        .create(
            &PostParams::default(),
            &object(json!({"replicas": 5, "max": 3})),
        )
        .await;
    out.push(format!("create 5 of 3: {}", code(r)));
    let r = raw
        .create(
            &PostParams::default(),
            &object(json!({"replicas": 1, "max": 3, "tier": "gold"})),
        )
        .await;
    out.push(format!("create 1 of 3: {}", code(r)));
    let pp = PatchParams::default();
    for patch in [
        json!({"spec": {"max": 20, "replicas": 2}}),
        json!({"spec": {"tier": "silver"}}),
        json!({"spec": {"tier": "bronze"}}),
        json!({"spec": {"replicas": 3}}),
    ] {
        let r = raw.patch("l", &pp, &Patch::Merge(&patch)).await;
        out.push(format!("{patch}: {}", code(r)));
    }
    out.push(format!("stored spec: {}", raw.get("l").await?.data["spec"]));
    Ok(out)
}

#[test]
fn a_crds_validation_rules_in_cel_refuse_a_write_as_the_server_does() {
    let program: Program = Arc::new(|client| {
        Box::pin(async move {
            match limits(client).await {
                Ok(lines) => lines.join("\n"),
                Err(e) => format!("error: {e}"),
            }
        })
    });
    let kinds = Kinds::new()
        .crd_manifest(&limits_crd())
        .expect("the CRD is served");
    let lines = common::result_lines(1, ApiServerConfig::default(), kinds, program);
    assert_eq!(
        lines,
        [
            r#"create 5 of 3: 422 Invalid: Limit.test.reconsim.dev "l" is invalid: spec: Invalid value: replicas 5 over max 3"#,
            "create 1 of 3: ok",
            r#"{"spec":{"max":20,"replicas":2}}: 422 Invalid: Limit.test.reconsim.dev "l" is invalid: spec.max: Forbidden: at most 10"#,
            r#"{"spec":{"tier":"silver"}}: 422 Invalid: Limit.test.reconsim.dev "l" is invalid: spec.tier: Invalid value: "silver": tier is immutable"#,
            r#"{"spec":{"tier":"bronze"}}: 422 Invalid: Limit.test.reconsim.dev "l" is invalid: [spec.tier: Unsupported value: "bronze": supported values: "gold", "silver", <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
            r#"{"spec":{"replicas":3}}: ok"#,
            r#"stored spec: {"max":3,"replicas":3,"tier":"gold"}"#,
        ]
    );
}

#[test]
fn a_crd_whose_rule_is_not_cel_is_refused_naming_the_rule() {
    let mut crd = limits_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        [1]["rule"] = json!("self.max <=");
    let Err(e) = Kinds::new().crd_manifest(&crd) else {
        panic!("a CRD whose rule is not CEL is refused");
    };
    assert!(
        e.starts_with(
            "`spec.versions[v1].schema.openAPIV3Schema`: spec: x-kubernetes-validations[1].rule: not CEL: "
        ),
        "{e}"
    );
}
