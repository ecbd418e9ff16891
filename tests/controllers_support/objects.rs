//! Creating the Cluster API and provider objects a test needs, as Cluster API core would.

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::{Env, NAMESPACE, capi, infra, owner};

impl Env {
    /// Creates a Cluster pointing to the DockerCluster of the same name.
    pub async fn create_cluster(&self, name: &str, paused: bool) -> DynamicObject {
        self.create(
            &capi("Cluster"),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "paused": paused,
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": name},
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
        let name = cluster.metadata.name.clone().unwrap();
        self.create(
            &infra("DockerCluster"),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerCluster",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": {"cluster.x-k8s.io/cluster-name": name},
                    "annotations": annotations,
                    "ownerReferences": [owner("Cluster", cluster)]
                },
                "spec": {
                    "loadBalancer": {
                        "imageRepository": self.images.haproxy_repository,
                        "imageTag": self.images.haproxy_tag
                    }
                }
            }),
        )
        .await
    }

    /// Plays the Cluster controller: the infrastructure is provisioned.
    pub async fn mark_infrastructure_provisioned(&self, cluster: &str) {
        self.merge_patch_status(
            &capi("Cluster"),
            cluster,
            json!({"status": {"initialization": {"infrastructureProvisioned": true}}}),
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
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NAMESPACE},
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
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": cluster});
        if control_plane {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
        }
        let mut bootstrap = json!({});
        if let Some(secret) = bootstrap_secret {
            bootstrap["dataSecretName"] = json!(secret);
        }
        let machine = self
            .create(
                &capi("Machine"),
                json!({
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "Machine",
                    "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
                    "spec": {
                        "clusterName": cluster,
                        "version": "v1.31.0",
                        "bootstrap": bootstrap,
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": name}
                    }
                }),
            )
            .await;
        let docker_machine = self
            .create(
                &infra("DockerMachine"),
                json!({
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                    "kind": "DockerMachine",
                    "metadata": {
                        "name": name,
                        "namespace": NAMESPACE,
                        "labels": labels,
                        "ownerReferences": [owner("Machine", &machine)]
                    },
                    "spec": {"customImage": self.images.node}
                }),
            )
            .await;
        (machine, docker_machine)
    }

    /// Stores the workload cluster's kubeconfig as Cluster API does.
    pub async fn create_kubeconfig_secret(&self, cluster: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
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

    pub async fn node(&self, name: &str) -> Node {
        let api: Api<Node> = Api::all(self.workload_client.clone());
        api.get(name).await.unwrap()
    }
}
