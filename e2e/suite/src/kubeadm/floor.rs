//! The floor of issue 29: the same real node image bootstrapped by hand with the same kubeadm
//! commands the provider runs, in the same run, so the real-node scenario reports the provider's
//! times as ratios against it (never as asserted timings).
//!
//! By hand means: node containers made with `docker run` and the provider's node run options
//! (`src/docker/node`, as `e2e/images/real/examples/prove.sh` spells them), on a network of the
//! floor's own; systemd's multi-user target awaited in the log and the container runtime checked
//! (`crictl ps`) as the provider does; a worker's preloaded images imported as the provider
//! imports them (`docker save` into `ctr images import`); the CABPK files written in one
//! `docker exec`, with the provider's rewrites of the kubeadm configuration
//! (`src/bootstrap/kubeadm_config.rs`: the CRI socket, the kubelet arguments node containers
//! need, the KubeProxyConfiguration appended to an init); then the provider's command line (`src/bootstrap/kubeadm.rs`: the started sentinel,
//! kubeadm with its `--ignore-preflight-errors`, the success sentinel). There is no load balancer:
//! the control-plane endpoint is the control plane's own address on the floor's network.
//!
//! The worker's clock starts once the controller manager signed `cluster-info` for its bootstrap
//! token: right after `kubeadm init` it may not have yet, and kubeadm's discovery then retries
//! every 5 s, which would time the young controller manager rather than the join (the provider's
//! worker starts later after init, by its own reporting delay).

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::certs::{ClusterCertificates, admin_kubeconfig};
use super::cloud_init::{
    File, INIT_CONFIG_PATH, JOIN_CONFIG_PATH, SENTINEL_FILE_COMMAND, certificate_files,
};
use super::cluster::{CLUSTER_NETWORK, Progress, READY_TIMEOUT, node_image_version};
use super::config::{
    ClusterSettings, Discovery, KubeadmConfigSpec, cluster_configuration,
    control_plane_join_configuration, init_configuration, worker_join_configuration,
};
use super::env::Workload;
use crate::docker::{
    CLUSTER_LABEL, container_volumes, docker, ip_on, network_exists, published_port, volume_exists,
};
use crate::{eventually, unique};

/// The preflight errors the provider ignores for cloud-init bootstrap (`CLOUD_INIT_PREFLIGHT_FLAG`).
pub const PREFLIGHT_FLAG: &str = "--ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables";
/// The label on the floor's network, so that the suite's leftover check (`hack/test.sh`: any
/// network with this label) finds it; the value says who made it.
pub const CREATED_BY_LABEL: &str = "io.x-k8s.capd.created-by";
/// The CRI socket the provider sets when the configuration leaves it unset.
const CRI_SOCKET: &str = "unix:///var/run/containerd/containerd.sock";
/// What the provider runs before kubeadm (`sentinel_snippet` of its `SENTINEL_PATH`).
const STARTED_SENTINEL: &str =
    "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started";
/// The provider appends this to an init configuration that has no kube-proxy configuration.
const KUBE_PROXY_DOCUMENT: &str = "---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  # Skip setting the sysctl net.netfilter.nf_conntrack_max: it is read-only in a container.
  maxPerCore: 0
";
/// The kubelet arguments the provider sets for an image of no known kind release (kind 0.20's).
const NODE_CONTAINER_KUBELET_ARGS: [(&str, &str); 5] = [
    ("image-gc-high-threshold", "100"),
    (
        "eviction-hard",
        "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%",
    ),
    ("fail-swap-on", "false"),
    ("cgroup-root", "/kubelet"),
    ("runtime-cgroups", "/system.slice/containerd.service"),
];
/// From `docker run` to systemd's multi-user target.
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

/// A spec with the kubelet arguments the provider puts into every kubeadm node registration
/// (they win over the spec's own values, as in the provider).
pub fn node_container_spec(spec: &KubeadmConfigSpec) -> KubeadmConfigSpec {
    let mut spec = spec.clone();
    spec.kubelet_extra_args
        .retain(|(name, _)| !NODE_CONTAINER_KUBELET_ARGS.iter().any(|(n, _)| n == name));
    spec.kubelet_extra_args.extend(
        NODE_CONTAINER_KUBELET_ARGS
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string())),
    );
    spec
}

/// The CRI socket in a node registration `config.rs` wrote (it writes none; keys stay sorted).
fn with_cri_socket(document: &str) -> String {
    document.replacen(
        "nodeRegistration:\n",
        &format!("nodeRegistration:\n  criSocket: {CRI_SOCKET}\n"),
        1,
    )
}

/// `/run/kubeadm/kubeadm.yaml` of the first control plane after the provider's rewrite.
pub fn init_config_file(settings: &ClusterSettings, spec: &KubeadmConfigSpec) -> String {
    let spec = node_container_spec(spec);
    format!(
        "---\n{}---\n{}{KUBE_PROXY_DOCUMENT}",
        cluster_configuration(settings, &spec),
        with_cri_socket(&init_configuration(&spec))
    )
}

/// `/run/kubeadm/kubeadm-join-config.yaml` of a worker after the provider's rewrite.
pub fn worker_join_config_file(spec: &KubeadmConfigSpec, discovery: &Discovery) -> String {
    let spec = node_container_spec(spec);
    format!(
        "---\n{}",
        with_cri_socket(&worker_join_configuration(&spec, discovery))
    )
}

/// `/run/kubeadm/kubeadm-join-config.yaml` of a joining control plane after the provider's
/// rewrite (the same as a worker's: the CRI socket and the kubelet arguments).
pub fn control_plane_join_config_file(spec: &KubeadmConfigSpec, discovery: &Discovery) -> String {
    let spec = node_container_spec(spec);
    format!(
        "---\n{}",
        with_cri_socket(&control_plane_join_configuration(&spec, discovery))
    )
}

/// The shell text the provider runs for CABPK's `runcmd` (`kubeadm <init|join> --config <path>
/// && <success sentinel>`): the started sentinel first, the preflight flag after the subcommand.
pub fn kubeadm_command(subcommand: &str, config: &str) -> String {
    format!(
        "{STARTED_SENTINEL} && {{ kubeadm {subcommand} {PREFLIGHT_FLAG} --config {config}  && {SENTINEL_FILE_COMMAND}\n}}"
    )
}

/// `docker run` with the provider's node run options; a control plane also gets `KUBECONFIG`
/// and its API server published on a loopback port of the host.
pub fn node_run_args(
    node: &str,
    cluster: &str,
    image: &str,
    network: &str,
    control_plane: bool,
) -> Vec<String> {
    let role = if control_plane {
        "control-plane"
    } else {
        "worker"
    };
    let mut args: Vec<String> = [
        "run",
        "--detach",
        "--name",
        node,
        "--hostname",
        node,
        "--label",
        &format!("{CLUSTER_LABEL}={cluster}"),
        "--label",
        &format!("io.x-k8s.kind.role={role}"),
        "--privileged",
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--cgroupns=private",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/run",
        "--volume",
        "/var",
        "--volume",
        "/lib/modules:/lib/modules:ro",
        "--restart",
        "on-failure:1",
        "--tty",
        "--network",
        network,
    ]
    .map(String::from)
    .to_vec();
    if control_plane {
        args.extend(
            [
                "--env",
                "KUBECONFIG=/etc/kubernetes/admin.conf",
                "--publish",
                "127.0.0.1::6443",
            ]
            .map(String::from),
        );
    }
    args.push(image.to_string());
    args
}

/// One shell script that writes `write_files` entries (each content in a quoted here-document).
pub fn write_files_script(files: &[File]) -> String {
    let mut script = String::from("set -e\n");
    for file in files {
        let dir = file.path.rsplit_once('/').map_or("/", |(d, _)| d);
        let content = file.content.strip_suffix('\n').unwrap_or(&file.content);
        script.push_str(&format!(
            "mkdir -p {dir}\ncat > {path} <<'CAPD_FLOOR_EOF'\n{content}\nCAPD_FLOOR_EOF\nchown {owner} {path}\nchmod {mode} {path}\n",
            path = file.path,
            owner = file.owner,
            mode = file.permissions,
        ));
    }
    script
}

/// A row of the provider-against-floor table: both times and their ratio (provider / floor).
pub fn ratio_line(what: &str, provider: Duration, floor: Duration) -> String {
    let (p, f) = (provider.as_secs_f64(), floor.as_secs_f64());
    format!("{what:<44} {p:>6.1}s  floor {f:>6.1}s  {:>5.2}x", p / f)
}

/// How long the floor's nodes took, from `docker run`.
#[derive(Debug, Clone, Copy)]
pub struct FloorTimes {
    /// The control plane: kubeadm init done, then its Node Ready.
    pub control_plane: Progress,
    /// The worker: kubeadm join done, then its Node Ready.
    pub worker: Progress,
    /// A second control plane: kubeadm join (with the shared certificates) done, then its Node
    /// Ready.
    pub control_plane_join: Progress,
}

/// The floor's containers, volumes and network, all removed when it is dropped (also on a
/// failure).
pub struct Floor {
    /// The cluster name: its containers carry it in the cluster label.
    pub name: String,
    /// The network of its own.
    pub network: String,
    image: String,
    containers: Vec<String>,
    volumes: Vec<String>,
}

impl Floor {
    /// A floor for a node image, with its network made.
    pub fn new(image: &str) -> Floor {
        let name = unique("floor");
        let floor = Floor {
            network: format!("{name}-net"),
            name,
            image: image.to_string(),
            containers: Vec::new(),
            volumes: Vec::new(),
        };
        let (ok, _) = docker(&[
            "network",
            "create",
            "--label",
            &format!("{CREATED_BY_LABEL}=capd-e2e-floor"),
            &floor.network,
        ]);
        assert!(ok, "docker network create {}", floor.network);
        floor
    }

    /// The node (and container) name of a machine.
    pub fn node(&self, machine: &str) -> String {
        format!("{}-{machine}", self.name)
    }

    /// One control plane initialised, one worker joined, then a second control plane joined,
    /// each timed from its `docker run` (the provider's scenario makes them in that order).
    /// The worker preloads `worker_preload_images` as the provider does: each exported by the
    /// engine (`docker save`) into the node's containerd, after boot and before kubeadm.
    pub async fn measure(
        &mut self,
        spec: &KubeadmConfigSpec,
        worker_preload_images: &[String],
    ) -> FloorTimes {
        let certificates = ClusterCertificates::generate();
        let cp = self.node("cp0");
        let created = Instant::now();
        self.run_node(&cp, true);
        wait_booted(&cp).await;
        let (pods, services, domain) = CLUSTER_NETWORK;
        let endpoint = format!("{}:6443", ip_on(&cp, &self.network));
        let settings = ClusterSettings {
            name: self.name.clone(),
            endpoint: endpoint.clone(),
            version: node_image_version(&self.image).expect("the node image's version"),
            pod_subnet: pods.into(),
            service_subnet: services.into(),
            service_domain: domain.into(),
        };
        let mut files = certificate_files(&certificates);
        files.push(config_file(
            INIT_CONFIG_PATH,
            init_config_file(&settings, spec),
        ));
        bootstrap(&cp, &files, &kubeadm_command("init", INIT_CONFIG_PATH));
        let bootstrapped = created.elapsed();
        let port = published_port(&cp, 6443).expect("the floor's control plane publishes 6443");
        let server = format!("https://127.0.0.1:{port}");
        let workload =
            Workload::connect(&admin_kubeconfig(&self.name, &server, &certificates.ca)).await;
        let ready = workload.wait_node_ready(&cp, created, READY_TIMEOUT).await;
        let control_plane = Progress {
            bootstrapped,
            ready,
        };

        let token = workload.create_bootstrap_token().await;
        wait_token_signed(&workload, &token.id).await;
        let discovery = Discovery {
            api_server_endpoint: endpoint,
            token: token.to_string(),
            ca_cert_hash: certificates.ca.spki_hash(),
        };
        let worker = self.node("md0");
        let created = Instant::now();
        self.run_node(&worker, false);
        wait_booted(&worker).await;
        for image in worker_preload_images {
            preload(&worker, image);
        }
        let file = config_file(JOIN_CONFIG_PATH, worker_join_config_file(spec, &discovery));
        bootstrap(&worker, &[file], &kubeadm_command("join", JOIN_CONFIG_PATH));
        let bootstrapped = created.elapsed();
        let ready = workload
            .wait_node_ready(&worker, created, READY_TIMEOUT)
            .await;
        let worker = Progress {
            bootstrapped,
            ready,
        };

        // KCP's control-plane join: the shared certificates and the join configuration with its
        // `controlPlane` section, with the same token.
        let joining = self.node("cp1");
        let created = Instant::now();
        self.run_node(&joining, true);
        wait_booted(&joining).await;
        let mut files = certificate_files(&certificates);
        files.push(config_file(
            JOIN_CONFIG_PATH,
            control_plane_join_config_file(spec, &discovery),
        ));
        bootstrap(&joining, &files, &kubeadm_command("join", JOIN_CONFIG_PATH));
        let bootstrapped = created.elapsed();
        let ready = workload
            .wait_node_ready(&joining, created, READY_TIMEOUT)
            .await;
        FloorTimes {
            control_plane,
            worker,
            control_plane_join: Progress {
                bootstrapped,
                ready,
            },
        }
    }

    fn run_node(&mut self, node: &str, control_plane: bool) {
        let args = node_run_args(node, &self.name, &self.image, &self.network, control_plane);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Recorded first: a run that fails half-way may still have made the container.
        self.containers.push(node.to_string());
        let (ok, _) = docker(&args);
        assert!(ok, "docker run of the floor's {node}");
        self.volumes.extend(container_volumes(node));
    }

    /// Removes the containers (with their volumes) and the network; returns what is still there.
    pub fn remove(&mut self) -> Vec<String> {
        for container in &self.containers {
            let _ = docker(&["rm", "--force", "--volumes", container]);
        }
        for volume in &self.volumes {
            if volume_exists(volume) {
                let _ = docker(&["volume", "rm", "--force", volume]);
            }
        }
        if network_exists(&self.network) {
            let _ = docker(&["network", "rm", &self.network]);
        }
        let mut left: Vec<String> = self
            .containers
            .iter()
            .filter(|c| docker(&["container", "inspect", c]).0)
            .map(|c| format!("container {c}"))
            .collect();
        left.extend(
            self.volumes
                .iter()
                .filter(|v| volume_exists(v))
                .map(|v| format!("volume {v}")),
        );
        if network_exists(&self.network) {
            left.push(format!("network {}", self.network));
        }
        left
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let left = self.remove();
        if !left.is_empty() {
            eprintln!("the floor could not remove: {}", left.join(", "));
        }
    }
}

/// Waits until the controller manager's bootstrap signer signed `kube-public/cluster-info` for a
/// token (the `jws-kubeconfig-<id>` key that kubeadm's token discovery needs).
async fn wait_token_signed(workload: &Workload, id: &str) {
    let api: Api<ConfigMap> = Api::namespaced(workload.client.clone(), "kube-public");
    let key = format!("jws-kubeconfig-{id}");
    eventually(
        READY_TIMEOUT,
        &format!("cluster-info signed for bootstrap token {id}"),
        || async {
            let map = api.get_opt("cluster-info").await.ok()??;
            map.data?.contains_key(&key).then_some(())
        },
    )
    .await;
}

fn config_file(path: &str, content: String) -> File {
    File {
        path: path.into(),
        owner: "root:root".into(),
        permissions: "0640".into(),
        content,
    }
}

/// Waits for systemd's multi-user target in the node's log (what the provider waits for), then
/// for the container runtime as the provider checks it: `crictl ps`, every 500 ms for up to 4 s.
async fn wait_booted(node: &str) {
    eventually(
        BOOT_TIMEOUT,
        &format!("systemd in the floor's {node}"),
        || async {
            let log = docker(&["logs", node]).1;
            log.lines()
                .any(|l| l.contains("Reached target") && l.contains("Multi-User System"))
                .then_some(())
        },
    )
    .await;
    for _ in 0..8 {
        if docker(&["exec", node, "crictl", "ps"]).0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the container runtime of the floor's {node} does not answer crictl ps");
}

/// `docker save <image> | docker exec -i <node> ctr --namespace=k8s.io images import -`; panics
/// when either side fails.
fn preload(node: &str, image: &str) {
    let mut save = Command::new("docker")
        .args(["save", image])
        .stdout(Stdio::piped())
        .spawn()
        .expect("docker save");
    let archive = save.stdout.take().expect("docker save's output");
    let import = Command::new("docker")
        .args(["exec", "--interactive", node])
        .args(["ctr", "--namespace=k8s.io", "images", "import", "-"])
        .stdin(archive)
        .output()
        .expect("docker exec ctr");
    assert!(
        save.wait().expect("docker save").success(),
        "docker save {image}"
    );
    assert!(
        import.status.success(),
        "importing {image} into the floor's {node}: {}",
        String::from_utf8_lossy(&import.stderr)
    );
}

/// Writes the files in one exec, then runs the kubeadm command line; panics with its output
/// when either fails.
fn bootstrap(node: &str, files: &[File], command: &str) {
    let mut child = Command::new("docker")
        .args(["exec", "--interactive", node, "/bin/sh", "-s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("docker exec");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(write_files_script(files).as_bytes())
        .expect("the write_files script");
    let out = child.wait_with_output().expect("docker exec");
    assert!(
        out.status.success(),
        "writing the files in the floor's {node}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("docker")
        .args(["exec", node, "/bin/sh", "-c", command])
        .output()
        .expect("docker exec");
    assert!(
        out.status.success(),
        "kubeadm in the floor's {node}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> KubeadmConfigSpec {
        KubeadmConfigSpec::real_node()
    }

    /// A join's discovery with a short, fixed CA hash, for whole-file comparisons.
    fn discovery() -> Discovery {
        Discovery {
            api_server_endpoint: "10.89.0.2:6443".into(),
            token: "abcdef.0123456789abcdef".into(),
            ca_cert_hash: "sha256:00".into(),
        }
    }

    #[test]
    fn the_init_config_is_what_the_provider_writes_after_its_rewrite() {
        let settings = ClusterSettings {
            name: "floor".into(),
            endpoint: "10.89.0.2:6443".into(),
            version: "v1.28.4".into(),
            pod_subnet: "10.244.0.0/16".into(),
            service_subnet: "10.96.0.0/12".into(),
            service_domain: "cluster.local".into(),
        };
        let file = init_config_file(&settings, &spec());
        // The documents of /run/kubeadm/kubeadm.yaml in a node the provider bootstrapped.
        let expected_init = "---
apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
localAPIEndpoint: {}
nodeRegistration:
  criSocket: unix:///var/run/containerd/containerd.sock
  imagePullPolicy: Never
  kubeletExtraArgs:
    cgroup-root: /kubelet
    eviction-hard: nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%
    fail-swap-on: \"false\"
    image-gc-high-threshold: \"100\"
    runtime-cgroups: /system.slice/containerd.service
  taints: null
skipPhases:
- addon/coredns
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
";
        assert!(file.starts_with("---\napiServer:\n"), "{file}");
        assert!(
            file.contains("controlPlaneEndpoint: 10.89.0.2:6443\n"),
            "{file}"
        );
        assert!(file.contains(expected_init), "{file}");
        assert!(file.ends_with("  maxPerCore: 0\n"), "{file}");
    }

    #[test]
    fn the_worker_join_config_is_what_the_provider_writes_after_its_rewrite() {
        assert_eq!(
            worker_join_config_file(&spec(), &discovery()),
            "---
apiVersion: kubeadm.k8s.io/v1beta3
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.89.0.2:6443
    caCertHashes:
    - sha256:00
    token: abcdef.0123456789abcdef
kind: JoinConfiguration
nodeRegistration:
  criSocket: unix:///var/run/containerd/containerd.sock
  kubeletExtraArgs:
    cgroup-root: /kubelet
    eviction-hard: nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%
    fail-swap-on: \"false\"
    image-gc-high-threshold: \"100\"
    runtime-cgroups: /system.slice/containerd.service
  taints:
  - effect: NoSchedule
    key: node.cluster.x-k8s.io/uninitialized
"
        );
    }

    #[test]
    fn the_control_plane_join_config_is_what_the_provider_writes_after_its_rewrite() {
        assert_eq!(
            control_plane_join_config_file(&spec(), &discovery()),
            "---
apiVersion: kubeadm.k8s.io/v1beta3
controlPlane:
  localAPIEndpoint: {}
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.89.0.2:6443
    caCertHashes:
    - sha256:00
    token: abcdef.0123456789abcdef
kind: JoinConfiguration
nodeRegistration:
  criSocket: unix:///var/run/containerd/containerd.sock
  imagePullPolicy: Never
  kubeletExtraArgs:
    cgroup-root: /kubelet
    eviction-hard: nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%
    fail-swap-on: \"false\"
    image-gc-high-threshold: \"100\"
    runtime-cgroups: /system.slice/containerd.service
  taints: null
"
        );
    }

    #[test]
    fn kubeadm_runs_with_the_providers_command_line() {
        assert_eq!(
            kubeadm_command("init", INIT_CONFIG_PATH),
            "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && { kubeadm init --ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete\n}"
        );
    }

    #[test]
    fn nodes_run_with_the_providers_options_and_only_control_planes_publish() {
        let cp = node_run_args("f-cp0", "f", "img", "f-net", true).join(" ");
        for option in [
            "--privileged",
            "--cgroupns=private",
            "--tmpfs /run",
            "--tmpfs /tmp",
            "--volume /var",
            "--volume /lib/modules:/lib/modules:ro",
            "seccomp=unconfined",
            "apparmor=unconfined",
            "--tty",
            "--network f-net",
            "--label io.x-k8s.kind.cluster=f",
            "--publish 127.0.0.1::6443",
        ] {
            assert!(cp.contains(option), "{option} in {cp}");
        }
        assert!(cp.ends_with(" img"));
        let worker = node_run_args("f-md0", "f", "img", "f-net", false).join(" ");
        assert!(!worker.contains("--publish") && worker.contains("io.x-k8s.kind.role=worker"));
    }

    #[test]
    fn files_are_written_whole_with_their_mode() {
        let script = write_files_script(&[config_file("/run/kubeadm/a.yaml", "x: 1\n".into())]);
        assert_eq!(
            script,
            "set -e\nmkdir -p /run/kubeadm\ncat > /run/kubeadm/a.yaml <<'CAPD_FLOOR_EOF'\nx: 1\nCAPD_FLOOR_EOF\nchown root:root /run/kubeadm/a.yaml\nchmod 0640 /run/kubeadm/a.yaml\n"
        );
    }

    #[test]
    fn rows_show_both_times_and_the_ratio() {
        assert_eq!(
            ratio_line(
                "cp0: created -> first control plane Ready",
                Duration::from_millis(22_800),
                Duration::from_millis(19_000)
            ),
            "cp0: created -> first control plane Ready      22.8s  floor   19.0s   1.20x"
        );
    }
}
