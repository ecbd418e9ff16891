//! The pool controllers' wiring, one per pool kind (DockerMachinePool with its DockerMachines,
//! DevMachinePool with its DevMachines), the same reconcile: each its own pool watch (only made
//! when machine pools are on) and the mappings from the watches it shares with the other
//! controllers (MachinePools, Clusters and its machines).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::shared::{SharedWatch, Subscription};
use super::{cluster_to_machines, drain, logged, ready_when_synced};
use crate::api::capi::{Cluster, MachinePool};
use crate::api::v1beta2::{DevMachine, DevMachinePool, DockerMachine, DockerMachinePool};
use crate::controllers::context::Context;
use crate::controllers::dockermachinepool;
use crate::controllers::kinds::ServedKind;
use crate::controllers::meta::key;
use crate::controllers::queue::{QueueDepth, Trigger};
use crate::controllers::watches::{
    ChangeFilter, docker_machine_fingerprint_for_pool, log_invalid, machine_pool_fingerprint,
    machine_pool_to_pool, machine_to_pool, pools_of_cluster,
};
use crate::runtime::ControllerTask;

/// The watches the pool controllers share with each other and with the other controllers.
pub(super) struct PoolShared<'a> {
    /// MachinePools: made for the pool controllers, driven with the shared watches.
    pub(super) machine_pools: SharedWatch<DeserializeGuard<MachinePool>>,
    pub(super) clusters: &'a SharedWatch<DeserializeGuard<Cluster>>,
    pub(super) docker_machines: &'a SharedWatch<DockerMachine>,
    /// DevMachines, when the Dev* kinds are served.
    pub(super) dev_machines: Option<&'a SharedWatch<DevMachine>>,
}

/// Adds to `tasks` the DockerMachinePool controller and, when its watch is given and the
/// DevMachines are watched, the DevMachinePool controller; returns the MachinePool watch's
/// driver, to be run with the shared watches.
pub(super) fn pool_tasks(
    ctx: &Arc<Context>,
    shared: PoolShared<'_>,
    (docker_pools, dev_pools): (
        SharedWatch<DockerMachinePool>,
        Option<SharedWatch<DevMachinePool>>,
    ),
    tasks: &mut Vec<ControllerTask>,
    stop: &CancellationToken,
) -> BoxFuture<'static, ()> {
    let manager = &ctx.manager;
    let concurrency = &manager.config.concurrency;
    let PoolShared {
        machine_pools,
        clusters,
        docker_machines,
        dev_machines,
    } = shared;
    let docker = concurrency.docker_machine_pool;
    manager
        .metrics
        .register_controller(dockermachinepool::CONTROLLER, docker);
    manager.readiness.require(dockermachinepool::CONTROLLER);
    let events = PoolEvents {
        machine_pools: machine_pools.subscribe(),
        pools: docker_pools.subscribe(),
        clusters: clusters.subscribe(),
        machines: docker_machines.subscribe(),
    };
    let synced = vec![clusters.synced(), docker_machines.synced()];
    tasks.push(pool_controller::<DockerMachinePool, DockerMachine>(
        ctx.clone(),
        docker_pools,
        &machine_pools,
        events,
        (docker, synced),
        stop,
    ));
    if let (Some(dev_pools), Some(dev_machines)) = (dev_pools, dev_machines) {
        let dev = concurrency.dev_machine_pool;
        manager
            .metrics
            .register_controller(dockermachinepool::DEV_CONTROLLER, dev);
        manager.readiness.require(dockermachinepool::DEV_CONTROLLER);
        let events = PoolEvents {
            machine_pools: machine_pools.subscribe(),
            pools: dev_pools.subscribe(),
            clusters: clusters.subscribe(),
            machines: dev_machines.subscribe(),
        };
        let synced = vec![clusters.synced(), dev_machines.synced()];
        tasks.push(pool_controller::<DevMachinePool, DevMachine>(
            ctx.clone(),
            dev_pools,
            &machine_pools,
            events,
            (dev, synced),
            stop,
        ));
    }
    machine_pools.into_driver()
}

/// The subscriptions a pool controller of kind `K`, whose machines are `M`s, reads.
struct PoolEvents<K: Resource, M: Resource> {
    machine_pools: Subscription<DeserializeGuard<MachinePool>>,
    pools: Subscription<K>,
    clusters: Subscription<DeserializeGuard<Cluster>>,
    machines: Subscription<M>,
}

/// A machine as its pool sees it: the view's DockerMachine, or only its metadata when it has no
/// view (a DevMachine naming no backend still belongs to its pool).
fn as_docker_machine<M: ServedKind<Docker = DockerMachine>>(machine: &M) -> DockerMachine {
    machine.docker().map_or_else(
        |_| DockerMachine {
            metadata: machine.meta().clone(),
            spec: Default::default(),
            status: None,
        },
        |(docker, _)| docker,
    )
}

/// Builds the controller of the pool kind `K`: its own objects, MachinePools through their
/// infrastructure reference, the machines it made (owner reference), and the Clusters of its
/// MachinePools, as one task with its own pool watch and its readiness. `machine_pools` is the
/// MachinePool watch's store (driven with the shared watches); `synced` are the shared watches it
/// reads.
fn pool_controller<K, M>(
    ctx: Arc<Context>,
    pools: SharedWatch<K>,
    machine_pools: &SharedWatch<DeserializeGuard<MachinePool>>,
    events: PoolEvents<K, M>,
    (concurrency, mut synced): (u16, Vec<watch::Receiver<bool>>),
    stop: &CancellationToken,
) -> ControllerTask
where
    K: ServedKind<Docker = DockerMachinePool>,
    M: ServedKind<Docker = DockerMachine>,
{
    let manager = ctx.manager.clone();
    let pool_store = pools.reader.clone();
    let machine_pool_store = machine_pools.reader.clone();
    let queue = QueueDepth::new(K::CONTROLLER, manager.metrics.clone(), pool_store.clone());
    let (mp_filter, dm_filter) = (ChangeFilter::default(), ChangeFilter::default());
    let (queue_own, queue_mps, queue_dms, queue_clusters) =
        (queue.clone(), queue.clone(), queue.clone(), queue.clone());
    let own = events.pools.map(move |object| {
        queue_own.requested(ObjectRef::from_obj(object.as_ref()), Trigger::Changed);
        object
    });
    let controller = Controller::for_shared_stream(own, pool_store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .watches_shared_stream(
            events.machine_pools,
            move |guarded: Arc<DeserializeGuard<MachinePool>>| {
                log_invalid(&guarded, "MachinePool");
                let machine_pool = guarded.0.as_ref().ok()?;
                let uid = machine_pool.metadata.uid.clone().unwrap_or_default();
                mp_filter
                    .changed(&uid, &machine_pool_fingerprint(machine_pool))
                    .then(|| machine_pool_to_pool::<K>(machine_pool))
                    .flatten()
                    .map(|object| {
                        let trigger = Trigger::Related("MachinePool", key(&machine_pool.metadata));
                        queue_mps.requested(object, trigger)
                    })
            },
        )
        .watches_shared_stream(events.machines, move |machine: Arc<M>| {
            let meta = machine.meta();
            let uid = meta.uid.clone().unwrap_or_default();
            dm_filter
                .changed(
                    &uid,
                    &docker_machine_fingerprint_for_pool(&as_docker_machine(machine.as_ref())),
                )
                .then(|| machine_to_pool::<K>(meta))
                .flatten()
                .map(|object| {
                    let trigger = Trigger::Related(M::SERVED.machine_kind(), key(meta));
                    queue_dms.requested(object, trigger)
                })
        })
        .watches_shared_stream(
            events.clusters,
            cluster_to_machines(queue_clusters, move |namespace, name| {
                pools_of_cluster::<K>(namespace, name, &machine_pool_store)
            }),
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    synced.extend([machine_pools.synced(), pools.synced()]);
    let watch = pools.into_driver();
    let ready = ready_when_synced(manager.readiness.clone(), K::CONTROLLER, synced);
    let run = drain(controller.run(
        move |object, ctx| {
            let reason = queue.started(&object);
            logged(
                K::CONTROLLER,
                key(object.meta()),
                reason,
                dockermachinepool::reconcile(object.clone(), ctx),
            )
        },
        dockermachinepool::error_policy,
        ctx,
    ));
    let stop = stop.clone();
    let future = async move {
        let watch = async move {
            tokio::select! {
                () = watch => tracing::warn!(kind = %K::kind(&()), "The pool watch ended"),
                () = stop.cancelled() => {}
            }
        };
        futures::join!(watch, run, ready);
    };
    ControllerTask {
        name: K::CONTROLLER,
        future: future.boxed(),
    }
}
