//! Core 1.12's Machine controller (`internal/controllers/machine/machine_controller.go`,
//! `Reconcile`), one pass at a time, for every Machine the suite plays: a MachineSet's, a
//! KubeadmControlPlane's and a MachinePool's. Its finalizer first; nothing more for a missing or
//! paused Cluster or a paused Machine; a deleting Machine's infrastructure machine deleted and
//! waited for, then the Machine released; otherwise the infrastructure machine made the
//! Machine's controlled child, its `spec.providerID` copied once it is provisioned, and the
//! workload Node with that provider ID recorded as `status.nodeRef`, read through the cluster's
//! kubeconfig Secret as core's cluster cache reads it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::Kubeconfig;
use kube::{Client, Config};
use serde_json::{Value, json};

use super::{MACHINE_FINALIZER, capi, infra, owner};
use crate::{Env, eventually};

/// The annotation that pauses core's reconciliation of one object.
const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// How long core waits for one Machine's infrastructure to go.
const MACHINE_DELETION: Duration = Duration::from_secs(90);

impl Env {
    /// One pass of core's Machine controller over `machine` (as read), whose Cluster is
    /// `cluster` (`None`: missing).
    pub async fn machine_controller_pass(
        &self,
        machine: &DynamicObject,
        cluster: Option<&DynamicObject>,
    ) {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let deleting = machine.metadata.deletion_timestamp.is_some();
        if !deleting
            && self
                .ensure_finalizer(&capi("Machine"), machine, MACHINE_FINALIZER)
                .await
        {
            return;
        }
        // A missing Cluster ends core's pass with an error; a paused one (or a paused Machine)
        // ends it quietly (`EnsurePausedCondition`).
        let Some(cluster) = cluster.filter(|cluster| !paused(cluster, machine)) else {
            return;
        };
        let reference = &machine.data["spec"]["infrastructureRef"];
        let kind = infra(reference["kind"].as_str().unwrap_or(self.kinds.machine()));
        let infra_name = reference["name"].as_str().unwrap_or(&name);
        let infra_machine = self.get(&kind, infra_name).await;
        if deleting {
            // `reconcileDelete` (the drain and KCP's hook are the scenarios' to play).
            match infra_machine {
                None => self.release_machine(&name, MACHINE_DELETION).await,
                Some(found) if found.metadata.deletion_timestamp.is_none() => {
                    self.finish_machine_deletion(&name, MACHINE_DELETION).await;
                }
                // Deleting since an earlier (cancelled) pass: released once gone.
                Some(_) => {}
            }
            return;
        }
        let Some(infra_machine) = infra_machine else {
            return;
        };
        // `ensureExternalOwnershipAndWatch`: the Machine becomes the controller (other owners,
        // such as a DockerMachinePool's, kept) and the cluster-name label is set.
        if !controlled_by_machine(&infra_machine) {
            let mut owners: Vec<Value> = infra_machine
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|r| serde_json::to_value(r).unwrap())
                .collect();
            owners.push(owner("Machine", machine));
            self.merge_patch(
                &kind,
                infra_name,
                json!({"metadata": {
                    "ownerReferences": owners,
                    "labels": {"cluster.x-k8s.io/cluster-name": machine.data["spec"]["clusterName"]}
                }}),
            )
            .await;
        }
        // `reconcileInfrastructure`: the provider ID once the infrastructure is provisioned.
        let provider_id = &infra_machine.data["spec"]["providerID"];
        let mut recorded = machine.data["spec"]["providerID"].clone();
        let infra_provisioned =
            infra_machine.data["status"]["initialization"]["provisioned"] == json!(true);
        if infra_provisioned
            && provider_id.as_str().is_some_and(|id| !id.is_empty())
            && recorded != *provider_id
        {
            self.merge_patch(
                &capi("Machine"),
                &name,
                json!({"spec": {"providerID": provider_id}}),
            )
            .await;
            recorded = provider_id.clone();
        }
        // `reconcileNode`: the Node with that provider ID, once core reaches the workload cluster.
        let Some(provider_id) = recorded.as_str().filter(|id| !id.is_empty()) else {
            return;
        };
        if machine.data["status"]["nodeRef"]["name"].is_string() {
            return;
        }
        let cluster_name = cluster.metadata.name.clone().unwrap_or_default();
        let Some(workload) = self.cluster_cache_client(&cluster_name).await else {
            return;
        };
        let node = workload_nodes(workload)
            .await
            .into_iter()
            .find(|node| {
                node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
            })
            .and_then(|node| node.metadata.name);
        if let Some(node) = node {
            self.merge_patch_status(
                &capi("Machine"),
                &name,
                json!({"status": {"nodeRef": {"name": node}}}),
            )
            .await;
        }
    }

    /// Core's `finalizers.EnsureFinalizer`: adds `finalizer` to `object` (of `kind`) when it is
    /// missing; whether it did, in which case core's pass ends there.
    pub async fn ensure_finalizer(
        &self,
        kind: &ApiResource,
        object: &DynamicObject,
        finalizer: &str,
    ) -> bool {
        if has_finalizer(object, finalizer) {
            return false;
        }
        let mut finalizers = object.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(finalizer.to_string());
        let name = object.metadata.name.clone().unwrap_or_default();
        self.merge_patch(kind, &name, json!({"metadata": {"finalizers": finalizers}}))
            .await;
        true
    }

    /// One pass of the Machine controller over the Machine `name`; the Machine as it is after.
    pub async fn play_machine_controller(&self, name: &str) -> Option<DynamicObject> {
        let machine = self.get(&capi("Machine"), name).await?;
        let cluster = machine.data["spec"]["clusterName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let cluster = self.get(&capi("Cluster"), &cluster).await;
        self.machine_controller_pass(&machine, cluster.as_ref())
            .await;
        self.get(&capi("Machine"), name).await
    }

    /// Plays core's Machine controller over a Machine until it records its Node; the Node's name.
    pub async fn wait_node_ref(&self, machine: &str, timeout: Duration) -> String {
        eventually(
            timeout,
            &format!("core to record Machine {machine}'s Node"),
            || async {
                let found = self.play_machine_controller(machine).await?;
                found.data["status"]["nodeRef"]["name"]
                    .as_str()
                    .map(str::to_string)
            },
        )
        .await
    }

    /// The workload cluster as core's cluster cache reaches it (`controllers/clustercache`,
    /// `cluster_cache.go`): only once the Cluster's infrastructure is provisioned, with the
    /// kubeconfig of the `<cluster>-kubeconfig` Secret (the test workload API server, or a real
    /// cluster's load balancer); `None` before.
    pub async fn cluster_cache_client(&self, cluster: &str) -> Option<Client> {
        let found = self.get(&capi("Cluster"), cluster).await?;
        if found.data["status"]["initialization"]["infrastructureProvisioned"] != json!(true) {
            return None;
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = secrets
            .get_opt(&format!("{cluster}-kubeconfig"))
            .await
            .ok()??;
        // A kubeconfig core cannot use (a scenario may store a bad one) reaches nothing.
        let kubeconfig = secret.data?.remove("value")?;
        let kubeconfig = Kubeconfig::from_yaml(std::str::from_utf8(&kubeconfig.0).ok()?).ok()?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .ok()?;
        Client::try_from(config).ok()
    }
}

/// The workload cluster's Nodes; none when it does not answer.
pub async fn workload_nodes(workload: Client) -> Vec<Node> {
    let nodes: Api<Node> = Api::all(workload);
    nodes
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
}

/// Whether a Machine is the object's controller.
fn controlled_by_machine(object: &DynamicObject) -> bool {
    object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == "Machine" && r.controller == Some(true))
}

/// Whether the object carries `finalizer`.
fn has_finalizer(object: &DynamicObject, finalizer: &str) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}

/// Whether core 1.12 leaves the object alone (`util/paused`, `EnsurePausedCondition`): its
/// Cluster has `spec.paused` or the object has the `cluster.x-k8s.io/paused` annotation.
pub fn paused(cluster: &DynamicObject, object: &DynamicObject) -> bool {
    cluster.data["spec"]["paused"] == json!(true)
        || object
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
}
