//! The suite playing Cluster API core, as the infrastructure provider contract describes it:
//! Clusters and Machines with owner references, infrastructure and control plane status, bootstrap
//! data secrets, the workload cluster's kubeconfig and its Nodes; the Machines of MachineSets and
//! KubeadmControlPlanes and what core's Machine controller records on them (`core/machines.rs`);
//! and deletion in core's order (`core/deletion.rs`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::{Env, eventually};

mod deletion;
pub mod machine_controller;
mod machines;

pub use deletion::CLUSTER_FINALIZER;
pub use machines::{
    CLONED_FROM_GROUP_KIND_ANNOTATION, CLONED_FROM_NAME_ANNOTATION, CLUSTER_NAME_LABEL,
    CONTROL_PLANE_LABEL, CONTROL_PLANE_NAME_LABEL, DEPLOYMENT_NAME_LABEL, KCP_CLEANUP_HOOK,
    MachineOwner, SET_NAME_LABEL, TEMPLATE_HASH_LABEL,
};

/// The finalizer Cluster API core holds Machines with while their infrastructure goes away.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
/// Our finalizer on DockerClusters.
pub const DOCKER_CLUSTER_FINALIZER: &str = "dockercluster.infrastructure.cluster.x-k8s.io";
/// Our finalizer on DockerMachines.
pub const DOCKER_MACHINE_FINALIZER: &str = "dockermachine.infrastructure.cluster.x-k8s.io";
/// Our finalizer on DockerMachinePools and DevMachinePools (CAPD 1.14 uses the same).
pub const DOCKER_MACHINE_POOL_FINALIZER: &str = "dockermachinepool.infrastructure.cluster.x-k8s.io";

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

/// The kinds of the objects the suite and the provider make: what a failure report shows, a
/// release strips of finalizers, and [`Env::resource_versions`] reads.
pub fn kinds() -> Vec<ApiResource> {
    vec![
        capi("Cluster"),
        capi("Machine"),
        capi("MachinePool"),
        infra("DockerCluster"),
        infra("DockerMachine"),
        infra("DockerMachinePool"),
        infra("DockerMachineTemplate"),
        infra("DevCluster"),
        infra("DevMachine"),
        infra("DevMachinePool"),
    ]
}

/// The generation of infrastructure kinds a scenario makes: both are served by the same
/// reconcilers, so a scenario can run with either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfraKinds {
    /// DockerCluster and DockerMachine.
    Docker,
    /// DevCluster and DevMachine with `spec.backend.docker`.
    Dev,
}

impl InfraKinds {
    /// The infrastructure cluster kind.
    pub fn cluster(self) -> &'static str {
        match self {
            Self::Docker => "DockerCluster",
            Self::Dev => "DevCluster",
        }
    }

    /// The infrastructure machine kind.
    pub fn machine(self) -> &'static str {
        match self {
            Self::Docker => "DockerMachine",
            Self::Dev => "DevMachine",
        }
    }

    /// The infrastructure machine pool kind.
    pub fn pool(self) -> &'static str {
        match self {
            Self::Docker => "DockerMachinePool",
            Self::Dev => "DevMachinePool",
        }
    }

    /// The label the provider puts on the containers of a machine pool of this kind.
    pub fn pool_container_label(self) -> &'static str {
        match self {
            Self::Docker => crate::docker::MACHINE_POOL_LABEL,
            Self::Dev => crate::docker::DEV_MACHINE_POOL_LABEL,
        }
    }

    /// A machine pool's spec in this generation's shape from the settings of its instances: a
    /// DockerMachinePool has them under `template`, a DevMachinePool under `backend.docker`.
    pub fn pool_spec(self, instance: Value) -> Value {
        match self {
            Self::Docker => json!({"template": instance}),
            Self::Dev => json!({"backend": {"docker": instance}}),
        }
    }

    /// A spec in this generation's shape: Docker* settings move under `backend.docker` (all of
    /// them but `keep`, which stay at the top: the endpoint, the provider ID).
    pub fn spec(self, docker_spec: Value, keep: &[&str]) -> Value {
        match self {
            Self::Docker => docker_spec,
            Self::Dev => {
                let mut top = serde_json::Map::new();
                let mut backend = serde_json::Map::new();
                for (key, value) in docker_spec.as_object().cloned().unwrap_or_default() {
                    if keep.contains(&key.as_str()) {
                        top.insert(key, value);
                    } else {
                        backend.insert(key, value);
                    }
                }
                top.insert("backend".into(), json!({"docker": backend}));
                Value::Object(top)
            }
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
    cloud_config_running(
        delay_seconds,
        "kubeadm init --config /etc/capd-test/config.yaml",
    )
}

/// Cloud-config that writes a file, then runs `command` after `delay` seconds.
pub fn cloud_config_running(delay_seconds: u32, command: &str) -> String {
    format!(
        "#cloud-config\nwrite_files:\n- path: /etc/capd-test/config.yaml\n  owner: root:root\n  permissions: '0600'\n  content: |\n    token: abcdef.0123456789abcdef\nruncmd:\n- sleep {delay_seconds}\n- {command}\n- mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"
    )
}

/// Whether a Machine is a control plane's (its `cluster.x-k8s.io/control-plane` label).
pub fn is_control_plane(machine: &DynamicObject) -> bool {
    machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key("cluster.x-k8s.io/control-plane"))
}

/// Whether a DockerMachine's bootstrap completed and it is provisioned.
pub fn provisioned(docker_machine: &DynamicObject) -> bool {
    condition_state(docker_machine, "BootstrapCompleted")
        == Some(("True".into(), "Completed".into()))
        && docker_machine.data["status"]["initialization"]["provisioned"] == json!(true)
}

/// What a Machine of the suite looks like.
#[derive(Debug, Clone, Default)]
pub struct MachineSpec {
    /// A control plane Machine.
    pub control_plane: bool,
    /// `spec.bootstrap.dataSecretName`.
    pub bootstrap_secret: Option<String>,
    /// `spec.failureDomain`.
    pub failure_domain: Option<String>,
    /// The DockerMachine's `customImage` (the test node image when unset).
    pub image: Option<String>,
    /// The DockerMachine's `preLoadImages`.
    pub preload_images: Vec<String>,
    /// `spec.version` (KCP and MachineSets copy theirs); `v1.31.0` when unset.
    pub version: Option<String>,
}

impl Env {
    /// The labels of a cluster's objects (with this environment's watch filter).
    pub fn labels(&self, cluster: &str) -> Value {
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": cluster});
        if let Some(filter) = &self.watch_filter {
            labels["cluster.x-k8s.io/watch-filter"] = json!(filter);
        }
        labels
    }

    /// Switches the environment to the Dev* kinds (before it makes any object).
    pub fn use_dev_kinds(&mut self) {
        self.kinds = InfraKinds::Dev;
    }

    /// Creates a Cluster pointing to the DockerCluster (or DevCluster) of the same name.
    pub async fn create_cluster(&self, name: &str, paused: bool) -> DynamicObject {
        self.create(
            &capi("Cluster"),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": name, "labels": self.labels(name)},
                "spec": {
                    "paused": paused,
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": self.kinds.cluster(), "name": name},
                    "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name}
                }
            }),
        )
        .await
    }

    /// Creates the DockerCluster owned by `cluster`, with the test load balancer image.
    pub async fn create_docker_cluster(
        &self,
        cluster: &DynamicObject,
        annotations: Value,
    ) -> DynamicObject {
        self.create_docker_cluster_with(cluster, annotations, json!({}))
            .await
    }

    /// As [`Env::create_docker_cluster`], with more `spec` fields (e.g. `failureDomains`).
    pub async fn create_docker_cluster_with(
        &self,
        cluster: &DynamicObject,
        annotations: Value,
        spec: Value,
    ) -> DynamicObject {
        let name = cluster.metadata.name.clone().unwrap();
        let mut body = json!({
            "loadBalancer": {
                "imageRepository": self.images.haproxy_repository,
                "imageTag": self.images.haproxy_tag
            }
        });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), spec.as_object()) {
            body.extend(extra.clone());
        }
        let body = self.kinds.spec(body, &["controlPlaneEndpoint"]);
        let kind = self.kinds.cluster();
        self.create(
            &infra(kind),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": kind,
                "metadata": {
                    "name": name,
                    "labels": self.labels(&name),
                    "annotations": annotations,
                    "ownerReferences": [owner("Cluster", cluster)]
                },
                "spec": body
            }),
        )
        .await
    }

    /// Plays core 1.12's Cluster controller once the infrastructure cluster is provisioned
    /// (`cluster_controller_phases.go`, `reconcileInfrastructure`): the Cluster's
    /// `spec.controlPlaneEndpoint` copied while it is not valid yet, `status.failureDomains` set
    /// from the infrastructure cluster's (each `controlPlane` defaulted to false, sorted by name),
    /// and `status.initialization.infrastructureProvisioned`. Core does nothing of it before the
    /// infrastructure cluster is provisioned; nor may a scenario.
    pub async fn mark_infrastructure_provisioned(&self, cluster: &str) {
        let kind = infra(self.kinds.cluster());
        let infra_cluster = self
            .get(&kind, cluster)
            .await
            .unwrap_or_else(|| panic!("core: the infrastructure cluster {cluster} is missing"));
        assert_eq!(
            infra_cluster.data["status"]["initialization"]["provisioned"],
            json!(true),
            "core marks the Cluster's infrastructure provisioned only once {cluster}'s is"
        );
        let mut domains: Vec<Value> = infra_cluster.data["status"]["failureDomains"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for domain in &mut domains {
            if domain["controlPlane"].is_null() {
                domain["controlPlane"] = json!(false);
            }
        }
        domains.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let current = self.get(&capi("Cluster"), cluster).await.unwrap();
        let endpoint = &current.data["spec"]["controlPlaneEndpoint"];
        let valid = endpoint["host"].as_str().is_some_and(|h| !h.is_empty())
            && endpoint["port"].as_i64().is_some_and(|p| p != 0);
        if !valid {
            let wanted = &infra_cluster.data["spec"]["controlPlaneEndpoint"];
            self.merge_patch(
                &capi("Cluster"),
                cluster,
                json!({"spec": {"controlPlaneEndpoint": wanted}}),
            )
            .await;
        }
        // An empty list is omitted, as Go's `omitempty` does (the CRD wants at least one item).
        let domains = if domains.is_empty() {
            Value::Null
        } else {
            json!(domains)
        };
        self.merge_patch_status(
            &capi("Cluster"),
            cluster,
            json!({"status": {
                "initialization": {"infrastructureProvisioned": true},
                "failureDomains": domains
            }}),
        )
        .await;
    }

    /// Plays the control plane provider: the control plane is initialized.
    pub async fn mark_control_plane_initialized(&self, cluster: &str) {
        self.merge_patch_status(
            &capi("Cluster"),
            cluster,
            json!({"status": {"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}}),
        )
        .await;
    }

    /// Creates a bootstrap data Secret.
    pub async fn create_secret(&self, name: &str, value: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.namespace},
            "stringData": {"value": value, "format": "cloud-config"}
        }))
        .unwrap();
        api.create(&PostParams::default(), &secret).await.unwrap();
    }

    /// Creates a Machine and its DockerMachine (node image of the test), owned by it.
    pub async fn create_machine(
        &self,
        cluster: &str,
        name: &str,
        control_plane: bool,
        bootstrap_secret: Option<&str>,
    ) -> (DynamicObject, DynamicObject) {
        let spec = MachineSpec {
            control_plane,
            bootstrap_secret: bootstrap_secret.map(str::to_string),
            ..MachineSpec::default()
        };
        self.create_machine_with(cluster, name, &spec).await
    }

    /// Stores the workload cluster's kubeconfig as Cluster API does.
    pub async fn create_kubeconfig_secret(&self, cluster: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": self.namespace, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "stringData": {"value": self.workload.kubeconfig_yaml()}
        }))
        .unwrap();
        api.create(&PostParams::default(), &secret).await.unwrap();
    }

    /// Registers a Node in the workload cluster, as kubelet would.
    pub async fn register_node(&self, name: &str, uninitialized: bool) {
        let api: Api<Node> = Api::all(self.workload_client.clone());
        let mut node = json!({"metadata": {"name": name}, "spec": {}});
        if uninitialized {
            node["spec"]["taints"] = json!([{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]);
        }
        let node: Node = serde_json::from_value(node).unwrap();
        api.create(&PostParams::default(), &node).await.unwrap();
    }

    /// A Node of the workload cluster.
    pub async fn node(&self, name: &str) -> Node {
        let api: Api<Node> = Api::all(self.workload_client.clone());
        api.get(name).await.unwrap()
    }

    /// Creates a Cluster and its DockerCluster, waits until the DockerCluster is provisioned,
    /// and marks the Cluster's infrastructure provisioned; returns the DockerCluster.
    pub async fn provisioned_cluster(&self, name: &str, spec: Value) -> DynamicObject {
        let cluster = self.create_cluster(name, false).await;
        self.create_docker_cluster_with(&cluster, json!({}), spec)
            .await;
        let dc = self
            .wait_docker_cluster_provisioned(name, Duration::from_secs(90))
            .await;
        self.mark_infrastructure_provisioned(name).await;
        dc
    }

    /// Waits until a DockerCluster is provisioned with an endpoint.
    pub async fn wait_docker_cluster_provisioned(
        &self,
        name: &str,
        timeout: Duration,
    ) -> DynamicObject {
        eventually(timeout, "the DockerCluster to be provisioned", || async {
            let dc = self.get(&infra(self.kinds.cluster()), name).await?;
            (dc.data["status"]["initialization"]["provisioned"] == json!(true)
                && dc.data["spec"]["controlPlaneEndpoint"]["host"].is_string())
            .then_some(dc)
        })
        .await
    }

    /// Waits until a DockerMachine's bootstrap runs in its node (`BootstrapCompleted` false,
    /// "Running bootstrap command ..."): the moment to kill a manager or cut off the engine.
    pub async fn wait_bootstrap_running(&self, name: &str, timeout: Duration) {
        eventually(timeout, "bootstrap to be running", || async {
            let dm = self.get(&infra(self.kinds.machine()), name).await?;
            let c = condition(&dm, "BootstrapCompleted")?;
            (c["status"] == "False"
                && c["message"]
                    .as_str()?
                    .starts_with("Running bootstrap command"))
            .then_some(())
        })
        .await;
    }

    /// Waits until a DockerMachine's bootstrap completed and it is provisioned, then plays
    /// core's Machine controller once for its Machine (the provider ID copied, the Node recorded
    /// if it already has the provider ID: [`Env::play_machine_controller`]).
    pub async fn wait_machine_provisioned(&self, name: &str, timeout: Duration) -> DynamicObject {
        let dm = eventually(
            timeout,
            &format!("DockerMachine {name} to be provisioned"),
            || async {
                let dm = self.get(&infra(self.kinds.machine()), name).await?;
                provisioned(&dm).then_some(dm)
            },
        )
        .await;
        self.play_machine_controller(name).await;
        dm
    }
}
