//! A family's controllers as a Deployment whose first pods are already bound to their
//! nodes (as once scheduled), seeded at t = 0: the kubelets start them, the Deployment
//! controller replaces them. machine-api's pods and users' `custom` entries are seeded
//! so.

use reconsim_world::apiserver::ApiServer;
use reconsim_world::object::{
    Body, Deployment, DeploymentSpec, Object, ObjectMeta, OwnerReference, Pod, PodSpec,
    PodTemplate, Resource,
};
use std::collections::BTreeMap;

/// Seed the Deployment `namespace/name` (selector and pod labels `labels`, pods from
/// `template`) and its pods `(pod name, node)`, in that order: `replicas` is their count.
pub fn seed(
    server: &mut ApiServer,
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    template: &PodSpec,
    pods: &[(String, String)],
) {
    let mut meta = ObjectMeta::named(namespace, name);
    meta.labels = labels.clone();
    let deployment = server.seed_object(Object::new(
        meta,
        Body::new(Deployment {
            spec: DeploymentSpec {
                replicas: pods.len() as u32,
                selector: labels.clone(),
                template: PodTemplate {
                    labels: labels.clone(),
                    spec: template.clone(),
                },
                ..Default::default()
            },
            status: Default::default(),
        }),
    ));
    for (pod, node) in pods {
        let mut meta = ObjectMeta::named(namespace, pod);
        meta.labels = labels.clone();
        meta.owner_references = vec![OwnerReference {
            kind: Deployment::KIND,
            name: name.to_string(),
            uid: deployment.meta.uid,
            controller: Some(true),
            block_owner_deletion: None,
        }];
        server.seed_object(Object::new(
            meta,
            Body::new(Pod {
                spec: PodSpec {
                    node_name: Some(node.clone()),
                    ..template.clone()
                },
                status: Default::default(),
            }),
        ));
    }
}
