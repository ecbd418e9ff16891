//! Building and running the controllers: one watch per kind (shared where several controllers
//! need it), every watch filtered by `--namespace` and `--watch-filter`, explicit concurrency,
//! and readiness once every watch has synced.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::backoff::ErrorBackoff;
use super::context::{Context, Stores};
use super::kinds::{MachineRef, Served, ServedKind};
use super::meta::key;
use super::queue::{QueueDepth, Trigger};
use super::tasks::TaskRegistry;
use super::template::{self, CapacityTemplate};
use super::watches::{
    ChangeFilter, cluster_fingerprint_for_docker_cluster, cluster_fingerprint_for_docker_machines,
    cluster_to_infra_cluster, docker_cluster_cluster, docker_cluster_fingerprint,
    infra_machine_fingerprint, infra_machines_of_cluster, log_invalid, machine_fingerprint,
    machine_to_infra_machine,
};
use super::workload::WorkloadClients;
use super::{dockercluster, dockermachine, dockermachinepool};
use crate::api::capi::{Cluster, Machine, MachinePool};
use crate::api::v1beta2::{
    DevCluster, DevMachine, DevMachineTemplate, DockerCluster, DockerMachine, DockerMachinePool,
    DockerMachinePoolTemplate, DockerMachineTemplate,
};
use crate::docker::ContainerRuntime;
use crate::docker::node::ProxyEnv;
use crate::runtime::{ControllerTask, Readiness};

mod pools;
mod shared;

use pools::{PoolEvents, pool_controller};
use shared::{SharedWatch, receiver_stream};

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn watch_config(selector: Option<&str>) -> watcher::Config {
    let config = watcher::Config::default();
    match selector {
        Some(selector) => config.labels(selector),
        None => config,
    }
}

/// Marks `name` ready on `/readyz` once every watch in `synced` has listed its objects.
async fn ready_when_synced(
    readiness: Readiness,
    name: &'static str,
    synced: Vec<watch::Receiver<bool>>,
) {
    for mut receiver in synced {
        if receiver.wait_for(|done| *done).await.is_err() {
            return;
        }
    }
    tracing::info!(controller = name, "Watches synced");
    readiness.mark_ready(name);
}

/// Drives a controller to its end; logs a failing queue (each reconcile logs its own start and end,
/// [`logged`], and its failures, `Context::reconciled`).
async fn drain<K: Resource, E: std::fmt::Debug + 'static, Q: std::fmt::Debug + 'static>(
    results: impl Stream<Item = Result<(ObjectRef<K>, Action), kube::runtime::controller::Error<E, Q>>>,
) {
    results
        .for_each(|result| async move {
            if let Err(kube::runtime::controller::Error::QueueError(error)) = &result {
                tracing::warn!(error = ?error, "Controller queue failed");
            }
        })
        .await;
}

/// Runs one reconcile of `object` (`namespace/name`) by `controller`, logging its start and its
/// end at debug level with `reason`, what triggered it: a silent gap in the log is then a gap
/// without reconciles, not a reconcile that never ended.
async fn logged<E: std::fmt::Display>(
    controller: &'static str,
    object: String,
    reason: String,
    reconcile: impl std::future::Future<Output = Result<Action, E>>,
) -> Result<Action, E> {
    tracing::debug!(controller, object, reason, "Reconcile started");
    let result = reconcile.await;
    match &result {
        Ok(action) => {
            tracing::debug!(controller, object, reason, next = ?action, "Reconcile ended");
        }
        Err(error) => {
            tracing::debug!(controller, object, reason, %error, "Reconcile ended with an error");
        }
    }
    result
}

/// Maps a Cluster to the machines (or machine pools) of that cluster, found by `objects_of(namespace,
/// name)`, when what matters of the Cluster to machines changed.
fn cluster_to_machines<K>(
    queue: Arc<QueueDepth<K>>,
    objects_of: impl Fn(&str, &str) -> Vec<ObjectRef<K>>,
) -> impl Fn(Arc<DeserializeGuard<Cluster>>) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let filter = ChangeFilter::default();
    move |guarded| {
        let Ok(cluster) = guarded.0.as_ref() else {
            return Vec::new();
        };
        let uid = cluster.metadata.uid.clone().unwrap_or_default();
        if !filter.changed(&uid, &cluster_fingerprint_for_docker_machines(cluster)) {
            return Vec::new();
        }
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let trigger = Trigger::Related("Cluster", key(&cluster.metadata));
        objects_of(&namespace, &name)
            .into_iter()
            .map(|object| queue.requested(object, trigger.clone()))
            .collect()
    }
}

/// Builds the controllers and their watches once this process leads.
pub fn start(
    manager: Arc<crate::runtime::Context>,
    runtime: Arc<dyn ContainerRuntime>,
    stop: CancellationToken,
) -> Vec<ControllerTask> {
    let config = manager.config.clone();
    let client = manager.client.clone();
    let namespace = config.namespace.as_deref();
    let selector = config.label_selector();
    let watch_config = || watch_config(selector.as_deref());

    let clusters = SharedWatch::new(
        api::<DeserializeGuard<Cluster>>(&client, namespace),
        watch_config(),
        "Cluster",
    );
    let machines = SharedWatch::new(
        api::<DeserializeGuard<Machine>>(&client, namespace),
        watch_config(),
        "Machine",
    );
    let docker_clusters = SharedWatch::new(
        api::<DockerCluster>(&client, namespace),
        watch_config(),
        "DockerCluster",
    );
    let docker_machines = SharedWatch::new(
        api::<DockerMachine>(&client, namespace),
        watch_config(),
        "DockerMachine",
    );
    // The Dev* kinds: watched only when their controllers run (their CRDs may not exist otherwise).
    let dev_watches = config.dev_kinds.then(|| {
        (
            SharedWatch::new(
                api::<DevCluster>(&client, namespace),
                watch_config(),
                "DevCluster",
            ),
            SharedWatch::new(
                api::<DevMachine>(&client, namespace),
                watch_config(),
                "DevMachine",
            ),
        )
    });
    // Machine pools: likewise, only when their controller runs.
    let pool_watches = config.machine_pools.then(|| {
        (
            SharedWatch::new(
                api::<DeserializeGuard<MachinePool>>(&client, namespace),
                watch_config(),
                "MachinePool",
            ),
            SharedWatch::new(
                api::<DockerMachinePool>(&client, namespace),
                watch_config(),
                "DockerMachinePool",
            ),
        )
    });

    let (trigger_tx, trigger_rx) = mpsc::unbounded_channel::<MachineRef>();
    let ctx = Arc::new(Context {
        manager: manager.clone(),
        runtime,
        stores: Stores {
            clusters: clusters.reader.clone(),
            machines: machines.reader.clone(),
            docker_clusters: docker_clusters.reader.clone(),
            dev_clusters: dev_watches
                .as_ref()
                .map_or_else(|| reflector::store().0, |(dc, _)| dc.reader.clone()),
            machine_pools: pool_watches
                .as_ref()
                .map_or_else(|| reflector::store().0, |(mp, _)| mp.reader.clone()),
        },
        tasks: TaskRegistry::new(trigger_tx),
        workload: WorkloadClients::new(config.workload_client_qps, config.workload_client_burst),
        backoff: ErrorBackoff::new(),
        proxy: ProxyEnv::from_env(),
        load_balancer_locks: Default::default(),
        written: Default::default(),
        finalizers: Default::default(),
        in_memory: Arc::new(crate::inmemory::Clusters::new(
            crate::inmemory::manager_host(),
            crate::inmemory::PORTS,
        )),
    });
    let (docker_triggers, dev_triggers, forward_triggers) = split_triggers(trigger_rx);

    // One cluster and one machine controller per generation of the API, the same reconcilers.
    let concurrency = &config.concurrency;
    let mut tasks: Vec<ControllerTask> = Vec::new();
    tasks.push(cluster_controller(
        &ctx,
        &docker_clusters,
        &clusters,
        concurrency.docker_cluster,
        &stop,
    ));
    tasks.push(machine_controller(
        &ctx,
        MachineWatches {
            own: &docker_machines,
            machines: &machines,
            clusters: &clusters,
            infra_clusters: &docker_clusters,
        },
        docker_triggers,
        concurrency.docker_machine,
        &stop,
    ));
    if let Some((dev_clusters, dev_machines)) = &dev_watches {
        tasks.push(cluster_controller(
            &ctx,
            dev_clusters,
            &clusters,
            concurrency.dev_cluster,
            &stop,
        ));
        tasks.push(machine_controller(
            &ctx,
            MachineWatches {
                own: dev_machines,
                machines: &machines,
                clusters: &clusters,
                infra_clusters: dev_clusters,
            },
            dev_triggers,
            concurrency.dev_machine,
            &stop,
        ));
    }

    // The templates' capacity: DockerMachineTemplates, DevMachineTemplates when the Dev* kinds are
    // served (`--devmachinetemplate-concurrency`), and DockerMachinePoolTemplates when machine
    // pools are on (under `--dockermachinetemplate-concurrency`, as the Docker kinds' template).
    tasks.push(template_task::<DockerMachineTemplate>(
        &ctx,
        watch_config(),
        concurrency.docker_machine_template,
        &stop,
    ));
    if config.dev_kinds {
        tasks.push(template_task::<DevMachineTemplate>(
            &ctx,
            watch_config(),
            concurrency.dev_machine_template,
            &stop,
        ));
    }
    if config.machine_pools {
        tasks.push(template_task::<DockerMachinePoolTemplate>(
            &ctx,
            watch_config(),
            concurrency.docker_machine_template,
            &stop,
        ));
    }

    if let Some(watches) = pool_watches {
        manager.metrics.register_controller(
            dockermachinepool::CONTROLLER,
            concurrency.docker_machine_pool,
        );
        manager.readiness.require(dockermachinepool::CONTROLLER);
        let events = PoolEvents {
            machine_pools: watches.0.subscribe(),
            pools: watches.1.subscribe(),
            clusters: clusters.subscribe(),
            docker_machines: docker_machines.subscribe(),
        };
        let synced = vec![clusters.synced(), docker_machines.synced()];
        tasks.push(pool_controller(ctx.clone(), watches, events, synced, &stop));
    }

    let mut drivers = vec![
        clusters.into_driver(),
        machines.into_driver(),
        docker_clusters.into_driver(),
        docker_machines.into_driver(),
        forward_triggers,
    ];
    if let Some((dev_clusters, dev_machines)) = dev_watches {
        drivers.extend([dev_clusters.into_driver(), dev_machines.into_driver()]);
    }
    let watches_stop = stop.clone();
    let watches = async move {
        tokio::select! {
            _ = futures::future::join_all(drivers) => tracing::warn!("The watches ended"),
            () = watches_stop.cancelled() => {}
        }
    };
    tasks.insert(
        0,
        ControllerTask {
            name: "watches",
            future: watches.boxed(),
        },
    );
    tasks
}

/// Splits the task registry's triggers by kind, for the DockerMachine and the DevMachine
/// controllers; the third part forwards them (must be polled).
fn split_triggers(
    mut triggers: mpsc::UnboundedReceiver<MachineRef>,
) -> (
    impl Stream<Item = ObjectRef<DockerMachine>> + Send + 'static,
    impl Stream<Item = ObjectRef<DevMachine>> + Send + 'static,
    BoxFuture<'static, ()>,
) {
    let (docker_tx, docker_rx) = mpsc::unbounded_channel();
    let (dev_tx, dev_rx) = mpsc::unbounded_channel();
    let forward = async move {
        while let Some(machine) = triggers.recv().await {
            // A closed channel means that controller does not run: nothing to wake.
            match machine.served {
                Served::Docker => {
                    let _ = docker_tx.send(machine.object_ref::<DockerMachine>());
                }
                Served::Dev => {
                    let _ = dev_tx.send(machine.object_ref::<DevMachine>());
                }
            }
        }
    };
    (
        receiver_stream(docker_rx),
        receiver_stream(dev_rx),
        forward.boxed(),
    )
}

/// The controller of one infrastructure cluster kind (DockerCluster or DevCluster): its own
/// objects, and Clusters through `spec.infrastructureRef`.
fn cluster_controller<K>(
    ctx: &Arc<Context>,
    own: &SharedWatch<K>,
    clusters: &SharedWatch<DeserializeGuard<Cluster>>,
    concurrency: u16,
    stop: &CancellationToken,
) -> ControllerTask
where
    K: ServedKind<Docker = DockerCluster>,
{
    let name = K::CONTROLLER;
    let manager = &ctx.manager;
    manager.metrics.register_controller(name, concurrency);
    manager.readiness.require(name);
    let (events, cluster_events) = (own.subscribe(), clusters.subscribe());
    let store = own.reader.clone();
    let queue = QueueDepth::new(name, manager.metrics.clone(), store.clone());
    let filter = ChangeFilter::default();
    let (queue_own, queue_clusters) = (queue.clone(), queue.clone());
    let events = events.map(move |object| {
        queue_own.requested(ObjectRef::from_obj(object.as_ref()), Trigger::Changed);
        object
    });
    let controller = Controller::for_shared_stream(events, store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .watches_shared_stream(
            cluster_events,
            move |guarded: Arc<DeserializeGuard<Cluster>>| {
                if K::SERVED == Served::Docker {
                    log_invalid(&guarded, "Cluster");
                }
                let cluster = guarded.0.as_ref().ok()?;
                let uid = cluster.metadata.uid.clone().unwrap_or_default();
                filter
                    .changed(&uid, &cluster_fingerprint_for_docker_cluster(cluster))
                    .then(|| cluster_to_infra_cluster::<K>(cluster))
                    .flatten()
                    .map(|object| {
                        let trigger = Trigger::Related("Cluster", key(&cluster.metadata));
                        queue_clusters.requested(object, trigger)
                    })
            },
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    let ready = ready_when_synced(
        manager.readiness.clone(),
        name,
        vec![own.synced(), clusters.synced()],
    );
    let ctx = ctx.clone();
    let future = async move {
        let run = drain(controller.run(
            move |object, ctx| {
                let reason = queue.started(&object);
                logged(
                    name,
                    key(object.meta()),
                    reason,
                    dockercluster::reconcile(object.clone(), ctx),
                )
            },
            dockercluster::error_policy,
            ctx,
        ));
        futures::join!(run, ready);
    };
    ControllerTask {
        name,
        future: future.boxed(),
    }
}

/// The watches an infrastructure machine controller reads.
struct MachineWatches<'a, K, C>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    C: Resource<DynamicType = ()> + Clone + 'static,
{
    /// Its own kind (DockerMachine or DevMachine).
    own: &'a SharedWatch<K>,
    machines: &'a SharedWatch<DeserializeGuard<Machine>>,
    clusters: &'a SharedWatch<DeserializeGuard<Cluster>>,
    /// The infrastructure clusters of the same generation (DockerCluster or DevCluster).
    infra_clusters: &'a SharedWatch<C>,
}

/// The controller of one infrastructure machine kind (DockerMachine or DevMachine): its own
/// objects, Machines through `spec.infrastructureRef`, the Cluster and infrastructure cluster of
/// their cluster, and the progress of background tasks (`triggers`).
fn machine_controller<K, C>(
    ctx: &Arc<Context>,
    watches: MachineWatches<'_, K, C>,
    triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    concurrency: u16,
    stop: &CancellationToken,
) -> ControllerTask
where
    K: ServedKind<Docker = DockerMachine>,
    C: ServedKind<Docker = DockerCluster>,
{
    let name = K::CONTROLLER;
    let manager = &ctx.manager;
    manager.metrics.register_controller(name, concurrency);
    manager.readiness.require(name);
    let (events, machine_events, cluster_events, infra_cluster_events) = (
        watches.own.subscribe(),
        watches.machines.subscribe(),
        watches.clusters.subscribe(),
        watches.infra_clusters.subscribe(),
    );
    let store = watches.own.reader.clone();
    let queue = QueueDepth::new(name, manager.metrics.clone(), store.clone());
    let (machine_filter, infra_filter) = (ChangeFilter::default(), ChangeFilter::default());
    let machine_store = watches.machines.reader.clone();
    let (machines_a, machines_b) = (machine_store.clone(), machine_store);
    let (store_a, store_b) = (store.clone(), store.clone());
    let (queue_own, queue_machines, queue_clusters, queue_infra, queue_tasks) = (
        queue.clone(),
        queue.clone(),
        queue.clone(),
        queue.clone(),
        queue.clone(),
    );
    let triggers = triggers.map(move |object| queue_tasks.requested(object, Trigger::Task));
    // The controller's own writes come back as watch events that change nothing it acts on
    // (what they follow from, a task's progress, triggers on its own).
    let own_filter = ChangeFilter::default();
    let events = events
        .filter(move |object| {
            let uid = object.meta().uid.clone().unwrap_or_default();
            let fingerprint = infra_machine_fingerprint(object.as_ref());
            futures::future::ready(own_filter.changed(&uid, &fingerprint))
        })
        .map(move |object| {
            queue_own.requested(ObjectRef::from_obj(object.as_ref()), Trigger::Changed);
            object
        });
    let controller = Controller::for_shared_stream(events, store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .watches_shared_stream(
            machine_events,
            move |guarded: Arc<DeserializeGuard<Machine>>| {
                if K::SERVED == Served::Docker {
                    log_invalid(&guarded, "Machine");
                }
                let machine = guarded.0.as_ref().ok()?;
                let uid = machine.metadata.uid.clone().unwrap_or_default();
                machine_filter
                    .changed(&uid, &machine_fingerprint(machine))
                    .then(|| machine_to_infra_machine::<K>(machine))
                    .flatten()
                    .map(|object| {
                        let trigger = Trigger::Related("Machine", key(&machine.metadata));
                        queue_machines.requested(object, trigger)
                    })
            },
        )
        .watches_shared_stream(
            cluster_events,
            cluster_to_machines(queue_clusters, move |namespace, name| {
                infra_machines_of_cluster(namespace, name, &machines_a, &store_a)
            }),
        )
        .watches_shared_stream(infra_cluster_events, move |object: Arc<C>| {
            let Ok(infra_cluster) = object.view() else {
                return Vec::new();
            };
            let uid = infra_cluster.metadata.uid.clone().unwrap_or_default();
            if !infra_filter.changed(&uid, &docker_cluster_fingerprint(&infra_cluster)) {
                return Vec::new();
            }
            let Some(cluster) = docker_cluster_cluster(&infra_cluster) else {
                return Vec::new();
            };
            let namespace = infra_cluster.metadata.namespace.clone().unwrap_or_default();
            let kind = match C::SERVED {
                Served::Docker => "DockerCluster",
                Served::Dev => "DevCluster",
            };
            let trigger = Trigger::Related(kind, key(&infra_cluster.metadata));
            infra_machines_of_cluster(&namespace, cluster, &machines_b, &store_b)
                .into_iter()
                .map(|object| queue_infra.requested(object, trigger.clone()))
                .collect()
        })
        .reconcile_on(triggers)
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    let ready = ready_when_synced(
        manager.readiness.clone(),
        name,
        vec![
            watches.own.synced(),
            watches.machines.synced(),
            watches.clusters.synced(),
            watches.infra_clusters.synced(),
        ],
    );
    let ctx = ctx.clone();
    let future = async move {
        let tasks_ctx = ctx.clone();
        let run = drain(controller.run(
            move |object, ctx| {
                let reason = queue.started(&object);
                logged(
                    name,
                    key(object.meta()),
                    reason,
                    dockermachine::reconcile(object.clone(), ctx),
                )
            },
            dockermachine::error_policy,
            ctx,
        ));
        futures::join!(run, ready);
        // Bootstrap keeps running inside the nodes; the next leader observes it.
        tasks_ctx.tasks.abort_all();
    };
    ControllerTask {
        name,
        future: future.boxed(),
    }
}

/// The capacity controller of one template kind as one task: its own watch, readiness once the
/// watch has synced, and the controller.
fn template_task<K: CapacityTemplate>(
    ctx: &Arc<Context>,
    config: watcher::Config,
    concurrency: u16,
    stop: &CancellationToken,
) -> ControllerTask {
    let name = K::CONTROLLER;
    let manager = &ctx.manager;
    let api = api::<K>(&manager.client, manager.config.namespace.as_deref());
    manager.metrics.register_controller(name, concurrency);
    manager.readiness.require(name);
    let watch = SharedWatch::new(api, config, K::KIND);
    let events = watch.subscribe();
    let store = watch.reader.clone();
    let queue = QueueDepth::new(name, manager.metrics.clone(), store.clone());
    let queued = queue.clone();
    let events = events.map(move |object| {
        queued.requested(ObjectRef::from_obj(object.as_ref()), Trigger::Changed);
        object
    });
    let controller = Controller::for_shared_stream(events, store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    let synced = watch.synced();
    let driver = watch.into_driver();
    let (readiness, stop) = (manager.readiness.clone(), stop.clone());
    let ctx = ctx.clone();
    let future = async move {
        let watch = async move {
            tokio::select! {
                () = driver => tracing::warn!(controller = name, "The watch ended"),
                () = stop.cancelled() => {}
            }
        };
        let run = drain(controller.run(
            move |object, ctx| {
                let reason = queue.started(&object);
                logged(
                    name,
                    key(object.meta()),
                    reason,
                    template::reconcile(object.clone(), ctx),
                )
            },
            template::error_policy,
            ctx,
        ));
        futures::join!(watch, run, ready_when_synced(readiness, name, vec![synced]));
    };
    ControllerTask {
        name,
        future: future.boxed(),
    }
}
