//! Every generated schema is structural (what a real kube-apiserver demands), documented, and
//! the committed YAML under `config/crd/bases/` is exactly what the generator produces.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::Value;

/// Checks one schema node and its children; pushes a line per violation.
fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        problems.push(format!("{path}: schema is not an object"));
        return;
    };
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    for banned in [
        "$ref",
        "$schema",
        "definitions",
        "$defs",
        "oneOf",
        "allOf",
        "not",
        "nullable",
        "title",
        "const",
    ] {
        if map.contains_key(banned) {
            problems.push(format!("{path}: has `{banned}`"));
        }
    }
    if preserve {
        problems.push(format!(
            "{path}: x-kubernetes-preserve-unknown-fields (CAPD has none)"
        ));
    }
    match map.get("anyOf") {
        None => {}
        Some(any_of) if int_or_string => {
            let expected = serde_json::json!([{"type": "integer"}, {"type": "string"}]);
            if *any_of != expected {
                problems.push(format!("{path}: int-or-string anyOf is {any_of}"));
            }
        }
        Some(_) => problems.push(format!("{path}: anyOf outside int-or-string")),
    }
    let ty = map.get("type").and_then(Value::as_str);
    if ty.is_none() && !int_or_string {
        problems.push(format!("{path}: no type"));
    }
    if int_or_string && ty.is_some() {
        problems.push(format!("{path}: int-or-string must not carry a type"));
    }
    if path != "." && !path.ends_with(".metadata") && !path.ends_with("{}") && !path.ends_with("[]")
    {
        let documented = map
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty());
        if !documented {
            problems.push(format!(
                "{path}: no description (kubectl explain would show nothing)"
            ));
        }
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    if matches!(map.get("additionalProperties"), Some(Value::Bool(_))) {
        problems.push(format!("{path}: boolean additionalProperties"));
    }
    if (ty == Some("array")) != map.contains_key("items") {
        problems.push(format!("{path}: items must be present exactly for arrays"));
    }
    if let Some(Value::Array(required)) = map.get("required") {
        let properties = map.get("properties").and_then(Value::as_object);
        for name in required.iter().filter_map(Value::as_str) {
            if !properties.is_some_and(|p| p.contains_key(name)) {
                problems.push(format!("{path}: required `{name}` is not a property"));
            }
        }
    }
    if map.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys = map
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array);
        let item_required = node.pointer("/items/required").and_then(Value::as_array);
        match (keys, item_required) {
            (Some(keys), Some(required)) if !keys.is_empty() => {
                for key in keys {
                    if !required.contains(key) {
                        problems.push(format!(
                            "{path}: list-map key {key} is not required in items"
                        ));
                    }
                }
            }
            _ => problems.push(format!("{path}: list-map without required keys")),
        }
    }
    if let Some(default) = map.get("default") {
        let allowed = (path.ends_with(".spec") && *default == serde_json::json!({}))
            || (path.ends_with("customHAProxyConfigTemplateRef.name")
                && default.as_str() == Some(""));
        if !allowed {
            problems.push(format!("{path}: unexpected default {default}"));
        }
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, child) in properties {
            check(
                child,
                &format!("{}.{name}", path.trim_end_matches('.')),
                problems,
            );
        }
    }
    if let Some(items) = map.get("items") {
        check(items, &format!("{path}[]"), problems);
    }
    if let Some(additional @ Value::Object(_)) = map.get("additionalProperties") {
        check(additional, &format!("{path}{{}}"), problems);
    }
}

/// Problems of the served versions (every version is served:
/// `every_listed_version_is_served_and_none_is_retired`).
fn problems_of(crd: &CustomResourceDefinition) -> Vec<String> {
    let mut problems = Vec::new();
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let schema = serde_json::to_value(
            version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref()),
        )
        .unwrap();
        let mut found = Vec::new();
        check(&schema, ".", &mut found);
        problems.extend(
            found
                .into_iter()
                .map(|p| format!("{} {}: {p}", crd.spec.names.kind, version.name)),
        );
    }
    problems
}

#[test]
fn every_generated_schema_is_structural_and_documented() {
    let crds = capd::api::crd::all().unwrap();
    assert!(crds.len() >= 4);
    let problems: Vec<String> = crds.iter().flat_map(problems_of).collect();
    assert!(
        problems.is_empty(),
        "non-structural schemas:\n{}",
        problems.join("\n")
    );
}

#[test]
fn checker_rejects_a_non_structural_schema() {
    let mut crd = capd::api::crd::docker_machine().unwrap();
    let index = crd
        .spec
        .versions
        .iter()
        .position(|v| v.name == "v1beta2")
        .unwrap();
    let mut schema = serde_json::to_value(&crd.spec.versions[index].schema).unwrap();
    let provider_id = schema
        .pointer_mut("/openAPIV3Schema/properties/spec/properties/providerID")
        .unwrap();
    *provider_id = serde_json::json!({
        "description": "an Option<String> the naive way",
        "anyOf": [{"type": "string"}, {"type": "null"}]
    });
    crd.spec.versions[index].schema = serde_json::from_value(schema).unwrap();
    let problems = problems_of(&crd);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("spec.providerID: anyOf outside int-or-string")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("spec.providerID: no type")),
        "{problems:?}"
    );
}

/// Every CRD stores v1beta2; the kinds CAPD had in v1beta1 serve it too, the pool kinds CAPD
/// 1.13 introduced (DevMachinePool, DevMachinePoolTemplate) serve v1beta2 alone.
#[test]
fn every_version_has_one_storage_and_both_betas_are_served() {
    for crd in capd::api::crd::all().unwrap() {
        let names = |keep: fn(&CustomResourceDefinitionVersion) -> bool| -> Vec<&str> {
            let versions = crd.spec.versions.iter().filter(|v| keep(v));
            versions.map(|v| v.name.as_str()).collect()
        };
        let kind = crd.spec.names.kind.as_str();
        assert_eq!(names(|v| v.storage), ["v1beta2"], "{kind}");
        let served: &[&str] = if kind.starts_with("DevMachinePool") {
            &["v1beta2"]
        } else {
            &["v1beta1", "v1beta2"]
        };
        assert_eq!(names(|v| v.served), served, "{kind}");
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta1").map(String::as_str),
            Some("v1beta1")
        );
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta2").map(String::as_str),
            Some("v1beta2")
        );
        let conversion = serde_json::to_value(&crd.spec.conversion).unwrap();
        assert_eq!(
            conversion,
            serde_json::json!({
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/convert"}},
                    "conversionReviewVersions": ["v1"]
                }
            })
        );
    }
}

/// CAPD 1.13 removed v1alpha3 and v1alpha4 from its CRDs, and so do we: every version our CRDs
/// list is served (the CRD migrator clears older ones from `status.storedVersions` first).
#[test]
fn every_listed_version_is_served_and_none_is_retired() {
    for crd in capd::api::crd::all().unwrap() {
        let kind = &crd.spec.names.kind;
        for version in &crd.spec.versions {
            assert!(version.served, "{kind} {} is not served", version.name);
            assert!(
                !["v1alpha3", "v1alpha4"].contains(&version.name.as_str()),
                "{kind} lists the retired {}",
                version.name
            );
        }
    }
}

#[test]
fn committed_yaml_parses_back_to_the_generated_crds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/crd/bases");
    for crd in capd::api::crd::all().unwrap() {
        let path = format!("{dir}/{}", capd::api::crd::file_name(&crd));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            text,
            capd::api::crd::to_yaml(&crd).unwrap(),
            "{path} is stale: run `cargo run --bin crdgen`"
        );
        let parsed: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&parsed).unwrap(),
            normalise(serde_json::to_value(&crd).unwrap()),
            "{path} does not parse back to the same CRD"
        );
    }
}

/// Bounds are `f64` in the CRD types; the YAML writes whole numbers as integers.
fn normalise(value: Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) && !n.is_i64() => {
            serde_json::to_value(n.as_f64()).unwrap()
        }
        Value::Array(items) => Value::Array(items.into_iter().map(normalise).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalise(v))).collect())
        }
        other => other,
    }
}
