//! The DockerMachinePool controller's wiring: its own watches (MachinePools and
//! DockerMachinePools, only made when machine pools are on) and the mappings from the watches it
//! shares with the other controllers.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::shared::{SharedWatch, Subscription};
use super::{cluster_to_machines, drain, logged, ready_when_synced};
use crate::api::capi::{Cluster, MachinePool};
use crate::api::v1beta2::{DockerMachine, DockerMachinePool};
use crate::controllers::context::Context;
use crate::controllers::dockermachinepool;
use crate::controllers::meta::key;
use crate::controllers::queue::{QueueDepth, Trigger};
use crate::controllers::watches::{
    ChangeFilter, docker_machine_fingerprint_for_pool, docker_machine_pools_of_cluster,
    docker_machine_to_pool, log_invalid, machine_pool_fingerprint,
    machine_pool_to_docker_machine_pool,
};
use crate::runtime::ControllerTask;

/// The subscriptions the DockerMachinePool controller reads.
pub(super) struct PoolEvents {
    pub(super) machine_pools: Subscription<DeserializeGuard<MachinePool>>,
    pub(super) pools: Subscription<DockerMachinePool>,
    pub(super) clusters: Subscription<DeserializeGuard<Cluster>>,
    pub(super) docker_machines: Subscription<DockerMachine>,
}

/// Builds the DockerMachinePool controller: its own objects, MachinePools through their
/// infrastructure reference, the DockerMachines it made (owner reference), and the Clusters of
/// its MachinePools, as one task with its own watches and its readiness. `synced` are the shared
/// watches it reads besides its own.
pub(super) fn pool_controller(
    ctx: Arc<Context>,
    (machine_pools, pools): (
        SharedWatch<DeserializeGuard<MachinePool>>,
        SharedWatch<DockerMachinePool>,
    ),
    events: PoolEvents,
    mut synced: Vec<watch::Receiver<bool>>,
    stop: &CancellationToken,
) -> ControllerTask {
    let manager = ctx.manager.clone();
    let pool_store = pools.reader.clone();
    let machine_pool_store = machine_pools.reader.clone();
    let queue = QueueDepth::new(
        dockermachinepool::CONTROLLER,
        manager.metrics.clone(),
        pool_store.clone(),
    );
    let (mp_filter, dm_filter) = (ChangeFilter::default(), ChangeFilter::default());
    let (queue_own, queue_mps, queue_dms, queue_clusters) =
        (queue.clone(), queue.clone(), queue.clone(), queue.clone());
    let own = events.pools.map(move |object| {
        queue_own.requested(ObjectRef::from_obj(object.as_ref()), Trigger::Changed);
        object
    });
    let controller = Controller::for_shared_stream(own, pool_store)
        .with_config(
            ControllerConfig::default().concurrency(manager.config.concurrency.docker_machine_pool),
        )
        .watches_shared_stream(
            events.machine_pools,
            move |guarded: Arc<DeserializeGuard<MachinePool>>| {
                log_invalid(&guarded, "MachinePool");
                let machine_pool = guarded.0.as_ref().ok()?;
                let uid = machine_pool.metadata.uid.clone().unwrap_or_default();
                mp_filter
                    .changed(&uid, &machine_pool_fingerprint(machine_pool))
                    .then(|| machine_pool_to_docker_machine_pool(machine_pool))
                    .flatten()
                    .map(|object| {
                        let trigger = Trigger::Related("MachinePool", key(&machine_pool.metadata));
                        queue_mps.requested(object, trigger)
                    })
            },
        )
        .watches_shared_stream(events.docker_machines, move |dm: Arc<DockerMachine>| {
            let uid = dm.metadata.uid.clone().unwrap_or_default();
            dm_filter
                .changed(&uid, &docker_machine_fingerprint_for_pool(&dm))
                .then(|| docker_machine_to_pool(&dm))
                .flatten()
                .map(|object| {
                    let trigger = Trigger::Related("DockerMachine", key(&dm.metadata));
                    queue_dms.requested(object, trigger)
                })
        })
        .watches_shared_stream(
            events.clusters,
            cluster_to_machines(queue_clusters, move |namespace, name| {
                docker_machine_pools_of_cluster(namespace, name, &machine_pool_store)
            }),
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    synced.extend([machine_pools.synced(), pools.synced()]);
    let watches = futures::future::join(machine_pools.into_driver(), pools.into_driver());
    let ready = ready_when_synced(
        manager.readiness.clone(),
        dockermachinepool::CONTROLLER,
        synced,
    );
    let run = drain(controller.run(
        move |object, ctx| {
            let reason = queue.started(&object);
            logged(
                dockermachinepool::CONTROLLER,
                key(&object.metadata),
                reason,
                dockermachinepool::reconcile(object.clone(), ctx),
            )
        },
        dockermachinepool::error_policy,
        ctx,
    ));
    let stop = stop.clone();
    let future = async move {
        let watches = async move {
            tokio::select! {
                _ = watches => tracing::warn!("The machine pool watches ended"),
                () = stop.cancelled() => {}
            }
        };
        futures::join!(watches, run, ready);
    };
    ControllerTask {
        name: dockermachinepool::CONTROLLER,
        future: future.boxed(),
    }
}
