//! The suite playing Cluster API core's MachinePool controller, as the InfraMachinePool contract
//! describes it: the MachinePool owns its DockerMachinePool and carries the bootstrap data
//! secret; core creates one Machine per DockerMachine of the pool and makes it the DockerMachine's
//! controller; a deleting Machine's DockerMachine is deleted, then the Machine released; the
//! pool's `providerIDList` is copied to the MachinePool.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::core::{
    MACHINE_FINALIZER, MachineSpec, capi, condition_state, infra, owner, provisioned,
};
use crate::{Env, eventually};

/// The label core and the provider put on a MachinePool's Machines and DockerMachines.
pub const POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";
/// The annotation that makes a Machine the first to go on scale-down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

/// How long core waits for one Machine's infrastructure to go.
const MACHINE_DELETION: Duration = Duration::from_secs(90);

/// A MachinePool and its DockerMachinePool (of the same name, as CAPD's templates write them).
#[derive(Debug, Clone)]
pub struct Pool {
    /// The Cluster's name.
    pub cluster: String,
    /// The MachinePool's name (and the DockerMachinePool's).
    pub name: String,
}

impl Env {
    /// Creates a MachinePool of `replicas` spread over `failure_domains` and its
    /// DockerMachinePool (test node image), then plays core and the bootstrap provider: the
    /// MachinePool becomes the DockerMachinePool's owner and gets `bootstrap_secret`.
    pub async fn create_machine_pool(
        &self,
        cluster: &str,
        name: &str,
        replicas: u32,
        failure_domains: &[&str],
        bootstrap_secret: &str,
    ) -> Pool {
        let labels = self.labels(cluster);
        let machine_pool = self
            .create(
                &capi("MachinePool"),
                json!({
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "MachinePool",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {
                        "clusterName": cluster,
                        "replicas": replicas,
                        "failureDomains": failure_domains,
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {
                                "clusterName": cluster,
                                "version": "v1.31.0",
                                "bootstrap": {},
                                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": name}
                            }
                        }
                    }
                }),
            )
            .await;
        self.create(
            &infra("DockerMachinePool"),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerMachinePool",
                "metadata": {"name": name, "labels": labels},
                "spec": {"template": {"customImage": self.images.node}}
            }),
        )
        .await;
        self.merge_patch(
            &infra("DockerMachinePool"),
            name,
            json!({"metadata": {"ownerReferences": [owner("MachinePool", &machine_pool)]}}),
        )
        .await;
        self.merge_patch(
            &capi("MachinePool"),
            name,
            json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": bootstrap_secret}}}}}),
        )
        .await;
        Pool {
            cluster: cluster.to_string(),
            name: name.to_string(),
        }
    }

    /// Scales a MachinePool as a user (or an autoscaler) does: `spec.replicas`.
    pub async fn scale_machine_pool(&self, pool: &Pool, replicas: u32) {
        self.merge_patch(
            &capi("MachinePool"),
            &pool.name,
            json!({"spec": {"replicas": replicas}}),
        )
        .await;
    }

    /// Runs `work` while the suite plays core's MachinePool controller for `pool` in the
    /// background; core's loop is cancelled when `work` ends (a cancelled step is resumed by
    /// the next loop: each pass starts from what the API holds).
    pub async fn playing_machine_pool<T>(&self, pool: &Pool, work: impl Future<Output = T>) -> T {
        tokio::select! {
            out = work => out,
            never = self.machine_pool_core(pool) => match never {},
        }
    }

    /// The objects of a kind labelled with the pool's cluster and MachinePool, sorted by name.
    pub async fn pool_objects(&self, resource: &ApiResource, pool: &Pool) -> Vec<DynamicObject> {
        let selector = format!(
            "cluster.x-k8s.io/cluster-name={},{POOL_NAME_LABEL}={}",
            pool.cluster, pool.name
        );
        let mut items = self
            .api(resource)
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        items
    }

    /// Deletes a MachinePool as core does: its DockerMachinePool first (core's loop playing
    /// on, for the Machines the provider deletes), then the MachinePool.
    pub async fn delete_machine_pool_as_core(&self, pool: &Pool, timeout: Duration) {
        self.delete(&infra("DockerMachinePool"), &pool.name).await;
        self.playing_machine_pool(
            pool,
            self.wait_gone(&infra("DockerMachinePool"), &pool.name, timeout),
        )
        .await;
        self.delete(&capi("MachinePool"), &pool.name).await;
        self.wait_gone(&capi("MachinePool"), &pool.name, timeout)
            .await;
    }

    async fn machine_pool_core(&self, pool: &Pool) -> Infallible {
        loop {
            self.machine_pool_core_pass(pool).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One pass of core's MachinePool controller.
    async fn machine_pool_core_pass(&self, pool: &Pool) {
        let Some(machine_pool) = self.get(&capi("MachinePool"), &pool.name).await else {
            return;
        };
        for docker_machine in self.pool_objects(&infra("DockerMachine"), pool).await {
            if docker_machine.metadata.deletion_timestamp.is_none()
                && !controlled_by_machine(&docker_machine)
            {
                self.adopt_docker_machine(&machine_pool, pool, &docker_machine)
                    .await;
            }
        }
        for machine in self.pool_objects(&capi("Machine"), pool).await {
            if machine.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let name = machine.metadata.name.clone().unwrap_or_default();
            match self.get(&infra("DockerMachine"), &name).await {
                None => self.release_machine(&name, MACHINE_DELETION).await,
                Some(dm) if dm.metadata.deletion_timestamp.is_none() => {
                    self.finish_machine_deletion(&name, MACHINE_DELETION).await;
                }
                // Deleting since an earlier (cancelled) pass: released once gone.
                Some(_) => {}
            }
        }
        if let Some(dmp) = self.get(&infra("DockerMachinePool"), &pool.name).await {
            let ids = &dmp.data["spec"]["providerIDList"];
            if machine_pool.data["spec"]["providerIDList"] != *ids {
                self.merge_patch(
                    &capi("MachinePool"),
                    &pool.name,
                    json!({"spec": {"providerIDList": ids}}),
                )
                .await;
            }
        }
    }

    /// Core's Machine for a pool DockerMachine (created unless a cancelled pass did), made the
    /// DockerMachine's controller.
    async fn adopt_docker_machine(
        &self,
        machine_pool: &DynamicObject,
        pool: &Pool,
        docker_machine: &DynamicObject,
    ) {
        let name = docker_machine.metadata.name.clone().unwrap_or_default();
        let machine = match self.get(&capi("Machine"), &name).await {
            Some(machine) => machine,
            None => {
                let body = self.pool_machine(machine_pool, pool, &name);
                self.create(&capi("Machine"), body).await
            }
        };
        let mut owners: Vec<Value> = docker_machine
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| serde_json::to_value(r).unwrap())
            .collect();
        owners.push(owner("Machine", &machine));
        self.merge_patch(
            &infra("DockerMachine"),
            &name,
            json!({"metadata": {"ownerReferences": owners}}),
        )
        .await;
    }

    /// The Machine core makes for a pool's DockerMachine: the MachinePool template's labels,
    /// version and bootstrap data, owned by the MachinePool, held by core's finalizer.
    fn pool_machine(&self, machine_pool: &DynamicObject, pool: &Pool, name: &str) -> Value {
        let template = &machine_pool.data["spec"]["template"];
        let spec = MachineSpec {
            bootstrap_secret: template["spec"]["bootstrap"]["dataSecretName"]
                .as_str()
                .map(str::to_string),
            ..MachineSpec::default()
        };
        let mut machine = self.machine(&pool.cluster, name, &spec);
        if let (Some(labels), Some(template_labels)) = (
            machine["metadata"]["labels"].as_object_mut(),
            template["metadata"]["labels"].as_object(),
        ) {
            labels.extend(template_labels.clone());
        }
        machine["metadata"]["labels"][POOL_NAME_LABEL] = json!(pool.name);
        machine["metadata"]["ownerReferences"] = json!([owner("MachinePool", machine_pool)]);
        machine["metadata"]["finalizers"] = json!([MACHINE_FINALIZER]);
        machine["spec"]["version"] = template["spec"]["version"].clone();
        machine
    }

    /// Waits until the pool settled at `replicas`: as many containers, DockerMachines (all
    /// provisioned), Machines, provider IDs and `status.replicas`, nothing deleting, and the
    /// pool's `Ready` and `ReplicasReady` True; returns the DockerMachinePool and its
    /// DockerMachines. Core plays meanwhile.
    pub async fn wait_machine_pool_at(
        &self,
        pool: &Pool,
        replicas: usize,
        timeout: Duration,
    ) -> (DynamicObject, Vec<DynamicObject>) {
        let what = format!("MachinePool {} to settle at {replicas}", pool.name);
        let settled = eventually(timeout, &what, || async {
            let containers = crate::docker::pool_containers(&pool.cluster, &pool.name);
            let dms = self.pool_objects(&infra("DockerMachine"), pool).await;
            let machines = self.pool_objects(&capi("Machine"), pool).await;
            let dmp = self.get(&infra("DockerMachinePool"), &pool.name).await?;
            let ids = dmp.data["spec"]["providerIDList"]
                .as_array()
                .map_or(0, Vec::len);
            let provisioned = dms
                .iter()
                .all(|dm| dm.metadata.deletion_timestamp.is_none() && provisioned(dm));
            let counts = [containers.len(), dms.len(), machines.len(), ids];
            let ready = ["Ready", "ReplicasReady"]
                .iter()
                .all(|c| condition_state(&dmp, c).is_some_and(|(status, _)| status == "True"));
            (counts.iter().all(|n| *n == replicas)
                && provisioned
                && ready
                // CAPD omits a zero `status.replicas`.
                && dmp.data["status"]["replicas"].as_u64().unwrap_or(0) == replicas as u64)
                .then_some((dmp, dms))
        });
        self.playing_machine_pool(pool, settled).await
    }
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
