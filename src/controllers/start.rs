//! Building and running the controllers: one watch per kind (shared where several controllers
//! need it), every watch filtered by `--namespace` and `--watch-filter`, explicit concurrency,
//! and readiness once every watch has synced.

use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backoff::ErrorBackoff;
use super::context::{Context, Stores};
use super::tasks::TaskRegistry;
use super::watches::{
    ChangeFilter, cluster_fingerprint_for_docker_cluster, cluster_fingerprint_for_docker_machines,
    cluster_to_docker_cluster, docker_cluster_cluster, docker_cluster_fingerprint,
    docker_machines_of_cluster, log_invalid, machine_fingerprint, machine_to_docker_machine,
};
use super::workload::WorkloadClients;
use super::{dockercluster, dockermachine, template};
use crate::api::capi::{Cluster, Machine};
use crate::api::v1beta2::{DockerCluster, DockerMachine, DockerMachineTemplate};
use crate::docker::ContainerRuntime;
use crate::docker::node::ProxyEnv;
use crate::manager::{self, ControllerTask, error_chain};

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

/// A shared watch: its store, and the future that keeps it running (must be polled).
fn shared_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
) -> (
    Store<K>,
    reflector::store::Writer<K>,
    impl FnOnce(reflector::store::Writer<K>) -> futures::future::BoxFuture<'static, ()>,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store_shared::<K>(SHARED_BUFFER);
    let run = move |writer| {
        watcher(api, config)
            .default_backoff()
            .reflect_shared(writer)
            .for_each(move |event| async move {
                if let Err(error) = event {
                    tracing::warn!(kind, error = %error_chain(&error), "Watch failed; retrying");
                }
            })
            .boxed()
    };
    (reader, writer, run)
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
    let watch = || watch_config(selector.as_deref());

    for (name, concurrency) in [
        (dockercluster::CONTROLLER, config.concurrency.docker_cluster),
        (dockermachine::CONTROLLER, config.concurrency.docker_machine),
        (
            template::CONTROLLER,
            config.concurrency.docker_machine_template,
        ),
    ] {
        manager.metrics.register_controller(name, concurrency);
        manager.readiness.require(name);
    }

    let (clusters, cluster_writer, run_clusters) = shared_watch(
        api::<DeserializeGuard<Cluster>>(&client, namespace),
        watch(),
        "Cluster",
    );
    let (machines, machine_writer, run_machines) = shared_watch(
        api::<DeserializeGuard<Machine>>(&client, namespace),
        watch(),
        "Machine",
    );
    let (docker_clusters, dc_writer, run_docker_clusters) = shared_watch(
        api::<DockerCluster>(&client, namespace),
        watch(),
        "DockerCluster",
    );
    let subscribe = |writer: &reflector::store::Writer<_>| writer.subscribe();
    let (Some(clusters_for_dc), Some(clusters_for_dm)) =
        (subscribe(&cluster_writer), subscribe(&cluster_writer))
    else {
        return Vec::new();
    };
    let (Some(machines_for_dm), Some(dcs_for_dc), Some(dcs_for_dm)) = (
        machine_writer.subscribe(),
        dc_writer.subscribe(),
        dc_writer.subscribe(),
    ) else {
        return Vec::new();
    };

    let (trigger_tx, trigger_rx) = mpsc::unbounded_channel::<ObjectRef<DockerMachine>>();
    let ctx = Arc::new(Context {
        manager: manager.clone(),
        runtime,
        stores: Stores {
            clusters: clusters.clone(),
            machines: machines.clone(),
            docker_clusters: docker_clusters.clone(),
        },
        tasks: TaskRegistry::new(trigger_tx),
        workload: WorkloadClients::new(config.workload_client_qps, config.workload_client_burst),
        backoff: ErrorBackoff::new(),
        proxy: ProxyEnv::from_env(),
    });

    // DockerCluster: its own objects, and Clusters through spec.infrastructureRef.
    let filter = ChangeFilter::default();
    let dc_controller = Controller::for_shared_stream(dcs_for_dc, docker_clusters.clone())
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
            },
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());

    // DockerMachine: its own objects, Machines through spec.infrastructureRef, the DockerCluster
    // and Cluster of their cluster, and the progress of background tasks.
    let dm_controller = Controller::new(api::<DockerMachine>(&client, namespace), watch())
        .with_config(ControllerConfig::default().concurrency(config.concurrency.docker_machine));
    let dm_store = dm_controller.store();
    let machine_filter = ChangeFilter::default();
    let cluster_filter = ChangeFilter::default();
    let dc_filter = ChangeFilter::default();
    let (machines_a, machines_b, dm_store_a, dm_store_b) = (
        machines.clone(),
        machines.clone(),
        dm_store.clone(),
        dm_store.clone(),
    );
    let triggers = futures::stream::unfold(trigger_rx, |mut rx| async move {
        rx.recv().await.map(|object| (object, rx))
    });
    let dm_controller = dm_controller
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
            },
        )
        .watches_shared_stream(
            clusters_for_dm,
            move |guarded: Arc<DeserializeGuard<Cluster>>| {
                let Ok(cluster) = guarded.0.as_ref() else {
                    return Vec::new();
                };
                let uid = cluster.metadata.uid.clone().unwrap_or_default();
                if !cluster_filter.changed(&uid, &cluster_fingerprint_for_docker_machines(cluster))
                {
                    return Vec::new();
                }
                let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
                let name = cluster.metadata.name.clone().unwrap_or_default();
                docker_machines_of_cluster(&namespace, &name, &machines_a, &dm_store_a)
            },
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
        })
        .reconcile_on(triggers)
        .graceful_shutdown_on(stop.clone().cancelled_owned());

    // DockerMachineTemplate: its own objects.
    let template_controller =
        Controller::new(api::<DockerMachineTemplate>(&client, namespace), watch())
            .with_config(
                ControllerConfig::default().concurrency(config.concurrency.docker_machine_template),
            )
            .graceful_shutdown_on(stop.clone().cancelled_owned());
    let template_store = template_controller.store();

    let readiness = manager.readiness.clone();
    let ready_when_synced =
        |name: &'static str, waits: Vec<futures::future::BoxFuture<'static, bool>>| {
            let readiness = readiness.clone();
            async move {
                let synced = futures::future::join_all(waits).await;
                if synced.iter().all(|ok| *ok) {
                    tracing::info!(controller = name, "Watches synced");
                    readiness.mark_ready(name);
                }
            }
        };
    let dc_ready = ready_when_synced(
        dockercluster::CONTROLLER,
        vec![
            synced_store(docker_clusters.clone()),
            synced_store(clusters.clone()),
        ],
    );
    let dm_ready = ready_when_synced(
        dockermachine::CONTROLLER,
        vec![
            synced_store(dm_store),
            synced_store(machines),
            synced_store(clusters),
            synced_store(docker_clusters),
        ],
    );
    let template_ready =
        ready_when_synced(template::CONTROLLER, vec![synced_store(template_store)]);

    let watches_stop = stop.clone();
    let watches = async move {
        let all = futures::future::join3(
            run_clusters(cluster_writer),
            run_machines(machine_writer),
            run_docker_clusters(dc_writer),
        );
        tokio::select! {
            _ = all => tracing::warn!("Shared watches ended"),
            () = watches_stop.cancelled() => {}
        }
    };

    let ctx_dc = ctx.clone();
    let ctx_dm = ctx.clone();
    let ctx_template = ctx.clone();
    let tasks_on_stop = ctx.clone();
    vec![
        ControllerTask {
            name: "watches",
            future: watches.boxed(),
        },
        ControllerTask {
            name: dockercluster::CONTROLLER,
            future: async move {
                let ready = tokio::spawn(dc_ready);
                drain(dc_controller.run(
                    dockercluster::reconcile,
                    dockercluster::error_policy,
                    ctx_dc,
                ))
                .await;
                ready.abort();
            }
            .boxed(),
        },
        ControllerTask {
            name: dockermachine::CONTROLLER,
            future: async move {
                let ready = tokio::spawn(dm_ready);
                drain(dm_controller.run(
                    dockermachine::reconcile,
                    dockermachine::error_policy,
                    ctx_dm,
                ))
                .await;
                ready.abort();
                // Bootstrap keeps running inside the nodes; the next leader observes it.
                tasks_on_stop.tasks.abort_all();
            }
            .boxed(),
        },
        ControllerTask {
            name: template::CONTROLLER,
            future: async move {
                let ready = tokio::spawn(template_ready);
                drain(template_controller.run(
                    template::reconcile,
                    template::error_policy,
                    ctx_template,
                ))
                .await;
                ready.abort();
            }
            .boxed(),
        },
    ]
}

fn synced_store<K>(store: Store<K>) -> futures::future::BoxFuture<'static, bool>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    async move { store.wait_until_ready().await.is_ok() }.boxed()
}
