//! Deletion as core 1.12 does it: a Machine's (`machine_controller.go`, `reconcileDelete`) and a
//! Cluster's (`cluster_controller.go`, `reconcileDelete`): the Cluster held by its finalizer while
//! its workers and pools go, then its control plane, then its infrastructure cluster.

use std::time::Duration;

use futures::future::join_all;
use kube::api::DynamicObject;
use serde_json::json;

use super::machines::KCP_CLEANUP_HOOK;
use super::{MACHINE_FINALIZER, capi, infra, is_control_plane};
use crate::Env;
use crate::pool::{POOL_NAME_LABEL, Pool};

/// The finalizer Cluster API core holds Clusters with while their descendants go.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";

impl Env {
    /// Plays core when a Machine is deleted: its finalizer holds it while it is marked deleting.
    /// [`Env::finish_machine_deletion`] deletes the infrastructure and lets it go.
    pub async fn begin_machine_deletion(&self, name: &str) {
        self.merge_patch(
            &capi("Machine"),
            name,
            json!({"metadata": {"finalizers": [MACHINE_FINALIZER]}}),
        )
        .await;
        self.delete(&capi("Machine"), name).await;
    }

    /// Plays core at the end of a Machine's deletion: KCP's pre-terminate hook released (once
    /// KCP removed the etcd member), then the Machine controller deletes the infrastructure
    /// machine, waits until it is gone (our finalizer released), and releases the Machine.
    pub async fn finish_machine_deletion(&self, name: &str, timeout: Duration) {
        self.release_kcp_cleanup_hook(name).await;
        let kind = infra(self.kinds.machine());
        self.delete(&kind, name).await;
        self.wait_gone(&kind, name, timeout).await;
        self.release_machine(name, timeout).await;
    }

    /// Plays core once a deleting Machine's infrastructure is gone: removes its finalizer and
    /// waits until it is gone.
    pub async fn release_machine(&self, name: &str, timeout: Duration) {
        self.merge_patch(
            &capi("Machine"),
            name,
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
        self.wait_gone(&capi("Machine"), name, timeout).await;
    }

    /// Plays core when a Cluster is deleted, in `reconcileDelete`'s order: the Cluster gets its
    /// deletion timestamp while core's finalizer holds it; its MachinePools and worker Machines
    /// are deleted together and waited for; only then is the control plane deleted (KCP
    /// releases its Machines' pre-terminate hooks and deletes them all) and waited for; then
    /// the infrastructure cluster; then the finalizer is removed. Each Machine goes as
    /// [`Env::begin_machine_deletion`] and [`Env::finish_machine_deletion`].
    pub async fn delete_cluster_as_core(&self, cluster: &str, timeout: Duration) {
        let cluster_kind = capi("Cluster");
        // `EnsureFinalizer` on the Cluster controller's first pass; then the user's delete.
        self.merge_patch(
            &cluster_kind,
            cluster,
            json!({"metadata": {"finalizers": [CLUSTER_FINALIZER]}}),
        )
        .await;
        self.delete(&cluster_kind, cluster).await;

        // The descendants: pools and workers. A pool's Machines go with their pool.
        let pools = self.cluster_machine_pools(cluster).await;
        let machines = self.cluster_machines(cluster).await.unwrap();
        let (control_planes, workers): (Vec<_>, Vec<_>) = machines
            .iter()
            .filter(|m| !in_pool(m))
            .partition(|m| is_control_plane(m));
        let pools = join_all(
            pools
                .iter()
                .map(|pool| self.delete_machine_pool_as_core(pool, timeout)),
        );
        let workers = self.delete_machines_as_core(&workers, timeout);
        futures::join!(pools, workers);

        // The control plane: KCP removes its hook from each Machine, then deletes them all.
        for machine in &control_planes {
            self.release_kcp_cleanup_hook(&name_of(machine)).await;
        }
        self.delete_machines_as_core(&control_planes, timeout).await;

        let infra_kind = infra(self.kinds.cluster());
        self.delete(&infra_kind, cluster).await;
        self.wait_gone(&infra_kind, cluster, timeout).await;

        self.merge_patch(
            &cluster_kind,
            cluster,
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
        self.wait_gone(&cluster_kind, cluster, timeout).await;
    }

    /// Deletes Machines together, as core's Machine controller does each on its own.
    async fn delete_machines_as_core(&self, machines: &[&DynamicObject], timeout: Duration) {
        for machine in machines {
            self.begin_machine_deletion(&name_of(machine)).await;
        }
        join_all(machines.iter().map(|machine| async move {
            self.finish_machine_deletion(&name_of(machine), timeout)
                .await
        }))
        .await;
    }

    /// KCP's `reconcilePreTerminateHook` (or its deletion) releasing a control plane Machine:
    /// the hook annotation removed, when it is there.
    async fn release_kcp_cleanup_hook(&self, name: &str) {
        let held = self.get(&capi("Machine"), name).await.is_some_and(|m| {
            m.metadata
                .annotations
                .is_some_and(|a| a.contains_key(KCP_CLEANUP_HOOK))
        });
        if held {
            self.merge_patch(
                &capi("Machine"),
                name,
                json!({"metadata": {"annotations": {KCP_CLEANUP_HOOK: null}}}),
            )
            .await;
        }
    }

    /// The MachinePools of a cluster in the current namespace.
    async fn cluster_machine_pools(&self, cluster: &str) -> Vec<Pool> {
        let pools = self
            .api(&capi("MachinePool"))
            .list(&Default::default())
            .await
            .unwrap();
        pools
            .items
            .into_iter()
            .filter(|p| p.data["spec"]["clusterName"] == json!(cluster))
            .map(|p| Pool::of(&p))
            .collect()
    }

    /// The Machines of a cluster in the current namespace.
    pub async fn cluster_machines(&self, cluster: &str) -> kube::Result<Vec<DynamicObject>> {
        let machines = self.api(&capi("Machine")).list(&Default::default()).await?;
        Ok(machines
            .items
            .into_iter()
            .filter(|m| m.data["spec"]["clusterName"] == json!(cluster))
            .collect())
    }
}

fn name_of(object: &DynamicObject) -> String {
    object.metadata.name.clone().unwrap_or_default()
}

/// Whether a Machine is a MachinePool's.
fn in_pool(machine: &DynamicObject) -> bool {
    machine
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(POOL_NAME_LABEL))
}
