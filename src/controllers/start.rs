//! Building and running the controllers: one watch per kind (shared where several controllers
//! need it), every watch filtered by `--namespace` and `--watch-filter`, explicit concurrency,
//! and readiness once every watch has synced.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::backoff::ErrorBackoff;
use super::context::{Context, Stores};
use super::queue::QueueDepth;
use super::tasks::TaskRegistry;
use super::template::{self, CapacityTemplate};
use super::watches::{
    ChangeFilter, cluster_fingerprint_for_docker_cluster, cluster_fingerprint_for_docker_machines,
    cluster_to_docker_cluster, docker_cluster_cluster, docker_cluster_fingerprint,
    docker_machines_of_cluster, log_invalid, machine_fingerprint, machine_to_docker_machine,
};
use super::workload::WorkloadClients;
use super::{dockercluster, dockermachine, dockermachinepool};
use crate::api::capi::{Cluster, Machine, MachinePool};
use crate::api::v1beta2::{
    DockerCluster, DockerMachine, DockerMachinePool, DockerMachinePoolTemplate,
    DockerMachineTemplate,
};
use crate::docker::ContainerRuntime;
use crate::docker::node::ProxyEnv;
use crate::manager::{self, ControllerTask, error_chain};

mod pools;

use pools::{PoolEvents, pool_controller};

/// Room for watch events not yet consumed by every subscriber of a shared watch.
const SHARED_BUFFER: usize = 1024;

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

/// One watch of a kind, shared by every consumer: a store, subscribers, and a sync signal.
///
/// Readiness is taken from the watch's own `InitDone` event, never from
/// `Store::wait_until_ready`: that future keeps only one waker per store, and the controller's
/// applier already waits on it, so a second waiter could leave the controller stalled.
struct SharedWatch<K: Resource<DynamicType = ()> + Clone + 'static> {
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    reader: Store<K>,
    writer: reflector::store::Writer<K>,
}

impl<K> SharedWatch<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    fn new(api: Api<K>, config: watcher::Config, kind: &'static str) -> Self {
        let (reader, writer) = reflector::store_shared::<K>(SHARED_BUFFER);
        Self {
            api,
            config,
            kind,
            reader,
            writer,
        }
    }

    fn subscribe(&self) -> Option<reflector::ReflectHandle<K>> {
        self.writer.subscribe()
    }

    /// The future that runs the watch (must be polled) and a receiver that turns `true` once
    /// the first list is in the store.
    fn into_driver(self) -> (BoxFuture<'static, ()>, watch::Receiver<bool>) {
        let (synced_tx, synced_rx) = watch::channel(false);
        let kind = self.kind;
        let driver = watcher(self.api, self.config)
            .default_backoff()
            .reflect_shared(self.writer)
            .for_each(move |event| {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        synced_tx.send_replace(true);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(kind, error = %error_chain(&error), "Watch failed; retrying");
                    }
                }
                std::future::ready(())
            })
            .boxed();
        (driver, synced_rx)
    }
}

/// Marks `name` ready on `/readyz` once every watch in `synced` has listed its objects.
async fn ready_when_synced(
    readiness: manager::Readiness,
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

/// Logs the outcome of each reconcile at debug level (failures are logged by the reconcilers).
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
        objects_of(&namespace, &name)
            .into_iter()
            .map(|object| queue.requested(object))
            .collect()
    }
}

/// Builds the controllers and their watches once this process leads.
pub fn start(
    manager: Arc<manager::Context>,
    runtime: Arc<dyn ContainerRuntime>,
    stop: CancellationToken,
) -> Vec<ControllerTask> {
    let config = manager.config.clone();
    let client = manager.client.clone();
    let namespace = config.namespace.as_deref();
    let selector = config.label_selector();
    let watch_config = || watch_config(selector.as_deref());

    for (name, concurrency) in [
        (dockercluster::CONTROLLER, config.concurrency.docker_cluster),
        (dockermachine::CONTROLLER, config.concurrency.docker_machine),
    ] {
        manager.metrics.register_controller(name, concurrency);
        manager.readiness.require(name);
    }
    if config.machine_pools {
        manager.metrics.register_controller(
            dockermachinepool::CONTROLLER,
            config.concurrency.docker_machine_pool,
        );
        manager.readiness.require(dockermachinepool::CONTROLLER);
    }

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
    // Machine pools: watched only when their controller runs (their CRDs may not exist otherwise).
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
    let pool_subscriptions = pool_watches.as_ref().map(|(machine_pools, pools)| {
        (
            machine_pools.subscribe(),
            pools.subscribe(),
            clusters.subscribe(),
            docker_machines.subscribe(),
        )
    });
    let subscriptions = (
        clusters.subscribe(),
        clusters.subscribe(),
        machines.subscribe(),
        docker_clusters.subscribe(),
        docker_clusters.subscribe(),
        docker_machines.subscribe(),
    );
    let (
        Some(clusters_for_dc),
        Some(clusters_for_dm),
        Some(machines_for_dm),
        Some(dcs_for_dc),
        Some(dcs_for_dm),
        Some(dms),
    ) = subscriptions
    else {
        // Shared stores always hand out subscribers; this cannot happen.
        tracing::error!("A shared watch refused a subscriber; no controller can run");
        return Vec::new();
    };
    let (cluster_store, machine_store, dc_store, dm_store) = (
        clusters.reader.clone(),
        machines.reader.clone(),
        docker_clusters.reader.clone(),
        docker_machines.reader.clone(),
    );

    let (trigger_tx, trigger_rx) = mpsc::unbounded_channel::<ObjectRef<DockerMachine>>();
    let ctx = Arc::new(Context {
        manager: manager.clone(),
        runtime,
        stores: Stores {
            clusters: cluster_store,
            machines: machine_store.clone(),
            docker_clusters: dc_store.clone(),
            machine_pools: pool_watches
                .as_ref()
                .map_or_else(|| reflector::store().0, |(mp, _)| mp.reader.clone()),
        },
        tasks: TaskRegistry::new(trigger_tx),
        workload: WorkloadClients::new(config.workload_client_qps, config.workload_client_burst),
        backoff: ErrorBackoff::new(),
        proxy: ProxyEnv::from_env(),
        load_balancer_locks: Default::default(),
    });

    // `workqueue_depth` of each controller, counted at the triggers it is fed.
    let metrics = &manager.metrics;
    let dc_queue = QueueDepth::new(dockercluster::CONTROLLER, metrics.clone(), dc_store.clone());
    let dm_queue = QueueDepth::new(dockermachine::CONTROLLER, metrics.clone(), dm_store.clone());

    // DockerCluster: its own objects, and Clusters through spec.infrastructureRef.
    let filter = ChangeFilter::default();
    let (queue_a, queue_b) = (dc_queue.clone(), dc_queue.clone());
    let dcs_for_dc = dcs_for_dc.map(move |object| {
        queue_a.requested(ObjectRef::from_obj(object.as_ref()));
        object
    });
    let dc_controller = Controller::for_shared_stream(dcs_for_dc, dc_store)
        .with_config(ControllerConfig::default().concurrency(config.concurrency.docker_cluster))
        .watches_shared_stream(
            clusters_for_dc,
            move |guarded: Arc<DeserializeGuard<Cluster>>| {
                log_invalid(&guarded, "Cluster");
                let cluster = guarded.0.as_ref().ok()?;
                let uid = cluster.metadata.uid.clone().unwrap_or_default();
                filter
                    .changed(&uid, &cluster_fingerprint_for_docker_cluster(cluster))
                    .then(|| cluster_to_docker_cluster(cluster))
                    .flatten()
                    .map(|object| queue_b.requested(object))
            },
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());

    // DockerMachine: its own objects, Machines through spec.infrastructureRef, the Cluster and
    // DockerCluster of their cluster, and the progress of background tasks.
    let machine_filter = ChangeFilter::default();
    let dc_filter = ChangeFilter::default();
    let (machines_a, machines_b) = (machine_store.clone(), machine_store);
    let (dm_store_a, dm_store_b) = (dm_store.clone(), dm_store.clone());
    let (queue_own, queue_machines, queue_clusters, queue_dcs, queue_tasks) = (
        dm_queue.clone(),
        dm_queue.clone(),
        dm_queue.clone(),
        dm_queue.clone(),
        dm_queue.clone(),
    );
    let triggers = futures::stream::unfold(trigger_rx, |mut rx| async move {
        rx.recv().await.map(|object| (object, rx))
    })
    .map(move |object| queue_tasks.requested(object));
    let dms = dms.map(move |object| {
        queue_own.requested(ObjectRef::from_obj(object.as_ref()));
        object
    });
    let dm_controller = Controller::for_shared_stream(dms, dm_store)
        .with_config(ControllerConfig::default().concurrency(config.concurrency.docker_machine))
        .watches_shared_stream(
            machines_for_dm,
            move |guarded: Arc<DeserializeGuard<Machine>>| {
                log_invalid(&guarded, "Machine");
                let machine = guarded.0.as_ref().ok()?;
                let uid = machine.metadata.uid.clone().unwrap_or_default();
                machine_filter
                    .changed(&uid, &machine_fingerprint(machine))
                    .then(|| machine_to_docker_machine(machine))
                    .flatten()
                    .map(|object| queue_machines.requested(object))
            },
        )
        .watches_shared_stream(
            clusters_for_dm,
            cluster_to_machines(queue_clusters, move |namespace, name| {
                docker_machines_of_cluster(namespace, name, &machines_a, &dm_store_a)
            }),
        )
        .watches_shared_stream(dcs_for_dm, move |docker_cluster: Arc<DockerCluster>| {
            let uid = docker_cluster.metadata.uid.clone().unwrap_or_default();
            if !dc_filter.changed(&uid, &docker_cluster_fingerprint(&docker_cluster)) {
                return Vec::new();
            }
            let Some(cluster) = docker_cluster_cluster(&docker_cluster) else {
                return Vec::new();
            };
            let namespace = docker_cluster
                .metadata
                .namespace
                .clone()
                .unwrap_or_default();
            docker_machines_of_cluster(&namespace, cluster, &machines_b, &dm_store_b)
                .into_iter()
                .map(|object| queue_dcs.requested(object))
                .collect()
        })
        .reconcile_on(triggers)
        .graceful_shutdown_on(stop.clone().cancelled_owned());

    // The templates' capacity: DockerMachineTemplates, and DockerMachinePoolTemplates when
    // machine pools are on (both under `--dockermachinetemplate-concurrency`).
    let template_concurrency = config.concurrency.docker_machine_template;
    let mut template_tasks = Vec::new();
    template_tasks.extend(template_task(
        &manager,
        api::<DockerMachineTemplate>(&client, namespace),
        watch_config(),
        template_concurrency,
        ctx.clone(),
        &stop,
    ));
    if config.machine_pools {
        template_tasks.extend(template_task(
            &manager,
            api::<DockerMachinePoolTemplate>(&client, namespace),
            watch_config(),
            template_concurrency,
            ctx.clone(),
            &stop,
        ));
    }

    let (run_clusters, clusters_synced) = clusters.into_driver();
    let (run_machines, machines_synced) = machines.into_driver();
    let (run_dcs, dcs_synced) = docker_clusters.into_driver();
    let (run_dms, dms_synced) = docker_machines.into_driver();
    let readiness = manager.readiness.clone();
    let pools = match (pool_watches, pool_subscriptions) {
        (
            Some(watches),
            Some((
                Some(machine_pool_events),
                Some(pool_events),
                Some(cluster_events),
                Some(dm_events),
            )),
        ) => Some(pool_controller(
            ctx.clone(),
            watches,
            PoolEvents {
                machine_pools: machine_pool_events,
                pools: pool_events,
                clusters: cluster_events,
                docker_machines: dm_events,
            },
            vec![clusters_synced.clone(), dms_synced.clone()],
            &stop,
        )),
        (Some(_), _) => {
            tracing::error!(
                "A shared watch refused a subscriber; the DockerMachinePool controller does not run"
            );
            None
        }
        (None, _) => None,
    };
    let (pool_task, run_pool_watches, pool_ready) = match pools {
        Some(pools) => (Some(pools.task), pools.watches, pools.ready),
        None => (
            None,
            futures::future::ready(()).boxed(),
            futures::future::ready(()).boxed(),
        ),
    };
    let ready = futures::future::join3(
        pool_ready,
        ready_when_synced(
            readiness.clone(),
            dockercluster::CONTROLLER,
            vec![dcs_synced.clone(), clusters_synced.clone()],
        ),
        ready_when_synced(
            readiness,
            dockermachine::CONTROLLER,
            vec![dms_synced, machines_synced, clusters_synced, dcs_synced],
        ),
    );
    let watches_stop = stop.clone();
    let watches = async move {
        let all = futures::future::join(
            futures::future::join4(run_clusters, run_machines, run_dcs, run_dms),
            run_pool_watches,
        );
        tokio::select! {
            _ = all => tracing::warn!("The watches ended"),
            () = watches_stop.cancelled() => {}
        }
    };
    let readiness_stop = stop.clone();
    let readiness_task = async move {
        tokio::select! {
            _ = ready => {}
            () = readiness_stop.cancelled() => {}
        }
        readiness_stop.cancelled().await;
    };

    let (ctx_dc, ctx_dm) = (ctx.clone(), ctx.clone());
    let mut tasks = vec![
        ControllerTask {
            name: "watches",
            future: watches.boxed(),
        },
        ControllerTask {
            name: "readiness",
            future: readiness_task.boxed(),
        },
        ControllerTask {
            name: dockercluster::CONTROLLER,
            future: drain(dc_controller.run(
                move |object, ctx| {
                    dc_queue.started(&object);
                    dockercluster::reconcile(object, ctx)
                },
                dockercluster::error_policy,
                ctx_dc,
            ))
            .boxed(),
        },
        ControllerTask {
            name: dockermachine::CONTROLLER,
            future: async move {
                drain(dm_controller.run(
                    move |object, ctx| {
                        dm_queue.started(&object);
                        dockermachine::reconcile(object, ctx)
                    },
                    dockermachine::error_policy,
                    ctx_dm,
                ))
                .await;
                // Bootstrap keeps running inside the nodes; the next leader observes it.
                ctx.tasks.abort_all();
            }
            .boxed(),
        },
    ];
    tasks.extend(template_tasks);
    tasks.extend(pool_task);
    tasks
}

/// The capacity controller of one template kind as one task: its own watch, readiness once the
/// watch has synced, and the controller. `None` (logged) if the watch refuses a subscriber.
fn template_task<K: CapacityTemplate>(
    manager: &manager::Context,
    api: Api<K>,
    config: watcher::Config,
    concurrency: u16,
    ctx: Arc<Context>,
    stop: &CancellationToken,
) -> Option<ControllerTask> {
    let name = K::CONTROLLER;
    manager.metrics.register_controller(name, concurrency);
    manager.readiness.require(name);
    let watch = SharedWatch::new(api, config, K::KIND);
    let Some(events) = watch.subscribe() else {
        tracing::error!(controller = name, "A shared watch refused a subscriber");
        return None;
    };
    let store = watch.reader.clone();
    let queue = QueueDepth::new(name, manager.metrics.clone(), store.clone());
    let queued = queue.clone();
    let events = events.map(move |object| {
        queued.requested(ObjectRef::from_obj(object.as_ref()));
        object
    });
    let controller = Controller::for_shared_stream(events, store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    let (driver, synced) = watch.into_driver();
    let (readiness, stop) = (manager.readiness.clone(), stop.clone());
    let future = async move {
        let watch = async move {
            tokio::select! {
                () = driver => tracing::warn!(controller = name, "The watch ended"),
                () = stop.cancelled() => {}
            }
        };
        let run = drain(controller.run(
            move |object, ctx| {
                queue.started(&object);
                template::reconcile(object, ctx)
            },
            template::error_policy,
            ctx,
        ));
        futures::join!(watch, run, ready_when_synced(readiness, name, vec![synced]));
    };
    Some(ControllerTask {
        name,
        future: future.boxed(),
    })
}
