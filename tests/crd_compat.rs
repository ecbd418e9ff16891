//! Compatibility of our generated CRDs with CAPD's release-1.14 CRDs (the twelve kinds of Cluster
//! API 1.14): for every kind and served version of the reference, every schema path exists in
//! ours with the same type and constraints (so `bootstrapped` is where 1.14 has it and nowhere
//! else), and names, scope, subresources, printer columns and the served, storage and
//! deprecation flags agree. Our CRDs list no extra version: the retired `v1alpha3`/`v1alpha4`
//! are gone, as CAPD 1.13 removed them (the comparator still recognises them, unserved).
//!
//! Reads `../shared/reference/crds/capd-release-1.14/`; skips with a message when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capd-release-1.14"
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
    ("DevMachinePool", ".spec", "default"),
];

/// Fields we serve that the CAPD 1.14 schema lacks, with the reason (`kind`, `path`).
const ADDED: &[(&str, &str)] = &[
    // Autoscaling from zero for MachinePools (issue 12): the pool templates report the capacity
    // of one machine, as DockerMachineTemplate does. CAPD's pool templates have no status.
    ("DockerMachinePoolTemplate", ".status"),
    ("DockerMachinePoolTemplate", ".status.capacity"),
    ("DockerMachinePoolTemplate", ".status.capacity{}"),
    ("DevMachinePoolTemplate", ".status"),
    ("DevMachinePoolTemplate", ".status.capacity"),
    ("DevMachinePoolTemplate", ".status.capacity{}"),
];

/// Subresources we serve that the CAPD 1.14 version lacks (`kind`, subresource): the status
/// holding the capacity above.
const ADDED_SUBRESOURCES: &[(&str, &str)] = &[
    ("DockerMachinePoolTemplate", "status"),
    ("DevMachinePoolTemplate", "status"),
];

/// The retired versions our CRDs listed (unserved, not stored) before they were removed, as CAPD
/// 1.13 removed them; the comparator recognises them, the generated CRDs must list none.
const RETIRED: &[&str] = &["v1alpha3", "v1alpha4"];

/// Differences from 1.14 that the API commits of this round remove, one kind of change at a
/// time (`kind`, start of the problem after the kind). Empty once they are all in.
const PENDING: &[(&str, &str)] = &[("DevMachine", ".status.backend")];

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

/// Compares a whole CRD; returns the problems and the [`RETIRED`] versions ours still lists.
/// Of a version CAPD lists but does not serve, only the flags are compared (its schema describes
/// objects nobody can read or write).
fn compare_crd(reference: &Value, ours: &Value) -> (Vec<String>, Vec<String>) {
    let kind = reference
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut problems = Vec::new();
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
            Some(mine) => problems.extend(compare_flags(kind, &theirs, mine)),
            None => problems.push(format!("{kind} {name}: version missing in ours")),
        }
    }
    let mut retired = Vec::new();
    for mine in &our_versions {
        let name = mine["name"].as_str().unwrap_or_default();
        if versions(reference)
            .iter()
            .any(|v| v["name"] == mine["name"])
        {
            continue;
        }
        let listed_only =
            mine["served"] != Value::Bool(true) && mine["storage"] != Value::Bool(true);
        if RETIRED.contains(&name) && listed_only {
            retired.push(format!("{kind} {name}"));
        } else {
            problems.push(format!("{kind} {name}: version not in CAPD"));
        }
    }
    problems.retain(|p| {
        !PENDING
            .iter()
            .any(|(k, rest)| *k == kind && p.starts_with(&format!("{kind} {rest}")))
    });
    (problems, retired)
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
fn generated_crds_match_capd_release_1_14() {
    let dir = Path::new(REFERENCE);
    if !dir.is_dir() {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return;
    }
    let ours = our_crds();
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    let mut retired = Vec::new();
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
        let (p, r) = compare_crd(&reference, mine);
        problems.extend(p);
        retired.extend(r);
        compared.push(kind);
    }
    println!("compared: {}", compared.join(", "));
    // CAPD 1.13 removed them, and so did we: the comparator still recognises them (an old CRD
    // of ours), but the generated CRDs list none.
    assert!(
        retired.is_empty(),
        "retired versions still listed in ours: {retired:?}"
    );
    for s in &skipped {
        println!("skipped: {s}");
    }
    assert!(
        compared.len() == ours.len(),
        "some of our kinds have no reference CRD: ours {:?}, compared {compared:?}",
        ours.keys()
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
    let v1beta1 = altered["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v["name"] == "v1beta1")
        .unwrap();
    *altered
        .pointer_mut(&format!(
            "/spec/versions/{v1beta1}/additionalPrinterColumns/0/jsonPath"
        ))
        .unwrap() = Value::from(".status.ready");
    let (problems, _) = compare_crd(&reference, &altered);
    assert!(
        problems.iter().any(|p| p.contains("printer columns")),
        "{problems:?}"
    );
}

#[test]
fn comparator_allows_only_the_retired_versions_and_only_unserved() {
    let Some((reference, ours, retired)) = machine_baseline() else {
        return;
    };
    // With or without v1alpha3/v1alpha4 (removed by the CRD migration work), nothing else.
    for version in &retired {
        assert!(
            ["DockerMachine v1alpha3", "DockerMachine v1alpha4"].contains(&version.as_str()),
            "{retired:?}"
        );
    }
    let listed = |name: &str, served: bool| {
        serde_json::json!({"name": name, "served": served, "storage": false, "deprecated": true,
            "schema": {"openAPIV3Schema": {"type": "object"}}})
    };
    let with = |version: Value| {
        let mut altered = ours.clone();
        let versions = altered["spec"]["versions"].as_array_mut().unwrap();
        versions.retain(|v| v["name"] != version["name"]);
        versions.push(version);
        compare_crd(&reference, &altered)
    };
    let (problems, retired) = with(listed("v1alpha4", false));
    assert!(problems.is_empty(), "{problems:?}");
    assert!(retired.contains(&"DockerMachine v1alpha4".to_string()));
    assert_eq!(
        with(listed("v1alpha4", true)).0,
        ["DockerMachine v1alpha4: version not in CAPD"],
        "served"
    );
    assert_eq!(
        with(listed("v1alpha2", false)).0,
        ["DockerMachine v1alpha2: version not in CAPD"],
        "another version"
    );

    // A version of CAPD's missing in ours, or with other flags.
    let mut altered = ours.clone();
    altered["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .retain(|v| v["name"] != "v1beta1");
    assert_eq!(
        compare_crd(&reference, &altered).0,
        ["DockerMachine v1beta1: version missing in ours"]
    );
    let mut altered = ours;
    for version in altered["spec"]["versions"].as_array_mut().unwrap() {
        if version["name"] == "v1beta2" {
            version.as_object_mut().unwrap().remove("deprecated");
        }
    }
    assert_eq!(
        compare_crd(&reference, &altered).0,
        ["DockerMachine v1beta2: deprecated is true in CAPD but absent in ours"]
    );
}

#[test]
fn the_pool_templates_add_exactly_their_capacity_status() {
    for (kind, plural) in [
        ("DevMachinePoolTemplate", "devmachinepooltemplates"),
        ("DockerMachinePoolTemplate", "dockermachinepooltemplates"),
    ] {
        let Some(reference) = reference_crd(plural) else {
            println!("SKIPPED: reference CRDs not found at {REFERENCE}");
            return;
        };
        let ours = our_crds()[kind].clone();
        let (problems, _) = compare_crd(&reference, &ours);
        assert!(problems.is_empty(), "baseline must match: {problems:?}");
        for version in ours["spec"]["versions"].as_array().unwrap() {
            assert_eq!(version["subresources"], serde_json::json!({"status": {}}));
            let status =
                &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
            assert_eq!(
                status.as_object().unwrap().keys().collect::<Vec<_>>(),
                ["capacity"],
                "{kind} {}",
                version["name"]
            );
        }
    }
    let Some(reference) = reference_crd("dockermachinepooltemplates") else {
        return;
    };
    let ours = our_crds()["DockerMachinePoolTemplate"].clone();

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
        ("DevMachinePool", "devmachinepools"),
        ("DevMachinePoolTemplate", "devmachinepooltemplates"),
    ] {
        let Some(reference) = reference_crd(plural) else {
            println!("SKIPPED: reference CRDs not found at {REFERENCE}");
            return;
        };
        let (problems, retired) = compare_crd(&reference, &ours[kind]);
        assert!(problems.is_empty(), "{kind}: {problems:?}");
        // CAPD introduced the Dev kinds in v1beta1 or later: no v1alpha3/v1alpha4.
        assert!(retired.is_empty(), "{kind}: {retired:?}");
        let versions: Vec<(&str, bool)> = ours[kind]["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["name"].as_str().unwrap(), v["storage"] == true))
            .collect();
        let expected: &[(&str, bool)] = if kind.starts_with("DevMachinePool") {
            &[("v1beta2", true)]
        } else {
            &[("v1beta1", false), ("v1beta2", true)]
        };
        assert_eq!(versions, expected, "{kind}");
    }

    // DevMachine adds status.failureDomain in v1beta2 only, as DockerMachine does.
    let machine = &ours["DevMachine"]["spec"]["versions"];
    let status = |i: usize| {
        machine[i]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"].clone()
    };
    assert!(status(0).get("failureDomain").is_none(), "v1beta1");
    assert_eq!(status(1)["failureDomain"]["type"], "string", "v1beta2");
}

/// Per version (ours without the [`RETIRED`] ones): name, served, storage, deprecated.
fn version_flags(crd: &Value) -> Vec<(String, bool, bool, bool)> {
    let flag = |v: &Value, key: &str| v.get(key) == Some(&Value::Bool(true));
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .zip(crd["spec"]["versions"].as_array().unwrap())
        .filter(|(name, v)| !RETIRED.contains(&name.as_str()) || flag(v, "served"))
        .map(|(name, v)| {
            (
                name,
                flag(v, "served"),
                flag(v, "storage"),
                flag(v, "deprecated"),
            )
        })
        .collect()
}

/// Every schema path ending in `.bootstrapped`, per served version.
fn bootstrapped_paths(crd: &Value) -> Vec<(String, Vec<String>)> {
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["served"] == Value::Bool(true))
        .map(|v| {
            let mut flat = BTreeMap::new();
            flatten(&v["schema"]["openAPIV3Schema"], "", &mut flat);
            let paths = flat
                .into_keys()
                .filter(|p| p.ends_with(".bootstrapped"))
                .collect();
            (v["name"].as_str().unwrap().to_string(), paths)
        })
        .collect()
}

/// The "done when", said directly: each of CAPD 1.14's twelve kinds has ours, with the
/// same versions and the same served, storage and deprecation flags (the Docker kinds deprecated
/// in every version; no `deprecationWarning`, so the API server's default text), and
/// `bootstrapped` only where 1.14 kept it (a DockerMachinePool's `status.instances[]`).
#[test]
fn each_kind_has_capd_1_14_versions_deprecations_and_bootstrapped() {
    let dir = Path::new(REFERENCE);
    if !dir.is_dir() {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return;
    }
    let ours = our_crds();
    let mut kinds = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let reference: Value = serde_saphyr::from_str(&text).unwrap();
        let kind = reference["spec"]["names"]["kind"].as_str().unwrap();
        let mine = &ours[kind];
        assert_eq!(version_flags(mine), version_flags(&reference), "{kind}");
        assert_eq!(
            bootstrapped_paths(mine),
            bootstrapped_paths(&reference),
            "{kind}: bootstrapped"
        );
        for version in mine["spec"]["versions"].as_array().unwrap() {
            assert!(version.get("deprecationWarning").is_none(), "{kind}");
        }
        if kind.starts_with("Docker") {
            assert!(
                version_flags(mine)
                    .iter()
                    .all(|(_, _, _, deprecated)| *deprecated),
                "{kind}: every version deprecated"
            );
        }
        kinds += 1;
    }
    assert_eq!(kinds, 12, "CAPD 1.14 has twelve kinds");
}
