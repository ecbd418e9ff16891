//! The e2e suite's CABPK stand-in (`capd_e2e::kubeadm`) through the provider's bootstrap
//! translation: what a real node then runs is what `e2e/images/real/examples/` proved by hand
//! (the node registration, skipped phases and kube-proxy settings), the PKI lands with CABPK's
//! modes, and kubeadm runs with the container preflight flags after the sentinel.

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use capd::bootstrap::{Format, KindMode, Options, Plan, SENTINEL_PATH, translate};
use capd_e2e::kubeadm::{
    ClusterCertificates, ClusterSettings, Discovery, KubeadmConfigSpec, init_control_plane,
    join_control_plane, join_worker,
};
use serde_json::Value;

const PREFLIGHT: &str = "--ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables";

fn options() -> Options {
    Options {
        kind_mode: KindMode::V0_20,
        kubernetes_version: Some("v1.28.4".into()),
    }
}

/// The YAML documents of a file the plan writes, by kind.
fn written_documents(plan: &Plan, path: &str) -> Vec<Value> {
    let write = plan
        .commands
        .iter()
        .find(|c| c.description == format!("write {path}"))
        .unwrap_or_else(|| panic!("no write of {path} in {plan:?}"));
    let text = String::from_utf8(write.stdin.clone().unwrap()).unwrap();
    text.split("\n---\n")
        .flat_map(|doc| doc.split("---\n"))
        .filter_map(|doc| serde_saphyr::from_str::<Option<Value>>(doc).unwrap())
        .collect()
}

fn kind<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {documents:?}"))
}

/// A document of the hand-proven examples beside the real node image.
fn example(file: &str, kind_name: &str) -> Value {
    let path = format!(
        "{}/e2e/images/real/examples/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let documents: Vec<Value> = text
        .split("\n---\n")
        .filter_map(|doc| serde_saphyr::from_str::<Option<Value>>(doc).unwrap())
        .collect();
    kind(&documents, kind_name).clone()
}

fn kubeadm_command(plan: &Plan) -> String {
    let command = plan
        .commands
        .iter()
        .find(|c| c.argv.iter().any(|a| a.contains(SENTINEL_PATH)))
        .unwrap_or_else(|| panic!("no kubeadm command in {plan:?}"));
    command.argv.join(" ")
}

#[test]
fn the_first_control_plane_runs_kubeadm_init_with_the_proven_configuration() {
    let certificates = ClusterCertificates::generate();
    let data = init_control_plane(
        &ClusterSettings::example(),
        &KubeadmConfigSpec::real_node(),
        &certificates,
    );
    let plan = translate(data.as_bytes(), Format::CloudConfig, &options()).unwrap();
    assert_eq!(plan.warnings, Vec::<String>::new());

    let documents = written_documents(&plan, "/run/kubeadm/kubeadm.yaml");
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterConfiguration",
            "InitConfiguration",
            "KubeProxyConfiguration"
        ]
    );
    let init = kind(&documents, "InitConfiguration");
    let proven = example("kubeadm-init.yaml", "InitConfiguration");
    assert_eq!(init["nodeRegistration"], proven["nodeRegistration"]);
    assert_eq!(init["skipPhases"], proven["skipPhases"]);
    assert_eq!(
        kind(&documents, "KubeProxyConfiguration")["conntrack"],
        example("kubeadm-init.yaml", "KubeProxyConfiguration")["conntrack"]
    );
    let cluster = kind(&documents, "ClusterConfiguration");
    let proven = example("kubeadm-init.yaml", "ClusterConfiguration");
    for field in [
        "apiServer",
        "apiVersion",
        "controllerManager",
        "kubernetesVersion",
        "networking",
    ] {
        assert_eq!(
            cluster[field], proven[field],
            "ClusterConfiguration.{field}"
        );
    }
    assert_eq!(cluster["controlPlaneEndpoint"], "10.89.0.2:6443");

    // The PKI with CABPK's modes: certificates 0640, keys 0600.
    for (path, mode) in [
        ("/etc/kubernetes/pki/ca.crt", "0640"),
        ("/etc/kubernetes/pki/ca.key", "0600"),
        ("/etc/kubernetes/pki/etcd/ca.key", "0600"),
        ("/etc/kubernetes/pki/front-proxy-ca.key", "0600"),
        ("/etc/kubernetes/pki/sa.pub", "0640"),
        ("/etc/kubernetes/pki/sa.key", "0600"),
    ] {
        let description = format!("set mode {mode} on {path}");
        assert!(
            plan.commands.iter().any(|c| c.description == description),
            "{description}: {plan:?}"
        );
    }
    let write_ca = plan
        .commands
        .iter()
        .find(|c| c.description == "write /etc/kubernetes/pki/ca.crt")
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(write_ca.stdin.as_deref().unwrap()).trim_end(),
        certificates.ca.cert_pem().trim_end()
    );

    let command = kubeadm_command(&plan);
    assert!(
        command.contains(&format!(
            "kubeadm init {PREFLIGHT} --config /run/kubeadm/kubeadm.yaml"
        )),
        "{command}"
    );
    assert!(
        command.contains("&& echo success > /run/cluster-api/bootstrap-success.complete"),
        "{command}"
    );
}

#[test]
fn a_worker_runs_kubeadm_join_with_the_proven_node_registration() {
    let certificates = ClusterCertificates::generate();
    let data = join_worker(
        &KubeadmConfigSpec::real_node(),
        &Discovery::example(&certificates.ca),
    );
    let plan = translate(data.as_bytes(), Format::CloudConfig, &options()).unwrap();
    assert_eq!(plan.warnings, Vec::<String>::new());
    let documents = written_documents(&plan, "/run/kubeadm/kubeadm-join-config.yaml");
    let join = kind(&documents, "JoinConfiguration");
    let mut registration = join["nodeRegistration"].clone();
    // CABPK adds the uninitialized taint to workers; the hand-run example has none.
    assert_eq!(
        registration["taints"][0]["key"],
        "node.cluster.x-k8s.io/uninitialized"
    );
    registration["taints"] = Value::Null;
    let proven = example("kubeadm-join-worker.yaml", "JoinConfiguration");
    assert_eq!(registration, proven["nodeRegistration"]);
    assert_eq!(
        join["discovery"]["bootstrapToken"]["caCertHashes"][0],
        certificates.ca.spki_hash()
    );
    assert!(kubeadm_command(&plan).contains(&format!(
        "kubeadm join {PREFLIGHT} --config /run/kubeadm/kubeadm-join-config.yaml"
    )));
}

#[test]
fn a_joining_control_plane_gets_the_shared_pki_and_the_proven_node_registration() {
    let certificates = ClusterCertificates::generate();
    let data = join_control_plane(
        &KubeadmConfigSpec::real_node(),
        &Discovery::example(&certificates.ca),
        &certificates,
    );
    let plan = translate(data.as_bytes(), Format::CloudConfig, &options()).unwrap();
    assert_eq!(plan.warnings, Vec::<String>::new());
    let documents = written_documents(&plan, "/run/kubeadm/kubeadm-join-config.yaml");
    let join = kind(&documents, "JoinConfiguration");
    let proven = example("kubeadm-join-control-plane.yaml", "JoinConfiguration");
    assert_eq!(join["nodeRegistration"], proven["nodeRegistration"]);
    assert_eq!(
        join["controlPlane"]["localAPIEndpoint"],
        proven["controlPlane"]["localAPIEndpoint"]
    );
    for path in [
        "/etc/kubernetes/pki/ca.key",
        "/etc/kubernetes/pki/etcd/ca.key",
        "/etc/kubernetes/pki/front-proxy-ca.key",
        "/etc/kubernetes/pki/sa.key",
    ] {
        let description = format!("write {path}");
        assert!(
            plan.commands.iter().any(|c| c.description == description),
            "{description}"
        );
    }
}
