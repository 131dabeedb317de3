//! Discovery: what the API server says it serves, at `/api`, `/apis`, `/api/v1` and
//! `/apis/{group}/{version}`, as a client's REST mapper reads it (client-go's
//! `discovery.DiscoveryClient`, which controller-runtime's mapper calls before its
//! first request of a kind). The legacy documents (`APIVersions`, `APIGroupList`,
//! `APIResourceList`): a client that asks for aggregated discovery first
//! (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`) takes
//! them by their content type, as it does from a server that has no aggregated
//! discovery (client-go `discovery/discovery_client.go`, `fetchGroupsAndResources`).

use crate::kinds::Kinds;
use serde_json::{Value, json};

/// The verbs every served resource answers (the simulated server serves them all).
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The discovery document at `path` (without its query), or `None` if `path` is
/// not a discovery path. A group version nobody serves is 404, as on a real server.
pub fn document(path: &str, kinds: &Kinds) -> Option<(u16, Value)> {
    let path = path.trim_end_matches('/');
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    match parts.as_slice() {
        ["api"] => Some((
            200,
            json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "kubernetes.default.svc:80"}
                ],
            }),
        )),
        ["apis"] => {
            let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
            for (g, v, _, _) in kinds.paths().filter(|(g, ..)| !g.is_empty()) {
                match groups.iter_mut().find(|(n, _)| *n == g) {
                    Some((_, vs)) if !vs.contains(&v) => vs.push(v),
                    Some(_) => {}
                    None => groups.push((g, vec![v])),
                }
            }
            let groups: Vec<Value> = groups
                .iter()
                .map(|(g, vs)| {
                    let versions: Vec<Value> = vs
                        .iter()
                        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                        .collect();
                    json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
                })
                .collect();
            Some((
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            ))
        }
        ["api", "v1"] => Some(resources("", "v1", kinds)),
        ["apis", group, version] => Some(resources(group, version, kinds)),
        _ => None,
    }
}

fn resources(group: &str, version: &str, kinds: &Kinds) -> (u16, Value) {
    let mut list = Vec::new();
    for (_, _, plural, served) in kinds
        .paths()
        .filter(|(g, v, ..)| *g == group && *v == version)
    {
        let kind = served.kind;
        list.push(json!({
            "name": plural,
            "singularName": kind.as_str().to_ascii_lowercase(),
            "namespaced": kind.namespaced(),
            "kind": kind.as_str(),
            "verbs": VERBS,
        }));
        if served.status_subresource {
            list.push(json!({
                "name": format!("{plural}/status"),
                "singularName": "",
                "namespaced": kind.namespaced(),
                "kind": kind.as_str(),
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    if list.is_empty() {
        return (
            404,
            json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "the server could not find the requested resource",
                "reason": "NotFound", "code": 404,
            }),
        );
    }
    (
        200,
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_group_lists_its_resources_and_the_groups_their_versions() {
        let kinds = Kinds::new();
        let (status, v1) = document("/api/v1", &kinds).expect("a discovery path");
        assert_eq!(status, 200);
        let names: Vec<&str> = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"configmaps") && names.contains(&"pods/status"),
            "{names:?}"
        );
        let (_, apis) = document("/apis", &kinds).unwrap();
        let groups: Vec<&str> = apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(
            groups.contains(&"coordination.k8s.io") && groups.contains(&"apps"),
            "{groups:?}"
        );
        assert_eq!(document("/apis/nope.io/v1", &kinds).unwrap().0, 404);
        assert_eq!(
            document("/api/v1/namespaces/default/configmaps", &kinds),
            None
        );
    }
}
