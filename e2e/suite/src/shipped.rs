//! The manager as shipped: its image (`hack/image-build.sh`: one static binary on `scratch`) run
//! with `docker run` under the restrictions of the Deployment in `config/` (read-only root file
//! system, no capability, no privilege escalation, uid 0), with the mounts a pod has: the Docker
//! socket, the webhook serving certificate, and (standing in for the service account) the
//! management kubeconfig.
//!
//! `tests/components.rs` compares [`ShippedRun::docker_run_args`] with the rendered Deployment, so
//! the two cannot drift apart unnoticed.
//!
//! The image ships Debian's CA bundle at [`CA_BUNDLE`] (issue 32): the manager reads it when its
//! kubeconfig has no `certificate-authority-data`. [`ShippedRun::ca_bundle`] mounts another bundle
//! over it, as an operator trusting a private CA would.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The manager image the as-shipped lane runs, e.g. `capd-rs-manager:e2e` (`hack/test.sh` builds
/// and exports it).
pub const MANAGER_IMAGE_ENV: &str = "CAPD_E2E_MANAGER_IMAGE";
/// The Docker socket, mounted at the same path as the Deployment's hostPath volume.
pub const DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// Where the Deployment mounts the webhook serving certificate (the `--webhook-cert-dir` default).
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Where the lane mounts the management kubeconfig (a pod uses its service account instead).
pub const KUBECONFIG: &str = "/etc/capd-e2e/kubeconfig";
/// Where the image ships its CA bundle (`hack/image-build.sh`; the path of Debian's and of CAPD's
/// distroless image, the first one the manager's TLS stack looks for).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The Deployment's `securityContext` as `docker run` options.
pub const SECURITY_OPTIONS: [&str; 4] = [
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--user=0:0",
];

/// The Deployment's args as `clusterctl init` renders them with the default variables, but the
/// diagnostics address, whose port the lane picks (the container shares the host's network).
pub const DEPLOYMENT_ARGS: [&str; 3] = [
    "--leader-elect",
    "--insecure-diagnostics=false",
    "--feature-gates=MachinePool=true,ClusterTopology=false,PriorityQueue=true,ReconcilerRateLimiting=true",
];

/// Ports the manager listens on in the host's network (free ones, so lanes never collide).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// `--health-addr` (the Deployment's default `:9440`).
    pub health: u16,
    /// `--webhook-port` (the Deployment's default 9443).
    pub webhook: u16,
    /// `--diagnostics-address` (the Deployment's `:8443`).
    pub diagnostics: u16,
}

/// One `docker run` of the manager image.
#[derive(Debug, Clone)]
pub struct ShippedRun {
    /// Container name; also `POD_NAME`, the leader election identity.
    pub name: String,
    /// The manager image.
    pub image: String,
    /// The management kubeconfig on the host.
    pub kubeconfig: PathBuf,
    /// The folder holding `tls.crt` and `tls.key` on the host.
    pub cert_dir: PathBuf,
    /// `POD_NAMESPACE`: where the leader election Lease lives.
    pub namespace: String,
    /// `CAPD_DOCKER_NETWORK`.
    pub network: String,
    /// Where it listens.
    pub ports: Ports,
    /// `CAPD_RS_UNPRIVILEGED_CONTAINERS`: this engine refuses privileged containers.
    pub unprivileged: bool,
    /// Further manager flags (e.g. `--watch-filter` against an existing cluster).
    pub extra_args: Vec<String>,
    /// A CA bundle on the host mounted read-only over the image's [`CA_BUNDLE`]; `None` runs
    /// the image with the bundle it ships.
    pub ca_bundle: Option<PathBuf>,
}

impl ShippedRun {
    /// The arguments of `docker run`: options, the image, then the manager's args.
    pub fn docker_run_args(&self) -> Vec<String> {
        let mut args = vec![
            "--detach".to_string(),
            format!("--name={}", self.name),
            "--network=host".to_string(),
        ];
        args.extend(SECURITY_OPTIONS.iter().map(|o| o.to_string()));
        args.extend([
            format!("--volume={}:{DOCKER_SOCKET}", engine_socket()),
            format!("--volume={}:{WEBHOOK_CERT_DIR}:ro", self.cert_dir.display()),
            format!("--volume={}:{KUBECONFIG}:ro", self.kubeconfig.display()),
        ]);
        if let Some(bundle) = &self.ca_bundle {
            args.push(format!("--volume={}:{CA_BUNDLE}:ro", bundle.display()));
        }
        let unprivileged = if self.unprivileged { "true" } else { "false" };
        for (name, value) in [
            ("POD_NAMESPACE", self.namespace.as_str()),
            ("POD_NAME", self.name.as_str()),
            // The Deployment's `status.podIP`: the container shares the host's network.
            ("POD_IP", "127.0.0.1"),
            ("DOCKER_HOST", ""),
            ("CAPD_DOCKER_NETWORK", self.network.as_str()),
            // The components' default: published ports stay on loopback.
            ("CAPD_PUBLISH_ADDRESS", "127.0.0.1"),
            ("CAPD_RS_UNPRIVILEGED_CONTAINERS", unprivileged),
        ] {
            args.push(format!("--env={name}={value}"));
        }
        args.push(self.image.clone());
        args.extend(DEPLOYMENT_ARGS.iter().map(|a| a.to_string()));
        args.extend([
            format!("--diagnostics-address=:{}", self.ports.diagnostics),
            format!("--kubeconfig={KUBECONFIG}"),
            format!("--health-addr=127.0.0.1:{}", self.ports.health),
            format!("--webhook-port={}", self.ports.webhook),
        ]);
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

/// The engine socket on this host that the manager gets at [`DOCKER_SOCKET`], as the
/// Deployment mounts the node's socket: the one `DOCKER_HOST` names (Podman's, in the podman
/// lane), else Docker's.
pub fn engine_socket() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|host| host.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| DOCKER_SOCKET.to_string())
}

/// The image of `CAPD_E2E_MANAGER_IMAGE`, or `None` (the lane is skipped, saying so) when it is
/// not set outside CI. Panics when it is not set and `CI=true`, or when the image is missing.
pub fn image_from_environment() -> Option<String> {
    let image = std::env::var(MANAGER_IMAGE_ENV)
        .ok()
        .filter(|v| !v.is_empty());
    let Some(image) = image else {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true but {MANAGER_IMAGE_ENV} is not set: the as-shipped lane must run in CI \
             (hack/test.sh builds the image with hack/image-build.sh and exports it)"
        );
        // Straight to stderr, past the test harness' capture, so that the skip shows.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED as-shipped lane: {MANAGER_IMAGE_ENV} is not set, so the manager is not run \
             from its image; build it with `bash hack/image-build.sh capd-rs-manager:e2e` and set \
             {MANAGER_IMAGE_ENV}=capd-rs-manager:e2e (hack/test.sh does both)"
        );
        return None;
    };
    assert!(
        crate::docker::docker(&["image", "inspect", "--format", "{{.Id}}", &image]).0,
        "{MANAGER_IMAGE_ENV}={image}, but the engine has no such image: run `bash hack/image-build.sh {image}`"
    );
    Some(image)
}

/// Writes a self-signed serving certificate into `dir` as `tls.crt` and `tls.key`, readable by a
/// root without capabilities (which cannot bypass file permissions).
pub fn write_serving_certificate(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let certs = testapiserver::tls::ServingCerts::generate(&[]).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (file, pem) in [("tls.crt", &certs.cert_pem), ("tls.key", &certs.key_pem)] {
        let path = dir.join(file);
        std::fs::write(&path, pem).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// The CA bundle `image` ships at [`CA_BUNDLE`], as text (copied out of a container created from
/// the image, never started).
pub fn shipped_ca_bundle(image: &str) -> String {
    let (created, container) = crate::docker::docker(&["create", image]);
    assert!(created, "docker create {image} failed");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("ca-certificates.crt");
    let source = format!("{container}:{CA_BUNDLE}");
    let (copied, _) = crate::docker::docker(&["cp", &source, &copy.display().to_string()]);
    crate::docker::docker(&["rm", &container]);
    assert!(copied, "{image} has no {CA_BUNDLE}");
    std::fs::read_to_string(copy).unwrap()
}

/// The certificates of a PEM bundle, DER-encoded; panics on a block that is not one.
pub fn pem_certificates(pem: &str) -> Vec<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap().to_vec())
        .collect()
}

/// How a kubeconfig without CA data lets the manager trust the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// `insecure-skip-tls-verify: true`: no verification.
    SkipVerification,
    /// The system roots: for the image, its CA bundle.
    SystemRoots,
}

/// `kubeconfig` (YAML) with its current cluster's `certificate-authority(-data)` removed, as a
/// kubeconfig of a hosted cluster signed by a public CA has none, and with
/// `insecure-skip-tls-verify: true` when `trust` says so. Returns the new kubeconfig and the CA it
/// held (PEM).
pub fn without_ca_data(kubeconfig: &str, trust: Trust) -> (String, String) {
    use base64::Engine;
    let mut config = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let context = config.current_context.clone().expect("a current context");
    let cluster_name = config
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .expect("the current context names a cluster");
    let cluster = config
        .clusters
        .iter_mut()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_mut())
        .expect("the current context's cluster");
    let data = cluster
        .certificate_authority_data
        .take()
        .expect("the management kubeconfig embeds its CA (certificate-authority-data)");
    cluster.certificate_authority = None;
    cluster.insecure_skip_tls_verify = (trust == Trust::SkipVerification).then_some(true);
    let ca = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .unwrap();
    let text = serde_saphyr::to_string(&config).unwrap();
    (text, String::from_utf8(ca).unwrap())
}
