//! The whole stack for one provider run: a management and a workload test API server, our CRDs
//! and Cluster API's, and the manager binary, with the benchmark playing Cluster API core
//! (Cluster, Machines, bootstrap secrets, kubeconfig, Nodes as kubelet registers them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Handle, Options, TestApiServer};

/// Namespace of every object.
pub const NAMESPACE: &str = "default";

const REFERENCE_CAPI_CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/reference/crds/capi-release-1.12"
);
const OUR_CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/crd/bases");

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct ManagerSettings {
    /// The manager binary.
    pub binary: PathBuf,
    /// Docker network of the clusters.
    pub network: String,
    /// Run containers unprivileged (engines that refuse privileged containers).
    pub unprivileged: bool,
    /// Where the manager writes its Docker call counts.
    pub count_file: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

/// One provider run's world.
pub struct Stack {
    /// Management API server.
    pub mgmt: Handle,
    /// Workload cluster API server.
    pub workload: Handle,
    /// Client of the management API server.
    pub client: Client,
    workload_client: Client,
    manager: Child,
    health_port: u16,
    settings: ManagerSettings,
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

async fn client_for(handle: &Handle) -> Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(handle.kubeconfig_yaml())?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

fn crd_from_file(path: &Path) -> Result<CustomResourceDefinition> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

fn minimal_capi_crd(kind: &str, plural: &str) -> Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
        "spec": {
            "group": "cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1beta2", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))?)
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Polls `check` every `every` until it returns `Some`, for at most `timeout`.
pub async fn poll<T, F, Fut>(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(every).await;
    }
}

/// The objects a watch has seen, by name: what [`Stack::watch_until`] judges. It also keeps the
/// names of the objects its mark holds for, with every event, so that a judge counting them
/// does not walk the whole set after every event (at N = 300 that walk cost the benchmark's
/// process about half a CPU second in the provider's phase, which the floor never pays).
#[derive(Debug)]
pub struct Seen {
    objects: BTreeMap<String, DynamicObject>,
    listing: BTreeMap<String, DynamicObject>,
    mark: fn(&DynamicObject) -> bool,
    marked: BTreeSet<String>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen::marking(|_| false)
    }
}

impl Seen {
    /// A set that keeps the names of the objects `mark` holds for.
    pub fn marking(mark: fn(&DynamicObject) -> bool) -> Self {
        Seen {
            objects: BTreeMap::new(),
            listing: BTreeMap::new(),
            mark,
            marked: BTreeSet::new(),
        }
    }

    /// Applies one watch event; returns whether the set is complete (not in the middle of the
    /// watch's initial listing) and so worth judging.
    pub fn apply(&mut self, event: watcher::Event<DynamicObject>) -> bool {
        let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
        match event {
            watcher::Event::Init => {
                self.listing.clear();
                false
            }
            watcher::Event::InitApply(o) => {
                self.listing.insert(name(&o), o);
                false
            }
            watcher::Event::InitDone => {
                self.objects = std::mem::take(&mut self.listing);
                let mark = self.mark;
                self.marked = self
                    .objects
                    .iter()
                    .filter(|(_, o)| mark(o))
                    .map(|(n, _)| n.clone())
                    .collect();
                true
            }
            watcher::Event::Apply(o) => {
                let name = name(&o);
                if (self.mark)(&o) {
                    self.marked.insert(name.clone());
                } else {
                    self.marked.remove(&name);
                }
                self.objects.insert(name, o);
                true
            }
            watcher::Event::Delete(o) => {
                let name = name(&o);
                self.marked.remove(&name);
                self.objects.remove(&name);
                true
            }
        }
    }

    /// The objects, in name order.
    pub fn objects(&self) -> impl Iterator<Item = &DynamicObject> {
        self.objects.values()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// How many objects the mark holds for.
    pub fn marked(&self) -> usize {
        self.marked.len()
    }
}

impl Stack {
    /// Watches `resource` until `done` holds for its objects, gathered in `seen` (judged after
    /// the watch's initial listing and after every change), for at most `timeout`. The moment
    /// it returns is the moment the API server told of the change, not the next tick of a poll.
    pub async fn watch_until(
        &self,
        resource: &ApiResource,
        timeout: Duration,
        what: &str,
        mut seen: Seen,
        done: impl Fn(&Seen) -> bool,
    ) -> Result<()> {
        let events = watcher::watcher(self.api(resource), watcher::Config::default());
        let mut events = std::pin::pin!(events);
        let wait = async {
            while let Some(event) = events.next().await {
                if seen.apply(event?) && done(&seen) {
                    return Ok(());
                }
            }
            bail!("the watch of {} ended", resource.plural)
        };
        tokio::time::timeout(timeout, wait)
            .await
            .with_context(|| format!("timed out after {timeout:?} waiting for {what}"))?
    }

    /// Starts the API servers, installs the CRDs, starts the manager and waits until it is ready.
    pub async fn start(settings: ManagerSettings) -> Result<Stack> {
        let mgmt = TestApiServer::start(Options::default()).await?;
        let workload = TestApiServer::start(Options {
            context_name: "workload".into(),
            ..Options::default()
        })
        .await?;
        let client = client_for(&mgmt).await?;
        let workload_client = client_for(&workload).await?;
        install_crds(&client).await?;
        let health_port = free_port()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&settings.log)?;
        let _ = std::fs::remove_file(&settings.count_file);
        let manager = Command::new(&settings.binary)
            .args([
                &format!("--kubeconfig={}", mgmt.kubeconfig_path().display()),
                &format!("--health-addr=127.0.0.1:{health_port}"),
                "--diagnostics-address=0",
                &format!("--docker-network={}", settings.network),
            ])
            .env_remove("RUST_LOG")
            .env("CAPD_DOCKER_NETWORK", &settings.network)
            .env(
                capd::controllers::UNPRIVILEGED_ENV,
                if settings.unprivileged {
                    "true"
                } else {
                    "false"
                },
            )
            .env(capd::docker::counting::COUNT_ENV, &settings.count_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", settings.binary.display()))?;
        let stack = Stack {
            mgmt,
            workload,
            client,
            workload_client,
            manager,
            health_port,
            settings,
        };
        stack.wait_ready().await?;
        Ok(stack)
    }

    /// The manager's process id.
    pub fn pid(&self) -> u32 {
        self.manager.id()
    }

    async fn wait_ready(&self) -> Result<()> {
        let port = self.health_port;
        poll(
            Duration::from_secs(60),
            Duration::from_millis(100),
            "the manager to be ready",
            || async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                else {
                    return Ok(None);
                };
                stream
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await?;
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await?;
                Ok(answer.starts_with("HTTP/1.1 200").then_some(()))
            },
        )
        .await
    }

    /// Docker calls the manager made so far, by operation. The manager writes the file over
    /// itself after every call, so a read may catch a write half done: such a read is repeated.
    pub fn docker_calls(&self) -> BTreeMap<String, u64> {
        for _ in 0..10 {
            let Ok(text) = std::fs::read_to_string(&self.settings.count_file) else {
                break;
            };
            if text.is_empty() {
                break;
            }
            if let Ok(counts) = serde_json::from_str(&text) {
                return counts;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        BTreeMap::new()
    }

    /// Stops the manager (SIGTERM, then a wait).
    pub fn stop(mut self) {
        let pid = self.manager.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.manager.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.manager.kill();
        let _ = self.manager.wait();
    }

    /// The API of a kind in the namespace.
    pub fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NAMESPACE, resource)
    }

    /// Creates `object` of `resource` in the namespace.
    pub async fn create(&self, resource: &ApiResource, object: Value) -> Result<DynamicObject> {
        let object: DynamicObject = serde_json::from_value(object)?;
        Ok(self
            .api(resource)
            .create(&PostParams::default(), &object)
            .await?)
    }

    /// Creates a Cluster (infrastructure provisioned, control plane initialized, as Cluster API
    /// reports once the load balancer is up) and its DockerCluster; returns the Cluster.
    pub async fn create_cluster(&self, name: &str, haproxy_image: &str) -> Result<DynamicObject> {
        let cluster = self
            .create(&capi("Cluster"), json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": name},
                    "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name}
                }
            }))
            .await?;
        let (repository, tag) = haproxy_image
            .rsplit_once(':')
            .context("the haproxy image has a tag")?;
        let repository = repository
            .strip_suffix("/haproxy")
            .context("the haproxy image is named <repository>/haproxy:<tag>")?;
        self.create(
            &infra("DockerCluster"),
            infra_object(
                "DockerCluster",
                name,
                name,
                owner("Cluster", &cluster),
                json!({"loadBalancer": {"imageRepository": repository, "imageTag": tag}}),
            ),
        )
        .await?;
        Ok(cluster)
    }

    /// Plays Cluster API core once the infrastructure is up: the Cluster is marked provisioned
    /// and initialized, the workload kubeconfig and the bootstrap secret exist.
    pub async fn prepare_machines(&self, cluster: &str, cloud_config: &str) -> Result<()> {
        self.api(&capi("Cluster"))
            .patch_status(
                cluster,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}})),
            )
            .await?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let kubeconfig: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "stringData": {"value": self.workload.kubeconfig_yaml()}
        }))?;
        secrets.create(&PostParams::default(), &kubeconfig).await?;
        let bootstrap: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{cluster}-bootstrap"), "namespace": NAMESPACE},
            "stringData": {"value": cloud_config, "format": "cloud-config"}
        }))?;
        secrets.create(&PostParams::default(), &bootstrap).await?;
        Ok(())
    }

    /// Creates worker Machine `name` of `cluster` and registers its Node in the workload cluster.
    pub async fn create_machine(
        &self,
        cluster: &str,
        name: &str,
        version: &str,
    ) -> Result<DynamicObject> {
        let machine = self
            .create(&capi("Machine"), machine(cluster, name, version))
            .await?;
        let nodes: Api<Node> = Api::all(self.workload_client.clone());
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": format!("{cluster}-{name}")}, "spec": {}}),
        )?;
        nodes.create(&PostParams::default(), &node).await?;
        Ok(machine)
    }

    /// Creates the DockerMachine of `machine`.
    pub async fn create_docker_machine(
        &self,
        cluster: &str,
        machine: &DynamicObject,
        image: &str,
    ) -> Result<()> {
        let name = machine.metadata.name.clone().unwrap_or_default();
        self.create(
            &infra("DockerMachine"),
            infra_object(
                "DockerMachine",
                &name,
                cluster,
                owner("Machine", machine),
                json!({"customImage": image}),
            ),
        )
        .await?;
        Ok(())
    }

    /// How many DockerMachines are provisioned with bootstrap completed.
    pub async fn bootstrapped_machines(&self) -> Result<usize> {
        let list = self
            .api(&infra("DockerMachine"))
            .list(&ListParams::default())
            .await?;
        Ok(list.items.iter().filter(|dm| is_bootstrapped(dm)).count())
    }

    /// How many workload Nodes carry a providerID.
    pub async fn initialized_nodes(&self) -> Result<usize> {
        let nodes: Api<Node> = Api::all(self.workload_client.clone());
        let list = nodes.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_some()
            })
            .count())
    }

    /// Creates MachinePool `name` of `cluster` at zero replicas (the bootstrap secret of
    /// [`Stack::prepare_machines`]) and its DockerMachinePool, owned by it as core makes it.
    pub async fn create_machine_pool(
        &self,
        cluster: &str,
        name: &str,
        version: &str,
        image: &str,
    ) -> Result<()> {
        let machine_pool = self
            .create(&capi("MachinePool"), json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "MachinePool",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                "spec": {
                    "clusterName": cluster,
                    "replicas": 0,
                    "template": {"spec": {
                        "clusterName": cluster,
                        "version": version,
                        "bootstrap": {"dataSecretName": format!("{cluster}-bootstrap")},
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": name}
                    }}
                }
            }))
            .await?;
        self.create(
            &infra("DockerMachinePool"),
            infra_object(
                "DockerMachinePool",
                name,
                cluster,
                owner("MachinePool", &machine_pool),
                json!({"template": {"customImage": image}}),
            ),
        )
        .await?;
        Ok(())
    }

    /// Sets a MachinePool's `spec.replicas`.
    pub async fn scale_machine_pool(&self, name: &str, replicas: usize) -> Result<()> {
        self.api(&capi("MachinePool"))
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        Ok(())
    }

    /// Plays core's MachinePool controller once: a Machine for every DockerMachine of the pool
    /// that has none, made the DockerMachine's controller.
    pub async fn adopt_pool_machines(
        &self,
        cluster: &str,
        pool: &str,
        version: &str,
    ) -> Result<()> {
        let machine_pool = self.api(&capi("MachinePool")).get(pool).await?;
        let selector = format!("cluster.x-k8s.io/pool-name={pool}");
        let docker_machines = self
            .api(&infra("DockerMachine"))
            .list(&ListParams::default().labels(&selector))
            .await?;
        for dm in docker_machines.items {
            let mut owners = dm.metadata.owner_references.unwrap_or_default();
            if owners.iter().any(|o| o.kind == "Machine") {
                continue;
            }
            let name = dm.metadata.name.unwrap_or_default();
            let mut body = machine(cluster, &name, version);
            body["metadata"]["labels"]["cluster.x-k8s.io/pool-name"] = json!(pool);
            body["metadata"]["ownerReferences"] = json!([owner("MachinePool", &machine_pool)]);
            let machine = self.create(&capi("Machine"), body).await?;
            owners.push(serde_json::from_value(owner("Machine", &machine))?);
            self.api(&infra("DockerMachine"))
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"ownerReferences": owners}})),
                )
                .await?;
        }
        Ok(())
    }
}

/// Worker Machine `name` of `cluster` (bootstrap secret of [`Stack::prepare_machines`]),
/// pointing to the DockerMachine of the same name.
fn machine(cluster: &str, name: &str, version: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {
            "clusterName": cluster,
            "version": version,
            "bootstrap": {"dataSecretName": format!("{cluster}-bootstrap")},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": name}
        }
    })
}

/// Provisioned (`status.initialization.provisioned`) and `BootstrapCompleted` True.
pub fn is_bootstrapped(dm: &DynamicObject) -> bool {
    let status = &dm.data["status"];
    status["initialization"]["provisioned"] == json!(true)
        && status["conditions"].as_array().is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "BootstrapCompleted" && c["status"] == "True")
        })
}

/// One of our objects of `cluster`, owned by `owner`.
fn infra_object(kind: &str, name: &str, cluster: &str, owner: Value, spec: Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": kind,
        "metadata": {
            "name": name, "namespace": NAMESPACE,
            "labels": {"cluster.x-k8s.io/cluster-name": cluster},
            "ownerReferences": [owner]
        },
        "spec": spec
    })
}

fn owner(kind: &str, object: &DynamicObject) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": kind,
        "name": object.metadata.name,
        "uid": object.metadata.uid,
        "controller": true,
        "blockOwnerDeletion": true
    })
}

async fn install_crds(client: &Client) -> Result<()> {
    let mut crds = Vec::new();
    for entry in std::fs::read_dir(OUR_CRDS).with_context(|| format!("read {OUR_CRDS}"))? {
        crds.push(crd_from_file(&entry?.path())?);
    }
    let reference = Path::new(REFERENCE_CAPI_CRDS);
    if reference.is_dir() {
        for file in [
            "cluster.x-k8s.io_clusters.yaml",
            "cluster.x-k8s.io_machines.yaml",
            "cluster.x-k8s.io_machinepools.yaml",
        ] {
            crds.push(crd_from_file(&reference.join(file))?);
        }
    } else {
        crds.push(minimal_capi_crd("Cluster", "clusters")?);
        crds.push(minimal_capi_crd("Machine", "machines")?);
        crds.push(minimal_capi_crd("MachinePool", "machinepools")?);
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        api.create(&PostParams::default(), crd).await?;
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        poll(
            Duration::from_secs(10),
            Duration::from_millis(50),
            "CRDs to be established",
            || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get(&name).await?;
                    Ok(crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(()))
                }
            },
        )
        .await?;
    }
    Ok(())
}
