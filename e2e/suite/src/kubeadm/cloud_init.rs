//! The cloud-config CABPK writes into a Machine's bootstrap data Secret, laid out as its
//! templates lay it out (`bootstrap/kubeadm/internal/cloudinit/`: `cloudinit.go`, `files.go`,
//! `controlplane_init.go`, `controlplane_join.go`, `node.go`, `utils.go`).

use super::certs::ClusterCertificates;
use super::config::{
    self, ClusterSettings, Discovery, KubeadmConfigSpec, cluster_configuration, init_configuration,
};

/// The first lines of every cloud-config CABPK writes (`cloudConfigHeader`).
pub const CLOUD_CONFIG_HEADER: &str = "## template: jinja\n#cloud-config\n";
/// What CABPK runs after kubeadm succeeded (`sentinelFileCommand`).
pub const SENTINEL_FILE_COMMAND: &str =
    "echo success > /run/cluster-api/bootstrap-success.complete";
/// The kubeadm configuration of the first control plane.
pub const INIT_CONFIG_PATH: &str = "/run/kubeadm/kubeadm.yaml";
/// The kubeadm configuration of a joining node.
pub const JOIN_CONFIG_PATH: &str = "/run/kubeadm/kubeadm-join-config.yaml";

/// The placeholder file that makes cloud-init create `/run/cluster-api` on every OS.
const PLACEHOLDER: &str = "-   path: /run/cluster-api/placeholder
    owner: root:root
    permissions: '0640'
    content: \"This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)\"";

/// One `write_files` entry (`bootstrapv1.File`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Where the file goes.
    pub path: String,
    /// `owner` (CABPK writes `root:root` for certificates).
    pub owner: String,
    /// `permissions`, e.g. `0640`.
    pub permissions: String,
    /// The content, as text.
    pub content: String,
}

/// The certificate files of a control plane, in CABPK's order (`Certificates.AsFiles`): each
/// CA's certificate (`0640`) then its key (`0600`).
pub fn certificate_files(certificates: &ClusterCertificates) -> Vec<File> {
    let mut files = Vec::new();
    for (purpose, crt, key) in certificates.pairs() {
        let (crt_path, key_path) = purpose.files();
        files.push(File {
            path: crt_path,
            owner: "root:root".into(),
            permissions: "0640".into(),
            content: crt,
        });
        files.push(File {
            path: key_path,
            owner: "root:root".into(),
            permissions: "0600".into(),
            content: key,
        });
    }
    files
}

/// The first control plane's cloud-config (`NewInitControlPlane`): the certificate files,
/// `/run/kubeadm/kubeadm.yaml` (`---`, the ClusterConfiguration, `---`, the InitConfiguration:
/// three documents, the first empty), the placeholder, then `kubeadm init` and the sentinel.
pub fn init_control_plane(
    cluster: &ClusterSettings,
    spec: &KubeadmConfigSpec,
    certificates: &ClusterCertificates,
) -> String {
    let mut out = String::from(CLOUD_CONFIG_HEADER);
    out.push('\n');
    out.push_str(&files_section(&certificate_files(certificates)));
    out.push_str(&format!(
        "\n-   path: {INIT_CONFIG_PATH}\n    owner: root:root\n    permissions: '0640'\n    content: |\n      ---\n{}\n      ---\n{}\n",
        indent(6, &cluster_configuration(cluster, spec)),
        indent(6, &init_configuration(spec)),
    ));
    out.push_str(PLACEHOLDER);
    // KubeadmVerbosity is empty: the template leaves two spaces before `&&`.
    out.push_str(&format!(
        "\nruncmd:\n  - 'kubeadm init --config {INIT_CONFIG_PATH}  && {SENTINEL_FILE_COMMAND}'\n"
    ));
    out
}

/// A worker's cloud-config (`NewNode`): no certificate (kubeadm fetches the CA through
/// discovery), `/run/kubeadm/kubeadm-join-config.yaml` (`---` then the JoinConfiguration), the
/// placeholder, then `kubeadm join` and the sentinel.
pub fn join_worker(spec: &KubeadmConfigSpec, discovery: &Discovery) -> String {
    let join = config::worker_join_configuration(spec, discovery);
    join_cloud_config(&[], &format!("      ---\n{}", indent(6, &join)))
}

/// A joining control plane's cloud-config (`NewJoinControlPlane`): the shared CA, etcd CA,
/// front-proxy CA and service-account files (`NewControlPlaneJoinCerts`), the JoinConfiguration
/// (no leading `---` in this template), the placeholder, then `kubeadm join` and the sentinel.
pub fn join_control_plane(
    spec: &KubeadmConfigSpec,
    discovery: &Discovery,
    certificates: &ClusterCertificates,
) -> String {
    let join = config::control_plane_join_configuration(spec, discovery);
    join_cloud_config(&certificate_files(certificates), &indent(6, &join))
}

fn join_cloud_config(files: &[File], content: &str) -> String {
    let mut out = String::from(CLOUD_CONFIG_HEADER);
    out.push('\n');
    out.push_str(&files_section(files));
    out.push_str(&format!(
        "\n-   path: {JOIN_CONFIG_PATH}\n    owner: root:root\n    permissions: '0640'\n    content: |\n{content}\n"
    ));
    out.push_str(PLACEHOLDER);
    // `standardJoinCommand` with an empty verbosity ends with a space, before ` && `.
    out.push_str(&format!(
        "\nruncmd:\n  - kubeadm join --config {JOIN_CONFIG_PATH}  && {SENTINEL_FILE_COMMAND}\n"
    ));
    out
}

/// `write_files:` and its entries as the `files` template writes them (each content indented by
/// six spaces, its last line break leaving a line of spaces before the next entry).
fn files_section(files: &[File]) -> String {
    let mut out = String::from("write_files:");
    for file in files {
        out.push_str(&format!(
            "\n-   path: {}\n    owner: {}\n    permissions: '{}'\n    content: |\n{}",
            file.path,
            file.owner,
            file.permissions,
            indent(6, &file.content)
        ));
    }
    out
}

/// CABPK's `Indent`: every line, the last included, prefixed with `width` spaces.
pub fn indent(width: usize, text: &str) -> String {
    let pad = " ".repeat(width);
    format!(
        "{pad}{}",
        text.split('\n')
            .collect::<Vec<_>>()
            .join(&format!("\n{pad}"))
    )
}
