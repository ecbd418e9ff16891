//! Packaging of the Gardener controller: the optional `config/gardener` kustomize component, added
//! to `config/default` the way the book says (`docs/src/gardener.md`, "Deploying"), turns the flag
//! on and grants exactly what
//! the controller does on `extensions.gardener.cloud` infrastructures and clusters and on its
//! heartbeat Lease; `config/gardener/standalone`
//! deploys the extension alone, without Cluster API, CAPD CRDs or webhooks.
//!
//! Needs `kubectl` (its built-in kustomize), like `tests/components.rs`.

// Test crate: a failed expectation anywhere is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .expect("the repository root")
}

/// `to` relative to `from` (kustomize refuses absolute paths to bases and components).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &to[common..] {
        path.push(part);
    }
    path
}

/// Renders `config/default` with the `config/gardener` component.
fn render_with_component() -> Vec<Value> {
    let overlay = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gardener-overlay-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).expect("create the overlay folder");
    let overlay = overlay.canonicalize().unwrap();
    let root = relative(&overlay, &repo_root());
    let kustomization = format!(
        "resources:\n- {}\ncomponents:\n- {}\n",
        root.join("config/default").display(),
        root.join("config/gardener").display()
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();
    let objects = kustomize(&overlay);
    let _ = std::fs::remove_dir_all(&overlay);
    objects
}

/// The objects `kubectl kustomize dir` renders.
fn kustomize(dir: &Path) -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("kubectl (>= 1.27, for its kustomize) is required but could not be run: {e}")
        });
    assert!(
        output.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("multi-document YAML");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered manifests"))
}

#[test]
fn the_component_turns_the_controller_on_with_least_privilege() {
    let objects = render_with_component();

    let deployment = find(&objects, "Deployment", "capd-controller-manager");
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--gardener-infrastructure"),
        "the manager runs with --gardener-infrastructure: {args}"
    );

    let role = find(&objects, "ClusterRole", "capd-gardener-infrastructure-role");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["extensions.gardener.cloud"], "resources": ["infrastructures"],
             "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["extensions.gardener.cloud"], "resources": ["infrastructures/status"],
             "verbs": ["get", "patch"]},
            {"apiGroups": ["extensions.gardener.cloud"], "resources": ["clusters"],
             "verbs": ["get"]},
        ]),
        "watch and patch (finalizer, annotation, status); never create, update or delete; \
         read the shoot's Cluster by name"
    );
    assert_eq!(
        role["metadata"]["labels"]["cluster.x-k8s.io/provider"],
        "infrastructure-docker"
    );

    let binding = find(
        &objects,
        "ClusterRoleBinding",
        "capd-gardener-infrastructure-rolebinding",
    );
    assert_eq!(
        binding["roleRef"]["name"],
        "capd-gardener-infrastructure-role"
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "capd-manager", "namespace": "capd-system"}]),
        "bound to the manager's service account"
    );
    let service_account = find(&objects, "ServiceAccount", "capd-manager");
    assert_eq!(service_account["metadata"]["namespace"], "capd-system");

    let heartbeat = find(&objects, "Role", "capd-gardener-heartbeat-role");
    assert_eq!(heartbeat["metadata"]["namespace"], "capd-system");
    assert_eq!(heartbeat["rules"], heartbeat_rules());
    let heartbeat_binding = find(
        &objects,
        "RoleBinding",
        "capd-gardener-heartbeat-rolebinding",
    );
    assert_eq!(heartbeat_binding["metadata"]["namespace"], "capd-system");
    assert_eq!(
        heartbeat_binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "capd-manager", "namespace": "capd-system"}]),
        "the heartbeat Lease is the manager's, in its namespace"
    );

    let events = find(&objects, "ClusterRole", "capd-manager-role")["rules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .contains(&json!("events"))
                && r["verbs"].as_array().unwrap().contains(&json!("create"))
        });
    assert!(
        events,
        "the manager role lets the controller publish Events"
    );
}

/// Create the heartbeat Lease, then read and renew only that one.
fn heartbeat_rules() -> Value {
    json!([
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["gardener-extension-heartbeat"], "verbs": ["get", "patch"]},
    ])
}

#[test]
fn without_the_component_nothing_about_gardener_is_deployed() {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join("config/default"))
        .output()
        .expect("kubectl runs");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        !text.contains("gardener"),
        "the clusterctl components stay free of the Gardener controller"
    );
}

/// Renders `config/gardener/standalone`.
fn render_standalone() -> Vec<Value> {
    kustomize(&repo_root().join("config/gardener/standalone"))
}

#[test]
fn the_standalone_overlay_deploys_only_the_extension() {
    let objects = render_standalone();

    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    for absent in [
        "CustomResourceDefinition",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Certificate",
        "Issuer",
        "Service",
    ] {
        assert!(!kinds.contains(&absent), "no {absent} in {kinds:?}");
    }
    let text = serde_json::to_string(&objects).unwrap();
    assert!(
        !text.contains("x-k8s.io/v1beta") && !text.contains("${"),
        "nothing of Cluster API and no clusterctl variable"
    );

    let deployment = find(&objects, "Deployment", "capd-gardener-controller-manager");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        json!([
            "--controllers=gardener-infrastructure",
            "--leader-elect",
            "--diagnostics-address=:8443"
        ])
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["secret"].is_null()),
        "no webhook certificate is mounted: {}",
        pod["volumes"]
    );
    let namespace = "capd-gardener-system";
    assert_eq!(deployment["metadata"]["namespace"], namespace);
    assert_eq!(pod["serviceAccountName"], "capd-gardener-manager");
    find(&objects, "Namespace", namespace);

    let subject = json!([{"kind": "ServiceAccount", "name": "capd-gardener-manager", "namespace": namespace}]);
    let role = find(&objects, "ClusterRole", "capd-gardener-infrastructure-role");
    let component_role = find(
        &render_with_component(),
        "ClusterRole",
        "capd-gardener-infrastructure-role",
    )
    .clone();
    assert_eq!(
        role["rules"], component_role["rules"],
        "the component's rules"
    );
    for (kind, binding) in [
        (
            "ClusterRoleBinding",
            "capd-gardener-infrastructure-rolebinding",
        ),
        ("ClusterRoleBinding", "capd-gardener-manager-rolebinding"),
        ("RoleBinding", "capd-gardener-leader-election-rolebinding"),
        ("RoleBinding", "capd-gardener-heartbeat-rolebinding"),
    ] {
        assert_eq!(
            find(&objects, kind, binding)["subjects"],
            subject,
            "{binding}"
        );
    }
    let manager_role = find(&objects, "ClusterRole", "capd-gardener-manager-role");
    assert_eq!(
        manager_role["rules"],
        json!([
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ]),
        "Events and the metrics endpoint's reviews only: no Secret, no CRD, no Cluster API object"
    );
    let roles: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.len(),
        4,
        "the controller's, the manager's, leader election's and the heartbeat's: {roles:?}"
    );
    let heartbeat = find(&objects, "Role", "capd-gardener-heartbeat-role");
    assert_eq!(heartbeat["metadata"]["namespace"], namespace);
    assert_eq!(heartbeat["rules"], heartbeat_rules());
    assert!(
        pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "POD_NAMESPACE"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
        "the heartbeat Lease goes to the manager's own namespace"
    );
}
