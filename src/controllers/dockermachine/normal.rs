//! The normal (not deleting) DockerMachine reconcile: CAPD's steps in order, each decided by a
//! pure function of `decide` and carried out here.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::bootstrap::{self, BootstrapJob};
use super::container::{
    Environment, api_addresses, bootstrap_mode, container_name, node_image, node_spec,
};
use super::decide::{self, ContainerStep, NODE_RETRY, Observed, StepDecision, TaskAction};
use super::node::{NodeSync, sync_node};
use super::restart::{self, ClusterRunning};
use super::{Fetched, apply_owned_fields, status, steps, write_status};
use crate::api::WEIGHT_ANNOTATION;
use crate::api::capi::{Cluster, Machine};
use crate::api::conditions::{
    CGROUPS_READY_CONDITION, Condition, PRELOADED_IMAGES_READY_CONDITION, remove_condition,
    set_condition,
};
use crate::api::v1beta2::DockerCluster;
use crate::bootstrap::{Format, Options, Plan, translate};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Result, is_not_found};
use crate::controllers::kinds::{MachineRef, MachineView};
use crate::controllers::loadbalancer::{DRAINED_WEIGHT, SERVING_WEIGHT, ip_family, sync_backends};
use crate::controllers::tasks::TaskKind;
use crate::docker::ContainerInfo;
use crate::docker::kind::Mapping;
use crate::docker::node::{
    FAILURE_DOMAIN_LABEL, IpFamily, addresses_on_network, create_node, inspect_node, is_running,
    provider_id,
};
use crate::runtime::error_chain;

/// One reconcile's working state: the object with the status being built.
struct Work<'a> {
    ctx: &'a Context,
    original: &'a MachineView,
    working: crate::api::v1beta2::DockerMachine,
    object: MachineRef,
    uid: String,
    requeue: Option<Duration>,
}

impl Work<'_> {
    fn set(&mut self, condition: Condition) {
        let status = self.working.status.get_or_insert_with(Default::default);
        set_condition(&mut status.conditions, condition);
    }

    fn clear(&mut self, type_: &str) {
        if let Some(status) = self.working.status.as_mut() {
            remove_condition(&mut status.conditions, type_);
        }
    }

    /// Takes the generation our own spec write produced. When it is the next one (nobody else
    /// changed the spec meanwhile), what this pass observed holds for it as well: the
    /// conditions made against the old generation carry the new one, and the status is
    /// written once instead of once more by the next pass.
    fn wrote_spec(&mut self, generation: Option<i64>) {
        let before = self.working.metadata.generation;
        if generation.is_none() || generation != before.map(|g| g + 1) {
            return;
        }
        self.working.metadata.generation = generation;
        if let Some(status) = self.working.status.as_mut() {
            for condition in &mut status.conditions {
                if condition.observed_generation == before {
                    condition.observed_generation = generation;
                }
            }
        }
    }

    fn requeue_after(&mut self, delay: Duration) {
        self.requeue = Some(self.requeue.map_or(delay, |d| d.min(delay)));
    }

    fn is_true(&self, type_: &str) -> bool {
        self.working
            .status
            .as_ref()
            .and_then(|s| crate::api::conditions::find_condition(&s.conditions, type_))
            .is_some_and(Condition::is_true)
    }

    /// Applies a step decision: records the condition, starts or resets the task.
    fn step<F>(&mut self, kind: TaskKind, decision: StepDecision, start: F)
    where
        F: FnOnce(&Context, &MachineRef, &str),
    {
        self.set(decision.condition);
        match decision.task {
            TaskAction::None => {}
            TaskAction::Start => start(self.ctx, &self.object, &self.uid),
            TaskAction::RetryAfter(delay) => {
                self.ctx.tasks.reset(&self.object, kind);
                self.requeue_after(delay);
            }
            TaskAction::RetryWithBackoff => {
                self.ctx.tasks.reset(&self.object, kind);
                let key = format!("{kind:?}/{}", self.object);
                let delay = self.ctx.backoff.failed(&key, None);
                self.requeue_after(delay);
            }
        }
    }
}

/// Reconciles a DockerMachine (or DevMachine) that is not being deleted.
///
/// # Errors
/// [`Error`] when a step failed; the status is written first.
pub async fn reconcile(
    ctx: &Context,
    docker_machine: &MachineView,
    fetched: &Fetched,
) -> Result<Action> {
    let (Some(machine), Some(cluster), Some(docker_cluster), Some(cluster_name)) = (
        fetched.machine.as_ref(),
        fetched.cluster.as_ref(),
        fetched.docker_cluster.as_deref(),
        fetched.cluster_name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let mut work = Work {
        ctx,
        original: docker_machine,
        working: (**docker_machine).clone(),
        object: docker_machine.key(),
        uid: docker_machine.uid().unwrap_or_default(),
        requeue: None,
    };
    let result = run_steps(&mut work, machine, cluster, docker_cluster, cluster_name).await;
    let generation = work.working.metadata.generation;
    let mut status = work.working.status.clone().unwrap_or_default();
    status::summarize(&mut status, generation);
    write_status(ctx, docker_machine, &status).await?;
    // 7. The workload cluster's Node, after the status: initializing the Node is no part of the
    // DockerMachine's status, and a completed bootstrap shows without waiting for it.
    if let Some(node_name) = result? {
        let namespace = docker_machine.namespace().unwrap_or_default();
        reconcile_node(
            &mut work,
            cluster,
            &namespace,
            cluster_name,
            &node_name,
            &status.addresses,
        )
        .await?;
    }
    if work.requeue.is_none() {
        let key = format!("{:?}/{}", TaskKind::Bootstrap, work.object);
        ctx.backoff.succeeded(&key);
    }
    Ok(Action::requeue(
        work.requeue.unwrap_or(ctx.manager.config.sync_period),
    ))
}

/// Steps 1 to 6; returns the name of the workload cluster's Node to initialize (step 7) once the
/// container runs and bootstrap completed.
async fn run_steps(
    work: &mut Work<'_>,
    machine: &Machine,
    cluster: &Cluster,
    docker_cluster: &DockerCluster,
    cluster_name: &str,
) -> Result<Option<String>> {
    let ctx = work.ctx;
    let generation = work.original.metadata.generation;
    let namespace = work.original.namespace().unwrap_or_default();
    let name = container_name(cluster_name, machine, work.original);
    let family = ip_family(Some(cluster))?;

    // 1. The container: one inspect says whether it exists and runs, and where it is.
    let found = inspect_node(ctx.runtime.as_ref(), cluster_name, &name).await?;
    let observed = match &found {
        None => Observed::Absent,
        Some(c) if is_running(c) => Observed::Running,
        Some(_) => Observed::Stopped,
    };
    // The running container as last inspected (after a create or start, that inspect's answer).
    let mut running: Option<ContainerInfo> = None;
    // Set when a stopped container was started again: what ran of the cluster then (a restarted
    // control plane may have another address for the load balancer).
    let mut restarted: Option<ClusterRunning> = None;
    match decide::container_step(&work.working, machine, cluster, observed) {
        ContainerStep::Running => running.clone_from(&found),
        ContainerStep::Lost => {
            work.set(decide::not_provisioned(
                format!("Container {name} is not running anymore"),
                generation,
            ));
        }
        ContainerStep::Wait(condition) => work.set(condition),
        ContainerStep::Restart => {
            let cluster_running = restart::cluster_running(ctx, cluster_name).await?;
            if let Some(wait) = restart::restart_wait(machine, &name, cluster_running, generation) {
                tracing::info!(container = %name, reason = %wait.reason, "Waiting before starting the stopped container");
                work.set(wait);
                work.requeue_after(restart::RESTART_RETRY);
            } else {
                let task = ctx
                    .tasks
                    .state(&work.object, &work.uid, TaskKind::Bootstrap);
                if let Some(failed) =
                    restart::interrupted_bootstrap(&work.working, &name, task.as_ref())
                {
                    ctx.tasks.reset(&work.object, TaskKind::Bootstrap);
                    work.set(failed);
                }
                if work.working.spec.provider_id.is_empty() {
                    boots_again(work);
                }
                let started = restart::start_node(ctx, work.original, &name).await;
                running = record_container(work, &name, ("Starting", "start"), started)?;
                restarted = running.is_some().then_some(cluster_running);
            }
        }
        ContainerStep::Create => {
            boots_again(work);
            let created =
                create_container(ctx, work.original, machine, cluster_name, &name, family).await;
            running = record_container(work, &name, ("Creating", "create"), created)?;
        }
    }
    if let Some(info) = &running {
        let note = restarted
            .is_some()
            .then(|| format!("Container {name} was stopped; started it again"));
        let provisioned = decide::provisioned(&work.working, note);
        work.set(provisioned);
        let addresses = addresses_on_network(info, ctx.network(), family)?;
        let status = work.working.status.get_or_insert_with(Default::default);
        status.addresses = api_addresses(addresses);
        // A pool machine's failure domain is the one its pool chose for the container.
        status.failure_domain = machine.spec.failure_domain.clone().or_else(|| {
            found
                .as_ref()
                .and_then(|c| c.labels.get(FAILURE_DOMAIN_LABEL).cloned())
        });
    }

    let running = running.is_some();

    // 2. The load balancer (control planes). A restarted control plane is put back at the
    // address it has now.
    let mut weight = annotation(work.original, WEIGHT_ANNOTATION);
    let step = decide::load_balancer_step(work.original, machine, running);
    let restarted_behind_load_balancer =
        machine.is_control_plane() && restarted.is_some_and(|r| r.load_balancer == Some(true));
    if step.is_some() || restarted_behind_load_balancer {
        sync_backends(
            ctx,
            &namespace,
            cluster_name,
            Some(cluster),
            Some(docker_cluster),
        )
        .await?;
    }
    // Set when the write says the machine's deletion began after this pass read it.
    let mut deletion_began = false;
    if let Some(step) = step {
        let value = decide::weight_after(step);
        let applied = apply_owned_fields(
            ctx,
            work.original,
            &work.original.spec.provider_id,
            Some(value),
        )
        .await?;
        weight = Some(value.to_string());
        deletion_began = applied.deleting;
        let value = if step == decide::LoadBalancerStep::Drain {
            DRAINED_WEIGHT
        } else {
            SERVING_WEIGHT
        };
        tracing::info!(container = %name, weight = value, "Updated the load balancer backends");
        ctx.event(
            work.original,
            EventKind::Normal,
            "LoadBalancerUpdated",
            format!("Load balancer weight of {name} set to {value}"),
        )
        .await;
    }
    if deletion_began {
        // The rest of this pass is moot; the next one deletes the machine, without waiting for
        // the watch to report the deletion.
        tracing::info!(container = %name, "The machine's deletion began during this pass; deleting it next");
        work.requeue_after(decide::DELETION_BEGAN_RETRY);
        return Ok(None);
    }

    // 3. Boot (cgroups) and 4. preloaded images, as background tasks.
    let runtime = ctx.runtime.clone();
    let decision = decide::cgroups_step(
        &work.working,
        running,
        ctx.tasks
            .state(&work.object, &work.uid, TaskKind::CGroups)
            .as_ref(),
    );
    let container = name.clone();
    work.step(TaskKind::CGroups, decision, |ctx, object, uid| {
        let runtime = runtime.clone();
        ctx.tasks.start(
            object,
            uid,
            TaskKind::CGroups,
            "Waiting for the node to boot",
            |_| steps::wait_for_node(runtime, container),
        );
    });
    let cgroups_ready = work.is_true(CGROUPS_READY_CONDITION);
    let decision = decide::preload_step(
        &work.working,
        running,
        cgroups_ready,
        ctx.tasks
            .state(&work.object, &work.uid, TaskKind::PreloadImages)
            .as_ref(),
    );
    let images = work.original.spec.pre_load_images.clone();
    let container = name.clone();
    work.step(TaskKind::PreloadImages, decision, |ctx, object, uid| {
        let runtime = runtime.clone();
        ctx.tasks.start(
            object,
            uid,
            TaskKind::PreloadImages,
            "Loading images",
            |p| steps::preload_images(runtime, container, images, p),
        );
    });
    let images_ready = work.is_true(PRELOADED_IMAGES_READY_CONDITION);

    // 5. Provisioned: recorded on the object before bootstrap starts.
    let wanted_id = provider_id(&name);
    if decide::infrastructure_ready(running, cgroups_ready, images_ready) {
        if work.original.spec.provider_id != wanted_id {
            let applied =
                apply_owned_fields(ctx, work.original, &wanted_id, weight.as_deref()).await?;
            work.working.spec.provider_id.clone_from(&wanted_id);
            work.wrote_spec(applied.generation);
            tracing::info!(provider_id = %wanted_id, "Machine infrastructure provisioned");
        }
        work.working
            .status
            .get_or_insert_with(Default::default)
            .initialization
            .provisioned = Some(true);
    }

    // 6. Bootstrap, as a background task that survives manager restarts.
    let provisioned = !work.working.spec.provider_id.is_empty();
    let decision = decide::bootstrap_step(
        &work.working,
        machine,
        [running, cgroups_ready && provisioned, images_ready],
        ctx.tasks
            .state(&work.object, &work.uid, TaskKind::Bootstrap)
            .as_ref(),
    );
    let job = if decision.task == TaskAction::Start {
        Some(bootstrap_job(ctx, &namespace, machine, work.original, &name).await)
    } else {
        None
    };
    work.step(TaskKind::Bootstrap, decision, |ctx, object, uid| {
        if let Some(job) = job {
            ctx.tasks.start(
                object,
                uid,
                TaskKind::Bootstrap,
                "Starting bootstrap",
                |p| bootstrap::run(job, p),
            );
        }
    });

    let bootstrapped = work.is_true(crate::api::conditions::BOOTSTRAP_COMPLETED_CONDITION);
    Ok((running && bootstrapped).then_some(name))
}

/// Records how creating or starting the container went (`verb`: the `-ing` and plain forms);
/// returns the container when it runs.
fn record_container(
    work: &mut Work<'_>,
    name: &str,
    verb: (&str, &str),
    outcome: Result<Option<ContainerInfo>>,
) -> Result<Option<ContainerInfo>> {
    let generation = work.original.metadata.generation;
    match outcome {
        Ok(Some(info)) => Ok(Some(info)),
        Ok(None) => {
            work.set(decide::not_provisioned(
                format!("{} container {name}", verb.0),
                generation,
            ));
            Ok(None)
        }
        Err(error) => {
            work.set(decide::not_provisioned(
                format!(
                    "Failed to {} container {name}: {}",
                    verb.1,
                    error_chain(&error)
                ),
                generation,
            ));
            Err(error)
        }
    }
}

/// A container that boots from scratch (new, or started again before it was provisioned): its
/// boot steps start over.
fn boots_again(work: &mut Work<'_>) {
    work.ctx.tasks.reset(&work.object, TaskKind::CGroups);
    work.ctx.tasks.reset(&work.object, TaskKind::PreloadImages);
    work.clear(CGROUPS_READY_CONDITION);
    work.clear(PRELOADED_IMAGES_READY_CONDITION);
}

fn annotation(docker_machine: &crate::api::v1beta2::DockerMachine, key: &str) -> Option<String> {
    docker_machine
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .cloned()
}

/// Creates the node container; returns it as inspected when it runs.
async fn create_container(
    ctx: &Context,
    docker_machine: &MachineView,
    machine: &Machine,
    cluster_name: &str,
    name: &str,
    family: IpFamily,
) -> Result<Option<ContainerInfo>> {
    let image = node_image(machine, docker_machine)?;
    let env = Environment::read(ctx, family).await?;
    let spec = node_spec(cluster_name, name, machine, docker_machine, &image, &env);
    let info = create_node(ctx.runtime.as_ref(), &spec, Some(&env.network_info)).await?;
    // No Event of its own: the pass that created it publishes ContainerProvisioned when it runs.
    tracing::info!(container = name, image = %image.image, "Created the node container");
    Ok(is_running(&info).then_some(info))
}

/// Reads and translates the bootstrap data; failures become the message of a retryable task
/// failure (never content of the secret).
async fn bootstrap_job(
    ctx: &Context,
    namespace: &str,
    machine: &Machine,
    docker_machine: &crate::api::v1beta2::DockerMachine,
    container: &str,
) -> BootstrapJob {
    let mapping = node_image(machine, docker_machine).ok();
    let plan = bootstrap_plan(ctx, namespace, machine, mapping.as_ref()).await;
    let timeout = docker_machine
        .spec
        .bootstrap_timeout_duration()
        .unwrap_or(crate::api::v1beta2::DEFAULT_BOOTSTRAP_TIMEOUT);
    BootstrapJob {
        runtime: ctx.runtime.clone(),
        container: container.to_string(),
        plan,
        timeout,
        attempt: format!(
            "{}-{}",
            docker_machine.uid().unwrap_or_default(),
            jiff::Timestamp::now().as_nanosecond()
        ),
        poll_interval: bootstrap::POLL_INTERVAL,
    }
}

async fn bootstrap_plan(
    ctx: &Context,
    namespace: &str,
    machine: &Machine,
    mapping: Option<&Mapping>,
) -> std::result::Result<Plan, String> {
    let Some(secret_name) = machine.bootstrap_data_secret_name() else {
        return Err("The Machine has no bootstrap data secret".to_string());
    };
    let full = format!("{namespace}/{secret_name}");
    let secret = match ctx.api::<Secret>(namespace).get(secret_name).await {
        Ok(secret) => secret,
        Err(e) if is_not_found(&e) => {
            return Err(format!("Bootstrap data secret {full} not found"));
        }
        Err(e) => {
            return Err(format!(
                "Failed to read bootstrap data secret {full}: {}",
                error_chain(&e)
            ));
        }
    };
    let data = secret.data.unwrap_or_default();
    let Some(value) = data.get("value") else {
        return Err(format!("Bootstrap data secret {full} has no key \"value\""));
    };
    let format = Format::from_secret_key(data.get("format").map(|f| f.0.as_slice()))
        .map_err(|e| format!("Invalid bootstrap data in secret {full}: {e}"))?;
    let options = Options {
        kind_mode: mapping.map(|m| bootstrap_mode(m.mode)).unwrap_or_default(),
        kubernetes_version: machine.spec.version.clone(),
    };
    translate(&value.0, format, &options)
        .map_err(|e| format!("Invalid bootstrap data in secret {full}: {e}"))
}

async fn reconcile_node(
    work: &mut Work<'_>,
    cluster: &Cluster,
    namespace: &str,
    cluster_name: &str,
    node_name: &str,
    addresses: &[crate::api::v1beta2::MachineAddress],
) -> Result<()> {
    let ctx = work.ctx;
    let wanted = provider_id(node_name);
    let provider_id = wanted.as_str();
    if cluster.spec.control_plane_ref.is_some() && !cluster.control_plane_initialized() {
        work.requeue_after(NODE_RETRY);
        return Ok(());
    }
    let client = ctx
        .workload
        .client(&ctx.client(), namespace, cluster_name)
        .await?;
    match sync_node(client, node_name, provider_id, addresses).await {
        Ok(NodeSync::Missing) => {
            tracing::info!(
                node = node_name,
                "Waiting for the Node to register in the workload cluster"
            );
            work.requeue_after(NODE_RETRY);
            Ok(())
        }
        Ok(NodeSync::Unchanged) => Ok(()),
        Ok(NodeSync::ForeignProviderId(theirs)) => {
            tracing::warn!(
                node = node_name,
                provider_id,
                node_provider_id = theirs,
                "The workload cluster Node has another providerID; leaving it alone"
            );
            ctx.event(
                work.original,
                EventKind::Warning,
                "NodeProviderIDMismatch",
                format!(
                    "Node {node_name} has providerID {theirs}, not {provider_id}: a Node's providerID cannot change, so the Node is left alone and its Machine cannot be matched to it"
                ),
            )
            .await;
            Ok(())
        }
        // Logged, not published: the Node shows its providerID, and the machine's Events keep
        // to its milestones (container provisioned, bootstrap completed) and its problems.
        Ok(NodeSync::Patched) => {
            tracing::info!(
                node = node_name,
                provider_id,
                "Initialized the workload cluster Node"
            );
            Ok(())
        }
        Err(error) => {
            ctx.workload.forget(namespace, cluster_name);
            Err(error)
        }
    }
}
