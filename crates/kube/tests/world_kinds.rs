//! The world's own kinds through kube-rs: Nodes, Pods, Leases and Deployments that
//! kube-rs code writes are the typed objects the world's components read (the scheduler
//! binds a Pod by its `spec.nodeName`, the kubelet runs its image), every field the
//! client wrote reads back, and the world's writes show through the client's types.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{SimTime, TraceMode};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::object::{self as world, ObjectKey, Resource};
use serde_json::json;
use std::sync::Arc;

async fn story(client: kube::Client) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let mut out = Vec::new();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-0"},
        "spec": {"providerID": "aws:///us-east-1a/i-0", "taints": [
            {"key": "dedicated", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"}]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // The status subresource: Ready, with the addresses kept.
    let ready = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}});
    nodes
        .patch_status("worker-0", &PatchParams::default(), &Patch::Merge(ready))
        .await
        .unwrap();
    let listed = nodes.list(&ListParams::default()).await.unwrap();
    for n in &listed.items {
        let spec = n.spec.clone().unwrap_or_default();
        let status = n.status.clone().unwrap_or_default();
        out.push(format!(
            "node {} {} taints {} addresses {} ready {}",
            n.metadata.name.as_deref().unwrap_or(""),
            spec.provider_id.unwrap_or_default(),
            spec.taints.map_or(0, |t| t.len()),
            status.addresses.map_or(0, |a| a.len()),
            status
                .conditions
                .unwrap_or_default()
                .iter()
                .find(|c| c.type_ == "Ready")
                .map_or("-".to_string(), |c| c.status.clone()),
        ));
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx", "command": ["serve"]}],
                 "nodeSelector": {"disk": "ssd"}},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let back = pods.get("web").await.unwrap();
    let c = &back.spec.as_ref().unwrap().containers[0];
    out.push(format!(
        "pod {} {} {:?} phase {}",
        c.name,
        c.image.as_deref().unwrap_or(""),
        c.command.clone().unwrap_or_default(),
        back.status
            .and_then(|s| s.phase)
            .unwrap_or_else(|| "-".into()),
    ));
    // An update may change the image only: the API server's rule for Pods.
    let moved = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeSelector": {"disk": "hdd"}}})),
        )
        .await;
    out.push(format!(
        "pod selector change: {}",
        match moved {
            Ok(_) => "accepted".to_string(),
            Err(kube::Error::Api(e)) => format!("{} {}", e.code, e.reason),
            Err(e) => e.to_string(),
        }
    ));
    // A Lease, as a kubelet's heartbeat: times to the microsecond read back.
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "worker-0"},
        "spec": {"holderIdentity": "worker-0", "leaseDurationSeconds": 40,
                 "renewTime": "2026-01-01T00:00:07.123456Z"},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let back = leases.get("worker-0").await.unwrap().spec.unwrap();
    out.push(format!(
        "lease {} {}s renewed {}",
        back.holder_identity.unwrap_or_default(),
        back.lease_duration_seconds.unwrap_or(0),
        back.renew_time.map(|t| t.0.to_string()).unwrap_or_default(),
    ));
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    }))
    .unwrap();
    let d = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    out.push(format!(
        "deployment replicas {}",
        d.spec.and_then(|s| s.replicas).unwrap_or(0)
    ));
    out
}

#[test]
fn kube_rs_code_and_the_worlds_components_see_one_object() {
    let program: Program = Arc::new(|client| Box::pin(async { story(client).await.join("\n") }));
    let mut w = KubeWorld::new(
        5,
        TraceMode::Hash,
        Default::default(),
        Kinds::new(),
        program,
    );
    w.sim.run_until(SimTime(60_000));
    let lines: Vec<String> = w
        .bridge()
        .results
        .join("\n")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "node worker-0 aws:///us-east-1a/i-0 taints 2 addresses 1 ready True",
            r#"pod app nginx ["serve"] phase Pending"#,
            "pod selector change: 422 Invalid",
            // The world keeps milliseconds; the text the client wrote is what it reads.
            "lease worker-0 40s renewed 2026-01-01T00:00:07.123456Z",
            // The API server's default.
            "deployment replicas 1",
        ]
    );
    // What the world's own components read: the typed objects.
    let Some(server) = w.sim.actor(w.apiserver).component::<ApiServer>() else {
        unreachable!("process 0 is the API server")
    };
    let get = |kind, ns: &str, name: &str| {
        server
            .get(&ObjectKey::new(kind, ns, name))
            .unwrap_or_else(|| panic!("{name} stored"))
            .clone()
    };
    let node = get(world::Node::KIND, "", "worker-0");
    let node = node.typed::<world::Node>().expect("a typed Node");
    assert_eq!(
        node.spec.provider_id.as_deref(),
        Some("aws:///us-east-1a/i-0")
    );
    // The soft taint is the scheduler's preference, which the world does not model.
    assert_eq!(node.spec.taints.len(), 1);
    assert_eq!(node.status.ready, world::ConditionStatus::True);
    assert_eq!(node.status.ready_since, Some(SimTime(5_000)));
    let pod = get(world::Pod::KIND, "default", "web");
    let pod = pod.typed::<world::Pod>().expect("a typed Pod");
    assert_eq!(pod.spec.image, "nginx");
    assert_eq!(pod.spec.node_selector["disk"], "ssd");
    let lease = get(world::Lease::KIND, "kube-node-lease", "worker-0");
    let lease = lease.typed::<world::Lease>().expect("a typed Lease");
    assert_eq!(lease.renew_time, Some(SimTime(7_123)));
    let d = get(world::Deployment::KIND, "default", "web");
    let d = d.typed::<world::Deployment>().expect("a typed Deployment");
    assert_eq!(
        (d.spec.replicas, d.spec.template.spec.image.as_str()),
        (1, "nginx")
    );
}

#[test]
fn the_worlds_writes_show_through_the_clients_types() {
    // A Pod the world's scheduler binds and its kubelet runs reads, to kube-rs code, as
    // bound and Running, its unmodeled fields kept.
    let written = json!({
        "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]},
    });
    let fields = written.as_object().unwrap();
    let codec = reconsim_kube::world_kinds::codec(world::Pod::KIND).unwrap();
    let body = (codec.decode)(fields).unwrap();
    let mut pod = body.typed::<world::Pod>().unwrap().clone();
    pod.spec.node_name = Some("worker-0".into());
    pod.status.phase = world::PodPhase::Running;
    pod.status.restart_count = 2;
    let json = (codec.encode)(&world::Body::new(pod)).unwrap();
    let read: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": json["spec"], "status": json["status"],
    }))
    .unwrap();
    let spec = read.spec.unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("worker-0"));
    assert_eq!(spec.containers[0].ports.as_ref().map(Vec::len), Some(1));
    let status = read.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let cs = &status.container_statuses.unwrap()[0];
    assert_eq!(
        (cs.name.as_str(), cs.restart_count, cs.ready),
        ("app", 2, true)
    );
}
