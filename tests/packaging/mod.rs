//! Shared by the packaging tests: builds the components once through `hack/build-components.sh` and
//! offers small accessors over the parsed objects.

pub use capd_e2e::envsubst;
pub mod variables;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

pub const NAMESPACE: &str = "capd-system";
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
pub const PROVIDER: &str = "infrastructure-docker";
pub const SERVICE_ACCOUNT: &str = "capd-manager";
pub const COMPONENTS_FILE: &str = "infrastructure-components.yaml";
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";
pub const LEASE: &str = "controller-leader-election-capd";
pub const KINDS: [(&str, &str); 12] = [
    ("DockerCluster", "dockerclusters"),
    ("DockerClusterTemplate", "dockerclustertemplates"),
    ("DockerMachine", "dockermachines"),
    ("DockerMachineTemplate", "dockermachinetemplates"),
    ("DockerMachinePool", "dockermachinepools"),
    ("DockerMachinePoolTemplate", "dockermachinepooltemplates"),
    ("DevCluster", "devclusters"),
    ("DevClusterTemplate", "devclustertemplates"),
    ("DevMachine", "devmachines"),
    ("DevMachineTemplate", "devmachinetemplates"),
    ("DevMachinePool", "devmachinepools"),
    ("DevMachinePoolTemplate", "devmachinepooltemplates"),
];
pub const CLUSTER_SCOPED: [&str; 6] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The output of one run of the build script, shared by every test of this file.
pub struct Built {
    pub dir: tempfile::TempDir,
    pub text: String,
    pub objects: Vec<Value>,
}

/// Runs `hack/build-components.sh OUT_DIR` and returns the components file it wrote.
pub fn run_build_script(out: &Path) -> String {
    if let Err(e) = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        panic!(
            "kubectl is required to build {COMPONENTS_FILE} (its built-in kustomize renders \
             config/default), but it could not be run: {e}; install kubectl >= 1.27"
        );
    }
    let output = Command::new("bash")
        .arg(repo_root().join("hack/build-components.sh"))
        .arg(out)
        .output()
        .expect("run bash hack/build-components.sh");
    assert!(
        output.status.success(),
        "hack/build-components.sh failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(out.join(COMPONENTS_FILE))
        .unwrap_or_else(|e| panic!("the build script did not write {COMPONENTS_FILE}: {e}"))
}

pub fn parse_documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .unwrap_or_else(|e| panic!("{COMPONENTS_FILE} is not valid multi-document YAML: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("create a temporary output folder");
        let text = run_build_script(dir.path());
        let objects = parse_documents(&text);
        Built { dir, text, objects }
    })
}

pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub fn describe(o: &Value) -> String {
    format!("{} {}", str_at(o, "/kind"), str_at(o, "/metadata/name"))
}

pub fn objects_of<'a>(kind: &'a str) -> impl Iterator<Item = &'static Value> + 'a {
    built()
        .objects
        .iter()
        .filter(move |o| str_at(o, "/kind") == kind)
}

pub fn object(kind: &str, name: &str) -> &'static Value {
    objects_of(kind)
        .find(|o| str_at(o, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("{COMPONENTS_FILE} has no {kind} named {name}"))
}

pub fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether an RBAC role grants `verb` on `resource` of `group` (resourceNames ignored).
pub fn allows(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    verbs(role, group, resource).contains(verb)
}

/// Every verb an RBAC role grants on `resource` of `group` (resourceNames ignored).
pub fn verbs<'a>(role: &'a Value, group: &str, resource: &str) -> BTreeSet<&'a str> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| {
            strings(rule.get("apiGroups")).contains(&group)
                && strings(rule.get("resources")).contains(&resource)
        })
        .flat_map(|rule| strings(rule.get("verbs")))
        .collect()
}
