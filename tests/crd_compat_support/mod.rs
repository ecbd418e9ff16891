//! The CRD comparator of `tests/crd_compat.rs`: flattens schemas into paths and compares them,
//! the version flags, subresources and printer columns of our CRDs with CAPD's.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Schema keywords compared between the reference and ours. Descriptions are ours to write.
pub const COMPARED_KEYWORDS: &[&str] = &[
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
pub const DELIBERATE: &[(&str, &str, &str)] = &[
    // The API server fills `spec: {}` when it is left out, so every stored object decodes.
    ("DockerCluster", ".spec", "default"),
    ("DockerMachine", ".spec", "default"),
    ("DockerMachinePool", ".spec", "default"),
    ("DevMachinePool", ".spec", "default"),
];

/// Fields we serve that the CAPD 1.14 schema lacks, with the reason (`kind`, `path`).
pub const ADDED: &[(&str, &str)] = &[
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
pub const ADDED_SUBRESOURCES: &[(&str, &str)] = &[
    ("DockerMachinePoolTemplate", "status"),
    ("DevMachinePoolTemplate", "status"),
];

/// The retired versions our older CRDs listed (unserved, not stored) before they were removed, as
/// CAPD 1.13 removed them: recognised by the comparator, absent from the generated CRDs (checked
/// in `tests/crd_compat.rs`). Any other extra version is a difference.
pub const RETIRED: &[&str] = &["v1alpha3", "v1alpha4"];

/// Flattens a schema into `path -> compared keywords`, with `required` sorted.
pub fn flatten(schema: &Value, path: &str, out: &mut BTreeMap<String, BTreeMap<String, Value>>) {
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
pub fn normalise(value: &Value) -> Value {
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
pub fn compare_schemas(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
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

pub fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".into(), Value::to_string)
}

/// Printer columns without their descriptions (those are ours to write).
pub fn columns(version: &Value) -> Vec<Value> {
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
pub fn compare_flags(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
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
pub fn compare_version(kind: &str, reference: &Value, ours: &Value) -> Vec<String> {
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
pub fn compare_crd(reference: &Value, ours: &Value) -> (Vec<String>, Vec<String>) {
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
    (problems, retired)
}

pub fn our_crds() -> BTreeMap<String, Value> {
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
