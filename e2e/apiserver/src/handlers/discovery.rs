//! Legacy (non-aggregated) discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::common::json_response;
use crate::resources::ResourceDef;
use crate::state::Shared;

/// Answers a discovery path, or None when the path is not a discovery path.
pub async fn serve(shared: &Shared, seg: &[&str], headers: &HeaderMap) -> Option<Response> {
    let store = shared.store.lock().await;
    let defs = &store.defs;
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let wants_aggregated = accept
        .split(',')
        .any(|p| p.contains("as=APIGroupDiscoveryList") && p.contains("v=v2"));
    if wants_aggregated && matches!(seg, ["api"] | ["apis"]) {
        let body = aggregated(defs, seg == ["api"]);
        let mut resp = json_response(StatusCode::OK, &body);
        resp.headers_mut().insert(
            "content-type",
            HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            ),
        );
        return Some(resp);
    }
    let body = match seg {
        [] => json!({"paths": root_paths(defs)}),
        ["version"] => version(),
        ["openapi", "v3"] => crate::openapi::index(defs),
        ["openapi", "v3", "api", v] => crate::openapi::document(defs, "", v)?,
        ["openapi", "v3", "apis", g, v] => crate::openapi::document(defs, g, v)?,
        ["healthz" | "livez" | "readyz", ..] => {
            let mut resp = (StatusCode::OK, "ok").into_response();
            resp.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return Some(resp);
        }
        ["api"] => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }),
        ["api", "v1"] => {
            let mut list = resource_list(defs, "", "v1");
            if let Some(m) = list.as_object_mut() {
                m.remove("apiVersion");
            }
            list
        }
        ["apis"] => json!({
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": groups(defs).iter().map(|g| group(defs, g)).collect::<Vec<_>>(),
        }),
        ["apis", g] => {
            if !defs.iter().any(|d| d.group == *g) {
                return None;
            }
            let mut v = group(defs, g);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        }
        ["apis", g, v] => {
            if !defs.iter().any(|d| d.group == *g && d.version(v).is_some()) {
                return None;
            }
            resource_list(defs, g, v)
        }
        _ => return None,
    };
    Some(json_response(StatusCode::OK, &body))
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "emulationMajor": "1",
        "emulationMinor": "34",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "33",
        "gitVersion": "v1.34.0-testapiserver",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-08-27T00:00:00Z",
        "goVersion": "go1.24.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn groups(defs: &[ResourceDef]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in defs.iter().filter(|d| !d.group.is_empty()) {
        if !out.contains(&d.group) {
            out.push(d.group.clone());
        }
    }
    out
}

fn group_versions(defs: &[ResourceDef], group: &str) -> Vec<String> {
    let mut versions: Vec<String> = Vec::new();
    for d in defs.iter().filter(|d| d.group == group) {
        for v in &d.versions {
            if !versions.contains(&v.name) {
                versions.push(v.name.clone());
            }
        }
    }
    versions.sort_by(|a, b| crate::crd::compare_versions(a, b));
    versions
}

fn group(defs: &[ResourceDef], name: &str) -> Value {
    let versions: Vec<Value> = group_versions(defs, name)
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": versions, "preferredVersion": preferred})
}

fn root_paths(defs: &[ResourceDef]) -> Vec<String> {
    let mut paths = vec![
        "/api".to_string(),
        "/api/v1".to_string(),
        "/apis".to_string(),
    ];
    for g in groups(defs) {
        paths.push(format!("/apis/{g}"));
        for v in group_versions(defs, &g) {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.extend(["/healthz", "/livez", "/readyz", "/version"].map(String::from));
    paths
}

fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version(version).is_some())
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        if d.version(&d.storage_version).is_some() || d.custom {
            r["storageVersionHash"] = json!(storage_hash(d));
        }
        resources.push(r);
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": if group.is_empty() { version.to_string() } else { format!("{group}/{version}") },
        "resources": resources,
    })
}

fn storage_hash(d: &ResourceDef) -> String {
    use base64::Engine;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&d.group, &d.storage_version, &d.kind).hash(&mut h);
    base64::engine::general_purpose::STANDARD.encode(h.finish().to_be_bytes())[..11].to_string()
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) of the core group (`/api`) or the named groups (`/apis`).
fn aggregated(defs: &[ResourceDef], core: bool) -> Value {
    let names: Vec<String> = if core {
        vec![String::new()]
    } else {
        groups(defs)
    };
    let items: Vec<Value> = names
        .iter()
        .map(|g| {
            let versions: Vec<String> = if g.is_empty() {
                vec!["v1".into()]
            } else {
                group_versions(defs, g)
            };
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = defs
                        .iter()
                        .filter(|d| &d.group == g && d.version(v).is_some())
                        .map(|d| {
                            let kind = json!({"group": d.group, "version": v, "kind": d.kind});
                            let mut r = json!({
                                "resource": d.plural,
                                "responseKind": kind,
                                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": d.singular,
                                "verbs": d.verbs(),
                            });
                            if !d.short_names.is_empty() {
                                r["shortNames"] = json!(d.short_names);
                            }
                            if !d.categories.is_empty() {
                                r["categories"] = json!(d.categories);
                            }
                            if d.status_subresource {
                                r["subresources"] = json!([{
                                    "subresource": "status",
                                    "responseKind": kind,
                                    "verbs": ["get", "patch", "update"],
                                }]);
                            }
                            r
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}
