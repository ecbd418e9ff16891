//! Cluster templates (`templates/`): rendered with clusterctl's substitution rules, parsed, and
//! every object validated against its CRD schema (ours from `config/crd/bases/`, Cluster API's from
//! `../shared/reference/crds/capi-release-1.12/`, skipped with a message when absent), references
//! resolved, ClusterClass variables and patches checked, the book's variables and flavors tables
//! (`docs/src/clusterctl.md`) and the README's quick start kept in step.

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod templates_support;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use templates_support::envsubst::{self, SubstError};
use templates_support::*;

const CLUSTERCLASS: &str = "clusterclass-quick-start.yaml";
const DOCKER_CLUSTERCLASS: &str = "clusterclass-quick-start-docker.yaml";

#[test]
fn the_expected_templates_ship() {
    assert_eq!(
        template_files(),
        [
            "cluster-template-dev.yaml",
            "cluster-template-development-docker.yaml",
            "cluster-template-development-mp-docker.yaml",
            "cluster-template-development-mp.yaml",
            "cluster-template-development.yaml",
            "cluster-template-in-memory.yaml",
            "cluster-template.yaml",
            "clusterclass-in-memory.yaml",
            DOCKER_CLUSTERCLASS,
            CLUSTERCLASS
        ]
    );
}

#[test]
fn every_object_of_every_template_matches_its_crd_schema() {
    skip_capi("every_object_of_every_template_matches_its_crd_schema");
    let mut all = Vec::new();
    let (mut checked, mut skipped) = (0, 0);
    for file in template_files() {
        let objects = render(&file, &demo());
        assert!(!objects.is_empty(), "{file} has no objects");
        let (problems, left_out) = problems_of(&file, &objects);
        all.extend(problems);
        checked += objects.len() - left_out;
        skipped += left_out;
    }
    println!("validated {checked} objects, {skipped} left out for want of their CRDs");
    assert_clean("templates rendered for `demo`", &all);
    assert!(checked >= 5, "only {checked} objects validated");
}

#[test]
fn what_clusterctl_generates_for_each_flavor_is_valid_and_consistent() {
    skip_capi("what_clusterctl_generates_for_each_flavor_is_valid_and_consistent");
    for flavor in flavors() {
        let objects = generate(&flavor, &demo());
        let (mut problems, _) = problems_of(&flavor_file(&flavor), &objects);
        problems.extend(refs::check(&objects));
        assert_clean(&format!("flavor {flavor:?}"), &problems);
        let kinds: BTreeSet<&str> = objects.iter().map(|o| str_at(o, "/kind")).collect();
        assert!(
            kinds.contains("Cluster"),
            "flavor {flavor:?} has no Cluster"
        );
        for o in &objects {
            assert_eq!(
                str_at(o, "/metadata/namespace"),
                "default",
                "{}",
                describe(o)
            );
        }
    }
    let development = generate("development", &demo());
    let class = find(&development, "ClusterClass", "quick-start");
    assert_eq!(str_at(class, "/metadata/namespace"), "default");
}

#[test]
fn rendering_without_values_names_every_missing_variable() {
    let from_clusterctl: Vec<String> = {
        let mut names: Vec<String> = FROM_CLUSTERCTL.iter().map(|(n, _)| n.to_string()).collect();
        names.sort();
        names
    };
    for flavor in flavors() {
        let file = flavor_file(&flavor);
        let err = envsubst::render(&template_text(&file), &BTreeMap::new())
            .expect_err("rendering without values must fail");
        assert_eq!(err, SubstError::Missing(from_clusterctl.clone()), "{file}");
        assert!(
            err.to_string()
                .contains("[CLUSTER_NAME, CONTROL_PLANE_MACHINE_COUNT, KUBERNETES_VERSION"),
            "{err}"
        );
    }
    let only_version_missing: BTreeMap<String, String> = demo()
        .into_iter()
        .filter(|(k, _)| k != "KUBERNETES_VERSION")
        .collect();
    assert_eq!(
        envsubst::render(
            &template_text("cluster-template.yaml"),
            &only_version_missing
        ),
        Err(SubstError::Missing(vec!["KUBERNETES_VERSION".into()]))
    );
    // clusterctl renders a ClusterClass with the cluster's variables: it must need none.
    for file in template_files()
        .iter()
        .filter(|f| f.starts_with("clusterclass-"))
    {
        assert_eq!(
            envsubst::variables(&template_text(file)).unwrap(),
            [],
            "{file} must not use variables"
        );
    }
}

#[test]
fn defaults_apply_and_values_override_them() {
    for flavor in flavors() {
        let objects = render(&flavor_file(&flavor), &demo());
        let cluster = find(&objects, "Cluster", "demo");
        let network = &cluster["spec"]["clusterNetwork"];
        assert_eq!(network["pods"]["cidrBlocks"], json!(["192.168.0.0/16"]));
        assert_eq!(network["services"]["cidrBlocks"], json!(["10.128.0.0/12"]));
        assert_eq!(network["serviceDomain"], "cluster.local");
    }
    let dev = render("cluster-template-development.yaml", &demo());
    let topology = &find(&dev, "Cluster", "demo")["spec"]["topology"];
    assert_eq!(topology["version"], "v1.34.0");
    assert_eq!(topology["controlPlane"]["replicas"], 1);
    assert_eq!(topology["workers"]["machineDeployments"][0]["replicas"], 1);
    assert_eq!(topology["variables"][3]["value"]["enabled"], true);
    let pools = render("cluster-template-development-mp.yaml", &demo());
    let pool_topology = &find(&pools, "Cluster", "demo")["spec"]["topology"];
    assert_eq!(
        pool_topology["workers"],
        json!({"machinePools": [{"class": "default-worker", "name": "mp-0", "replicas": 1}]}),
        "the development flavor with a pool instead of a deployment"
    );
    for pointer in ["/version", "/controlPlane", "/variables", "/classRef"] {
        assert_eq!(pool_topology.pointer(pointer), topology.pointer(pointer));
    }

    let mut custom = demo();
    custom.extend(values(&[
        ("POD_CIDR", r#"["10.244.0.0/16", "fd00:10:244::/56"]"#),
        ("SERVICE_CIDR", r#"["10.96.0.0/16"]"#),
        ("SERVICE_DOMAIN", "k8s.test"),
        ("POD_SECURITY_STANDARD_ENABLED", "false"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "0"),
    ]));
    skip_capi("defaults_apply_and_values_override_them");
    for flavor in flavors() {
        let objects = generate(&flavor, &custom);
        let (problems, _) = problems_of(&flavor_file(&flavor), &objects);
        assert_clean(&format!("flavor {flavor:?} with custom values"), &problems);
        let network = &find(&objects, "Cluster", "demo")["spec"]["clusterNetwork"];
        assert_eq!(network["pods"]["cidrBlocks"][1], "fd00:10:244::/56");
        assert_eq!(network["services"]["cidrBlocks"], json!(["10.96.0.0/16"]));
        assert_eq!(network["serviceDomain"], "k8s.test");
    }
    let plain = render("cluster-template.yaml", &custom);
    assert_eq!(
        find(&plain, "KubeadmControlPlane", "demo-control-plane")["spec"]["replicas"],
        3
    );
    assert_eq!(
        find(&plain, "MachineDeployment", "demo-md-0")["spec"]["replicas"],
        0
    );
    let dev = render("cluster-template-development.yaml", &custom);
    let variables = &find(&dev, "Cluster", "demo")["spec"]["topology"]["variables"];
    assert_eq!(variables[3]["value"]["enabled"], false);
    let pools = render("cluster-template-development-mp.yaml", &custom);
    let topology = &find(&pools, "Cluster", "demo")["spec"]["topology"];
    assert_eq!(topology["workers"]["machinePools"][0]["replicas"], 0);
    assert_eq!(topology["variables"][3]["value"]["enabled"], false);
}

#[test]
fn templates_use_only_the_documented_variable_syntax() {
    let mut defaults: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
    for file in template_files() {
        let text = template_text(&file);
        for (at, _) in text.match_indices('$') {
            assert!(
                text[at..].starts_with("${"),
                "{file}: a `$` that is not `${{` (clusterctl would keep it, or read `$$` as `$`): {:.40}",
                &text[at..]
            );
        }
        for v in envsubst::variables(&text).unwrap_or_else(|e| panic!("{file}: {e}")) {
            let valid = v
                .name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            assert!(valid, "{file}: variable {} is not UPPER_SNAKE_CASE", v.name);
            if let Some(default) = &v.default {
                assert!(
                    !default.contains("${"),
                    "{file}: {} has a nested default",
                    v.name
                );
            }
            match defaults.get(&v.name) {
                Some((other, other_file)) => assert_eq!(
                    other, &v.default,
                    "{} has different defaults in {other_file} and {file}",
                    v.name
                ),
                None => {
                    defaults.insert(v.name.clone(), (v.default.clone(), file.clone()));
                }
            }
        }
        // Only `${VAR}` and `${VAR:=default}`: no `=`/`:-` forms, no legacy spaces.
        for expression in text.split("${").skip(1) {
            let inner = expression.split('}').next().unwrap_or("");
            let name_end = inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            let rest = name_end.map_or("", |e| &inner[e..]);
            assert!(
                rest.is_empty() || rest.starts_with(":="),
                "{file}: use ${{VAR}} or ${{VAR:=default}}, not ${{{inner}}}"
            );
        }
    }
}

#[test]
fn the_book_documents_every_template_variable() {
    let documented = readme::template_variables();
    let mut used: BTreeMap<String, (Option<String>, Vec<String>)> = BTreeMap::new();
    for file in template_files() {
        for v in envsubst::variables(&template_text(&file)).unwrap() {
            let entry = used.entry(v.name).or_insert((v.default, Vec::new()));
            entry.1.push(file.clone());
        }
    }
    for (name, (default, files)) in &used {
        let (documented_default, documented_files) = documented.get(name).unwrap_or_else(|| {
            panic!("{name} is used by {files:?} but not in {}", readme::CHAPTER)
        });
        let expected = match (default, FROM_CLUSTERCTL.iter().find(|(n, _)| n == name)) {
            (Some(d), _) => d.trim_matches('"').to_string(),
            (None, Some((_, from_clusterctl))) => from_clusterctl.to_string(),
            (None, None) => "(required)".to_string(),
        };
        assert_eq!(documented_default, &expected, "book's default of {name}");
        let listed: BTreeSet<&str> = documented_files
            .split(',')
            .map(|f| f.trim().trim_matches('`'))
            .collect();
        let files: BTreeSet<&str> = files.iter().map(String::as_str).collect();
        assert_eq!(listed, files, "book's templates column of {name}");
    }
    for name in documented.keys() {
        assert!(
            used.contains_key(name),
            "the book documents unused variable {name}"
        );
    }
}

#[test]
fn the_book_lists_every_flavor() {
    let listed = readme::flavors();
    let shipped: Vec<(String, String)> = flavors()
        .into_iter()
        .map(|f| (f.clone(), flavor_file(&f)))
        .collect();
    let sorted = |mut v: Vec<(String, String)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(listed), sorted(shipped));
}

#[test]
fn the_readme_quick_start_generates_a_valid_cluster() {
    let (flavor, v) = readme::quick_start();
    assert!(
        flavors().contains(&flavor),
        "the README uses unknown flavor {flavor:?}"
    );
    assert!(v["KUBERNETES_VERSION"].starts_with('v'), "{v:?}");
    let objects = generate(&flavor, &v);
    let name = &v["CLUSTER_NAME"];
    let cluster = find(&objects, "Cluster", name);
    let replicas = |pointer: &str| cluster.pointer(pointer).map(Value::to_string);
    assert_eq!(
        replicas("/spec/topology/controlPlane/replicas"),
        Some(v["CONTROL_PLANE_MACHINE_COUNT"].clone())
    );
    assert_eq!(
        replicas("/spec/topology/workers/machineDeployments/0/replicas"),
        Some(v["WORKER_MACHINE_COUNT"].clone())
    );
    let mut problems = refs::check(&objects);
    if !skip_capi("the_readme_quick_start_generates_a_valid_cluster") {
        problems.extend(problems_of("README quick start", &objects).0);
    }
    assert_clean("the README's quick start", &problems);
}

/// Problems of one rendered object after a text edit of the rendered template.
fn problems_after_edit(file: &str, from: &str, to: &str, kind: &str, name: &str) -> Vec<String> {
    let text = envsubst::render(&template_text(file), &demo()).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    let objects = parse_documents(&text.replacen(from, to, 1), file);
    let object = find(&objects, kind, name);
    crds()
        .validate(object)
        .expect("the kind's CRD is at hand")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn mistakes_in_a_rendered_template_are_reported() {
    let misspelled = problems_after_edit(
        "cluster-template.yaml",
        "extraMounts:",
        "extraMount:",
        "DockerMachineTemplate",
        "demo-control-plane",
    );
    assert_eq!(
        misspelled,
        ["spec.template.spec.extraMount: unknown field \"spec.template.spec.extraMount\""]
    );
    let wrong_type = problems_after_edit(
        "cluster-template.yaml",
        "hostPath: \"/var/run/docker.sock\"",
        "hostPath: 42",
        "DockerMachineTemplate",
        "demo-control-plane",
    );
    assert_eq!(
        wrong_type,
        [
            "spec.template.spec.extraMounts[0].hostPath: Invalid value: \"integer\": \
             spec.template.spec.extraMounts[0].hostPath in body must be of type string: \"integer\""
        ]
    );
    let missing = problems_after_edit(
        DOCKER_CLUSTERCLASS,
        "  template:\n    spec: {}",
        "  templat:\n    spec: {}",
        "DockerClusterTemplate",
        "quick-start-docker-cluster",
    );
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert_eq!(missing[0], "spec.template: Required value");
    assert!(missing[1].starts_with("spec.templat: unknown field"));
    // An instance setting written where a DockerMachineTemplate has it, not under the pool's
    // `template`; a Docker setting outside a DevMachineTemplate's or a DevMachinePoolTemplate's
    // `backend.docker`.
    for (file, from, to, kind, name) in [
        (
            DOCKER_CLUSTERCLASS,
            "      template: {}",
            "      customImage: kindest/node:v1.34.0",
            "DockerMachinePoolTemplate",
            "quick-start-docker-default-worker-machinepooltemplate",
        ),
        (
            CLUSTERCLASS,
            "      backend:\n        # The settings of every instance",
            "      customImage: kindest/node:v1.34.0\n      backend:\n        # The settings of every instance",
            "DevMachinePoolTemplate",
            "quick-start-default-worker-machinepooltemplate",
        ),
        (
            "cluster-template-dev.yaml",
            "      backend:\n        docker:\n          # The image",
            "      customImage: kindest/node:v1.34.0\n      backend:\n        docker:\n          # The image",
            "DevMachineTemplate",
            "demo-control-plane",
        ),
    ] {
        let misplaced = problems_after_edit(file, from, to, kind, name);
        assert_eq!(misplaced.len(), 1, "{kind}: {misplaced:?}");
        assert!(
            misplaced[0].starts_with("spec.template.spec.customImage: unknown field"),
            "{kind}: {misplaced:?}"
        );
    }

    if skip_capi("mistakes_in_a_rendered_template_are_reported") {
        return;
    }
    let ref_typo = problems_after_edit(
        "cluster-template.yaml",
        "controlPlaneRef:",
        "controlplaneRef:",
        "Cluster",
        "demo",
    );
    assert_eq!(ref_typo.len(), 1, "{ref_typo:?}");
    assert!(ref_typo[0].starts_with("spec.controlplaneRef: unknown field"));
    let mut text_replicas = demo();
    text_replicas.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "one".into());
    let objects = render("cluster-template.yaml", &text_replicas);
    let kcp = find(&objects, "KubeadmControlPlane", "demo-control-plane");
    let found: Vec<String> = crds()
        .validate(kcp)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type \
             integer: \"string\""
        ]
    );
    let no_version = problems_after_edit(
        "cluster-template.yaml",
        "  version: \"v1.34.0\"\n  machineTemplate:",
        "  machineTemplate:",
        "KubeadmControlPlane",
        "demo-control-plane",
    );
    assert_eq!(no_version, ["spec.version: Required value"]);
    let duplicate_arg = problems_after_edit(
        "cluster-template.yaml",
        "        kubeletExtraArgs:\n",
        "        kubeletExtraArgs:\n          - name: eviction-hard\n            value: \"\"\n",
        "KubeadmControlPlane",
        "demo-control-plane",
    );
    assert_eq!(duplicate_arg.len(), 1, "{duplicate_arg:?}");
    assert!(
        duplicate_arg[0].contains("kubeletExtraArgs name must be unique"),
        "{duplicate_arg:?}"
    );
}

#[test]
fn the_local_clusterctl_repository_carries_the_templates() {
    let out = tempfile::tempdir().expect("create a temporary output folder");
    let status = std::process::Command::new("bash")
        .arg(repo_root().join("hack/build-components.sh"))
        .arg(out.path())
        .output()
        .expect("run bash hack/build-components.sh");
    assert!(
        status.status.success(),
        "hack/build-components.sh failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let settings = std::fs::read_to_string(repo_root().join("clusterctl-settings.json")).unwrap();
    let settings: Value = serde_json::from_str(&settings).unwrap();
    let repository = out
        .path()
        .join("repository")
        .join(str_at(&settings, "/name"))
        .join(str_at(&settings, "/config/nextVersion"));
    for file in template_files() {
        let shipped = std::fs::read_to_string(repository.join(&file))
            .unwrap_or_else(|e| panic!("{file} is not in {}: {e}", repository.display()));
        assert_eq!(
            shipped,
            template_text(&file),
            "{file} differs in the repository"
        );
    }
}
