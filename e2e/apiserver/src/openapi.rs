//! A minimal OpenAPI v3 index: enough for kubectl to see that every resource supports
//! server-side field validation (`fieldValidation`), so it validates on the server, and the
//! schemas of custom resources so that `kubectl explain` shows their field documentation.
//! Built-in kinds have no published schemas.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the group-versions with documents.
pub fn index(defs: &[ResourceDef]) -> Value {
    let mut paths = Map::new();
    for d in defs {
        for v in &d.versions {
            let p = gv_path(&d.group, &v.name);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
            );
        }
    }
    json!({"paths": paths})
}

fn param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true})
}

fn op(d: &ResourceDef, version: &str, action: &str, params: &[&str]) -> Value {
    json!({
        "operationId": format!("{action}{}", d.kind),
        "parameters": params.iter().map(|p| param(p)).collect::<Vec<_>>(),
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": d.group, "version": version, "kind": d.kind},
    })
}

/// `/openapi/v3/<gv>`: paths of one group-version with their query parameters.
pub fn document(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let mut any = false;
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version(version).is_some())
    {
        any = true;
        if let Some(schema) = d.schema(version).filter(|_| d.custom) {
            let mut schema = schema.clone();
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": d.group, "version": version, "kind": d.kind}]);
            let reversed: Vec<&str> = d.group.split('.').rev().collect();
            schemas.insert(
                format!("{}.{version}.{}", reversed.join("."), d.kind),
                schema,
            );
        }
        let base = format!("/{}", gv_path(group, version));
        let collection = if d.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{base}/{}", d.plural)
        };
        let write = ["dryRun", "fieldManager", "fieldValidation"];
        paths.insert(collection.clone(), json!({
            "get": op(d, version, "list", &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch"]),
            "post": op(d, version, "post", &write),
            "delete": op(d, version, "deletecollection", &["labelSelector", "fieldSelector"]),
        }));
        let item = json!({
            "get": op(d, version, "get", &[]),
            "put": op(d, version, "put", &write),
            "patch": op(d, version, "patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
            "delete": op(d, version, "delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
        });
        paths.insert(format!("{collection}/{{name}}"), item.clone());
        if d.status_subresource {
            paths.insert(format!("{collection}/{{name}}/status"), item);
        }
    }
    any.then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.34.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        })
    })
}
