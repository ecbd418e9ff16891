//! What the stand-in writes: the management cluster's Secrets (as CABPK, KCP and core write them),
//! Machines with their version, and the workload cluster's side (bootstrap tokens, Nodes), reached
//! with the admin kubeconfig through the load balancer.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

use super::certs::{Authority, ClusterCertificates, cluster_secret};
use super::token::{BootstrapToken, DEFAULT_TOKEN_TTL};
use crate::{Env, capi, condition, eventually, infra, owner};

impl Env {
    /// KCP's `reconcileClusterCertificates`: the cluster CA, etcd CA, front-proxy CA and
    /// service-account Secrets (`<cluster>-ca`, `-etcd`, `-proxy`, `-sa`).
    pub async fn create_cluster_certificates(
        &self,
        cluster: &str,
        certificates: &ClusterCertificates,
    ) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for secret in certificates.secrets(cluster, &self.namespace) {
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
    }

    /// CABPK's `storeBootstrapData`: the Secret named after the KubeadmConfig (KCP and
    /// MachineSets name it after the Machine) with `value` (the cloud-config) and
    /// `format: cloud-config`, type `cluster.x-k8s.io/secret`, labelled with the cluster name.
    pub async fn create_bootstrap_data(&self, cluster: &str, name: &str, cloud_config: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = cluster_secret(
            name,
            &self.namespace,
            cluster,
            [
                ("value", cloud_config.to_string()),
                ("format", "cloud-config".to_string()),
            ],
        );
        api.create(&PostParams::default(), &secret).await.unwrap();
    }

    /// The `<cluster>-kubeconfig` Secret as core's `kubeconfig.CreateSecretWithOwner` writes it
    /// (key `value`, type `cluster.x-k8s.io/secret`, the cluster-name label), with an admin
    /// client certificate of `ca` for `https://<endpoint>`; returns the kubeconfig.
    pub async fn create_admin_kubeconfig_secret(
        &self,
        cluster: &str,
        endpoint: &str,
        ca: &Authority,
    ) -> String {
        let kubeconfig =
            super::certs::admin_kubeconfig(cluster, &format!("https://{endpoint}"), ca);
        let mut secret = cluster_secret(
            &format!("{cluster}-kubeconfig"),
            &self.namespace,
            cluster,
            [("value", kubeconfig.clone())],
        );
        // KCP owns it; there is no KubeadmControlPlane object here, so the Cluster does (as
        // core's `kubeconfig.CreateSecret` makes it).
        if let Some(object) = self.get(&capi("Cluster"), cluster).await {
            let mut reference = owner("Cluster", &object);
            reference["controller"] = json!(null);
            reference["blockOwnerDeletion"] = json!(null);
            secret.metadata.owner_references =
                Some(vec![serde_json::from_value(reference).unwrap()]);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        api.create(&PostParams::default(), &secret).await.unwrap();
        kubeconfig
    }

    /// Waits until a DockerMachine's bootstrap completed and it is provisioned; panics at once,
    /// with the condition's message, when bootstrap failed.
    pub async fn wait_bootstrap_completed(&self, name: &str, timeout: Duration) -> DynamicObject {
        eventually(
            timeout,
            &format!("bootstrap of {name} to complete"),
            || async {
                let dm = self.get(&infra(self.kinds.machine()), name).await?;
                if let Some(c) = condition(&dm, "BootstrapCompleted") {
                    assert_ne!(
                        c["reason"], "Failed",
                        "bootstrap of {name} failed: {}",
                        c["message"]
                    );
                }
                crate::provisioned(&dm).then_some(dm)
            },
        )
        .await
    }
}

/// The workload cluster, through its admin kubeconfig (so through the load balancer).
pub struct Workload {
    /// A client of the workload API server.
    pub client: Client,
}

impl Workload {
    /// A client with connections of its own (a load balancer sends new connections only to the
    /// backends it still weighs).
    pub async fn connect(kubeconfig: &str) -> Workload {
        Workload {
            client: crate::env::client_from_yaml(kubeconfig).await,
        }
    }

    /// CABPK's `createToken`: a bootstrap token Secret in `kube-system`, valid for CABPK's default
    /// 15 minutes.
    pub async fn create_bootstrap_token(&self) -> BootstrapToken {
        let token = BootstrapToken::generate();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), "kube-system");
        api.create(&PostParams::default(), &token.secret(DEFAULT_TOKEN_TTL))
            .await
            .unwrap();
        token
    }

    /// Whether `kubeadm init` uploaded its configuration (`kube-system/kubeadm-config`): KCP's
    /// test for an initialized control plane (`setControlPlaneInitialized`).
    pub async fn kubeadm_config_uploaded(&self) -> bool {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        matches!(api.get_opt("kubeadm-config").await, Ok(Some(_)))
    }

    /// The Nodes, `None` when the API server does not answer.
    pub async fn nodes(&self) -> Option<Vec<Node>> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.list(&ListParams::default()).await.ok().map(|l| l.items)
    }

    /// A Node, `None` when absent or when the API server does not answer.
    pub async fn node(&self, name: &str) -> Option<Node> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.get_opt(name).await.ok().flatten()
    }

    /// Waits until a Node is registered and Ready; returns how long that took from `since`.
    pub async fn wait_node_ready(&self, name: &str, since: Instant, timeout: Duration) -> Duration {
        eventually(timeout, &format!("Node {name} to be Ready"), || async {
            self.node(name)
                .await
                .filter(node_ready)
                .map(|_| since.elapsed())
        })
        .await
    }

    /// Core's Machine controller once it synced a Node's labels (`machine_controller_noderef.go`):
    /// the taint CABPK put on a joining worker goes.
    pub async fn remove_uninitialized_taint(&self, name: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = api.get(name).await.unwrap();
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        let kept: Vec<_> = taints
            .iter()
            .filter(|t| t.key != super::config::NODE_UNINITIALIZED_TAINT)
            .cloned()
            .collect();
        if kept.len() != taints.len() {
            let patch = json!({"spec": {"taints": kept}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    }

    /// Core's drain before it deletes a Machine's infrastructure (`drainNode`): the Node is
    /// cordoned and its Pods evicted, except DaemonSet Pods and static (mirror) Pods.
    pub async fn drain(&self, name: &str) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await
            .unwrap();
        let pods: Api<Pod> = Api::all(self.client.clone());
        let on_node = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
            .await
            .unwrap();
        for pod in on_node.items {
            let daemon = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet");
            let mirror = pod
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
            if daemon || mirror {
                continue;
            }
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let _ = api.evict(&pod_name, &EvictParams::default()).await;
        }
    }

    /// Core's `deleteNode`, once the Machine's infrastructure is gone (a Node already gone is
    /// fine); waits until it is gone.
    pub async fn delete_node(&self, name: &str, timeout: Duration) {
        let api: Api<Node> = Api::all(self.client.clone());
        eventually(timeout, &format!("Node {name} to be deleted"), || async {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(status)) if status.code == 404 => Some(()),
                Err(_) => None,
            }
        })
        .await;
    }
}

/// Whether a Node's `Ready` condition is `True`.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
