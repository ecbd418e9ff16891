//! The ClusterClass quick-start-docker (quick-start on the Docker* kinds; quick-start on the Dev*
//! kinds is the same class, `dev_tests.rs`): references, variables and patches, and what its
//! patches make of its templates for the development-docker flavor.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

const CLUSTERCLASS: &str = "clusterclass-quick-start-docker.yaml";

#[test]
fn the_development_variables_satisfy_the_quick_start_class() {
    let objects = generate("development-docker", &demo());
    let class = find(&objects, "ClusterClass", "quick-start-docker");
    let cluster = find(&objects, "Cluster", "demo");
    let set = cluster["spec"]["topology"]["variables"].as_array().unwrap();
    assert_eq!(
        set.len(),
        4,
        "imageRepository, etcdImageTag, coreDNSImageTag, podSecurityStandard"
    );
    let problems = refs::variable_problems(class, set);
    assert!(problems.is_empty(), "{problems:?}");

    // Each definition's default and example are valid values of its own schema.
    for def in class["spec"]["variables"].as_array().unwrap() {
        let schema = &def["schema"]["openAPIV3Schema"];
        for key in ["default", "example"] {
            if let Some(value) = schema.get(key) {
                let found = schema::validate_value(value, schema, key);
                assert!(found.is_empty(), "{}: {found:?}", str_at(def, "/name"));
            }
        }
        for (property, sub) in schema["properties"].as_object().into_iter().flatten() {
            if let Some(value) = sub.get("default") {
                let found = schema::validate_value(value, sub, property);
                assert!(
                    found.is_empty(),
                    "{}.{property}: {found:?}",
                    str_at(def, "/name")
                );
            }
        }
    }

    // The same check rejects what Cluster API would reject.
    let mut wrong = set.clone();
    wrong[3]["value"]["enforce"] = json!("strict");
    wrong[0]["value"] = json!(5);
    wrong.push(json!({"name": "lbImageRepository", "value": "kindest"}));
    let found: Vec<String> = refs::variable_problems(class, &wrong)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with("spec.topology.variables[0].value: Invalid value: \"integer\"")
            && found[0].contains("must be of type string"),
        "{found:#?}"
    );
    assert!(
        found[1]
            .starts_with("spec.topology.variables[3].value.enforce: Unsupported value: \"strict\""),
        "{found:#?}"
    );
    assert!(found[2].contains("\"lbImageRepository\" is not defined"));
    let mut missing = class.clone();
    missing["spec"]["variables"][0]["schema"]["openAPIV3Schema"]
        .as_object_mut()
        .unwrap()
        .remove("default");
    let found = refs::variable_problems(&missing, &set[1..]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .message
            .contains("required variable \"imageRepository\" is not set")
    );
}

#[test]
fn quick_start_patches_select_its_templates_and_write_existing_fields() {
    let class_objects = render(CLUSTERCLASS, &demo());
    let class = find(&class_objects, "ClusterClass", "quick-start-docker");
    let patches: Vec<&str> = class["spec"]["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| str_at(p, "/name"))
        .collect();
    assert_eq!(
        patches,
        [
            "imageRepository",
            "etcdImageTag",
            "coreDNSImageTag",
            "customImage",
            "podSecurityStandard"
        ]
    );
    assert_clean("ClusterClass references", &refs::check(&class_objects));
    if skip_capi("quick_start_patches_select_its_templates_and_write_existing_fields") {
        return;
    }
    assert_clean("patch paths", &refs::patch_path_problems(class, crds()));

    let mut broken = class.clone();
    let custom_image = &mut broken["spec"]["patches"][3]["definitions"][0];
    custom_image["jsonPatches"][0]["path"] = json!("/spec/template/spec/customImag");
    custom_image["selector"]["apiVersion"] = json!("infrastructure.cluster.x-k8s.io/v1beta1");
    broken["spec"]["patches"][0]["enabledIf"] = json!("{{ ne .imageRepo \"\" }}");
    let pss = &mut broken["spec"]["patches"][4]["definitions"][0]["jsonPatches"][1];
    pss["value"][0]["readOnly"] = json!("yes");
    let mut objects = class_objects.clone();
    objects[0] = broken.clone();
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("enabledIf reads undefined variable \"imageRepo\""));
    assert!(found[1].contains("selects no template of the class"));
    let found = refs::patch_path_problems(&broken, crds());
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("no \"customImag\""), "{found:?}");
    assert!(
        found[1].contains("extraVolumes[0].readOnly in body must be of type boolean"),
        "{found:?}"
    );
}

#[test]
fn broken_references_are_reported() {
    let plain = render("cluster-template.yaml", &demo());
    let mut objects = plain.clone();
    objects[0]["spec"]["infrastructureRef"]["name"] = json!("other");
    objects[2]["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["apiGroup"] =
        json!("infrastructure.example.com");
    objects[4]["spec"]["clusterName"] = json!("someone-else");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("Cluster demo") && found[0].contains("DockerCluster \"other\""));
    assert!(
        found[1].starts_with("KubeadmControlPlane")
            && found[1].contains("infrastructure.example.com")
    );
    assert!(found[2].starts_with("MachineDeployment") && found[2].contains("someone-else"));

    let dev = generate("development-docker", &demo());
    let mut objects = dev.clone();
    let cluster = objects.iter_mut().find(|o| o["kind"] == "Cluster").unwrap();
    cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["class"] = json!("big-worker");
    let class = objects
        .iter_mut()
        .find(|o| o["kind"] == "ClusterClass")
        .unwrap();
    class["spec"]["controlPlane"]["templateRef"]["name"] = json!("quick-start-docker-cp");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("uses class \"big-worker\""));
    assert!(found[1].contains("KubeadmControlPlaneTemplate \"quick-start-docker-cp\""));

    let mut objects = dev;
    objects.retain(|o| o["kind"] != "ClusterClass");
    let found = refs::check(&objects);
    assert!(
        found.len() == 1 && found[0].contains("no ClusterClass \"quick-start-docker\""),
        "{found:?}"
    );
}

/// The quick-start templates patched for `flavor` rendered with `values`, after `edit` changed the
/// generated Cluster.
pub(super) fn patched(
    flavor: &str,
    values: &BTreeMap<String, String>,
    edit: impl FnOnce(&mut Value),
) -> Vec<patches::Patched> {
    patched_objects(generate(flavor, values), values, edit)
}

/// The templates of the class of the Cluster among `objects` patched for it, after `edit` changed
/// the Cluster.
pub(super) fn patched_objects(
    mut objects: Vec<Value>,
    values: &BTreeMap<String, String>,
    edit: impl FnOnce(&mut Value),
) -> Vec<patches::Patched> {
    let cluster = objects.iter_mut().find(|o| o["kind"] == "Cluster").unwrap();
    edit(cluster);
    let cluster = find(&objects, "Cluster", &values["CLUSTER_NAME"]);
    let class = find(
        &objects,
        "ClusterClass",
        str_at(cluster, "/spec/topology/classRef/name"),
    );
    patches::apply(class, cluster, &objects).unwrap_or_else(|e| panic!("patching failed: {e}"))
}

/// The role and kind of each patched template, in the class's order.
pub(super) fn roles(patched: &[patches::Patched]) -> Vec<(&str, &str)> {
    patched
        .iter()
        .map(|p| (p.role.as_str(), str_at(&p.object, "/kind")))
        .collect()
}

pub(super) fn of<'a>(patched: &'a [patches::Patched], role: &str, kind: &str) -> &'a Value {
    &patched
        .iter()
        .find(|p| p.role == role && p.object["kind"] == kind)
        .unwrap_or_else(|| panic!("no patched {kind} for {role}"))
        .object
}

pub(super) fn assert_valid(patched: &[patches::Patched], what: &str) {
    let objects: Vec<Value> = patched.iter().map(|p| p.object.clone()).collect();
    assert_clean(what, &problems_of(what, &objects).0);
}

#[test]
fn the_quick_start_patches_give_valid_templates_on_the_kind_image_of_the_version() {
    let default = patched("development-docker", &demo(), |_| {});
    assert_eq!(
        default.len(),
        5,
        "cluster, control plane (2), one worker class (2)"
    );
    let md = default
        .iter()
        .find(|p| p.role == "md:default-worker")
        .unwrap();
    assert_eq!(md.workers.as_deref(), Some("md-0"));
    for role in ["controlPlane", "md:default-worker"] {
        let machine = of(&default, role, "DockerMachineTemplate");
        assert_eq!(
            machine["spec"]["template"]["spec"]["customImage"], "kindest/node:v1.34.0",
            "{role}"
        );
    }
    let kcp =
        &of(&default, "controlPlane", "KubeadmControlPlaneTemplate")["spec"]["template"]["spec"];
    let cluster_configuration = &kcp["kubeadmConfigSpec"]["clusterConfiguration"];
    for unset in ["imageRepository", "etcd", "dns"] {
        assert!(
            cluster_configuration.get(unset).is_none(),
            "empty variables must leave {unset} out"
        );
    }
    assert_eq!(
        cluster_configuration["apiServer"]["extraArgs"],
        json!([{"name": "admission-control-config-file", "value": "/etc/kubernetes/kube-apiserver-admission-pss.yaml"}])
    );
    let file = &kcp["kubeadmConfigSpec"]["files"][0];
    assert_eq!(
        file["path"],
        "/etc/kubernetes/kube-apiserver-admission-pss.yaml"
    );
    let admission: Value = serde_saphyr::from_str(file["content"].as_str().unwrap()).unwrap();
    let pss = &admission["plugins"][0]["configuration"];
    assert_eq!(pss["apiVersion"], "pod-security.admission.config.k8s.io/v1");
    assert_eq!(pss["defaults"]["enforce"], "baseline");
    assert_eq!(pss["defaults"]["warn"], "restricted");
    assert_eq!(pss["exemptions"]["namespaces"], json!(["kube-system"]));
    if !skip_capi("the_quick_start_patches_give_valid_templates_on_the_kind_image_of_the_version") {
        assert_valid(&default, "patched for demo");
    }

    // Every variable set, an old version with build metadata, Pod Security off.
    let mut old = demo();
    old.insert("KUBERNETES_VERSION".into(), "v1.24.17+build.1".into());
    let custom = patched("development-docker", &old, |cluster| {
        let variables = &mut cluster["spec"]["topology"]["variables"];
        variables[0]["value"] = json!("registry.example.com/k8s");
        variables[1]["value"] = json!("3.5.15-0");
        variables[2]["value"] = json!("v1.11.3");
        variables[3]["value"] = json!({"enforce": "restricted"});
    });
    let machine = of(&custom, "controlPlane", "DockerMachineTemplate");
    assert_eq!(
        machine["spec"]["template"]["spec"]["customImage"],
        "kindest/node:v1.24.17_build.1"
    );
    let kcp =
        &of(&custom, "controlPlane", "KubeadmControlPlaneTemplate")["spec"]["template"]["spec"];
    let cluster_configuration = &kcp["kubeadmConfigSpec"]["clusterConfiguration"];
    assert_eq!(
        cluster_configuration["imageRepository"],
        "registry.example.com/k8s"
    );
    assert_eq!(
        cluster_configuration["etcd"]["local"]["imageTag"],
        "3.5.15-0"
    );
    assert_eq!(cluster_configuration["dns"]["imageTag"], "v1.11.3");
    let content = kcp["kubeadmConfigSpec"]["files"][0]["content"]
        .as_str()
        .unwrap();
    assert!(
        content.contains("pod-security.admission.config.k8s.io/v1beta1\n"),
        "{content}"
    );
    assert!(
        content.contains("enforce: \"restricted\""),
        "defaults fill the rest: {content}"
    );
    if !skip_capi("the_quick_start_patches_give_valid_templates_on_the_kind_image_of_the_version") {
        assert_valid(&custom, "patched with every variable set");
    }

    let mut off = demo();
    off.insert("POD_SECURITY_STANDARD_ENABLED".into(), "false".into());
    let off = patched("development-docker", &off, |_| {});
    let kcp = &of(&off, "controlPlane", "KubeadmControlPlaneTemplate")["spec"]["template"]["spec"];
    assert!(kcp["kubeadmConfigSpec"].get("files").is_none(), "{kcp}");
    assert!(
        kcp.pointer("/kubeadmConfigSpec/clusterConfiguration/apiServer/extraArgs")
            .is_none()
    );
}

#[test]
fn a_patch_that_cannot_apply_is_reported() {
    let mut objects = generate("development-docker", &demo());
    let class = objects
        .iter_mut()
        .find(|o| o["kind"] == "ClusterClass")
        .unwrap();
    class["spec"]["patches"][1]["definitions"][0]["jsonPatches"][0]["path"] =
        json!("/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/etcd/local/imageTag");
    let class = class.clone();
    let mut cluster = find(&objects, "Cluster", "demo").clone();
    cluster["spec"]["topology"]["variables"][1]["value"] = json!("3.6.4-0");
    let err = patches::apply(&class, &cluster, &objects)
        .err()
        .expect("the patch must fail");
    assert!(
        err.contains("patch \"etcdImageTag\"")
            && err.ends_with("/etcd/local/imageTag': path is invalid"),
        "{err}"
    );
}

/// Nested schemas of a variable (`properties`, `items`, `additionalProperties`), with their paths.
fn nested_schemas<'a>(schema: &'a Value, path: &str, out: &mut Vec<(String, &'a Value)>) {
    for (name, sub) in schema["properties"].as_object().into_iter().flatten() {
        out.push((format!("{path}.properties.{name}"), sub));
        nested_schemas(sub, &format!("{path}.properties.{name}"), out);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = schema.get(key).filter(|s| s.is_object()) {
            out.push((format!("{path}.{key}"), sub));
            nested_schemas(sub, &format!("{path}.{key}"), out);
        }
    }
}

/// Problems of the nested variable schemas against the shape the CRD gives the top-level one (the
/// CRD cannot recurse, so it keeps nested schemas as unknown fields).
fn nested_schema_problems(class: &Value) -> Vec<String> {
    let crd = crds()
        .schema("cluster.x-k8s.io/v1beta2", "ClusterClass")
        .unwrap();
    let meta = refs::schema_at(crd, "/spec/variables/0/schema/openAPIV3Schema").unwrap();
    let mut problems = Vec::new();
    for (i, def) in class["spec"]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let mut nested = Vec::new();
        let root = format!("spec.variables[{i}].schema.openAPIV3Schema");
        nested_schemas(&def["schema"]["openAPIV3Schema"], &root, &mut nested);
        for (path, sub) in nested {
            problems.extend(
                schema::validate_value(sub, meta, &path)
                    .iter()
                    .map(ToString::to_string),
            );
        }
    }
    problems
}

#[test]
fn nested_variable_schemas_use_only_known_keywords() {
    if skip_capi("nested_variable_schemas_use_only_known_keywords") {
        return;
    }
    let objects = render(CLUSTERCLASS, &demo());
    let class = find(&objects, "ClusterClass", "quick-start-docker");
    assert_clean("nested variable schemas", &nested_schema_problems(class));
    let mut typo = class.clone();
    let enforce =
        &mut typo["spec"]["variables"][3]["schema"]["openAPIV3Schema"]["properties"]["enforce"];
    let values = enforce.as_object_mut().unwrap().remove("enum").unwrap();
    enforce["enmu"] = values;
    let found = nested_schema_problems(&typo);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "spec.variables[3].schema.openAPIV3Schema.properties.enforce.enmu: unknown field"
        ),
        "{found:?}"
    );
}
