//! Every field the Cluster API views read exists, with the same type, in the Cluster API
//! release-1.12 CRDs (v1beta2). Reads `../shared/reference/crds/capi-release-1.12/`; skips with a
//! message when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use capd::api::capi::{ClusterSpec, ClusterStatus, MachineSpec, MachineStatus};
use capd::api::schema::schema_for;
use serde_json::Value;

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capi-release-1.12"
);

/// `(path, type)` of every node of a schema.
fn typed_paths(schema: &Value, path: &str, out: &mut Vec<(String, String)>) {
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        out.push((path.to_string(), ty.to_string()));
    }
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, child) in properties {
            typed_paths(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        typed_paths(items, &format!("{path}[]"), out);
    }
}

/// The reference v1beta2 schema of a CAPI kind, or `None` when the reference is absent.
fn reference_schema(file: &str) -> Option<Value> {
    let text = std::fs::read_to_string(Path::new(REFERENCE).join(file)).ok()?;
    let crd: Value = serde_saphyr::from_str(&text).unwrap();
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta2")
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
}

fn missing_paths(reference: &Value, views: &[(&str, Value)]) -> Vec<String> {
    let mut theirs = Vec::new();
    typed_paths(reference, "", &mut theirs);
    let mut problems = Vec::new();
    for (prefix, view) in views {
        let mut ours = Vec::new();
        typed_paths(view, prefix, &mut ours);
        assert!(ours.len() > 1, "view schema at {prefix} has no fields");
        for (path, ty) in ours {
            match theirs.iter().find(|(p, _)| *p == path) {
                None => problems.push(format!("{path}: not in Cluster API")),
                Some((_, t)) if *t != ty => {
                    problems.push(format!("{path}: {ty} in the view but {t} in Cluster API"))
                }
                Some(_) => {}
            }
        }
    }
    problems
}

#[test]
fn cluster_and_machine_views_read_existing_fields() {
    let (Some(cluster), Some(machine)) = (
        reference_schema("cluster.x-k8s.io_clusters.yaml"),
        reference_schema("cluster.x-k8s.io_machines.yaml"),
    ) else {
        println!("SKIPPED: Cluster API reference CRDs not found at {REFERENCE}");
        return;
    };
    let mut problems = missing_paths(
        &cluster,
        &[
            (".spec", schema_for::<ClusterSpec>()),
            (".status", schema_for::<ClusterStatus>()),
        ],
    );
    problems.extend(missing_paths(
        &machine,
        &[
            (".spec", schema_for::<MachineSpec>()),
            (".status", schema_for::<MachineStatus>()),
        ],
    ));
    assert!(
        problems.is_empty(),
        "views read fields Cluster API does not have:\n{}",
        problems.join("\n")
    );
}

#[test]
fn check_catches_a_misnamed_field() {
    let Some(cluster) = reference_schema("cluster.x-k8s.io_clusters.yaml") else {
        println!("SKIPPED: Cluster API reference CRDs not found at {REFERENCE}");
        return;
    };
    let mut spec = schema_for::<ClusterSpec>();
    let paused = spec["properties"]
        .as_object_mut()
        .unwrap()
        .remove("paused")
        .unwrap();
    spec["properties"]["pause"] = paused;
    spec["properties"]["clusterNetwork"]["properties"]["pods"]["type"] = Value::from("array");
    let problems = missing_paths(&cluster, &[(".spec", spec)]);
    assert!(
        problems
            .iter()
            .any(|p| p == ".spec.pause: not in Cluster API"),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with(".spec.clusterNetwork.pods: array")),
        "{problems:?}"
    );
}
