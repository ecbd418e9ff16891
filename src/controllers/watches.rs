//! Mapping watched objects to the objects to reconcile, and the change filters that keep
//! unrelated updates (status churn of Cluster API objects) from triggering reconciles.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;

use super::loadbalancer::machine_cluster;
use super::meta::{cluster_label, owner, owner_cluster, refers_to};
use crate::api::capi::{Cluster, Machine, MachinePool};
use crate::api::v1beta2::{DockerCluster, DockerMachine, DockerMachinePool};
use crate::api::{GROUP, LEGACY_WEIGHT_ANNOTATION, PAUSED_ANNOTATION, WEIGHT_ANNOTATION};

/// Remembers a fingerprint per object and says whether it changed: a predicate for shared
/// watch streams (which carry every update).
#[derive(Debug, Default)]
pub struct ChangeFilter {
    seen: Mutex<HashMap<String, u64>>,
}

impl ChangeFilter {
    /// Whether `fingerprint` differs from the last one seen for the object `uid`.
    pub fn changed(&self, uid: &str, fingerprint: &impl Serialize) -> bool {
        let text = serde_json::to_string(fingerprint).unwrap_or_default();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let hash = hasher.finish();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(uid.to_string(), hash) != Some(hash)
    }
}

fn paused_annotation(meta: &kube::core::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
}

/// What of a Cluster matters to a DockerCluster: pause and the infrastructure reference.
pub fn cluster_fingerprint_for_docker_cluster(cluster: &Cluster) -> impl Serialize + use<> {
    (
        cluster.spec.paused,
        paused_annotation(&cluster.metadata),
        cluster.spec.infrastructure_ref.clone(),
        cluster.spec.cluster_network.clone(),
    )
}

/// What of a Cluster matters to DockerMachines: pause, infrastructure provisioned, control plane
/// initialized, references and network.
pub fn cluster_fingerprint_for_docker_machines(cluster: &Cluster) -> impl Serialize + use<> {
    (
        cluster.spec.paused,
        cluster.infrastructure_provisioned(),
        cluster.control_plane_initialized(),
        cluster.spec.infrastructure_ref.clone(),
        cluster.spec.control_plane_ref.is_some(),
        cluster.spec.cluster_network.clone(),
    )
}

/// What of a DockerMachine (or DevMachine) its controller acts on: all of it but what the
/// controller writes itself (the status, `spec.providerID` and the load balancer weight
/// annotation) and what every write changes (`resourceVersion`, `managedFields`, and
/// `generation`: the spec itself is compared). Its own writes then do not wake it again; the
/// finalizer it adds does, as the finalizer helper expects.
pub fn infra_machine_fingerprint(object: &impl Serialize) -> serde_json::Value {
    use serde_json::Value;
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        fields.remove("status");
        if let Some(spec) = fields.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("providerID");
        }
        if let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) {
            for bookkeeping in ["resourceVersion", "managedFields", "generation"] {
                metadata.remove(bookkeeping);
            }
            if let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(WEIGHT_ANNOTATION);
                annotations.remove(LEGACY_WEIGHT_ANNOTATION);
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
    value
}

/// What of a Machine matters to its DockerMachine.
pub fn machine_fingerprint(machine: &Machine) -> impl Serialize + use<> {
    (
        machine.metadata.deletion_timestamp.is_some(),
        machine.metadata.labels.clone(),
        machine.spec.clone(),
        machine.node_name().map(str::to_string),
    )
}

/// What of a DockerCluster matters to its DockerMachines.
pub fn docker_cluster_fingerprint(docker_cluster: &DockerCluster) -> impl Serialize + use<> {
    (
        docker_cluster.metadata.deletion_timestamp.is_some(),
        paused_annotation(&docker_cluster.metadata),
        docker_cluster.spec.clone(),
        docker_cluster
            .status
            .as_ref()
            .and_then(|s| s.initialization.provisioned),
    )
}

/// The infrastructure cluster of kind `K` (DockerCluster, DevCluster) a Cluster points to.
pub fn cluster_to_infra_cluster<K>(cluster: &Cluster) -> Option<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    let reference = cluster.spec.infrastructure_ref.as_ref()?;
    if !refers_to(reference, &K::kind(&())) {
        return None;
    }
    Some(ObjectRef::new(&reference.name).within(&cluster.namespace().unwrap_or_default()))
}

/// The infrastructure machine of kind `K` (DockerMachine, DevMachine) a Machine points to.
pub fn machine_to_infra_machine<K>(machine: &Machine) -> Option<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    let reference = machine.spec.infrastructure_ref.as_ref()?;
    if !refers_to(reference, &K::kind(&())) {
        return None;
    }
    Some(ObjectRef::new(&reference.name).within(&machine.namespace().unwrap_or_default()))
}

/// The infrastructure machines of kind `K` of the cluster `cluster` in `namespace`: those
/// Machines point to, and those labelled with the cluster name.
pub fn infra_machines_of_cluster<K>(
    namespace: &str,
    cluster: &str,
    machines: &Store<DeserializeGuard<Machine>>,
    infra_machines: &Store<K>,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    let mut refs: Vec<ObjectRef<K>> = machines
        .state()
        .iter()
        .filter_map(|guarded| guarded.0.as_ref().ok())
        .filter(|m| {
            m.namespace().as_deref() == Some(namespace) && machine_cluster(m) == Some(cluster)
        })
        .filter_map(machine_to_infra_machine::<K>)
        .collect();
    refs.extend(
        infra_machines
            .state()
            .iter()
            .filter(|object| {
                object.meta().namespace.as_deref() == Some(namespace)
                    && cluster_label(object.meta()) == Some(cluster)
            })
            .map(|object| ObjectRef::from_obj(object.as_ref())),
    );
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    refs.dedup();
    refs
}

/// The name of the Cluster a DockerCluster belongs to (owner, else label).
pub fn docker_cluster_cluster(docker_cluster: &DockerCluster) -> Option<&str> {
    owner_cluster(&docker_cluster.metadata).or_else(|| cluster_label(&docker_cluster.metadata))
}

/// What of a MachinePool matters to its DockerMachinePool.
pub fn machine_pool_fingerprint(machine_pool: &MachinePool) -> impl Serialize + use<> {
    (
        machine_pool.metadata.deletion_timestamp.is_some(),
        machine_pool.metadata.uid.clone(),
        machine_pool.spec.clone(),
    )
}

/// The DockerMachinePool a MachinePool points to.
pub fn machine_pool_to_docker_machine_pool(
    machine_pool: &MachinePool,
) -> Option<ObjectRef<DockerMachinePool>> {
    let reference = machine_pool
        .spec
        .template
        .spec
        .infrastructure_ref
        .as_ref()?;
    if !refers_to(reference, "DockerMachinePool") {
        return None;
    }
    Some(ObjectRef::new(&reference.name).within(&machine_pool.namespace().unwrap_or_default()))
}

/// What of a DockerMachine matters to its pool: owners, deletion, provider ID and readiness.
pub fn docker_machine_fingerprint_for_pool(
    docker_machine: &DockerMachine,
) -> impl Serialize + use<> {
    let status = docker_machine.status.as_ref();
    (
        docker_machine.metadata.deletion_timestamp.is_some(),
        docker_machine
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>(),
        docker_machine.spec.provider_id.clone(),
        status.and_then(|s| s.initialization.provisioned),
        status.and_then(|s| {
            crate::api::conditions::find_condition(
                &s.conditions,
                crate::api::conditions::READY_CONDITION,
            )
            .map(crate::api::conditions::Condition::is_true)
        }),
    )
}

/// The DockerMachinePool that made a DockerMachine (its owner reference).
pub fn docker_machine_to_pool(
    docker_machine: &DockerMachine,
) -> Option<ObjectRef<DockerMachinePool>> {
    let pool = owner(&docker_machine.metadata, GROUP, "DockerMachinePool")?;
    Some(ObjectRef::new(&pool.name).within(&docker_machine.namespace().unwrap_or_default()))
}

/// The DockerMachinePools of the cluster `cluster` in `namespace`, through their MachinePools.
pub fn docker_machine_pools_of_cluster(
    namespace: &str,
    cluster: &str,
    machine_pools: &Store<DeserializeGuard<MachinePool>>,
) -> Vec<ObjectRef<DockerMachinePool>> {
    machine_pools
        .state()
        .iter()
        .filter_map(|guarded| guarded.0.as_ref().ok())
        .filter(|mp| {
            mp.namespace().as_deref() == Some(namespace) && mp.cluster_name() == Some(cluster)
        })
        .filter_map(machine_pool_to_docker_machine_pool)
        .collect()
}

/// Logs an object a watch could not decode (once per version of it).
pub fn log_invalid<K>(guarded: &DeserializeGuard<K>, kind: &str) {
    if let Err(invalid) = &guarded.0 {
        tracing::warn!(
            kind,
            namespace = invalid.metadata.namespace.as_deref().unwrap_or_default(),
            name = invalid.metadata.name.as_deref().unwrap_or_default(),
            error = %invalid.error,
            "Ignoring an object that does not decode"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::ContractVersionedObjectReference;
    use crate::controllers::fixtures::*;

    #[test]
    fn clusters_map_to_their_docker_cluster_by_group_and_kind() {
        let cluster = Cluster::test("c1");
        assert_eq!(
            cluster_to_infra_cluster::<DockerCluster>(&cluster),
            Some(ObjectRef::new("c1").within("default"))
        );
        let mut foreign = Cluster::test("c1");
        foreign.spec.infrastructure_ref = Some(ContractVersionedObjectReference {
            api_group: "infrastructure.cluster.x-k8s.io".into(),
            kind: "AWSCluster".into(),
            name: "c1".into(),
        });
        assert_eq!(cluster_to_infra_cluster::<DockerCluster>(&foreign), None);
        assert_eq!(
            cluster_to_infra_cluster::<crate::api::v1beta2::DevCluster>(&cluster),
            None
        );
    }

    #[test]
    fn an_undecodable_machine_is_isolated_not_fatal() {
        let guarded: DeserializeGuard<Machine> = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"clusterName": 42, "bootstrap": "not-an-object"}
        }))
        .unwrap();
        let invalid = guarded.0.as_ref().unwrap_err();
        assert_eq!(invalid.metadata.name.as_deref(), Some("bad"));
        log_invalid(&guarded, "Machine");
    }

    #[test]
    fn machines_map_to_their_docker_machine() {
        assert_eq!(
            machine_to_infra_machine::<DockerMachine>(&Machine::test("m1")),
            Some(ObjectRef::new("m1").within("default"))
        );
    }

    #[test]
    fn status_churn_does_not_pass_the_filter_but_relevant_changes_do() {
        let filter = ChangeFilter::default();
        let cluster = Cluster::test("c1");
        assert!(filter.changed("u", &cluster_fingerprint_for_docker_machines(&cluster)));
        let mut churned = cluster.clone();
        churned.status = Some(crate::api::capi::ClusterStatus {
            conditions: vec![crate::api::capi::ConditionView {
                type_: "SomethingElse".into(),
                status: "True".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert!(!filter.changed("u", &cluster_fingerprint_for_docker_machines(&churned)));
        let provisioned = cluster.with_infrastructure_provisioned();
        assert!(filter.changed("u", &cluster_fingerprint_for_docker_machines(&provisioned)));
        let paused = provisioned.paused();
        assert!(filter.changed("u", &cluster_fingerprint_for_docker_machines(&paused)));
    }

    #[test]
    fn a_machines_own_writes_do_not_pass_its_filter_but_other_changes_do() {
        let machine = |patch: serde_json::Value| -> DockerMachine {
            let mut object = serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerMachine",
                "metadata": {"name": "m1", "namespace": "default", "uid": "u",
                             "resourceVersion": "1", "generation": 1},
                "spec": {"customImage": "node:1"}
            });
            json_patch::merge(&mut object, &patch);
            serde_json::from_value(object).unwrap()
        };
        let filter = ChangeFilter::default();
        let changed = |patch| filter.changed("u", &infra_machine_fingerprint(&machine(patch)));
        assert!(changed(serde_json::json!({})));
        // The status, providerID and weight annotation it writes, with their new versions.
        assert!(!changed(serde_json::json!({
            "metadata": {"resourceVersion": "2"},
            "status": {"initialization": {"provisioned": true}}
        })));
        assert!(!changed(serde_json::json!({
            "metadata": {"resourceVersion": "3", "generation": 2,
                         "annotations": {(WEIGHT_ANNOTATION): "100"}},
            "spec": {"providerID": "docker:////c1-m1"}
        })));
        // The finalizer, the user's spec and deletion do.
        assert!(changed(
            serde_json::json!({"metadata": {"finalizers": ["f"]}})
        ));
        assert!(changed(
            serde_json::json!({"metadata": {"finalizers": ["f"]}, "spec": {"customImage": "node:2"}})
        ));
        assert!(changed(serde_json::json!({
            "metadata": {"finalizers": ["f"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"customImage": "node:2"}
        })));
    }
}
