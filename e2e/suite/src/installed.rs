//! The suite against an installed Cluster API (issue 39): `CAPD_E2E_CAPI=installed` with the
//! kubeconfig of `CAPD_E2E_KUBECONFIG` (or `KUBECONFIG`) naming a management cluster where
//! Cluster API core, CABPK and KCP run and this provider is installed (`clusterctl init
//! --infrastructure docker` with our components). The suite then starts no test API server, no
//! manager and no stand-in: a scenario creates what a user creates, from the project's own
//! templates rendered with clusterctl's variable rules ([`crate::envsubst`]), and checks what the
//! real controllers and the installed manager make of it. The scenarios that play core
//! themselves skip in this mode ([`runs_with_stand_in`]), each with one line.
//!
//! What a scenario can see depends on the node image. With `CAPD_REAL_NODE_IMAGE` the machines
//! are real Kubernetes nodes and the whole quick start runs; with the test node image nothing
//! answers as a workload API server, so real core never initializes the control plane, and a
//! scenario checks the infrastructure only (the load balancer, the first control plane's
//! container, `providerID` and addresses) before deleting the cluster. A real node image without
//! CoreDNS (the project's own) gets control planes that neither pull nor install it
//! ([`NodeImage::lacks_coredns`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::discovery::pinned_kind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::core::{capi, condition_state, infra};
use crate::docker::{cluster_containers, docker, images};
use crate::env::client_from_yaml;
use crate::kubeadm::{node_image_version, real_node_image_setting, supported_version};
use crate::{eventually, unique, workspace_root};

/// The variable that selects the mode: `installed`, or `stand-in` (the default).
pub const CAPI_MODE_VARIABLE: &str = "CAPD_E2E_CAPI";

/// The field manager of the objects a scenario applies, as a user's `kubectl apply` would.
const FIELD_MANAGER: &str = "capd-e2e";

/// Which Cluster API the scenarios meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapiMode {
    /// The suite plays core itself, against a test API server or an existing cluster.
    StandIn,
    /// Core, CABPK and KCP are installed in the management cluster, and so is this provider.
    Installed,
}

impl CapiMode {
    /// The mode `CAPD_E2E_CAPI` names; panics, naming the values, on any other.
    pub fn from_environment() -> CapiMode {
        let value = std::env::var(CAPI_MODE_VARIABLE).unwrap_or_default();
        Self::parse(&value).unwrap_or_else(|why| panic!("{why}"))
    }

    /// The mode a value of `CAPD_E2E_CAPI` names.
    ///
    /// # Errors
    /// A message naming the accepted values.
    pub fn parse(value: &str) -> Result<CapiMode, String> {
        match value.trim() {
            "" | "stand-in" => Ok(CapiMode::StandIn),
            "installed" => Ok(CapiMode::Installed),
            other => Err(format!(
                "{CAPI_MODE_VARIABLE}={other:?}: expected `installed` (Cluster API core, CABPK \
                 and KCP run in the management cluster of CAPD_E2E_KUBECONFIG) or `stand-in`"
            )),
        }
    }

    /// How a scenario names the mode it ran in.
    pub fn describe(self) -> &'static str {
        match self {
            CapiMode::StandIn => "the suite's Cluster API stand-in",
            CapiMode::Installed => "an installed Cluster API",
        }
    }
}

/// For a scenario that plays Cluster API core itself: whether it runs. It prints the mode it runs
/// in, or the one line that says why it skips (core is installed, and would fight the stand-in).
pub fn runs_with_stand_in(test: &str) -> bool {
    let mode = CapiMode::from_environment();
    if mode == CapiMode::Installed {
        println!(
            "{test}: skipped: it plays Cluster API core itself, which {CAPI_MODE_VARIABLE}=installed \
             leaves to the installed controllers (the installed_* scenarios run there)"
        );
        return false;
    }
    println!("{test}: mode: {}", mode.describe());
    true
}

/// For a scenario written for an installed Cluster API: whether it runs (it prints the mode, or
/// why it skips).
pub fn runs_with_installed_capi(test: &str) -> bool {
    let mode = CapiMode::from_environment();
    if mode == CapiMode::StandIn {
        println!(
            "{test}: skipped: it needs Cluster API core, CABPK and KCP installed in the management \
             cluster: set {CAPI_MODE_VARIABLE}=installed and CAPD_E2E_KUBECONFIG \
             (docs/src/contributing.md, \"Against an installed Cluster API\")"
        );
        return false;
    }
    println!("{test}: mode: {}", mode.describe());
    true
}

/// The kinds a management cluster must serve for this mode, as `(group, kind)`: core's, CABPK's,
/// KCP's and ours.
const REQUIRED_KINDS: [(&str, &str); 7] = [
    ("cluster.x-k8s.io", "Cluster"),
    ("cluster.x-k8s.io", "MachineDeployment"),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
    ("infrastructure.cluster.x-k8s.io", "DockerCluster"),
    ("infrastructure.cluster.x-k8s.io", "DockerMachine"),
    ("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate"),
];

/// Our infrastructure cluster kinds, machine kinds and machine pool kinds: Docker* (CAPD 1.12's,
/// the `-docker` templates) and Dev* (CAPD 1.14's).
pub const INFRA_CLUSTERS: &[&str] = &["DockerCluster", "DevCluster"];
/// See [`INFRA_CLUSTERS`].
pub const INFRA_MACHINES: &[&str] = &["DockerMachine", "DevMachine"];
/// See [`INFRA_CLUSTERS`].
pub const INFRA_POOLS: &[&str] = &["DockerMachinePool", "DevMachinePool"];

/// The node image of the machines, and the Kubernetes version the templates are rendered with.
#[derive(Debug, Clone)]
pub struct NodeImage {
    /// The image every DockerMachineTemplate gets as `customImage`.
    pub image: String,
    /// `KUBERNETES_VERSION` for the templates.
    pub version: String,
    /// Whether the machines are real Kubernetes nodes (`CAPD_REAL_NODE_IMAGE`).
    pub real: bool,
    /// Whether the image holds no CoreDNS image (the project's own real node image: CoreDNS is not
    /// among Kubernetes' server binaries), so that kubeadm must neither pull nor install it
    /// ([`without_coredns`]).
    pub lacks_coredns: bool,
    /// The load balancer image as `(repository, tag)` every DockerCluster (and the class's
    /// DockerClusterTemplate) gets: the test haproxy image (this machine has no registry to pull
    /// kindest/haproxy from).
    pub load_balancer: (String, String),
}

impl NodeImage {
    /// The real node image of `CAPD_REAL_NODE_IMAGE` with its version, else the test node image
    /// (whose machines never initialize a control plane under real core).
    pub fn from_environment() -> NodeImage {
        let test_images = images();
        let load_balancer = (test_images.haproxy_repository, test_images.haproxy_tag);
        match real_node_image_setting() {
            Some(image) => {
                let version = node_image_version(&image)
                    .and_then(|v| supported_version(&v))
                    .unwrap_or_else(|why| panic!("CAPD_REAL_NODE_IMAGE={image}: {why}"));
                let lacks_coredns = lacks_coredns(&image);
                if lacks_coredns {
                    println!(
                        "{image} holds no CoreDNS image (its /etc/capd-node/images lists none): \
                         every KubeadmControlPlane and KubeadmControlPlaneTemplate rendered here \
                         gets initConfiguration.skipPhases [addon/coredns] and \
                         nodeRegistration.imagePullPolicy Never (init and join)"
                    );
                }
                NodeImage {
                    image,
                    version,
                    real: true,
                    lacks_coredns,
                    load_balancer,
                }
            }
            None => NodeImage {
                image: test_images.node,
                // Any version core and KCP accept (the test node image runs no Kubernetes),
                // marked so that its kindest/node tag ([`Installed::tag_for_class`]) is never
                // mistaken for a real kind image.
                version: "v1.30.0-capdtest".into(),
                real: false,
                lacks_coredns: false,
                load_balancer,
            },
        }
    }
}

/// One scenario's world on an installed Cluster API: a client of the management cluster and a
/// namespace of the scenario's own, deleted (with what is left in it) when dropped.
pub struct Installed {
    /// A client of the management cluster.
    pub client: Client,
    /// The scenario's namespace.
    pub namespace: String,
    /// The machines' node image.
    pub node_image: NodeImage,
}

impl Installed {
    /// Connects to the management cluster, checks that Cluster API and this provider are served
    /// there (panicking with what is missing) and creates the scenario's namespace.
    pub async fn connect(test: &str) -> Installed {
        let kubeconfig = ["CAPD_E2E_KUBECONFIG", "KUBECONFIG"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
            .and_then(|v| v.split(':').next().map(PathBuf::from))
            .unwrap_or_else(|| {
                panic!("{CAPI_MODE_VARIABLE}=installed needs CAPD_E2E_KUBECONFIG or KUBECONFIG")
            });
        let yaml = std::fs::read_to_string(&kubeconfig)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", kubeconfig.display()));
        let client = client_from_yaml(&yaml).await;
        let mut missing = Vec::new();
        for (group, kind) in REQUIRED_KINDS {
            if resource(&client, group, kind).await.is_none() {
                missing.push(format!("{kind}.{group}"));
            }
        }
        assert!(
            missing.is_empty(),
            "the management cluster of {} does not serve {}: install Cluster API and this \
             provider first (`clusterctl init --infrastructure docker`)",
            kubeconfig.display(),
            missing.join(", ")
        );
        let namespace = unique(&format!("capd-e2e-{}-", test.replace('_', "-")));
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let object: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("a namespace");
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create namespace {namespace}: {e}"));
        Installed {
            client,
            namespace,
            node_image: NodeImage::from_environment(),
        }
    }

    /// `templates/<file>` rendered for this scenario ([`render_template`]).
    pub fn render(&self, file: &str, values: &[(&str, &str)]) -> Vec<Value> {
        render_template(file, &self.namespace, &self.node_image, values)
    }

    /// Makes the node image answer to `kindest/node:<version>` in the engine, tagging it when that
    /// name is free: the quick-start ClusterClass sets every machine's `customImage` to that name
    /// (its `customImage` patch overrides the templates' own).
    pub fn tag_for_class(&self) {
        let name = format!("kindest/node:{}", self.node_image.version.replace('+', "_"));
        if name == self.node_image.image || docker(&["image", "inspect", &name]).0 {
            return;
        }
        assert!(
            docker(&["tag", &self.node_image.image, &name]).0,
            "docker tag {} {name}",
            self.node_image.image
        );
        println!(
            "tagged {} as {name}: the quick-start ClusterClass runs its machines on that name",
            self.node_image.image
        );
    }

    /// Applies `objects` (server-side, as a user's `kubectl apply --server-side` would).
    pub async fn apply(&self, objects: &[Value]) {
        for object in objects {
            let (api_version, kind) = (
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
            );
            let (group, _) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let resource = resource(&self.client, group, kind)
                .await
                .unwrap_or_else(|| panic!("{kind}.{group} is not served"));
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
            api.patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
        }
    }

    /// An object of the scenario's namespace, when it exists.
    pub async fn get(&self, kind: &ApiResource, name: &str) -> Option<DynamicObject> {
        self.api(kind).get_opt(name).await.unwrap_or_default()
    }

    /// The objects of `kind` labelled `cluster.x-k8s.io/cluster-name=<cluster>`.
    pub async fn of_cluster(&self, kind: &ApiResource, cluster: &str) -> Vec<DynamicObject> {
        let selector = format!("cluster.x-k8s.io/cluster-name={cluster}");
        self.api(kind)
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Merges `patch` into an object, as `kubectl patch --type merge` would.
    pub async fn patch(&self, kind: &ApiResource, name: &str, patch: Value) {
        self.api(kind)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", kind.kind));
    }

    /// The objects of `kinds` (ours) labelled with `cluster`, kind by kind.
    pub async fn of_cluster_kinds(&self, kinds: &[&str], cluster: &str) -> Vec<DynamicObject> {
        let mut objects = Vec::new();
        for kind in kinds {
            objects.extend(self.of_cluster(&infra(kind), cluster).await);
        }
        objects
    }

    fn api(&self, kind: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, kind)
    }

    /// Waits until the DockerCluster (or DevCluster) of `cluster` is ready with its load balancer
    /// running and the endpoint set, and returns it.
    pub async fn wait_infrastructure(&self, cluster: &str, timeout: Duration) -> DynamicObject {
        let docker_cluster = eventually(
            timeout,
            &format!("the DockerCluster or DevCluster of {cluster} Ready with its endpoint"),
            || async {
                let dc = self.of_cluster_kinds(INFRA_CLUSTERS, cluster).await.pop()?;
                let ready = condition_state(&dc, "Ready").is_some_and(|(s, _)| s == "True");
                let endpoint = &dc.data["spec"]["controlPlaneEndpoint"];
                (ready && endpoint["host"].is_string() && endpoint["port"].is_number())
                    .then_some(dc)
            },
        )
        .await;
        let lb = format!("{cluster}-lb");
        assert_eq!(
            docker(&["inspect", "--format", "{{.State.Running}}", &lb]).1,
            "true",
            "the load balancer container {lb} runs"
        );
        eventually(
            timeout,
            &format!("core to mark {cluster}'s infrastructure provisioned"),
            || async {
                let c = self.get(&capi("Cluster"), cluster).await?;
                (c.data["status"]["initialization"]["infrastructureProvisioned"] == true)
                    .then_some(())
            },
        )
        .await;
        docker_cluster
    }

    /// Waits until `count` DockerMachines and DevMachines of `cluster` (control planes when
    /// `control_plane`, else workers: a MachineDeployment's and a MachinePool's) are provisioned,
    /// each with our provider ID, addresses and a running container, and returns them.
    pub async fn wait_machines(
        &self,
        cluster: &str,
        control_plane: bool,
        count: usize,
        timeout: Duration,
    ) -> Vec<DynamicObject> {
        let what = if control_plane {
            "control plane"
        } else {
            "worker"
        };
        let machines = eventually(
            timeout,
            &format!("{count} {what} DockerMachines or DevMachines of {cluster} provisioned"),
            || async {
                let machines: Vec<DynamicObject> = self
                    .of_cluster_kinds(INFRA_MACHINES, cluster)
                    .await
                    .into_iter()
                    .filter(|m| {
                        m.labels().contains_key("cluster.x-k8s.io/control-plane") == control_plane
                            && m.metadata.deletion_timestamp.is_none()
                    })
                    .collect();
                let provisioned = machines.iter().all(|m| {
                    m.data["status"]["initialization"]["provisioned"] == true
                        && m.data["status"]["addresses"]
                            .as_array()
                            .is_some_and(|a| !a.is_empty())
                });
                (machines.len() == count && provisioned).then_some(machines)
            },
        )
        .await;
        for machine in &machines {
            let provider_id = machine.data["spec"]["providerID"]
                .as_str()
                .unwrap_or_default();
            let container = provider_id
                .strip_prefix("docker:////")
                .unwrap_or_else(|| panic!("{provider_id:?} is not one of our provider IDs"));
            assert_eq!(
                docker(&["inspect", "--format", "{{.State.Running}}", container]).1,
                "true",
                "the container {container} of {} runs",
                machine.name_any()
            );
        }
        machines
    }

    /// With real nodes: waits until the Cluster is `Available` and `machines` Nodes are Ready in
    /// the workload cluster with our provider IDs.
    pub async fn wait_available(&self, cluster: &str, machines: usize, timeout: Duration) {
        eventually(timeout, &format!("Cluster {cluster} Available"), || async {
            let c = self.get(&capi("Cluster"), cluster).await?;
            (condition_state(&c, "Available")?.0 == "True").then_some(())
        })
        .await;
        let workload = self.workload_client(cluster).await;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(workload);
        eventually(
            timeout,
            &format!("{machines} Nodes of {cluster} Ready with our provider IDs"),
            || async {
                let list = nodes.list(&ListParams::default()).await.ok()?;
                let ready = list.items.iter().filter(|n| {
                    let ours = n
                        .spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_deref())
                        .is_some_and(|p| p.starts_with("docker:////"));
                    let is_ready = n
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    ours && is_ready
                });
                (ready.count() == machines).then_some(())
            },
        )
        .await;
    }

    /// A client of the workload cluster, from the `<cluster>-kubeconfig` Secret core writes.
    pub async fn workload_client(&self, cluster: &str) -> Client {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = eventually(
            Duration::from_secs(60),
            &format!("the {cluster}-kubeconfig Secret"),
            || async {
                secrets
                    .get_opt(&format!("{cluster}-kubeconfig"))
                    .await
                    .ok()
                    .flatten()
            },
        )
        .await;
        let value = secret
            .data
            .and_then(|d| d.get("value").cloned())
            .expect("the kubeconfig Secret has a value");
        client_from_yaml(&String::from_utf8_lossy(&value.0)).await
    }

    /// Deletes the Cluster as a user does, and waits until it, our objects and every container
    /// of it are gone.
    pub async fn delete_cluster(&self, cluster: &str, timeout: Duration) {
        let clusters = self.api(&capi("Cluster"));
        let _ = clusters.delete(cluster, &DeleteParams::default()).await;
        eventually(timeout, &format!("Cluster {cluster} gone"), || async {
            clusters
                .get_opt(cluster)
                .await
                .ok()
                .and_then(|c| c.is_none().then_some(()))
        })
        .await;
        for kind in INFRA_CLUSTERS
            .iter()
            .chain(INFRA_MACHINES)
            .chain(INFRA_POOLS)
        {
            assert!(
                self.of_cluster(&infra(kind), cluster).await.is_empty(),
                "no {kind} of {cluster} is left"
            );
        }
        assert_eq!(
            cluster_containers(cluster),
            Vec::<String>::new(),
            "no container of {cluster} is left"
        );
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // The namespace goes with what a failed scenario left in it; core and the provider
        // remove the containers as the objects go.
        let client = self.client.clone();
        let namespace = self.namespace.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    let api: Api<Namespace> = Api::all(client);
                    let _ = api.delete(&namespace, &DeleteParams::default()).await;
                });
            }
        })
        .join();
    }
}

/// `templates/<file>` rendered as `clusterctl generate cluster` would, with `namespace`, the node
/// image's Kubernetes version and `values`; every DockerMachineTemplate and DevMachineTemplate of
/// the docker backend (the ClusterClass's too) gets the node image as `customImage`, every
/// DockerCluster, DevCluster and template of them the load balancer image. The objects, in
/// order.
pub fn render_template(
    file: &str,
    namespace: &str,
    node_image: &NodeImage,
    values: &[(&str, &str)],
) -> Vec<Value> {
    let path = workspace_root().join("templates").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut variables: BTreeMap<String, String> = BTreeMap::from([
        ("NAMESPACE".to_string(), namespace.to_string()),
        ("KUBERNETES_VERSION".to_string(), node_image.version.clone()),
    ]);
    for (k, v) in values {
        variables.insert(k.to_string(), v.to_string());
    }
    let rendered = crate::envsubst::render(&text, &variables)
        .unwrap_or_else(|e| panic!("{file}: clusterctl would not render it: {e}"));
    let mut objects = Vec::new();
    for document in rendered.split("\n---") {
        let document = document.trim_start_matches("---");
        if document.trim().is_empty() {
            continue;
        }
        let mut object: Value = serde_saphyr::from_str(document)
            .unwrap_or_else(|e| panic!("{file}: a rendered document is not YAML: {e}"));
        if object.is_null() {
            continue;
        }
        let (repository, tag) = &node_image.load_balancer;
        let load_balancer = json!({"imageRepository": repository, "imageTag": tag});
        // Where the Docker settings sit: a Dev* kind has them under `backend.docker` (and one
        // of the in-memory backend has none).
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let settings = match kind.as_str() {
            "DockerCluster" => object.pointer_mut("/spec"),
            "DockerMachineTemplate" | "DockerClusterTemplate" => {
                object.pointer_mut("/spec/template/spec")
            }
            "DevCluster" => object.pointer_mut("/spec/backend/docker"),
            "DevMachineTemplate" | "DevClusterTemplate" => {
                object.pointer_mut("/spec/template/spec/backend/docker")
            }
            _ => None,
        };
        if let Some(settings) = settings.filter(|s| s.is_object()) {
            let (key, value) = if kind.ends_with("MachineTemplate") {
                ("customImage", json!(node_image.image))
            } else {
                ("loadBalancer", load_balancer)
            };
            settings[key] = value;
        }
        match kind.as_str() {
            "KubeadmControlPlane" if node_image.lacks_coredns => {
                without_coredns(&mut object["spec"]["kubeadmConfigSpec"]);
            }
            "KubeadmControlPlaneTemplate" if node_image.lacks_coredns => {
                without_coredns(&mut object["spec"]["template"]["spec"]["kubeadmConfigSpec"]);
            }
            _ => {}
        }
        objects.push(object);
    }
    objects
}

/// Whether a real node image holds no CoreDNS image: the project's own (e2e/images/real) lists
/// what it preloads in `/etc/capd-node/images`; an image without that list (kindest/node) is
/// taken to hold what kubeadm asks for.
fn lacks_coredns(image: &str) -> bool {
    let (listed, images) = docker(&[
        "run",
        "--rm",
        "--entrypoint",
        "cat",
        image,
        "/etc/capd-node/images",
    ]);
    listed && !images.lines().any(|l| l.contains("/coredns:"))
}

/// A control plane's kubeadm config (CABPK's `kubeadmConfigSpec`, v1beta2) for a node image
/// without CoreDNS, as its README says: kubeadm's preflight pulls every image it lists, CoreDNS
/// too, unless `imagePullPolicy` is `Never` (init and control-plane join), and the CoreDNS addon
/// is skipped. Both are fields a KubeadmControlPlane's user may set.
fn without_coredns(spec: &mut Value) {
    for configuration in ["initConfiguration", "joinConfiguration"] {
        spec[configuration]["nodeRegistration"]["imagePullPolicy"] = json!("Never");
    }
    let phases = &mut spec["initConfiguration"]["skipPhases"];
    match phases.as_array_mut() {
        Some(list) if list.iter().any(|p| p == "addon/coredns") => {}
        Some(list) => list.push(json!("addon/coredns")),
        None => *phases = json!(["addon/coredns"]),
    }
}

/// The resource of `kind` in `group` as the cluster serves it (its preferred version), when it
/// does.
pub async fn resource(client: &Client, group: &str, kind: &str) -> Option<ApiResource> {
    let discovery = kube::discovery::group(client, group).await.ok()?;
    let version = discovery.preferred_version_or_latest().to_string();
    let gvk = GroupVersionKind::gvk(group, &version, kind);
    pinned_kind(client, &gvk).await.ok().map(|(ar, _)| ar)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_image() -> NodeImage {
        NodeImage {
            image: "capd-test/node:abc".into(),
            version: "v1.30.0".into(),
            real: false,
            lacks_coredns: false,
            load_balancer: ("capd-test".into(), "abc".into()),
        }
    }

    #[test]
    fn the_plain_template_renders_as_clusterctl_would_with_our_node_image() {
        let objects = render_template(
            "cluster-template.yaml",
            "ns1",
            &test_image(),
            &[
                ("CLUSTER_NAME", "c1"),
                ("CONTROL_PLANE_MACHINE_COUNT", "3"),
                ("WORKER_MACHINE_COUNT", "2"),
            ],
        );
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        for kind in [
            "Cluster",
            "DockerCluster",
            "KubeadmControlPlane",
            "DockerMachineTemplate",
            "MachineDeployment",
            "KubeadmConfigTemplate",
        ] {
            assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
        }
        assert!(objects.iter().all(|o| o["metadata"]["namespace"] == "ns1"));
        let templates: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "DockerMachineTemplate")
            .collect();
        assert_eq!(templates.len(), 2);
        assert!(
            templates
                .iter()
                .all(|t| t["spec"]["template"]["spec"]["customImage"] == "capd-test/node:abc")
        );
        let docker_cluster = objects
            .iter()
            .find(|o| o["kind"] == "DockerCluster")
            .unwrap();
        assert_eq!(
            docker_cluster["spec"]["loadBalancer"],
            json!({"imageRepository": "capd-test", "imageTag": "abc"})
        );
        let kcp = objects
            .iter()
            .find(|o| o["kind"] == "KubeadmControlPlane")
            .unwrap();
        assert_eq!(kcp["spec"]["replicas"], 3);
        assert_eq!(kcp["spec"]["version"], "v1.30.0");
    }

    #[test]
    fn the_classes_on_the_dev_kinds_get_our_images_in_their_docker_backend() {
        let image = json!("capd-test/node:abc");
        let load_balancer = json!({"imageRepository": "capd-test", "imageTag": "abc"});
        let quick_start =
            render_template("clusterclass-quick-start.yaml", "ns1", &test_image(), &[]);
        let backend = |kind: &str, name: &str| {
            quick_start
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("no {kind} {name}"))["spec"]["template"]["spec"]
                ["backend"]["docker"]
                .clone()
        };
        for name in [
            "quick-start-control-plane",
            "quick-start-default-worker-machinetemplate",
        ] {
            assert_eq!(backend("DevMachineTemplate", name)["customImage"], image);
        }
        let cluster = backend("DevClusterTemplate", "quick-start-cluster");
        assert_eq!(cluster["loadBalancer"], load_balancer);
        assert_eq!(cluster["failureDomains"].as_array().map(Vec::len), Some(8));
        // The pool's image comes from the class's customImage patch (`Installed::tag_for_class`).
        assert_eq!(
            backend(
                "DevMachinePoolTemplate",
                "quick-start-default-worker-machinepooltemplate"
            ),
            json!({})
        );
        // The in-memory class has no docker backend to write to.
        let in_memory = render_template("clusterclass-in-memory.yaml", "ns1", &test_image(), &[]);
        let as_written: Vec<Value> = crate::envsubst::render(
            &std::fs::read_to_string(
                crate::workspace_root().join("templates/clusterclass-in-memory.yaml"),
            )
            .unwrap(),
            &BTreeMap::new(),
        )
        .map(|text| serde_saphyr::from_multiple(&text).unwrap())
        .unwrap();
        for (rendered, written) in in_memory.iter().zip(&as_written) {
            assert_eq!(rendered["spec"], written["spec"], "{}", rendered["kind"]);
        }
    }

    #[test]
    fn a_node_image_without_coredns_gets_control_planes_that_neither_pull_nor_install_it() {
        let offline = NodeImage {
            lacks_coredns: true,
            ..test_image()
        };
        let values = [
            ("CLUSTER_NAME", "c1"),
            ("CONTROL_PLANE_MACHINE_COUNT", "1"),
            ("WORKER_MACHINE_COUNT", "1"),
        ];
        let specs = |node_image: &NodeImage| -> Vec<Value> {
            let plain = render_template("cluster-template.yaml", "ns1", node_image, &values);
            let class = render_template("clusterclass-quick-start.yaml", "ns1", node_image, &[]);
            let kcp = plain.iter().find(|o| o["kind"] == "KubeadmControlPlane");
            let template = class
                .iter()
                .find(|o| o["kind"] == "KubeadmControlPlaneTemplate");
            vec![
                kcp.unwrap()["spec"]["kubeadmConfigSpec"].clone(),
                template.unwrap()["spec"]["template"]["spec"]["kubeadmConfigSpec"].clone(),
            ]
        };
        for spec in specs(&offline) {
            assert_eq!(
                spec["initConfiguration"]["skipPhases"],
                json!(["addon/coredns"])
            );
            for configuration in ["initConfiguration", "joinConfiguration"] {
                assert_eq!(
                    spec[configuration]["nodeRegistration"]["imagePullPolicy"], "Never",
                    "{configuration}"
                );
            }
            // What the template sets stays.
            assert!(spec["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"].is_array());
        }
        for spec in specs(&test_image()) {
            assert_eq!(spec["initConfiguration"]["skipPhases"], Value::Null);
            assert_eq!(
                spec["joinConfiguration"]["nodeRegistration"]["imagePullPolicy"],
                Value::Null
            );
        }
        let mut listed = json!({"initConfiguration": {"skipPhases": ["addon/kube-proxy"]}});
        without_coredns(&mut listed);
        without_coredns(&mut listed);
        assert_eq!(
            listed["initConfiguration"]["skipPhases"],
            json!(["addon/kube-proxy", "addon/coredns"])
        );
    }

    #[test]
    fn a_missing_variable_is_named_as_clusterctl_names_it() {
        let err = std::panic::catch_unwind(|| {
            render_template("cluster-template.yaml", "ns1", &test_image(), &[])
        })
        .unwrap_err();
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("value for variables [CLUSTER_NAME, CONTROL_PLANE_MACHINE_COUNT, WORKER_MACHINE_COUNT]"),
            "{text}"
        );
    }

    #[test]
    fn the_mode_is_installed_or_stand_in_and_anything_else_is_refused() {
        assert_eq!(CapiMode::parse(""), Ok(CapiMode::StandIn));
        assert_eq!(CapiMode::parse("stand-in"), Ok(CapiMode::StandIn));
        assert_eq!(CapiMode::parse(" installed\n"), Ok(CapiMode::Installed));
        let err = CapiMode::parse("real").unwrap_err();
        assert!(
            err.starts_with("CAPD_E2E_CAPI=\"real\": expected `installed`"),
            "{err}"
        );
    }
}
