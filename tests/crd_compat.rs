//! Compatibility of our generated CRDs with CAPD's release-1.12 CRDs: for every kind and served
//! version of the reference, every schema path exists in ours with the same type and
//! constraints, and names, scope, subresources, printer columns and storage flags agree. The
//! versions the reference lists unserved (the retired `v1alpha3`/`v1alpha4`) are absent from ours,
//! as CAPD 1.13 removed them.
//!
//! Reads `../shared/reference/crds/capd-release-1.12/`; skips with a message when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capd-release-1.12"
);

/// Schema keywords compared between the reference and ours. Descriptions are ours to write.
const COMPARED_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "default",
    "nullable",
    "anyOf",
    "allOf",
    "oneOf",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
];

/// Differences we chose on purpose: (kind, schema path, keyword). Each one is explained in the
/// report of the API work and in `crd.rs`.
const DELIBERATE: &[(&str, &str, &str)] = &[
    // The API server fills `spec: {}` when it is left out, so every stored object decodes.
    ("DockerCluster", ".spec", "default"),
    ("DockerMachine", ".spec", "default"),
    ("DockerMachinePool", ".spec", "default"),
];

/// Fields we serve that the CAPD 1.12 schema lacks, with the reason (`kind`, `path`).
const ADDED: &[(&str, &str)] = &[
    // The machine's failure domain reported in status (issue: "addresses and failure domain
    // reported"), as later CAPD releases do; v1beta2 only (v1beta1 keeps it in conversion data).
    ("DockerMachine", ".status.failureDomain"),
    // The same on DevMachine, whose docker backend is served by the DockerMachine reconciler.
    ("DevMachine", ".status.failureDomain"),
    // Autoscaling from zero for MachinePools (issue 12): the pool template reports the capacity
    // of one machine, as DockerMachineTemplate does. CAPD 1.12's pool template has no status.
    ("DockerMachinePoolTemplate", ".status"),
    ("DockerMachinePoolTemplate", ".status.capacity"),
    ("DockerMachinePoolTemplate", ".status.capacity{}"),
];

/// Subresources we serve that the CAPD 1.12 version lacks (`kind`, subresource): the status
/// holding the capacity above.
const ADDED_SUBRESOURCES: &[(&str, &str)] = &[("DockerMachinePoolTemplate", "status")];

/// Flattens a schema into `path -> compared keywords`, with `required` sorted.
fn flatten(schema: &Value, path: &str, out: &mut BTreeMap<String, BTreeMap<String, Value>>) {
    let mut keywords = BTreeMap::new();
    for key in COMPARED_KEYWORDS {
        if let Some(value) = schema.get(*key) {
            keywords.insert((*key).to_string(), normalise(value));
        }
    }
    if let Some(Value::Array(required)) = schema.get("required") {
        let mut names: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
        names.sort_unstable();
        keywords.insert("required".into(), Value::from(names));
    }
    out.insert(
        if path.is_empty() {
            ".".into()
        } else {
            path.into()
        },
        keywords,
    );
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, child) in properties {
            flatten(child, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        flatten(items, &format!("{path}[]"), out);
    }
    if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
        flatten(additional, &format!("{path}{{}}"), out);
    }
}

/// Numbers compare by value (`65535` and `65535.0` are the same bound).
fn normalise(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| Value::from(f as i64))
            .unwrap_or_else(|| value.clone()),
        Value::Array(items) => Value::Array(items.iter().map(normalise).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalise(v))).collect())
        }
        _ => value.clone(),
    }
}

/// Compares two schemas; returns one line per difference, minus the allowed ones.
fn compare_schemas(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
    let (mut theirs_flat, mut ours_flat) = (BTreeMap::new(), BTreeMap::new());
    flatten(reference, "", &mut theirs_flat);
    flatten(ours, "", &mut ours_flat);
    let paths: BTreeSet<&String> = theirs_flat.keys().chain(ours_flat.keys()).collect();
    let mut problems = Vec::new();
    for path in paths {
        match (theirs_flat.get(path), ours_flat.get(path)) {
            (Some(_), None) => problems.push(format!("{kind} {path}: missing in ours")),
            (None, Some(_)) if ADDED.contains(&(kind, path.as_str())) => {}
            (None, Some(_)) => problems.push(format!("{kind} {path}: not in CAPD")),
            (Some(theirs), Some(ours)) => {
                let keys: BTreeSet<&String> = theirs.keys().chain(ours.keys()).collect();
                for key in keys {
                    if theirs.get(key) == ours.get(key)
                        || DELIBERATE.contains(&(kind, path.as_str(), key.as_str()))
                    {
                        continue;
                    }
                    problems.push(format!(
                        "{kind} {path}: {key} is {} in CAPD but {} in ours",
                        show(theirs.get(key)),
                        show(ours.get(key))
                    ));
                }
            }
            (None, None) => {}
        }
    }
    problems
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".into(), Value::to_string)
}

/// Printer columns without their descriptions (those are ours to write).
fn columns(version: &Value) -> Vec<Value> {
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| {
                    let mut c = c.clone();
                    if let Value::Object(map) = &mut c {
                        map.remove("description");
                    }
                    normalise(&c)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Compares the flags of one version: served, stored, deprecated.
fn compare_flags(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
    let name = reference["name"].as_str().unwrap_or_default();
    let mut problems = Vec::new();
    for key in ["served", "storage", "deprecated", "deprecationWarning"] {
        let theirs = reference.get(key).filter(|v| **v != Value::Bool(false));
        let mine = ours.get(key).filter(|v| **v != Value::Bool(false));
        if theirs != mine {
            problems.push(format!(
                "{kind} {name}: {key} is {} in CAPD but {} in ours",
                show(theirs),
                show(mine)
            ));
        }
    }
    problems
}

/// Compares everything about one served version.
fn compare_version(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
    let name = reference["name"].as_str().unwrap_or_default();
    let mut problems = compare_flags(kind, reference, ours);
    let empty = Value::Object(Default::default());
    let subresources = |v: &Value| v.get("subresources").cloned().unwrap_or(empty.clone());
    let theirs = subresources(reference);
    let mut mine = subresources(ours);
    for (added_to, subresource) in ADDED_SUBRESOURCES {
        if *added_to == kind
            && theirs.get(subresource).is_none()
            && let Value::Object(map) = &mut mine
        {
            map.remove(*subresource);
        }
    }
    if theirs != mine {
        problems.push(format!(
            "{kind} {name}: subresources are {theirs} in CAPD but {} in ours",
            subresources(ours)
        ));
    }
    if columns(reference) != columns(ours) {
        problems.push(format!(
            "{kind} {name}: printer columns are {:?} in CAPD but {:?} in ours",
            columns(reference),
            columns(ours)
        ));
    }
    let schema = |v: &Value| {
        v.pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null)
    };
    problems.extend(compare_schemas(kind, &schema(reference), &schema(ours)));
    problems
}

/// Compares a whole CRD; returns the problems and the versions CAPD 1.12 lists unserved, which
/// ours must not list (CAPD 1.13 removed them).
fn compare_crd(reference: &Value, ours: &Value) -> (Vec<String>, Vec<String>) {
    let kind = reference
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut problems = Vec::new();
    let mut unserved = Vec::new();
    for key in [
        "/spec/group",
        "/spec/scope",
        "/spec/names",
        "/metadata/name",
    ] {
        let (theirs, mine) = (reference.pointer(key), ours.pointer(key));
        if theirs != mine {
            problems.push(format!(
                "{kind}: {key} is {} in CAPD but {} in ours",
                show(theirs),
                show(mine)
            ));
        }
    }
    let versions = |crd: &Value| -> Vec<Value> {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let our_versions = versions(ours);
    for theirs in versions(reference) {
        let name = theirs["name"].as_str().unwrap_or_default().to_string();
        let served = theirs.get("served") == Some(&Value::Bool(true));
        match our_versions.iter().find(|v| v["name"] == theirs["name"]) {
            Some(mine) if served => problems.extend(compare_version(kind, &theirs, mine)),
            Some(_) => problems.push(format!(
                "{kind} {name}: retired (unserved in CAPD 1.12, removed in 1.13) but listed in ours"
            )),
            None if served => problems.push(format!("{kind} {name}: version missing in ours")),
            None => unserved.push(format!("{kind} {name}")),
        }
    }
    for mine in &our_versions {
        if !versions(reference)
            .iter()
            .any(|v| v["name"] == mine["name"])
        {
            problems.push(format!("{kind} {}: version not in CAPD", mine["name"]));
        }
    }
    (problems, unserved)
}

fn our_crds() -> BTreeMap<String, Value> {
    capd::api::crd::all()
        .unwrap()
        .into_iter()
        .map(|crd| {
            (
                crd.spec.names.kind.clone(),
                serde_json::to_value(&crd).unwrap(),
            )
        })
        .collect()
}

#[test]
fn generated_crds_match_capd_release_1_12() {
    let dir = Path::new(REFERENCE);
    if !dir.is_dir() {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return;
    }
    let ours = our_crds();
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    let mut unserved = Vec::new();
    let mut compared = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let reference: Value = serde_saphyr::from_str(&text).unwrap();
        let kind = reference
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap()
            .to_string();
        let Some(mine) = ours.get(&kind) else {
            skipped.push(format!("{kind} (kind not served by this provider)"));
            continue;
        };
        let (p, u) = compare_crd(&reference, mine);
        problems.extend(p);
        unserved.extend(u);
        compared.push(kind);
    }
    println!("compared: {}", compared.join(", "));
    println!(
        "not served by CAPD 1.12, absent from ours: {}",
        unserved.join(", ")
    );
    for s in &skipped {
        println!("skipped: {s}");
    }
    // DevMachinePool and DevMachinePoolTemplate came with CAPD 1.13: 1.12 has no CRD for them.
    let expected: Vec<&String> = ours
        .keys()
        .filter(|k| !["DevMachinePool", "DevMachinePoolTemplate"].contains(&k.as_str()))
        .collect();
    assert!(
        compared.len() == expected.len(),
        "some of our kinds have no reference CRD: ours {expected:?}, compared {compared:?}"
    );
    assert!(
        problems.is_empty(),
        "CRDs differ from CAPD:\n{}",
        problems.join("\n")
    );
}

/// CAPD's CRD of `plural`; `None` without the reference.
fn reference_crd(plural: &str) -> Option<Value> {
    let path = Path::new(REFERENCE).join(format!("infrastructure.cluster.x-k8s.io_{plural}.yaml"));
    let text = std::fs::read_to_string(path).ok()?;
    serde_saphyr::from_str(&text).ok()
}

/// CAPD's DockerMachine CRD and ours, checked to match; `None` (with a message) without the
/// reference.
fn machine_baseline() -> Option<(Value, Value, Vec<String>)> {
    let Some(reference) = reference_crd("dockermachines") else {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return None;
    };
    let ours = our_crds()["DockerMachine"].clone();
    let (problems, unserved) = compare_crd(&reference, &ours);
    assert!(problems.is_empty(), "baseline must match: {problems:?}");
    Some((reference, ours, unserved))
}

#[test]
fn comparator_reports_a_deliberately_altered_schema() {
    let Some((reference, ours, _)) = machine_baseline() else {
        return;
    };

    let index = ours["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v["name"] == "v1beta2")
        .unwrap();
    let base = format!("/spec/versions/{index}/schema/openAPIV3Schema/properties");

    let mut altered = ours.clone();
    *altered
        .pointer_mut(&format!("{base}/spec/properties/providerID/maxLength"))
        .unwrap() = Value::from(511);
    let (problems, _) = compare_crd(&reference, &altered);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains(".spec.providerID: maxLength"),
        "{problems:?}"
    );

    let mut altered = ours.clone();
    altered
        .pointer_mut(&format!("{base}/status/properties"))
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("addresses");
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems
            .iter()
            .any(|p| p.contains(".status.addresses: missing in ours")),
        "{problems:?}"
    );

    let mut altered = ours.clone();
    altered
        .pointer_mut(&format!("{base}/status/properties/conditions"))
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("x-kubernetes-list-type");
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("x-kubernetes-list-type")),
        "{problems:?}"
    );

    let mut altered = ours.clone();
    altered
        .pointer_mut(&format!("/spec/versions/{index}"))
        .unwrap()["subresources"] = serde_json::json!({});
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems.iter().any(|p| p.contains("subresources")),
        "{problems:?}"
    );

    let mut altered = ours;
    *altered
        .pointer_mut(&format!(
            "/spec/versions/{index}/additionalPrinterColumns/3/jsonPath"
        ))
        .unwrap() = Value::from(".status.ready");
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems.iter().any(|p| p.contains("printer columns")),
        "{problems:?}"
    );
}

#[test]
fn comparator_reports_a_retired_version_listed_again() {
    let Some((reference, ours, unserved)) = machine_baseline() else {
        return;
    };
    assert_eq!(
        unserved,
        ["DockerMachine v1alpha3", "DockerMachine v1alpha4"]
    );
    let mut altered = ours;
    let mut retired = altered["spec"]["versions"][0].clone();
    retired["name"] = Value::from("v1alpha4");
    retired["served"] = Value::Bool(false);
    retired["storage"] = Value::Bool(false);
    altered["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(retired);
    let (problems, _) = compare_crd(&reference, &altered);
    assert_eq!(
        problems,
        [
            "DockerMachine v1alpha4: retired (unserved in CAPD 1.12, removed in 1.13) but listed in ours"
        ]
    );
}

#[test]
fn the_pool_template_adds_exactly_its_capacity_status() {
    let path = Path::new(REFERENCE)
        .join("infrastructure.cluster.x-k8s.io_dockermachinepooltemplates.yaml");
    let Ok(text) = std::fs::read_to_string(path) else {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return;
    };
    let reference: Value = serde_saphyr::from_str(&text).unwrap();
    let ours = our_crds()["DockerMachinePoolTemplate"].clone();
    let (problems, _) = compare_crd(&reference, &ours);
    assert!(problems.is_empty(), "baseline must match: {problems:?}");
    for version in ours["spec"]["versions"].as_array().unwrap() {
        assert_eq!(version["subresources"], serde_json::json!({"status": {}}));
        let status = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert_eq!(
            status.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["capacity"],
            "{}",
            version["name"]
        );
    }

    // Anything beyond the capacity status is still reported.
    let mut altered = ours.clone();
    altered["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ["nodeInfo"] = serde_json::json!({"type": "object"});
    altered["spec"]["versions"][0]["subresources"]["scale"] = serde_json::json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems
            .iter()
            .any(|p| p.contains(".status.nodeInfo: not in CAPD")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("subresources")),
        "{problems:?}"
    );
}

#[test]
fn the_dev_kinds_match_capd_with_no_retired_versions() {
    let ours = our_crds();
    for (kind, plural) in [
        ("DevCluster", "devclusters"),
        ("DevClusterTemplate", "devclustertemplates"),
        ("DevMachine", "devmachines"),
        ("DevMachineTemplate", "devmachinetemplates"),
    ] {
        let Some(reference) = reference_crd(plural) else {
            println!("SKIPPED: reference CRDs not found at {REFERENCE}");
            return;
        };
        let (problems, unserved) = compare_crd(&reference, &ours[kind]);
        assert!(problems.is_empty(), "{kind}: {problems:?}");
        // CAPD introduced the Dev kinds in v1beta1: no v1alpha3/v1alpha4 to keep unserved.
        assert!(unserved.is_empty(), "{kind}: {unserved:?}");
        let versions: Vec<(&str, bool)> = ours[kind]["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v["storage"] == true))
            .collect();
        assert_eq!(versions, [("v1beta1", false), ("v1beta2", true)], "{kind}");
    }

    // DevMachine adds status.failureDomain in v1beta2 only, as DockerMachine does.
    let machine = &ours["DevMachine"]["spec"]["versions"];
    let status = |i: usize| {
        machine[i]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"].clone()
    };
    assert!(status(0).get("failureDomain").is_none(), "v1beta1");
    assert_eq!(status(1)["failureDomain"]["type"], "string", "v1beta2");
}
