//! Domain types exchanged with a [`ContainerRuntime`](super::ContainerRuntime).
//!
//! They describe containers, networks and exec calls in the provider's words; no Docker client type
//! leaks through them, so the layers above can be tested with [`FakeRuntime`](super::FakeRuntime).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnetwork::IpNetwork;

/// Container or network labels, ordered by key so output and comparisons are stable.
pub type Labels = BTreeMap<String, String>;

/// Everything needed to create and start one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSpec {
    /// Container name; also the hostname unless [`ContainerSpec::hostname`] is set.
    pub name: String,
    /// Hostname inside the container (defaults to the name).
    pub hostname: Option<String>,
    /// Image reference, used exactly as given.
    pub image: String,
    /// Labels put on the container.
    pub labels: Labels,
    /// Environment variables, in order, as `(name, value)`.
    pub env: Vec<(String, String)>,
    /// Overrides the image's entrypoint when set.
    pub entrypoint: Option<Vec<String>>,
    /// Overrides the image's command when set.
    pub cmd: Option<Vec<String>>,
    /// Allocate a pseudo-terminal (kind node images expect one).
    pub tty: bool,
    /// Run the container privileged.
    pub privileged: bool,
    /// Security options such as `seccomp=unconfined`.
    pub security_opt: Vec<String>,
    /// tmpfs mounts: container path → mount options (may be empty).
    pub tmpfs: BTreeMap<String, String>,
    /// Anonymous volumes, by container path (removed with the container).
    pub volumes: Vec<String>,
    /// Bind mounts from the host.
    pub mounts: Vec<BindMount>,
    /// Container ports published on the host.
    pub ports: Vec<PortPublish>,
    /// What the engine does when the container exits.
    pub restart: RestartPolicy,
    /// Give the container its own cgroup namespace (kind images built by kind ≥ 0.20).
    pub private_cgroupns: bool,
    /// Namespaced kernel parameters.
    pub sysctls: BTreeMap<String, String>,
    /// The network the container joins (its only network).
    pub network: String,
    /// The addresses it asks for on [`ContainerSpec::network`], which the engine gives it at every
    /// start; a family left `None` gets an address chosen by the engine at each start.
    pub addresses: EndpointAddresses,
    /// Host devices made visible in the container.
    pub devices: Vec<DeviceMapping>,
    /// Run in the host's user namespace (needed when the engine remaps user namespaces).
    pub userns_host: bool,
}

impl ContainerSpec {
    /// The settings CAPD gives every container it runs, nodes and load balancers alike
    /// (`RunContainer`): hostname = name, a TTY, privileged with seccomp and AppArmor unconfined,
    /// tmpfs on `/tmp` and `/run`, an anonymous volume on `/var`, restart once on failure.
    pub fn capd_defaults(name: &str, image: &str, network: &str) -> Self {
        ContainerSpec {
            name: name.to_string(),
            hostname: Some(name.to_string()),
            image: image.to_string(),
            tty: true,
            privileged: true,
            security_opt: vec![
                "seccomp=unconfined".to_string(),
                "apparmor=unconfined".to_string(),
            ],
            tmpfs: BTreeMap::from([
                ("/tmp".to_string(), String::new()),
                ("/run".to_string(), String::new()),
            ]),
            volumes: vec!["/var".to_string()],
            restart: RestartPolicy::OnFailure { max_retries: 1 },
            network: network.to_string(),
            ..ContainerSpec::default()
        }
    }
}

/// A host path mounted into a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindMount {
    /// Path on the host.
    pub host_path: String,
    /// Path inside the container.
    pub container_path: String,
    /// Mount read-only.
    pub read_only: bool,
    /// Ask the engine to relabel the content for SELinux (`:Z`).
    pub selinux_relabel: bool,
}

impl BindMount {
    /// The mount in the engine's `host:container[:opts]` bind syntax.
    pub fn to_bind_string(&self) -> String {
        let mut options = Vec::new();
        if self.read_only {
            options.push("ro");
        }
        if self.selinux_relabel {
            options.push("Z");
        }
        if options.is_empty() {
            format!("{}:{}", self.host_path, self.container_path)
        } else {
            format!(
                "{}:{}:{}",
                self.host_path,
                self.container_path,
                options.join(",")
            )
        }
    }
}

/// A container port published on a host address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPublish {
    /// TCP port inside the container.
    pub container_port: u16,
    /// Host address the port is bound to (for example `127.0.0.1`).
    pub host_ip: String,
    /// Host port; `None` lets the engine pick a free one.
    pub host_port: Option<u16>,
}

/// Restart policy of a container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Never restart.
    #[default]
    No,
    /// Restart when the main process exits non-zero, at most `max_retries` times.
    OnFailure {
        /// Maximum number of restarts.
        max_retries: u32,
    },
    /// Always restart unless stopped by the user.
    UnlessStopped,
}

/// A host device exposed to a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMapping {
    /// Device path on the host.
    pub host_path: String,
    /// Device path inside the container.
    pub container_path: String,
    /// cgroup permissions, for example `rwm`.
    pub permissions: String,
}

/// What the engine reports about one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Engine id.
    pub id: String,
    /// Name without the engine's leading `/`.
    pub name: String,
    /// Image reference the container was created from.
    pub image: String,
    /// Labels of the container.
    pub labels: Labels,
    /// Whether the main process is running.
    pub running: bool,
    /// Engine state word (`created`, `running`, `exited`, ...).
    pub status: String,
    /// Exit code of the last run (0 while running).
    pub exit_code: i64,
    /// Addresses per attached network, by network name.
    pub networks: BTreeMap<String, EndpointAddresses>,
    /// Published ports.
    pub ports: Vec<PublishedPort>,
    /// Names of the volumes mounted (anonymous ones included).
    pub volumes: Vec<String>,
}

impl ContainerInfo {
    /// The host port published for a container TCP port, if any.
    pub fn host_port(&self, container_port: u16) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.container_port == container_port)
            .map(|p| p.host_port)
    }
}

/// A container's addresses on one network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointAddresses {
    /// IPv4 address, when the network has IPv4.
    pub ipv4: Option<Ipv4Addr>,
    /// Global IPv6 address, when the network has IPv6.
    pub ipv6: Option<Ipv6Addr>,
}

/// A published port as the engine bound it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedPort {
    /// TCP port inside the container.
    pub container_port: u16,
    /// Host address.
    pub host_ip: String,
    /// Host port.
    pub host_port: u16,
}

/// One line of a container listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSummary {
    /// Engine id.
    pub id: String,
    /// Name without the leading `/`.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Labels of the container.
    pub labels: Labels,
    /// Whether the container is running.
    pub running: bool,
    /// Engine state word.
    pub status: String,
}

/// A command to run inside a running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// Program and arguments; never passed through a shell by the runtime.
    pub argv: Vec<String>,
    /// Extra environment variables as `(name, value)`.
    pub env: Vec<(String, String)>,
    /// Data fed to the process' standard input, which is closed afterwards.
    pub stdin: Option<ExecStdin>,
    /// Longest time to wait for the process to end.
    pub timeout: Duration,
}

/// Default time an exec may take (CAPD polls for five minutes).
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(300);

impl ExecRequest {
    /// A request for `argv` with no stdin, no extra environment and the default timeout.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            stdin: None,
            timeout: DEFAULT_EXEC_TIMEOUT,
        }
    }

    /// Feeds `data` to standard input.
    pub fn stdin_bytes(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(ExecStdin::Bytes(data.into()));
        self
    }

    /// Streams the engine's export of `image` (`docker save`, a tar archive) to standard input,
    /// chunk by chunk: no local file, memory bounded by one chunk.
    pub fn stdin_image(mut self, image: impl Into<String>) -> Self {
        self.stdin = Some(ExecStdin::Image(image.into()));
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Standard input of an exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecStdin {
    /// Bytes held in memory.
    Bytes(Vec<u8>),
    /// The engine's export of this image (`docker save`), streamed to the process as it is read.
    Image(String),
}

/// What an exec produced once its process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Everything written to standard output.
    pub stdout: Vec<u8>,
    /// Everything written to standard error.
    pub stderr: Vec<u8>,
    /// Exit code of the process.
    pub exit_code: i64,
}

impl ExecOutput {
    /// Whether the process exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// The last `max_chars` characters of stdout and stderr, for error messages and conditions.
    pub fn output_tail(&self, max_chars: usize) -> String {
        let mut text = self.stdout_text();
        let stderr = self.stderr_text();
        if !stderr.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&stderr);
        }
        let text = text.trim();
        let count = text.chars().count();
        if count <= max_chars {
            text.to_string()
        } else {
            let tail: String = text.chars().skip(count - max_chars).collect();
            format!("...{tail}")
        }
    }
}

/// A network to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSpec {
    /// Network name.
    pub name: String,
    /// Driver (`bridge`).
    pub driver: String,
    /// Driver options.
    pub options: BTreeMap<String, String>,
    /// Labels put on the network.
    pub labels: Labels,
    /// Enable IPv6 on the network.
    pub enable_ipv6: bool,
    /// Subnets to use; the engine picks an IPv4 subnet itself when none is IPv4.
    pub subnets: Vec<IpNetwork>,
}

/// What the engine reports about one network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkInfo {
    /// Engine id.
    pub id: String,
    /// Network name.
    pub name: String,
    /// Driver name.
    pub driver: String,
    /// Driver options.
    pub options: BTreeMap<String, String>,
    /// Labels of the network.
    pub labels: Labels,
    /// Whether IPv6 is enabled.
    pub enable_ipv6: bool,
    /// Configured subnets.
    pub subnets: Vec<IpNetwork>,
    /// Gateway addresses, one per subnet that has one (same order as the engine reports them).
    pub gateways: Vec<IpAddr>,
    /// Ids of the containers attached (only filled by an inspect, not by a listing).
    pub containers: Vec<String>,
    /// The addresses of the containers attached (only filled by an inspect).
    pub attached_addresses: Vec<IpAddr>,
}

/// Whether two image references name the same image, however fully each engine writes them:
/// Docker reports a container's image as it was given (`kindest/node:v1.31.0`), Podman fully
/// qualified (`docker.io/kindest/node:v1.31.0`, and `localhost/capd-test/node:...` for an image
/// loaded from an archive, which its short name finds).
pub fn same_image(a: &str, b: &str) -> bool {
    qualified(a) == qualified(b)
}

/// `reference` with Docker Hub's registry and `library/` written out; Podman's `localhost/`
/// prefix of registry-less images is read as no registry.
fn qualified(reference: &str) -> String {
    let reference = reference.strip_prefix("localhost/").unwrap_or(reference);
    match reference.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => {
            reference.to_string()
        }
        Some(_) => format!("docker.io/{reference}"),
        None => format!("docker.io/library/{reference}"),
    }
}

/// Which engine serves the Docker API: read once from its `/version` answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// Docker Engine (Moby).
    #[default]
    Docker,
    /// Podman's Docker-compatible service (`podman system service`).
    Podman,
}

/// The engine behind the API, and the facts about it that change what the provider asks of it.
/// Code that differs between engines asks one of these facts, never the kind itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Engine {
    /// Which engine.
    pub kind: EngineKind,
    /// Its version (`20.10.24`, `4.3.1`).
    pub version: String,
}

impl Engine {
    /// A Docker engine of `version`.
    pub fn docker(version: &str) -> Self {
        Self {
            kind: EngineKind::Docker,
            version: version.to_string(),
        }
    }

    /// A Podman service of `version`.
    pub fn podman(version: &str) -> Self {
        Self {
            kind: EngineKind::Podman,
            version: version.to_string(),
        }
    }

    /// The engine's name as a metric label and in logs: `docker` or `podman`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// Whether a bridge network masquerades only when created with the driver option
    /// `com.docker.network.bridge.enable_ip_masquerade`. Podman masquerades every bridge network
    /// that is not internal, and answers the option with a warning that it is not recognised.
    pub fn takes_masquerade_option(&self) -> bool {
        self.kind == EngineKind::Docker
    }

    /// Whether a container may ask for an IPv4 address only on a network whose IPv4 subnet was
    /// named when the network was created. Docker refuses it on a subnet it chose itself;
    /// Podman records every network's subnets and accepts it on any.
    pub fn pins_only_named_subnets(&self) -> bool {
        self.kind == EngineKind::Docker
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.kind {
            EngineKind::Docker => "Docker",
            EngineKind::Podman => "Podman",
        };
        write!(f, "{name} {}", self.version)
    }
}

/// Facts about the engine's host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostInfo {
    /// Number of CPUs.
    pub ncpu: u32,
    /// Total memory in bytes.
    pub mem_total_bytes: u64,
    /// Engine version string.
    pub server_version: String,
    /// Storage driver (`overlay2`, `btrfs`, `zfs`, ...).
    pub storage_driver: String,
    /// Security options such as `name=rootless` or `name=userns`.
    pub security_options: Vec<String>,
    /// The cgroup version of the engine's host (`1` or `2`), when the engine reports it.
    pub cgroup_version: Option<String>,
    /// The cgroup controllers the engine may hand to containers, when the engine reports them
    /// (Podman does; for a rootless engine on cgroup v2, the controllers delegated to its user).
    pub cgroup_controllers: Option<Vec<String>>,
}

impl HostInfo {
    /// Whether the engine runs rootless.
    pub fn rootless(&self) -> bool {
        self.security_options
            .iter()
            .any(|o| o.contains("name=rootless"))
    }

    /// Whether the engine remaps user namespaces.
    pub fn userns_remap(&self) -> bool {
        self.security_options
            .iter()
            .any(|o| o.contains("name=userns"))
    }

    /// What a rootless engine lacks to run Kubernetes nodes, in words for the start-up error;
    /// `None` for an engine that runs as root or has what it needs.
    ///
    /// A node runs systemd and a kubelet that both manage cgroups: a rootless engine can only
    /// give a container cgroups it may write to, which needs cgroup v2 with the controllers
    /// delegated to the user (kind has the same requirement for rootless Docker and Podman).
    pub fn rootless_shortfall(&self) -> Option<String> {
        const NEEDED: [&str; 3] = ["cpu", "memory", "pids"];
        const HOW: &str = "a rootless engine needs cgroup v2 with the cpu, memory and pids controllers delegated to its user (systemd: Delegate=yes for user@.service) to run Kubernetes nodes";
        if !self.rootless() {
            return None;
        }
        match (self.cgroup_version.as_deref(), &self.cgroup_controllers) {
            (Some("2"), None) => None,
            (Some("2"), Some(controllers)) => {
                let missing: Vec<&str> = NEEDED
                    .into_iter()
                    .filter(|n| !controllers.iter().any(|c| c == n))
                    .collect();
                (!missing.is_empty()).then(|| {
                    format!(
                        "the engine runs rootless on cgroup v2 without the {} controller(s) delegated to it, and {HOW}",
                        missing.join(", ")
                    )
                })
            }
            (Some(version), _) => Some(format!(
                "the engine runs rootless on cgroup v{version}, and {HOW}"
            )),
            (None, _) => Some(format!(
                "the engine runs rootless on a cgroup version it does not report, and {HOW}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_match_however_fully_the_engine_writes_them() {
        for (a, b) in [
            ("kindest/node:v1.31.0", "docker.io/kindest/node:v1.31.0"),
            ("capd-test/node:abc", "localhost/capd-test/node:abc"),
            ("haproxy:2.6", "docker.io/library/haproxy:2.6"),
            ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
            ("localhost:5000/node:v1", "localhost:5000/node:v1"),
        ] {
            assert!(same_image(a, b), "{a} and {b}");
            assert!(same_image(b, a), "{b} and {a}");
        }
        for (a, b) in [
            ("kindest/node:v1.31.0", "kindest/node:v1.32.0"),
            ("kindest/node:v1.31.0", "quay.io/kindest/node:v1.31.0"),
            ("localhost:5000/node:v1", "node:v1"),
        ] {
            assert!(!same_image(a, b), "{a} and {b}");
        }
    }
}
