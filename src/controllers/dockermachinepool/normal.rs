//! The normal (not deleting) DockerMachinePool reconcile: containers first, then their
//! DockerMachines, then the Machines to delete, then `spec.providerIDList` and the status.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::decide::{self, Plan};
use super::{Fetched, cluster_machines, delete_machine, pool_docker_machines, write_status};
use crate::api::capi::{Cluster, MachinePool, label_value};
use crate::api::v1beta2::DockerMachinePool;
use crate::api::{CLUSTER_NAME_LABEL, MACHINE_POOL_NAME_LABEL};
use crate::controllers::apply::{POOL_FIELD_MANAGER, apply_object, apply_object_as};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::Result;
use crate::controllers::loadbalancer::ip_family;
use crate::controllers::meta::owner_machine;
use crate::controllers::nodes::{Environment, extra_mounts, image_for};
use crate::docker::kind::Mapping;
use crate::docker::node::{
    MACHINE_POOL_LABEL, NodeRole, NodeSpec, cluster_selector, create_node, machine_container_name,
};
use crate::docker::types::{ContainerSummary, NetworkInfo};
use crate::runtime::context::WATCH_FILTER_LABEL;

/// How soon to look again while instances wait for core to make their Machines.
const MACHINES_RETRY: Duration = Duration::from_secs(5);

/// Reconciles a DockerMachinePool that is not being deleted.
///
/// # Errors
/// [`crate::controllers::Error`] when reading or changing the infrastructure failed.
pub async fn reconcile(
    ctx: &Context,
    pool: &DockerMachinePool,
    fetched: &Fetched,
) -> Result<Action> {
    let (Some(machine_pool), Some(cluster), Some(cluster_name)) = (
        fetched.machine_pool.as_ref(),
        fetched.cluster.as_ref(),
        fetched.cluster_name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let generation = pool.metadata.generation;
    let mut status = pool.status.clone().unwrap_or_default();
    if status.infrastructure_machine_kind.is_empty() {
        status.infrastructure_machine_kind = "DockerMachine".to_string();
        write_status(ctx, pool, &status).await?;
    }
    if !cluster.infrastructure_provisioned() {
        tracing::info!("Waiting for the Cluster infrastructure to be provisioned");
        return Ok(Action::await_change());
    }
    if machine_pool.bootstrap_data_secret_name().is_none() {
        tracing::info!("Waiting for the MachinePool's bootstrap data secret");
        return Ok(Action::await_change());
    }

    let namespace = pool.namespace().unwrap_or_default();
    let pool_name = pool.name_any();
    let mut selector = cluster_selector(cluster_name);
    selector.insert(MACHINE_POOL_LABEL.to_string(), pool_name.clone());
    let containers = ctx.runtime.list_containers(&selector).await.map_err(
        crate::controllers::Error::runtime(format!(
            "list the containers of DockerMachinePool {namespace}/{pool_name}"
        )),
    )?;
    let docker_machines = pool_docker_machines(ctx, pool, Some(cluster_name)).await?;
    let mut machines = cluster_machines(ctx, &namespace, cluster_name).await?;
    // Owner Machines without the cluster-name label (core's webhook sets it; a stand-in may not).
    for docker_machine in &docker_machines {
        if let Some(name) = owner_machine(&docker_machine.metadata)
            && !machines
                .iter()
                .any(|m| m.metadata.name.as_deref() == Some(name))
            && let Some(machine) = ctx.machine(&namespace, name).await?
        {
            machines.push(machine);
        }
    }
    let image = image_for(
        machine_pool.spec.template.spec.version.as_deref(),
        &pool.spec.template.custom_image,
    )?;
    let replicas = machine_pool.replicas();
    let instances = decide::instances(cluster_name, &containers, &docker_machines, &machines);
    let plan = decide::plan(
        &instances,
        replicas,
        &image.image,
        &machine_pool.spec.failure_domains,
    );

    // 1. DockerMachines of containers that lack one (a manager stopped in between), 2. new
    // containers, each followed by its DockerMachine.
    for container in &plan.docker_machines {
        let name = decide::docker_machine_name(cluster_name, container);
        apply_docker_machine(ctx, pool, machine_pool, cluster_name, &name).await?;
    }
    let new = NewInstances {
        pool,
        machine_pool,
        cluster_name,
        image: &image,
    };
    new.create(ctx, cluster, &plan, &containers).await?;
    // 3. Machines to remove (their drain comes first; core then deletes the DockerMachine).
    for (machine, why) in &plan.delete_machines {
        if !delete_machine(ctx, &namespace, machine).await? {
            continue;
        }
        tracing::info!(machine = %machine, reason = why, "Deleted a Machine of the pool");
        ctx.event(
            pool,
            EventKind::Normal,
            "MachineDeleted",
            format!("Deleted Machine {machine}: {why}"),
        )
        .await;
    }

    // 4. What the pool reports.
    apply_provider_ids(ctx, pool, cluster_name, decide::provider_ids(&instances)).await?;
    let status = decide::status(&status, &instances, replicas, generation);
    write_status(ctx, pool, &status).await?;
    // A DockerMachine that goes away sends no event the controller sees (shared watch streams
    // carry no deletions), so a pool with deleting instances looks again soon.
    let busy = plan.waiting_for_machines > 0
        || instances
            .iter()
            .any(|i| (i.docker_machine.is_some() && i.machine.is_none()) || i.deleting());
    Ok(Action::requeue(if busy {
        MACHINES_RETRY
    } else {
        ctx.manager.config.sync_period
    }))
}

/// How many new instances of one pool are made at once.
const CREATE_PARALLELISM: usize = 10;

/// What new instances of a pool are made from.
struct NewInstances<'a> {
    pool: &'a DockerMachinePool,
    machine_pool: &'a MachinePool,
    cluster_name: &'a str,
    image: &'a Mapping,
}

impl NewInstances<'_> {
    /// Creates the planned containers, [`CREATE_PARALLELISM`] at a time, each followed at once by
    /// its DockerMachine (so its bootstrap does not wait for the others). The first failure is
    /// returned after the others finished.
    async fn create(
        &self,
        ctx: &Context,
        cluster: &Cluster,
        plan: &Plan,
        existing: &[ContainerSummary],
    ) -> Result<()> {
        if plan.create.is_empty() {
            return Ok(());
        }
        let env = Environment::read(ctx, ip_family(Some(cluster))?).await?;
        let mut taken: BTreeSet<String> = existing.iter().map(|c| c.name.clone()).collect();
        let mut specs = Vec::new();
        for failure_domain in &plan.create {
            let name = loop {
                let name = machine_container_name(
                    self.cluster_name,
                    &format!("worker-{}", decide::random_suffix()),
                );
                if taken.insert(name.clone()) {
                    break name;
                }
            };
            let mut spec = env.node(self.cluster_name, &name, NodeRole::Worker, self.image);
            spec.failure_domain.clone_from(failure_domain);
            spec.machine_pool = Some((MACHINE_POOL_LABEL.to_string(), self.pool.name_any()));
            spec.extra_mounts = extra_mounts(&self.pool.spec.template.extra_mounts);
            specs.push(spec);
        }
        let outcomes: Vec<Result<String>> = futures::stream::iter(specs)
            .map(|spec| self.create_one(ctx, spec, &env.network_info))
            .buffer_unordered(CREATE_PARALLELISM)
            .collect()
            .await;
        let mut created = Vec::new();
        let mut failure = None;
        for outcome in outcomes {
            match outcome {
                Ok(name) => created.push(name),
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        created.sort();
        if !created.is_empty() {
            ctx.event(
                self.pool,
                EventKind::Normal,
                "ContainersCreated",
                format!(
                    "Created {} node container(s) from image {}: {}",
                    created.len(),
                    self.image.image,
                    created.join(", ")
                ),
            )
            .await;
        }
        failure.map_or(Ok(()), Err)
    }

    async fn create_one(
        &self,
        ctx: &Context,
        spec: NodeSpec,
        network: &NetworkInfo,
    ) -> Result<String> {
        create_node(ctx.runtime.as_ref(), &spec, Some(network)).await?;
        tracing::info!(
            container = %spec.name,
            failure_domain = spec.failure_domain.as_deref().unwrap_or_default(),
            image = %spec.image,
            "Created a pool container"
        );
        let name = decide::docker_machine_name(self.cluster_name, &spec.name);
        apply_docker_machine(ctx, self.pool, self.machine_pool, self.cluster_name, &name).await?;
        Ok(spec.name)
    }
}

/// Creates (or completes) the DockerMachine of a pool container: pool labels, an owner reference
/// to the pool (not as controller: core makes the Machine its controller) and the pool's machine
/// template as its spec.
async fn apply_docker_machine(
    ctx: &Context,
    pool: &DockerMachinePool,
    machine_pool: &MachinePool,
    cluster_name: &str,
    name: &str,
) -> Result<()> {
    let namespace = pool.namespace().unwrap_or_default();
    let template = &pool.spec.template;
    let mut spec = serde_json::Map::new();
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
        CLUSTER_NAME_LABEL: cluster_name,
        // Core selects a pool's infrastructure machines by this label, its value formatted as
        // core formats names into labels.
        MACHINE_POOL_NAME_LABEL: label_value(&machine_pool.name_any()),
    });
    // Selected by the same --watch-filter as its pool: else no controller would see it.
    if let Some(filter) = pool.labels().get(WATCH_FILTER_LABEL) {
        labels[WATCH_FILTER_LABEL] = json!(filter);
    }
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerMachinePool",
                "name": pool.name_any(),
                "uid": pool.uid().unwrap_or_default(),
            }],
        },
        "spec": spec,
    });
    // A field manager of its own: the DockerMachine controller applies the fields it owns on the
    // same object, and one manager's apply would drop the other's fields.
    apply_object_as(
        &ctx.api::<crate::api::v1beta2::DockerMachine>(&namespace),
        name,
        body,
        POOL_FIELD_MANAGER,
    )
    .await?;
    tracing::info!(
        dockermachine = name,
        "Applied the DockerMachine of a pool container"
    );
    Ok(())
}

/// Applies `spec.providerID` (the pool's own, fake) and `spec.providerIDList` when they changed.
async fn apply_provider_ids(
    ctx: &Context,
    pool: &DockerMachinePool,
    cluster_name: &str,
    ids: Vec<String>,
) -> Result<()> {
    let provider_id = decide::pool_provider_id(cluster_name, &pool.name_any());
    if pool.spec.provider_id == provider_id && pool.spec.provider_id_list == ids {
        return Ok(());
    }
    let namespace = pool.namespace().unwrap_or_default();
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachinePool",
        "spec": {"providerID": provider_id, "providerIDList": ids},
    });
    apply_object(
        &ctx.api::<DockerMachinePool>(&namespace),
        &pool.name_any(),
        body,
    )
    .await?;
    Ok(())
}
