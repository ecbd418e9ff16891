//! The suite playing Cluster API core 1.14's MachinePool controller and, for the pool's
//! Machines, its Machine controller, as their source does it (the table in `e2e/README.md` names
//! the files and functions): the MachinePool owns its infrastructure pool (a DockerMachinePool
//! or a DevMachinePool, whichever its `infrastructureRef` names) and carries the bootstrap data
//! secret; once the workload cluster is reachable and the infrastructure pool names its
//! machines' kind in `status.infrastructureMachineKind`, core makes one Machine per
//! infrastructure machine of that kind (found by the pool-name and cluster-name labels), named
//! after it, with an empty bootstrap data secret name and a version only from a Node; the
//! Machine controller (the suite's one pass for every Machine, `core/machine_controller.rs`)
//! adds its finalizer, makes the Machine the infrastructure machine's controller, copies
//! `spec.providerID` once provisioned, records the Node, and on deletion deletes the
//! infrastructure machine before it releases the Machine; the pool's `providerIDList` and
//! replicas are copied once the infrastructure pool is `status.ready`. The MachinePool
//! controller reads the Cluster, then adds its finalizer, then leaves a paused object alone; a
//! deleting MachinePool only has its infrastructure pool deleted, and its finalizer goes with
//! the latter.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use base64::Engine as _;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::core::machine_controller::{paused, workload_nodes};
use crate::core::{InfraKinds, capi, condition_state, infra, owner, provisioned};
use crate::{Env, eventually};

/// The label core and the provider put on a MachinePool's Machines and DockerMachines.
pub const POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";
/// The annotation that makes a Machine the first to go on scale-down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

/// Core's finalizer on a MachinePool.
pub const MACHINE_POOL_FINALIZER: &str = "machinepool.cluster.x-k8s.io";

/// A MachinePool and its infrastructure pool (of the same name, as CAPD's templates write them).
#[derive(Debug, Clone)]
pub struct Pool {
    /// The Cluster's name.
    pub cluster: String,
    /// The MachinePool's name (and the infrastructure pool's).
    pub name: String,
    /// DockerMachinePool and DockerMachines, or DevMachinePool and DevMachines.
    pub kinds: InfraKinds,
}

impl Pool {
    /// The pool of a MachinePool, its kinds read from its `infrastructureRef`.
    pub fn of(machine_pool: &DynamicObject) -> Pool {
        let kind = &machine_pool.data["spec"]["template"]["spec"]["infrastructureRef"]["kind"];
        Pool {
            cluster: str_of(&machine_pool.data["spec"]["clusterName"]),
            name: machine_pool.name_any(),
            kinds: if kind == InfraKinds::Dev.pool() {
                InfraKinds::Dev
            } else {
                InfraKinds::Docker
            },
        }
    }

    /// The infrastructure pool's kind.
    pub fn infra_pool(&self) -> ApiResource {
        infra(self.kinds.pool())
    }

    /// The infrastructure machines' kind.
    pub fn infra_machine(&self) -> ApiResource {
        infra(self.kinds.machine())
    }

    /// The pool's containers (running or not), sorted.
    pub fn containers(&self) -> Vec<String> {
        crate::docker::pool_containers(&self.cluster, self.kinds.pool_container_label(), &self.name)
    }
}

impl Env {
    /// Creates a MachinePool of `replicas` spread over `failure_domains` and its infrastructure
    /// pool of the environment's kinds (test node image), then plays core and the bootstrap
    /// provider: the MachinePool becomes the infrastructure pool's owner and gets
    /// `bootstrap_secret`.
    pub async fn create_machine_pool(
        &self,
        cluster: &str,
        name: &str,
        replicas: u32,
        failure_domains: &[&str],
        bootstrap_secret: &str,
    ) -> Pool {
        let labels = self.labels(cluster);
        let pool = Pool {
            cluster: cluster.to_string(),
            name: name.to_string(),
            kinds: self.kinds,
        };
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
                                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": self.kinds.pool(), "name": name}
                            }
                        }
                    }
                }),
            )
            .await;
        self.create(
            &pool.infra_pool(),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": self.kinds.pool(),
                "metadata": {"name": name, "labels": labels},
                "spec": self.kinds.pool_spec(json!({"customImage": self.images.node}))
            }),
        )
        .await;
        self.merge_patch(
            &pool.infra_pool(),
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
        pool
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
            pool.cluster,
            label_value(&pool.name)
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

    /// Deletes a MachinePool as core does (`machinepool_controller.go`, `reconcileDelete`): the
    /// MachinePool is marked deleting, held by core's finalizer while core's loop deletes its
    /// infrastructure pool (the provider deleting the pool's Machines, which core's Machine
    /// controller releases), and let go once the infrastructure pool is gone.
    pub async fn delete_machine_pool_as_core(&self, pool: &Pool, timeout: Duration) {
        // One pass first, so that the finalizer is there even for a pool never played.
        self.machine_pool_core_pass(pool).await;
        self.delete(&capi("MachinePool"), &pool.name).await;
        self.playing_machine_pool(
            pool,
            self.wait_gone(&capi("MachinePool"), &pool.name, timeout),
        )
        .await;
        assert!(
            self.get(&pool.infra_pool(), &pool.name).await.is_none(),
            "the {} went before the MachinePool",
            pool.kinds.pool()
        );
    }

    async fn machine_pool_core(&self, pool: &Pool) -> Infallible {
        loop {
            self.machine_pool_core_pass(pool).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One pass of core 1.14's MachinePool controller for the pool, then of its Machine
    /// controller for the pool's Machines (two controllers: a paused MachinePool does not stop
    /// the Machines').
    async fn machine_pool_core_pass(&self, pool: &Pool) {
        let cluster = self.get(&capi("Cluster"), &pool.cluster).await;
        if let Some(machine_pool) = self.get(&capi("MachinePool"), &pool.name).await {
            self.machine_pool_controller_pass(pool, &machine_pool, cluster.as_ref())
                .await;
        }
        for machine in self.pool_objects(&capi("Machine"), pool).await {
            self.machine_controller_pass(&machine, cluster.as_ref())
                .await;
        }
    }

    /// Core's MachinePool `Reconcile`: nothing for a missing Cluster (an error), then its
    /// finalizer, nothing more for a paused Cluster or MachinePool, only `reconcileDelete` for a
    /// deleting one, else `reconcileInfrastructure`.
    async fn machine_pool_controller_pass(
        &self,
        pool: &Pool,
        machine_pool: &DynamicObject,
        cluster: Option<&DynamicObject>,
    ) {
        let Some(cluster) = cluster else {
            return;
        };
        let deleting = machine_pool.metadata.deletion_timestamp.is_some();
        if !deleting
            && self
                .ensure_finalizer(&capi("MachinePool"), machine_pool, MACHINE_POOL_FINALIZER)
                .await
        {
            return;
        }
        if paused(cluster, machine_pool) {
            return;
        }
        if deleting {
            self.machine_pool_delete_pass(machine_pool).await;
        } else {
            self.machine_pool_infrastructure_pass(pool, machine_pool)
                .await;
        }
    }

    /// Core's `reconcileDelete` (`reconcileDeleteExternal`): the infrastructure pool is deleted,
    /// and the finalizer removed only once a pass finds it gone. (No Node is deleted: the suite
    /// never fills the MachinePool's `status.nodeRefs`.)
    async fn machine_pool_delete_pass(&self, machine_pool: &DynamicObject) {
        let (kind, name) = infrastructure_ref(machine_pool);
        if self.get(&kind, &name).await.is_some() {
            // Core ignores a NotFound here: the pool may go between the read and the delete.
            match self.api(&kind).delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => panic!("core: delete {} {name}: {e}", kind.kind),
            }
            return;
        }
        let finalizers: Vec<&String> = machine_pool
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != MACHINE_POOL_FINALIZER)
            .collect();
        self.merge_patch(
            &capi("MachinePool"),
            &machine_pool.name_any(),
            json!({"metadata": {"finalizers": finalizers}}),
        )
        .await;
    }

    /// Core's `reconcileInfrastructure` (`machinepool_controller_phases.go`): the infrastructure
    /// pool its `infrastructureRef` names; nothing for a deleting one; `reconcileMachines` once
    /// the workload cluster is reachable; then, for a `status.ready` pool, `status.replicas`
    /// copied when the pool has it and the provider IDs unless the list is empty while that
    /// count is not zero.
    async fn machine_pool_infrastructure_pass(&self, pool: &Pool, machine_pool: &DynamicObject) {
        let (kind, name) = infrastructure_ref(machine_pool);
        let Some(dmp) = self.get(&kind, &name).await else {
            return;
        };
        if dmp.metadata.deletion_timestamp.is_some() {
            return;
        }
        // Core reaches the workload cluster (its ClusterCache) before it makes any Machine.
        let Some(workload) = self.cluster_cache_client(&pool.cluster).await else {
            return;
        };
        // `reconcileMachines`: only for a pool that names its machines' kind, whose objects (in
        // the pool's group) are its machines; one Machine for every infrastructure machine,
        // deleting ones included (`createOrUpdateMachines`).
        if let Some(machine_kind) = dmp.data["status"]["infrastructureMachineKind"]
            .as_str()
            .filter(|k| !k.is_empty())
        {
            let nodes = kubelet_versions_by_provider_id(workload).await;
            for infra_machine in self.pool_objects(&infra(machine_kind), pool).await {
                let desired =
                    pool_machine(machine_pool, pool, machine_kind, &infra_machine, &nodes);
                self.apply_pool_machine(desired).await;
            }
        }
        // Ready is the infrastructure pool's `status.ready` (core 1.12 to 1.14 read no other
        // field of an InfraMachinePool); only then are the replicas and provider IDs copied.
        if dmp.data["status"]["ready"] != json!(true) {
            return;
        }
        let old_replicas = &machine_pool.data["status"]["replicas"];
        // Core keeps its old count when the pool has none (`UnstructuredUnmarshalField`).
        let replicas = match &dmp.data["status"]["replicas"] {
            Value::Null => old_replicas.clone(),
            value => value.clone(),
        };
        // The status patch is deferred in core: it lands even when the guard below returns.
        if replicas != *old_replicas {
            self.merge_patch_status(
                &capi("MachinePool"),
                &pool.name,
                json!({"status": {"replicas": replicas}}),
            )
            .await;
        }
        let ids = string_list(&dmp.data["spec"]["providerIDList"]);
        if ids.is_empty() && replicas.as_i64().unwrap_or(0) != 0 {
            return;
        }
        if string_list(&machine_pool.data["spec"]["providerIDList"]) != ids {
            let ids = if ids.is_empty() {
                json!(null)
            } else {
                json!(ids)
            };
            self.merge_patch(
                &capi("MachinePool"),
                &pool.name,
                json!({"spec": {"providerIDList": ids}}),
            )
            .await;
        }
    }

    /// Core's Machine for a pool's infrastructure machine (`computeDesiredMachine`, `desired`),
    /// created or brought up to date as core's server-side apply does.
    async fn apply_pool_machine(&self, desired: Value) {
        let name = str_of(&desired["metadata"]["name"]);
        match self.get(&capi("Machine"), &name).await {
            None => {
                self.create(&capi("Machine"), desired).await;
            }
            Some(machine) => {
                let labels = &desired["metadata"]["labels"];
                let version = &desired["spec"]["version"];
                let stale = labels.as_object().is_some_and(|wanted| {
                    wanted.iter().any(|(k, v)| {
                        machine
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(k))
                            .map(String::as_str)
                            != v.as_str()
                    })
                });
                if stale || (!version.is_null() && machine.data["spec"]["version"] != *version) {
                    self.merge_patch(
                        &capi("Machine"),
                        &name,
                        json!({"metadata": {"labels": labels}, "spec": {"version": version}}),
                    )
                    .await;
                }
            }
        }
    }

    /// Waits until the pool settled at `replicas`: as many containers, infrastructure machines
    /// (all provisioned), Machines, provider IDs and `status.replicas`, nothing deleting, and the
    /// pool's `Ready` and `ReplicasReady` True; returns the infrastructure pool and its
    /// machines. Core plays meanwhile.
    pub async fn wait_machine_pool_at(
        &self,
        pool: &Pool,
        replicas: usize,
        timeout: Duration,
    ) -> (DynamicObject, Vec<DynamicObject>) {
        let what = format!("MachinePool {} to settle at {replicas}", pool.name);
        let settled = eventually(timeout, &what, || async {
            let containers = pool.containers();
            let dms = self.pool_objects(&pool.infra_machine(), pool).await;
            let machines = self.pool_objects(&capi("Machine"), pool).await;
            let dmp = self.get(&pool.infra_pool(), &pool.name).await?;
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
                // Written even when zero, as CAPD's `json:"replicas"`.
                && dmp.data["status"]["replicas"] == json!(replicas))
            .then_some((dmp, dms))
        });
        self.playing_machine_pool(pool, settled).await
    }
}

/// The Machine core 1.14's MachinePool controller makes for a pool's infrastructure machine of
/// kind `machine_kind` (`machinepool_controller_phases.go`, `computeDesiredMachine`): the
/// infrastructure machine's name, the MachinePool as controller, the template's labels and
/// annotations with the pool-name and cluster-name labels forced, an empty bootstrap data secret
/// name, a reference to the infrastructure machine, and a version only once a Node with the
/// machine's provider ID reports its kubelet's. No finalizer: the Machine controller adds it.
fn pool_machine(
    machine_pool: &DynamicObject,
    pool: &Pool,
    machine_kind: &str,
    infra_machine: &DynamicObject,
    nodes: &[(String, String)],
) -> Value {
    let template = &machine_pool.data["spec"]["template"];
    let name = infra_machine.metadata.name.clone().unwrap_or_default();
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[POOL_NAME_LABEL] = json!(label_value(&pool.name));
    labels["cluster.x-k8s.io/cluster-name"] = json!(pool.cluster);
    let mut spec = json!({
        "clusterName": pool.cluster,
        "bootstrap": {"dataSecretName": ""},
        "infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": machine_kind,
            "name": name
        }
    });
    let provider_id = infra_machine.data["spec"]["providerID"].as_str();
    if let Some((_, version)) = nodes
        .iter()
        .find(|(id, version)| Some(id.as_str()) == provider_id && !version.is_empty())
    {
        spec["version"] = json!(version);
    }
    let mut metadata = json!({
        "name": name,
        "labels": labels,
        "ownerReferences": [owner("MachinePool", machine_pool)]
    });
    if let Some(annotations) = template["metadata"]["annotations"].as_object() {
        metadata["annotations"] = json!(annotations);
    }
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": metadata,
        "spec": spec
    })
}

/// A name as core 1.12 writes it into a label value (`util/labels/format`, `MustFormatValue`):
/// the name when it is a valid label value, else `hash_` and the unpadded URL-safe base64 of its
/// FNV-32a digest (big-endian) and `_z`. Written here from core's description, apart from the
/// provider's own, so that a provider that formats differently is caught.
pub fn label_value(name: &str) -> String {
    let valid = name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name
            .chars()
            .next()
            .is_none_or(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_none_or(|c| c.is_ascii_alphanumeric());
    if valid {
        return name.to_string();
    }
    let digest = name.bytes().fold(2_166_136_261_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(16_777_619)
    });
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.to_be_bytes());
    format!("hash_{encoded}_z")
}

/// The kind and name a MachinePool's `spec.template.spec.infrastructureRef` names (core reads the
/// infrastructure pool through it, `reconcileExternal`).
fn infrastructure_ref(machine_pool: &DynamicObject) -> (ApiResource, String) {
    let reference = &machine_pool.data["spec"]["template"]["spec"]["infrastructureRef"];
    (
        infra(&str_of(&reference["kind"])),
        str_of(&reference["name"]),
    )
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// A list of strings, absent or `null` read as empty (as core's `UnstructuredUnmarshalField`
/// leaves a nil slice).
fn string_list(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The workload cluster's Nodes by `spec.providerID`, with their kubelet versions.
async fn kubelet_versions_by_provider_id(workload: kube::Client) -> Vec<(String, String)> {
    workload_nodes(workload)
        .await
        .into_iter()
        .filter_map(|node| {
            let id = node.spec?.provider_id.filter(|id| !id.is_empty())?;
            let version = node
                .status
                .and_then(|s| s.node_info)
                .map(|i| i.kubelet_version)
                .unwrap_or_default();
            Some((id, version))
        })
        .collect()
}
