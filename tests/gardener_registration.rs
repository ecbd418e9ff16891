//! Registration of the extension with Gardener: `hack/gardener-registration.sh` renders a
//! `ControllerRegistration` (kind `Infrastructure`, type `docker`) and a `ControllerDeployment`
//! whose Helm chart installs the standalone overlay. The rendered objects are accepted unchanged
//! by an API server serving Gardener's types from the test-only schemas under `e2e/gardener/`
//! (nothing pruned, nothing refused), and the chart, unpacked and rendered as gardenlet's Helm
//! would, holds the standalone overlay's objects in the release namespace. What gardenlet does
//! with them is checked against its source (gardener/gardener): the network policies it puts in
//! the extension namespace let the manager's pod out (`pkg/controller/networkpolicy`), and the
//! registration's Pod Security annotation becomes the namespace's level
//! (`pkg/gardenlet/controller/controllerinstallation`).
//!
//! Needs `kubectl` (its built-in kustomize), `tar`, `gzip` and `base64`, like the script.

// Test crate: a failed expectation anywhere is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod gardener_support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gardener_support::{Env, install_crd};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const REGISTRATION_CRD: &str = include_str!("../e2e/gardener/controllerregistrations.crd.yaml");
const DEPLOYMENT_CRD: &str = include_str!("../e2e/gardener/controllerdeployments.crd.yaml");

/// The namespace gardenlet would install the chart into.
const RELEASE_NAMESPACE: &str = "extension-provider-docker-x8k2p";

const IMAGE: &str = "registry.example.org/capd-rs-manager:v0.1.0";

/// The objects the script renders with `--image IMAGE` and `args`.
fn render(args: &[&str]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/gardener-registration.sh");
    let output = Command::new("bash")
        .arg(script)
        .args(["--image", IMAGE])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("bash runs the script: {e}"));
    assert!(
        output.status.success(),
        "the script fails: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("multi-document YAML");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

/// The files of a tar archive (ustar headers, regular files only).
fn untar(archive: &[u8]) -> BTreeMap<String, String> {
    let field = |header: &[u8], from: usize, to: usize| {
        let raw = &header[from..to];
        let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        String::from_utf8(raw[..end].to_vec()).unwrap()
    };
    let mut files = BTreeMap::new();
    let mut offset = 0;
    while offset + 512 <= archive.len() {
        let header = &archive[offset..offset + 512];
        if header.iter().all(|b| *b == 0) {
            break;
        }
        let name = field(header, 0, 100);
        let prefix = field(header, 345, 500);
        let size = usize::from_str_radix(field(header, 124, 136).trim(), 8).unwrap();
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let body = &archive[offset + 512..offset + 512 + size];
        if header[156] == b'0' || header[156] == 0 {
            files.insert(path, String::from_utf8(body.to_vec()).unwrap());
        }
        offset += 512 + size.div_ceil(512) * 512;
    }
    files
}

/// Creates `object` on the server as its API group and version, and returns what is stored.
async fn create(env: &Env, object: &Value, plural: &str) -> Value {
    let (group, version) = object["apiVersion"]
        .as_str()
        .unwrap()
        .split_once('/')
        .unwrap();
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &resource);
    let typed: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let stored = api
        .create(&PostParams::default(), &typed)
        .await
        .unwrap_or_else(|e| panic!("the API server refuses the {}: {e}", object["kind"]));
    serde_json::to_value(stored).unwrap()
}

/// `value` without what the server adds to `metadata`.
fn content(value: &Value) -> Value {
    let mut value = value.clone();
    value["metadata"] = json!({
        "name": value["metadata"]["name"],
        "annotations": value["metadata"]["annotations"],
    });
    value
}

/// The files of the chart in a rendered ControllerDeployment.
fn chart_files(deployment: &Value) -> BTreeMap<String, String> {
    let gzipped = STANDARD
        .decode(deployment["helm"]["rawChart"].as_str().unwrap())
        .expect("rawChart is base64");
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(gzipped.as_slice())
        .read_to_end(&mut tar)
        .expect("rawChart is gzipped");
    untar(&tar)
}

/// The chart's manifests as Helm renders them for gardenlet: the chart's `values.yaml` overlaid
/// with the ControllerDeployment's `helm.values`, in the release namespace. There is no Helm
/// here: this evaluates the few template constructs the script writes, and fails on any other.
fn install(deployment: &Value) -> Vec<Value> {
    let files = chart_files(deployment);
    let mut values: Value = serde_saphyr::from_str(&files["provider-docker/values.yaml"]).unwrap();
    for (key, value) in deployment["helm"]["values"].as_object().unwrap() {
        values[key] = value.clone();
    }
    let value = |key: &str| {
        values[key]
            .as_str()
            .unwrap_or_else(|| panic!("no string value {key}: {values}"))
            .to_string()
    };
    let condition = |text: &str| match text {
        r#"regexMatch "^(tcp|https?)://" .Values.dockerHost"# => ["tcp://", "http://", "https://"]
            .iter()
            .any(|scheme| value("dockerHost").starts_with(scheme)),
        r#"eq .Values.dockerHostNetwork "public""# => value("dockerHostNetwork") == "public",
        other => panic!("a template condition this test does not know: {other}"),
    };
    // Whether each enclosing `if` branch is taken.
    let mut branches: Vec<bool> = Vec::new();
    let mut rendered = String::new();
    for line in files["provider-docker/templates/extension.yaml"].lines() {
        if let Some(text) = line
            .strip_prefix("{{- if ")
            .and_then(|l| l.strip_suffix(" }}"))
        {
            branches.push(condition(text));
        } else if line == "{{- else }}" {
            let taken = branches.last_mut().expect("else inside an if");
            *taken = !*taken;
        } else if line == "{{- end }}" {
            branches.pop().expect("end of an if");
        } else if branches.iter().all(|taken| *taken) {
            let line = line
                .replace("{{ .Release.Namespace }}", RELEASE_NAMESPACE)
                .replace("{{ .Values.image }}", &value("image"))
                .replace(
                    "{{ .Values.dockerHost | quote }}",
                    &serde_json::to_string(&value("dockerHost")).unwrap(),
                );
            assert!(!line.contains("{{"), "an unknown template: {line}");
            rendered.push_str(&line);
            rendered.push('\n');
        }
    }
    assert!(branches.is_empty(), "every if ends");
    let manifests: Vec<Value> = serde_saphyr::from_multiple(&rendered).unwrap();
    manifests.into_iter().filter(|m| !m.is_null()).collect()
}

/// The manager's pod template in the installed chart.
fn manager_pod(manifests: &[Value]) -> Value {
    manifests
        .iter()
        .find(|m| m["kind"] == "Deployment")
        .expect("the manager Deployment")["spec"]["template"]
        .clone()
}

/// The network policies gardenlet puts in every namespace labelled `gardener.cloud/role:
/// extension` (gardener/gardener `pkg/controller/networkpolicy/reconciler.go`,
/// `networkPolicyConfigs`): `deny-all` selects every pod; each other one lets out the pods
/// labelled `<label>: allowed`.
const GARDENLET_EGRESS_POLICIES: [(&str, &str); 5] = [
    (
        "allow-to-runtime-apiserver",
        "networking.gardener.cloud/to-runtime-apiserver",
    ),
    ("allow-to-dns", "networking.gardener.cloud/to-dns"),
    (
        "allow-to-private-networks",
        "networking.gardener.cloud/to-private-networks",
    ),
    (
        "allow-to-public-networks",
        "networking.gardener.cloud/to-public-networks",
    ),
    (
        "allow-to-blocked-cidrs",
        "networking.gardener.cloud/to-blocked-cidrs",
    ),
];

/// The gardenlet policies that let the pod with `labels` out of the extension namespace.
fn egress_allowed_by(labels: &Value) -> Vec<&'static str> {
    GARDENLET_EGRESS_POLICIES
        .iter()
        .filter(|(_, label)| labels[*label] == "allowed")
        .map(|(policy, _)| *policy)
        .collect()
}

#[tokio::test]
async fn the_rendered_objects_are_gardeners_types_unchanged() {
    let objects = render(&[]);
    assert_eq!(
        objects.len(),
        2,
        "a ControllerDeployment and a ControllerRegistration"
    );
    let env = Env::without_controller("garden").await;
    for crd in [REGISTRATION_CRD, DEPLOYMENT_CRD] {
        install_crd(&env.client, serde_saphyr::from_str(crd).unwrap()).await;
    }

    let deployment = find(&objects, "ControllerDeployment");
    assert_eq!(deployment["apiVersion"], "core.gardener.cloud/v1");
    let stored = create(&env, deployment, "controllerdeployments").await;
    assert_eq!(
        content(&stored),
        content(deployment),
        "nothing pruned from the ControllerDeployment"
    );

    let registration = find(&objects, "ControllerRegistration");
    assert_eq!(registration["apiVersion"], "core.gardener.cloud/v1beta1");
    let stored = create(&env, registration, "controllerregistrations").await;
    assert_eq!(
        content(&stored),
        content(registration),
        "nothing pruned from the ControllerRegistration"
    );
    assert_eq!(
        registration["spec"]["resources"],
        json!([{"kind": "Infrastructure", "type": "docker", "primary": true}])
    );
    assert_eq!(
        registration["spec"]["deployment"]["deploymentRefs"],
        json!([{"name": deployment["metadata"]["name"]}]),
        "the registration installs the rendered deployment"
    );

    // The schemas have teeth: a resource without its type is refused.
    let mut broken = registration.clone();
    broken["metadata"]["name"] = json!("broken");
    broken["spec"]["resources"] = json!([{"kind": "Infrastructure"}]);
    let (group, version) = ("core.gardener.cloud", "v1beta1");
    let gvk = GroupVersionKind::gvk(group, version, "ControllerRegistration");
    let api: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "controllerregistrations"),
    );
    let refused = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(broken).unwrap(),
        )
        .await;
    assert!(refused.is_err(), "a resource without type is accepted");
}

#[tokio::test]
async fn the_chart_installs_the_standalone_overlay_in_the_release_namespace() {
    let objects = render(&[]);
    let deployment = find(&objects, "ControllerDeployment");
    assert_eq!(deployment["helm"]["values"], json!({"image": IMAGE}));
    let files = chart_files(deployment);
    let chart: Value = serde_saphyr::from_str(&files["provider-docker/Chart.yaml"]).unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "provider-docker");
    assert!(chart["version"].as_str().is_some_and(|v| !v.is_empty()));

    let manifests = install(deployment);
    let kinds: Vec<&str> = manifests
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.contains(&"Namespace"),
        "gardenlet creates the namespace: {kinds:?}"
    );
    for manifest in &manifests {
        let cluster_scoped =
            ["ClusterRole", "ClusterRoleBinding"].contains(&manifest["kind"].as_str().unwrap());
        let namespace = &manifest["metadata"]["namespace"];
        if cluster_scoped {
            assert!(namespace.is_null());
        } else {
            assert_eq!(namespace, RELEASE_NAMESPACE, "{manifest}");
        }
    }

    let standalone = manifests
        .iter()
        .find(|m| m["kind"] == "Deployment")
        .expect("the manager Deployment");
    let container = &standalone["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], IMAGE);
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "DOCKER_HOST", "value": ""})),
        "the node's socket by default: {}",
        container["env"]
    );
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--controllers=gardener-infrastructure"))
    );
    let role = manifests
        .iter()
        .find(|m| {
            m["kind"] == "ClusterRole"
                && m["metadata"]["name"] == "capd-gardener-infrastructure-role"
        })
        .expect("the controller's ClusterRole");
    assert!(
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["clusters"])),
        "the controller reads Clusters"
    );
    let heartbeat = manifests
        .iter()
        .find(|m| {
            m["kind"] == "RoleBinding"
                && m["metadata"]["name"] == "capd-gardener-heartbeat-rolebinding"
        })
        .expect("the heartbeat Lease's binding");
    assert_eq!(
        heartbeat["subjects"],
        json!([{"kind": "ServiceAccount", "name": "capd-gardener-manager", "namespace": RELEASE_NAMESPACE}])
    );
}

#[test]
fn gardenlets_network_policies_let_the_manager_reach_the_api_server_dns_and_its_engine() {
    let pod_labels = |args: &[&str]| {
        let objects = render(args);
        let manifests = install(find(&objects, "ControllerDeployment"));
        let pod = manager_pod(&manifests);
        let env = &pod["spec"]["containers"][0]["env"];
        let host = env
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "DOCKER_HOST")
            .expect("DOCKER_HOST is set")["value"]
            .clone();
        (pod["metadata"]["labels"].clone(), host)
    };

    let (local, host) = pod_labels(&[]);
    assert_eq!(host, "", "the node's socket");
    assert_eq!(
        egress_allowed_by(&local),
        ["allow-to-runtime-apiserver", "allow-to-dns"],
        "the seed's API server and DNS, nothing else: {local}"
    );

    let (private, host) = pod_labels(&["--docker-host", "tcp://10.0.0.5:2376"]);
    assert_eq!(host, "tcp://10.0.0.5:2376");
    assert_eq!(
        egress_allowed_by(&private),
        [
            "allow-to-runtime-apiserver",
            "allow-to-dns",
            "allow-to-private-networks"
        ],
        "a remote engine on a private network: {private}"
    );

    let (public, _) = pod_labels(&[
        "--docker-host",
        "https://docker.example.org:2376",
        "--docker-host-network",
        "public",
    ]);
    assert_eq!(
        egress_allowed_by(&public),
        [
            "allow-to-runtime-apiserver",
            "allow-to-dns",
            "allow-to-public-networks"
        ],
        "a remote engine on a public address: {public}"
    );

    let (socket, host) = pod_labels(&["--docker-host", "unix:///run/docker.sock"]);
    assert_eq!(host, "unix:///run/docker.sock");
    assert_eq!(
        egress_allowed_by(&socket),
        ["allow-to-runtime-apiserver", "allow-to-dns"],
        "a socket needs no network: {socket}"
    );
}

/// The labels gardenlet sets on the extension namespace of `registration`'s installation
/// (gardener/gardener `pkg/gardenlet/controller/controllerinstallation/controllerinstallation/
/// reconciler.go`: the role, and `pod-security.kubernetes.io/enforce` from the annotation
/// `security.gardener.cloud/pod-security-enforce` that gardener-controller-manager copies from
/// the ControllerRegistration to the ControllerInstallation, or no level without it).
fn extension_namespace_labels(registration: &Value) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("gardener.cloud/role".to_string(), "extension".to_string()),
        (
            "controllerregistration.core.gardener.cloud/name".to_string(),
            registration["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        ),
    ]);
    if let Some(level) =
        registration["metadata"]["annotations"]["security.gardener.cloud/pod-security-enforce"]
            .as_str()
    {
        labels.insert(
            "pod-security.kubernetes.io/enforce".to_string(),
            level.to_string(),
        );
    }
    labels
}

#[test]
fn the_registration_gets_the_manager_the_pod_security_level_its_socket_needs() {
    let objects = render(&[]);
    let namespace = extension_namespace_labels(find(&objects, "ControllerRegistration"));
    let pod = manager_pod(&install(find(&objects, "ControllerDeployment")));
    let host_paths: Vec<&Value> = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| !v["hostPath"].is_null())
        .collect();
    assert_eq!(
        host_paths.len(),
        1,
        "the Docker socket's hostPath: {}",
        pod["spec"]["volumes"]
    );
    // The Pod Security Standards refuse hostPath volumes at `baseline` and `restricted`; an
    // unlabelled namespace gets the API server's default level, `privileged` only if so set.
    assert_eq!(
        namespace
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged"),
        "gardenlet labels the extension namespace: {namespace:?}"
    );
}
