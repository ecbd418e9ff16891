//! Pure decisions of the pool reconcile: which containers to create and where, which machines to
//! create, which Machines to delete, and the status to report.
//!
//! Instances are seen from three sides at once: the pool's containers (the engine), its
//! DockerMachines (a DevMachinePool's DevMachines, seen as DockerMachines) and their owner
//! Machines (the API). Containers come first: a machine is made for every container, so a
//! manager killed between the two finds the container and only adds the machine.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use serde_json::{Map, Value, json};

use crate::api::capi::{Machine, label_value};
use crate::api::conditions::{
    Condition, ConditionStatus, READY_CONDITION, REPLICAS_READY_CONDITION, find_condition, legacy,
};
use crate::api::v1beta2::{
    DockerMachine, DockerMachinePoolInstanceStatus, DockerMachinePoolStatus,
};
use crate::api::{CLUSTER_NAME_LABEL, DELETE_MACHINE_ANNOTATION, MACHINE_POOL_NAME_LABEL};
use crate::controllers::conditions::{
    Legacy, condition, paused_condition, set_legacy_condition, set_legacy_ready_summary,
    set_ready_summary,
};
use crate::controllers::kinds::{PoolView, Recorded, Served};
use crate::controllers::meta::{is_deleting, owner_machine};
use crate::docker::node::{DEV_MACHINE_POOL_LABEL, FAILURE_DOMAIN_LABEL, MACHINE_POOL_LABEL};
use crate::docker::types::{ContainerSummary, same_image};
use crate::runtime::context::WATCH_FILTER_LABEL;

/// Reason of `ReplicasReady=False` while machines are added.
pub const SCALING_UP_REASON: &str = "ScalingUp";
/// Reason of `ReplicasReady=False` while machines are removed.
pub const SCALING_DOWN_REASON: &str = "ScalingDown";
/// Reason of `ReplicasReady=False` while machines exist but are not all ready.
pub const MACHINES_NOT_READY_REASON: &str = "MachinesNotReady";
/// Reason of `ReplicasReady=True`.
pub const REPLICAS_READY_REASON: &str = "ReplicasReady";

/// One machine of the pool as the engine and the API show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance<'a> {
    /// The container (absent when it vanished).
    pub container: Option<&'a ContainerSummary>,
    /// Name of the container, or of the one the DockerMachine expects.
    pub container_name: String,
    /// Its DockerMachine, once made.
    pub docker_machine: Option<&'a DockerMachine>,
    /// The DockerMachine's owner Machine, once core made it.
    pub machine: Option<&'a Machine>,
}

impl Instance<'_> {
    /// Being removed: its DockerMachine or its Machine is being deleted.
    pub fn deleting(&self) -> bool {
        self.docker_machine
            .is_some_and(|d| is_deleting(&d.metadata))
            || self.machine.is_some_and(|m| is_deleting(&m.metadata))
    }

    /// Its container runs an image other than `image`.
    pub fn outdated(&self, image: &str) -> bool {
        self.container.is_some_and(|c| !same_image(&c.image, image))
    }

    /// The DockerMachine reports its infrastructure provisioned.
    pub fn provisioned(&self) -> bool {
        self.docker_machine
            .and_then(|d| d.status.as_ref())
            .and_then(|s| s.initialization.provisioned)
            .unwrap_or(false)
    }

    /// The DockerMachine's `Ready` condition is true (bootstrapped, node up).
    pub fn ready(&self) -> bool {
        self.docker_machine
            .and_then(|d| d.status.as_ref())
            .and_then(|s| find_condition(&s.conditions, READY_CONDITION))
            .is_some_and(Condition::is_true)
    }

    /// The failure domain its container was placed in.
    pub fn failure_domain(&self) -> Option<&str> {
        self.container
            .and_then(|c| c.labels.get(FAILURE_DOMAIN_LABEL))
            .map(String::as_str)
    }

    fn marked_for_deletion(&self) -> bool {
        self.machine.is_some_and(|m| {
            m.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(DELETE_MACHINE_ANNOTATION))
        })
    }
}

/// Pairs the pool's containers, DockerMachines and Machines. A DockerMachine is named after its
/// container without the `<cluster>-` prefix; a Machine is found through the DockerMachine's
/// owner reference. Sorted by container name.
pub fn instances<'a>(
    cluster: &str,
    containers: &'a [ContainerSummary],
    docker_machines: &'a [DockerMachine],
    machines: &'a [Machine],
) -> Vec<Instance<'a>> {
    let machine_named = |name: &str| {
        machines
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(name))
    };
    let mut by_container: BTreeMap<String, Instance<'a>> = containers
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                Instance {
                    container: Some(c),
                    container_name: c.name.clone(),
                    docker_machine: None,
                    machine: None,
                },
            )
        })
        .collect();
    for docker_machine in docker_machines {
        let name = crate::docker::node::machine_container_name(
            cluster,
            docker_machine.metadata.name.as_deref().unwrap_or_default(),
        );
        let machine = owner_machine(&docker_machine.metadata).and_then(machine_named);
        let entry = by_container
            .entry(name.clone())
            .or_insert_with(|| Instance {
                container: None,
                container_name: name,
                docker_machine: None,
                machine: None,
            });
        entry.docker_machine = Some(docker_machine);
        entry.machine = machine;
    }
    by_container.into_values().collect()
}

/// The DockerMachine name of a pool container: the container name without `<cluster>-`.
pub fn docker_machine_name(cluster: &str, container: &str) -> String {
    container
        .strip_prefix(&format!("{cluster}-"))
        .unwrap_or(container)
        .to_string()
}

/// What one reconcile changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Failure domain of each container to create (`None`: the pool has none).
    pub create: Vec<Option<String>>,
    /// Containers that need their DockerMachine.
    pub docker_machines: Vec<String>,
    /// Machines to delete, with why.
    pub delete_machines: Vec<(String, &'static str)>,
    /// Instances that must go but have no Machine yet (deleted once core made it).
    pub waiting_for_machines: usize,
}

/// Decides the changes: `replicas` machines running `image`, spread over `failure_domains`.
pub fn plan(
    instances: &[Instance<'_>],
    replicas: usize,
    image: &str,
    failure_domains: &[String],
) -> Plan {
    let mut plan = Plan::default();
    let live: Vec<&Instance<'_>> = instances.iter().filter(|i| !i.deleting()).collect();

    // Vanished containers: their machines are replaced.
    let (present, vanished): (Vec<&Instance<'_>>, Vec<&Instance<'_>>) =
        live.into_iter().partition(|i| i.container.is_some());
    for instance in vanished {
        match instance.machine.and_then(|m| m.metadata.name.clone()) {
            Some(name) => plan.delete_machines.push((name, "its container is gone")),
            None => plan.waiting_for_machines += 1,
        }
    }

    // Every present container gets its DockerMachine.
    plan.docker_machines = present
        .iter()
        .filter(|i| i.docker_machine.is_none())
        .map(|i| i.container_name.clone())
        .collect();

    // Scale up: enough containers of the wanted image, each in the least used failure domain.
    let mut population: BTreeMap<&str, usize> =
        failure_domains.iter().map(|fd| (fd.as_str(), 0)).collect();
    for instance in &present {
        if let Some(count) = instance
            .failure_domain()
            .and_then(|fd| population.get_mut(fd))
        {
            *count += 1;
        }
    }
    let matching = present.iter().filter(|i| !i.outdated(image)).count();
    for _ in matching..replicas {
        let fd = failure_domains
            .iter()
            .min_by_key(|fd| population.get(fd.as_str()).copied().unwrap_or(0))
            .cloned();
        if let Some(count) = fd.as_deref().and_then(|fd| population.get_mut(fd)) {
            *count += 1;
        }
        plan.create.push(fd);
    }

    // Scale down and roll out: the excess goes, in order of preference.
    let excess = present.len().saturating_sub(replicas);
    let mut order: Vec<&Instance<'_>> = present.clone();
    order.sort_by_key(|i| {
        let crowd = i
            .failure_domain()
            .and_then(|fd| population.get(fd))
            .copied()
            .unwrap_or(0);
        (
            !i.marked_for_deletion(),
            !i.outdated(image),
            i.provisioned(),
            std::cmp::Reverse(crowd),
            std::cmp::Reverse(i.container_name.clone()),
        )
    });
    for instance in order.into_iter().take(excess) {
        let why = if instance.marked_for_deletion() {
            "marked with the delete-machine annotation"
        } else if instance.outdated(image) {
            "its image is outdated"
        } else {
            "the pool scales down"
        };
        match instance.machine.and_then(|m| m.metadata.name.clone()) {
            Some(name) => plan.delete_machines.push((name, why)),
            None => plan.waiting_for_machines += 1,
        }
    }
    plan
}

/// The sorted provider IDs of the pool's machines (those not being deleted).
pub fn provider_ids(instances: &[Instance<'_>]) -> Vec<String> {
    let ids: BTreeSet<String> = instances
        .iter()
        .filter(|i| !i.deleting())
        .filter_map(|i| i.docker_machine)
        .map(|d| d.spec.provider_id.clone())
        .filter(|id| !id.is_empty())
        .collect();
    ids.into_iter().collect()
}

/// The fake provider ID of the pool itself: CAPD's `docker:////<cluster>-dmp-<pool>` for a
/// DockerMachinePool, CAPD 1.14's `dev:////<cluster>-dmp-<pool>` for a DevMachinePool.
pub fn pool_provider_id(served: Served, cluster: &str, pool: &str) -> String {
    let scheme = match served {
        Served::Docker => "docker",
        Served::Dev => "dev",
    };
    format!("{scheme}:////{cluster}-dmp-{pool}")
}

/// The machine of a pool container, as applied: a DockerMachine, or a DevMachine whose settings
/// sit under `spec.backend.docker`, named `name`, labelled with the cluster and the MachinePool
/// (its name formatted as core formats names into labels, which core selects the pool's machines
/// by) and the pool's `--watch-filter` label, owned by the pool (not as controller: core makes
/// the Machine its controller), its spec the pool's machine template.
pub fn machine_body(pool: &PoolView, machine_pool: &str, cluster: &str, name: &str) -> Value {
    let template = &pool.spec.template;
    let mut spec = Map::new();
    if !template.custom_image.is_empty() {
        spec.insert("customImage".into(), json!(template.custom_image));
    }
    if !template.pre_load_images.is_empty() {
        spec.insert("preLoadImages".into(), json!(template.pre_load_images));
    }
    if !template.extra_mounts.is_empty() {
        spec.insert(
            "extraMounts".into(),
            serde_json::to_value(&template.extra_mounts).unwrap_or(Value::Null),
        );
    }
    let mut labels = json!({
        CLUSTER_NAME_LABEL: cluster,
        MACHINE_POOL_NAME_LABEL: label_value(machine_pool),
    });
    // Selected by the same --watch-filter as its pool: else no controller would see it.
    if let Some(filter) = pool.labels().get(WATCH_FILTER_LABEL) {
        labels[WATCH_FILTER_LABEL] = json!(filter);
    }
    let served = pool.served();
    let spec = match served {
        Served::Docker => Value::Object(spec),
        Served::Dev => json!({"backend": {"docker": spec}}),
    };
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": served.machine_kind(),
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": served.pool_kind(),
                "name": pool.name_any(),
                "uid": pool.reference().uid.unwrap_or_default(),
            }],
        },
        "spec": spec,
    })
}

/// The label naming the pool on its containers (CAPD's `docker.cluster.x-k8s.io/machine-pool`,
/// CAPD 1.14's `dev.cluster.x-k8s.io/machine-pool` for a DevMachinePool).
pub fn container_label(served: Served) -> &'static str {
    match served {
        Served::Docker => MACHINE_POOL_LABEL,
        Served::Dev => DEV_MACHINE_POOL_LABEL,
    }
}

/// The status for `replicas` wanted machines, from the previous status and the instances, of a
/// pool of the `served` generation (its machines' kind).
pub fn status(
    served: Served,
    previous: &DockerMachinePoolStatus,
    instances: &[Instance<'_>],
    replicas: usize,
    generation: Option<i64>,
) -> DockerMachinePoolStatus {
    let mut status = previous.clone();
    let live: Vec<&Instance<'_>> = instances
        .iter()
        .filter(|i| !i.deleting() && i.docker_machine.is_some())
        .collect();
    let provisioned = live.iter().filter(|i| i.provisioned()).count();
    let ready = live.iter().filter(|i| i.ready()).count();
    let existing = instances.iter().filter(|i| !i.deleting()).count();
    status.infrastructure_machine_kind = served.machine_kind().to_string();
    status.replicas = i32::try_from(live.len()).unwrap_or(i32::MAX);
    status.observed_generation = generation.unwrap_or_default();
    // CAPD never turns `ready` back to false once the pool was complete.
    status.ready = status.ready || (live.len() == replicas && provisioned == replicas);
    status.instances = live
        .iter()
        .filter_map(|i| i.docker_machine)
        .map(instance_status)
        .collect();

    let replicas_ready = if existing < replicas {
        condition(
            REPLICAS_READY_CONDITION,
            ConditionStatus::False,
            SCALING_UP_REASON,
            format!("Scaling up to {replicas} machines ({existing} exist)"),
            generation,
        )
    } else if existing > replicas || instances.len() > existing {
        condition(
            REPLICAS_READY_CONDITION,
            ConditionStatus::False,
            SCALING_DOWN_REASON,
            format!(
                "Scaling down to {replicas} machines ({} exist)",
                instances.len()
            ),
            generation,
        )
    } else if ready < replicas {
        condition(
            REPLICAS_READY_CONDITION,
            ConditionStatus::False,
            MACHINES_NOT_READY_REASON,
            format!("{ready} of {replicas} machines are ready"),
            generation,
        )
    } else {
        condition(
            REPLICAS_READY_CONDITION,
            ConditionStatus::True,
            REPLICAS_READY_REASON,
            format!("{ready} of {replicas} machines are ready"),
            generation,
        )
    };
    let legacy_replicas = if replicas_ready.is_true() {
        Legacy::ok(legacy::REPLICAS_READY_CONDITION)
    } else {
        let reason = match replicas_ready.reason.as_str() {
            SCALING_UP_REASON => legacy::SCALING_UP_REASON,
            SCALING_DOWN_REASON => legacy::SCALING_DOWN_REASON,
            other => other,
        };
        Legacy::not_ok(
            legacy::REPLICAS_READY_CONDITION,
            reason,
            legacy::SEVERITY_INFO,
            replicas_ready.message.clone(),
        )
    };
    crate::api::conditions::set_condition(&mut status.conditions, replicas_ready);
    crate::api::conditions::set_condition(
        &mut status.conditions,
        paused_condition(false, generation),
    );
    set_ready_summary(
        &mut status.conditions,
        &[REPLICAS_READY_CONDITION],
        generation,
    );
    let legacy_conditions = &mut status.deprecated.v1beta1.conditions;
    set_legacy_condition(legacy_conditions, legacy_replicas);
    set_legacy_ready_summary(legacy_conditions, &[legacy::REPLICAS_READY_CONDITION]);
    status
}

fn instance_status(docker_machine: &DockerMachine) -> DockerMachinePoolInstanceStatus {
    let status = docker_machine.status.clone().unwrap_or_default();
    let ready = find_condition(&status.conditions, READY_CONDITION).is_some_and(Condition::is_true);
    DockerMachinePoolInstanceStatus {
        addresses: status.addresses,
        instance_name: docker_machine.metadata.name.clone().unwrap_or_default(),
        provider_id: Some(docker_machine.spec.provider_id.clone()).filter(|id| !id.is_empty()),
        version: None,
        ready,
        bootstrapped: false,
    }
}

/// The status of a paused pool: only `Paused=True` changes.
pub fn paused(
    previous: &DockerMachinePoolStatus,
    generation: Option<i64>,
) -> DockerMachinePoolStatus {
    let mut status = previous.clone();
    crate::api::conditions::set_condition(
        &mut status.conditions,
        paused_condition(true, generation),
    );
    status
}

/// A random six-character suffix for a new container (`[a-z0-9]`, as CAPD's names).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}
