//! Shared helpers of the controller integration tests: the real manager binary against an
//! in-process test API server and the real Docker engine, the test playing Cluster API core.
//!
//! Every test gets its own management and workload API servers, its own Docker network and
//! cluster names, and a guard that removes whatever the provider left in the engine, even when
//! the test panics.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Handle, Options, TestApiServer};

mod objects;

pub const MANAGER: &str = env!("CARGO_BIN_EXE_manager");
pub const NAMESPACE: &str = "default";
const REFERENCE_CAPI_CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capi-release-1.12"
);

/// The test images built by `e2e/images/build.sh`.
pub struct Images {
    pub node: String,
    pub haproxy_repository: String,
    pub haproxy_tag: String,
}

fn image_setting(key: &str) -> Option<String> {
    if let Ok(value) = std::env::var(key)
        && !value.is_empty()
    {
        return Some(value);
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/images/.build/images.env");
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim().to_string())
}

fn image_present(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The test images; panics with instructions when they were not built.
pub fn images() -> Images {
    let missing = "the test images are missing: run `bash e2e/images/build.sh` (hack/test.sh does)";
    let node = image_setting("CAPD_TEST_NODE_IMAGE").expect(missing);
    let haproxy = image_setting("CAPD_TEST_HAPROXY_IMAGE").expect(missing);
    assert!(image_present(&node) && image_present(&haproxy), "{missing}");
    // The provider builds the load balancer image as `<repository>/haproxy:<tag>`.
    let (repository, tag) = haproxy
        .rsplit_once(':')
        .expect("the haproxy image has a tag");
    let repository = repository
        .strip_suffix("/haproxy")
        .expect("the haproxy test image is named <repository>/haproxy:<tag>");
    Images {
        node,
        haproxy_repository: repository.to_string(),
        haproxy_tag: tag.to_string(),
    }
}

/// Whether the engine runs privileged containers (sandboxed engines refuse them; the manager then
/// runs the stand-in images unprivileged).
pub fn privileged_allowed(node_image: &str) -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let ok = docker(&["run", "--rm", "--privileged", "--entrypoint", "true", node_image]).0;
        if !ok {
            eprintln!("note: this engine refuses privileged containers; the manager runs them unprivileged");
        }
        ok
    })
}

/// A short name unique to this process and call (container host names must stay short).
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("{prefix}{:x}{n}", (std::process::id() ^ nanos) & 0xffffff)
}

/// Waits until `check` returns `Some`, polling every 200 ms.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn docker(args: &[&str]) -> (bool, String) {
    let out = Command::new("docker").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    docker(args)
        .1
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Container names of a cluster (running or not).
pub fn cluster_containers(cluster: &str) -> Vec<String> {
    let mut names = docker_lines(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=io.x-k8s.kind.cluster={cluster}"),
        "--format",
        "{{.Names}}",
    ]);
    names.sort();
    names
}

/// The anonymous volumes of a container.
pub fn container_volumes(container: &str) -> Vec<String> {
    docker_lines(&[
        "inspect",
        "--format",
        "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}\n{{end}}{{end}}",
        container,
    ])
}

pub fn volume_exists(volume: &str) -> bool {
    docker(&["volume", "inspect", volume]).0
}

pub fn network_exists(network: &str) -> bool {
    docker(&["network", "inspect", network]).0
}

/// Runs a command in a container and returns its stdout.
pub fn docker_exec(container: &str, command: &[&str]) -> String {
    let mut args = vec!["exec", container];
    args.extend_from_slice(command);
    docker(&args).1
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn client_for(handle: &Handle) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(handle.kubeconfig_yaml()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// The kind of a Cluster API core object.
pub fn capi(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind))
}

/// The kind of one of our objects.
pub fn infra(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        kind,
    ))
}

/// A minimal CRD for a Cluster API core kind, used when the reference CRDs are not available.
fn minimal_capi_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
        "spec": {
            "group": "cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1beta2",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

fn crd_from_file(path: &Path) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// A running manager process.
pub struct Manager {
    child: Child,
    pub health_port: u16,
}

/// One test's world: API servers, the manager, and what to clean up in the engine.
pub struct Env {
    pub mgmt: Handle,
    pub workload: Handle,
    pub client: Client,
    pub workload_client: Client,
    pub network: String,
    pub images: Images,
    manager: Option<Manager>,
    extra_args: Vec<String>,
    log: PathBuf,
    starts: u32,
    clusters: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Env {
    /// Starts both API servers, installs the CRDs and starts the manager.
    pub async fn start(test: &str) -> Env {
        Self::start_with(test, &[]).await
    }

    /// As [`Env::start`], with extra manager flags.
    pub async fn start_with(test: &str, extra_args: &[&str]) -> Env {
        let images = images();
        let mgmt = TestApiServer::start(Options::default()).await.unwrap();
        let workload = TestApiServer::start(Options {
            context_name: "workload".into(),
            ..Options::default()
        })
        .await
        .unwrap();
        let client = client_for(&mgmt).await;
        let workload_client = client_for(&workload).await;
        let dir = tempfile::tempdir().unwrap();
        let mut env = Env {
            log: dir.path().join("manager.log"),
            mgmt,
            workload,
            client,
            workload_client,
            network: unique(&format!("capdit-{test}-")),
            images,
            manager: None,
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
            starts: 0,
            clusters: Vec::new(),
            _dir: dir,
        };
        env.install_crds().await;
        env.start_manager();
        env
    }

    async fn install_crds(&self) {
        let mut crds: Vec<CustomResourceDefinition> = Vec::new();
        let bases = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/crd/bases");
        for entry in std::fs::read_dir(bases).unwrap() {
            crds.push(crd_from_file(&entry.unwrap().path()));
        }
        let reference = Path::new(REFERENCE_CAPI_CRDS);
        if reference.is_dir() {
            for file in [
                "cluster.x-k8s.io_clusters.yaml",
                "cluster.x-k8s.io_machines.yaml",
            ] {
                crds.push(crd_from_file(&reference.join(file)));
            }
        } else {
            println!(
                "note: {REFERENCE_CAPI_CRDS} not found; using minimal Cluster and Machine CRDs"
            );
            crds.push(minimal_capi_crd("Cluster", "clusters"));
            crds.push(minimal_capi_crd("Machine", "machines"));
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in &crds {
            api.create(&PostParams::default(), crd).await.unwrap();
        }
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap();
            eventually(Duration::from_secs(10), "CRDs to be established", || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get(&name).await.ok()?;
                    crd.status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                }
            })
            .await;
        }
    }

    /// Starts (or restarts) the manager binary.
    pub fn start_manager(&mut self) {
        assert!(self.manager.is_none(), "the manager already runs");
        self.starts += 1;
        let health_port = free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(MANAGER)
            .args([
                &format!("--kubeconfig={}", self.mgmt.kubeconfig_path().display()),
                &format!("--health-addr=127.0.0.1:{health_port}"),
                "--diagnostics-address=0",
                &format!("--docker-network={}", self.network),
            ])
            .args(&self.extra_args)
            .env_remove("RUST_LOG")
            .env("CAPD_DOCKER_NETWORK", &self.network)
            .env(
                "CAPD_RS_UNPRIVILEGED_CONTAINERS",
                if privileged_allowed(&self.images.node) {
                    "false"
                } else {
                    "true"
                },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.manager = Some(Manager { child, health_port });
    }

    /// Stops the manager: `kill -9` when `crash`, else SIGTERM and a wait for its exit.
    pub fn stop_manager(&mut self, crash: bool) {
        let Some(mut manager) = self.manager.take() else {
            return;
        };
        if crash {
            let _ = manager.child.kill();
        } else {
            let pid = manager.child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
        }
        let _ = manager.child.wait();
    }

    /// Waits until `/readyz` of the manager answers 200.
    pub async fn wait_ready(&self) {
        let port = self.manager.as_ref().unwrap().health_port;
        eventually(
            Duration::from_secs(30),
            "the manager to be ready",
            || async move {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()?;
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                stream
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await
                    .ok()?;
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.ok()?;
                answer.starts_with("HTTP/1.1 200").then_some(())
            },
        )
        .await;
    }

    /// The manager's log so far.
    pub fn manager_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A unique cluster name, whose containers are removed when the test ends.
    pub fn cluster_name(&mut self) -> String {
        let name = unique("it");
        self.clusters.push(name.clone());
        name
    }

    pub fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NAMESPACE, resource)
    }

    pub async fn create(&self, resource: &ApiResource, object: Value) -> DynamicObject {
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        self.api(resource)
            .create(&PostParams::default(), &object)
            .await
            .unwrap()
    }

    pub async fn get(&self, resource: &ApiResource, name: &str) -> Option<DynamicObject> {
        self.api(resource).get_opt(name).await.unwrap()
    }

    pub async fn merge_patch(&self, resource: &ApiResource, name: &str, patch: Value) {
        self.api(resource)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    pub async fn merge_patch_status(&self, resource: &ApiResource, name: &str, patch: Value) {
        self.api(resource)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    pub async fn delete(&self, resource: &ApiResource, name: &str) {
        let _ = self
            .api(resource)
            .delete(name, &Default::default())
            .await
            .unwrap();
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop_manager(true);
        if std::thread::panicking() || std::env::var("CAPD_IT_SHOW_LOG").is_ok() {
            let log = self.manager_log();
            let lines: Vec<&str> = log.lines().collect();
            let start = lines.len().saturating_sub(150);
            eprintln!(
                "---- manager log (last lines) ----\n{}",
                lines[start..].join("\n")
            );
        }
        for cluster in &self.clusters {
            for container in cluster_containers(cluster) {
                let _ = Command::new("docker")
                    .args(["rm", "-fv", &container])
                    .output();
            }
        }
        if network_exists(&self.network) {
            let _ = Command::new("docker")
                .args(["network", "rm", &self.network])
                .output();
        }
    }
}

/// A controller owner reference to `object` of Cluster API kind `kind`.
pub fn owner(kind: &str, object: &DynamicObject) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": kind,
        "name": object.metadata.name,
        "uid": object.metadata.uid,
        "controller": true,
        "blockOwnerDeletion": true
    })
}

/// A condition of an object (`status.conditions[type]`).
pub fn condition(object: &DynamicObject, type_: &str) -> Option<Value> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// `(status, reason)` of a condition.
pub fn condition_state(object: &DynamicObject, type_: &str) -> Option<(String, String)> {
    let c = condition(object, type_)?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

/// Cloud-config the test node image executes: a file, then `kubeadm init` after `delay` seconds.
pub fn cloud_config(delay_seconds: u32) -> String {
    format!(
        "#cloud-config\nwrite_files:\n- path: /etc/capd-test/config.yaml\n  owner: root:root\n  permissions: '0600'\n  content: |\n    token: abcdef.0123456789abcdef\nruncmd:\n- sleep {delay_seconds}\n- kubeadm init --config /etc/capd-test/config.yaml\n- mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"
    )
}
