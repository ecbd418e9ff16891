//! kubeadm's configuration documents as CABPK marshals them for Kubernetes below 1.31
//! (`bootstrap/kubeadm/types/utils.go`, `Marshal{Cluster,Init,Join}ConfigurationForVersion`:
//! kubeadm `v1beta3`, keys sorted as `sigs.k8s.io/yaml` writes them, `taints: null` when unset).

use std::fmt::Write;

/// The taint CABPK puts on joining workers until core's Machine controller has synced the Node's
/// labels (`clusterv1.NodeUninitializedTaint`).
pub const NODE_UNINITIALIZED_TAINT: &str = "node.cluster.x-k8s.io/uninitialized";

/// The kubeadm API version for the Kubernetes versions the suite runs (1.28).
pub const KUBEADM_API_VERSION: &str = "kubeadm.k8s.io/v1beta3";

/// What CABPK takes from the Cluster (`computeClusterConfigurationAndAdditionalData`): its name,
/// `spec.controlPlaneEndpoint`, `spec.clusterNetwork` and the Machine's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The Cluster's name (kubeadm's `clusterName`).
    pub name: String,
    /// `host:port` of the control plane endpoint (the DockerCluster's load balancer).
    pub endpoint: String,
    /// The Machine's Kubernetes version, e.g. `v1.28.4`.
    pub version: String,
    /// `spec.clusterNetwork.pods.cidrBlocks`.
    pub pod_subnet: String,
    /// `spec.clusterNetwork.services.cidrBlocks`.
    pub service_subnet: String,
    /// `spec.clusterNetwork.serviceDomain`.
    pub service_domain: String,
}

impl ClusterSettings {
    /// A fixed cluster for tests of the bootstrap data: `real`, its endpoint at `10.89.0.2:6443`
    /// (Podman's first address), v1.28.4, the quick-start's pod and service networks.
    pub fn example() -> Self {
        ClusterSettings {
            name: "real".into(),
            endpoint: "10.89.0.2:6443".into(),
            version: "v1.28.4".into(),
            pod_subnet: "10.244.0.0/16".into(),
            service_subnet: "10.96.0.0/12".into(),
            service_domain: "cluster.local".into(),
        }
    }
}

/// The parts of a KubeadmControlPlane's `spec.kubeadmConfigSpec` (and a KubeadmConfigTemplate's
/// `spec.template.spec`) the suite sets. The defaults are CAPD 1.12's quick-start ClusterClass
/// (`test/infrastructure/docker/templates/clusterclass-quick-start.yaml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeadmConfigSpec {
    /// `clusterConfiguration.apiServer.certSANs`.
    pub cert_sans: Vec<String>,
    /// `clusterConfiguration.controllerManager.extraArgs`.
    pub controller_manager_extra_args: Vec<(String, String)>,
    /// `initConfiguration` and `joinConfiguration` `nodeRegistration.kubeletExtraArgs`.
    pub kubelet_extra_args: Vec<(String, String)>,
    /// `nodeRegistration.imagePullPolicy` of control planes (init and control-plane join).
    pub control_plane_image_pull_policy: Option<String>,
    /// `initConfiguration.skipPhases`.
    pub skip_phases: Vec<String>,
}

impl Default for KubeadmConfigSpec {
    fn default() -> Self {
        KubeadmConfigSpec {
            cert_sans: ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"]
                .map(String::from)
                .to_vec(),
            controller_manager_extra_args: vec![(
                "enable-hostpath-provisioner".into(),
                "true".into(),
            )],
            kubelet_extra_args: vec![(
                "eviction-hard".into(),
                "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%".into(),
            )],
            control_plane_image_pull_policy: None,
            skip_phases: Vec::new(),
        }
    }
}

impl KubeadmConfigSpec {
    /// The quick-start spec with what the real node image of `e2e/images/real` needs (its
    /// `examples/`): control planes never pull (`imagePullPolicy: Never`: kubeadm's preflight would
    /// look for a CoreDNS image the node does not have) and CoreDNS is not installed
    /// (`skipPhases: [addon/coredns]`). Both are fields a KubeadmControlPlane user may set.
    pub fn real_node() -> Self {
        KubeadmConfigSpec {
            control_plane_image_pull_policy: Some("Never".into()),
            skip_phases: vec!["addon/coredns".into()],
            ..Self::default()
        }
    }
}

/// The `ClusterConfiguration` of the first control plane.
pub fn cluster_configuration(cluster: &ClusterSettings, spec: &KubeadmConfigSpec) -> String {
    let mut out = String::from("apiServer:");
    if spec.cert_sans.is_empty() {
        out.push_str(" {}\n");
    } else {
        out.push_str("\n  certSANs:\n");
        for san in &spec.cert_sans {
            let _ = writeln!(out, "  - {}", scalar(san));
        }
    }
    let _ = writeln!(out, "apiVersion: {KUBEADM_API_VERSION}");
    let _ = writeln!(out, "clusterName: {}", scalar(&cluster.name));
    let _ = writeln!(out, "controlPlaneEndpoint: {}", scalar(&cluster.endpoint));
    out.push_str("controllerManager:");
    map_or_empty(
        &mut out,
        "extraArgs",
        &spec.controller_manager_extra_args,
        2,
    );
    out.push_str("dns: {}\netcd: {}\nkind: ClusterConfiguration\n");
    let _ = writeln!(out, "kubernetesVersion: {}", scalar(&cluster.version));
    let _ = writeln!(
        out,
        "networking:\n  dnsDomain: {}\n  podSubnet: {}\n  serviceSubnet: {}",
        scalar(&cluster.service_domain),
        scalar(&cluster.pod_subnet),
        scalar(&cluster.service_subnet)
    );
    out.push_str("scheduler: {}\n");
    out
}

/// The `InitConfiguration` of the first control plane (KCP's `initConfiguration`).
pub fn init_configuration(spec: &KubeadmConfigSpec) -> String {
    let mut out = format!(
        "apiVersion: {KUBEADM_API_VERSION}\nkind: InitConfiguration\nlocalAPIEndpoint: {{}}\n"
    );
    node_registration(
        &mut out,
        spec.control_plane_image_pull_policy.as_deref(),
        &spec.kubelet_extra_args,
        None,
    );
    if !spec.skip_phases.is_empty() {
        out.push_str("skipPhases:\n");
        for phase in &spec.skip_phases {
            let _ = writeln!(out, "- {}", scalar(phase));
        }
    }
    out
}

/// How a joining node finds and trusts the cluster (`discovery.bootstrapToken`, filled in by
/// CABPK's `reconcileDiscovery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// `host:port` of the control plane endpoint.
    pub api_server_endpoint: String,
    /// The bootstrap token, `<id>.<secret>`.
    pub token: String,
    /// `sha256:<hex>` of the cluster CA's public key.
    pub ca_cert_hash: String,
}

impl Discovery {
    /// The discovery of [`ClusterSettings::example`] with a fixed token, trusting `ca`.
    pub fn example(ca: &super::certs::Authority) -> Self {
        Discovery {
            api_server_endpoint: ClusterSettings::example().endpoint,
            token: "abcdef.0123456789abcdef".into(),
            ca_cert_hash: ca.spki_hash(),
        }
    }
}

/// The `JoinConfiguration` of a worker: the quick-start's kubelet arguments and the
/// uninitialized taint CABPK's `joinWorker` adds.
pub fn worker_join_configuration(spec: &KubeadmConfigSpec, discovery: &Discovery) -> String {
    let mut out = format!("apiVersion: {KUBEADM_API_VERSION}\n");
    discovery_section(&mut out, discovery);
    out.push_str("kind: JoinConfiguration\n");
    node_registration(
        &mut out,
        None,
        &spec.kubelet_extra_args,
        Some(&[(NODE_UNINITIALIZED_TAINT, "NoSchedule")]),
    );
    out
}

/// The `JoinConfiguration` of a control plane joining the cluster: `controlPlane` set (CABPK's
/// `joinControlplane` makes it `{}` when KCP leaves it unset), kubeadm picks the local address.
pub fn control_plane_join_configuration(spec: &KubeadmConfigSpec, discovery: &Discovery) -> String {
    let mut out =
        format!("apiVersion: {KUBEADM_API_VERSION}\ncontrolPlane:\n  localAPIEndpoint: {{}}\n");
    discovery_section(&mut out, discovery);
    out.push_str("kind: JoinConfiguration\n");
    node_registration(
        &mut out,
        spec.control_plane_image_pull_policy.as_deref(),
        &spec.kubelet_extra_args,
        None,
    );
    out
}

fn discovery_section(out: &mut String, discovery: &Discovery) {
    let _ = writeln!(
        out,
        "discovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    caCertHashes:\n    - {}\n    token: {}",
        scalar(&discovery.api_server_endpoint),
        scalar(&discovery.ca_cert_hash),
        scalar(&discovery.token)
    );
}

/// `nodeRegistration` in sorted key order; `taints: null` when none are given (kubeadm then
/// applies its defaults: the control-plane taint on control planes).
fn node_registration(
    out: &mut String,
    image_pull_policy: Option<&str>,
    kubelet_extra_args: &[(String, String)],
    taints: Option<&[(&str, &str)]>,
) {
    out.push_str("nodeRegistration:\n");
    if let Some(policy) = image_pull_policy {
        let _ = writeln!(out, "  imagePullPolicy: {}", scalar(policy));
    }
    if !kubelet_extra_args.is_empty() {
        out.push_str("  kubeletExtraArgs:\n");
        let mut args = kubelet_extra_args.to_vec();
        args.sort();
        for (name, value) in &args {
            let _ = writeln!(out, "    {}: {}", scalar(name), scalar(value));
        }
    }
    match taints {
        None => out.push_str("  taints: null\n"),
        Some(taints) => {
            out.push_str("  taints:\n");
            for (key, effect) in taints {
                let _ = writeln!(out, "  - effect: {effect}\n    key: {key}");
            }
        }
    }
}

/// `<key>:` with a nested mapping of string values, or ` {}` when there is nothing in it
/// (the parent is written just before, without its newline).
fn map_or_empty(out: &mut String, key: &str, entries: &[(String, String)], indent: usize) {
    if entries.is_empty() {
        out.push_str(" {}\n");
        return;
    }
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "\n{pad}{key}:");
    let mut entries = entries.to_vec();
    entries.sort();
    for (name, value) in &entries {
        let _ = writeln!(out, "{pad}  {}: {}", scalar(name), scalar(value));
    }
}

/// A YAML string scalar as Go's YAML writer emits it: plain when that reads back as the same
/// string, double-quoted otherwise (`"true"`, `"100"`, empty strings, leading indicators).
pub fn scalar(value: &str) -> String {
    let reads_as_other_type = matches!(
        value,
        "" | "~"
            | "null"
            | "Null"
            | "NULL"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "yes"
            | "no"
            | "on"
            | "off"
            | "y"
            | "n"
    ) || value.parse::<f64>().is_ok();
    let special_start = value.starts_with([
        '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
        '`', ' ',
    ]);
    let special_inside = value.contains(": ")
        || value.contains(" #")
        || value.ends_with(' ')
        || value.ends_with(':')
        || value.contains('\n');
    if reads_as_other_type || special_start || special_inside {
        serde_json::Value::String(value.to_string()).to_string()
    } else {
        value.to_string()
    }
}
