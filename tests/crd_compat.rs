//! Compatibility of our generated CRDs with CAPD's release-1.14 CRDs (the twelve kinds of Cluster
//! API 1.14): for every kind and served version of the reference, every schema path exists in
//! ours with the same type and constraints (so `bootstrapped` is where 1.14 has it and nowhere
//! else), and names, scope, subresources, printer columns and the served, storage and
//! deprecation flags agree. The generated CRDs list no retired `v1alpha3`/`v1alpha4` (CAPD 1.13
//! removed them; the comparator still recognises them, unserved, as in our older CRDs).
//!
//! Reads `../shared/reference/crds/capd-release-1.14/`; skips with a message when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod crd_compat_support;

use std::collections::BTreeMap;
use std::path::Path;

use crd_compat_support::*;
use serde_json::Value;

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capd-release-1.14"
);

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
