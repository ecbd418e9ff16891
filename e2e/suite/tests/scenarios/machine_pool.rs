//! Scenario 9 (issue 12): a MachinePool with a DockerMachinePool, and the same with CAPD 1.14's
//! DevMachinePool (issue 50; one pool controller serves both), the suite playing core's
//! MachinePool controller. Scaled 0 → 3 → 1 → 0 over three failure domains, the manager killed
//! once in the middle of the scale-up, the `cluster.x-k8s.io/delete-machine` Machine removed
//! first on scale-down, the MachinePool showing each count and provider ID list core reads;
//! then deleting the pool and the cluster as core does leaves no container, volume, network,
//! object or finalizer behind.

use std::time::Duration;

use capd_e2e::*;
use kube::api::DynamicObject;
use serde_json::json;

use crate::PROVISION;

const DOMAINS: [&str; 3] = ["fd1", "fd2", "fd3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_pool_scales_over_failure_domains_and_leaves_nothing_behind() {
    if !capd_e2e::installed::runs_with_stand_in(
        "a_machine_pool_scales_over_failure_domains_and_leaves_nothing_behind",
    ) {
        return;
    }
    scales_over_failure_domains(Env::scenario("pool", &[]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_machine_pool_scales_over_failure_domains_and_leaves_nothing_behind() {
    if !capd_e2e::installed::runs_with_stand_in(
        "a_dev_machine_pool_scales_over_failure_domains_and_leaves_nothing_behind",
    ) {
        return;
    }
    let mut env = Env::scenario("devpool", &[]).await;
    env.use_dev_kinds();
    scales_over_failure_domains(env).await;
}

/// The scenario in `env`, with the kinds it is set to (DockerMachinePool or DevMachinePool).
async fn scales_over_failure_domains(mut env: Env) {
    let name = env.cluster_name();
    env.create_kubeconfig_secret(&name).await;
    let domains: Vec<_> = DOMAINS.iter().map(|d| json!({"name": d})).collect();
    env.provisioned_cluster(&name, json!({"failureDomains": domains}))
        .await;
    // The pool's workers join a control plane that is already up.
    env.mark_control_plane_initialized(&name).await;
    env.create_secret(
        "pool-bootstrap",
        &cloud_config_running(3, "kubeadm join --config /etc/capd-test/config.yaml"),
    )
    .await;
    let pool = env
        .create_machine_pool(&name, "pool", 0, &DOMAINS, "pool-bootstrap")
        .await;
    let dmp = eventually(
        Duration::from_secs(30),
        &format!("the {} to be reconciled", env.kinds.pool()),
        || async {
            let dmp = env.get(&pool.infra_pool(), &pool.name).await?;
            (dmp.data["status"]["infrastructureMachineKind"] == env.kinds.machine()).then_some(dmp)
        },
    )
    .await;
    assert_eq!(
        dmp.metadata.finalizers,
        Some(vec![DOCKER_MACHINE_POOL_FINALIZER.to_string()])
    );
    let (dmp, _) = env.wait_machine_pool_at(&pool, 0, PROVISION).await;
    assert_machine_pool(&env, &pool, &dmp, 0).await;

    // 0 -> 3, the manager killed (SIGKILL) once the first container is there.
    env.scale_machine_pool(&pool, 3).await;
    let (early, early_ids) = env
        .playing_machine_pool(
            &pool,
            eventually(PROVISION, "a first pool container", || async {
                let containers = pool.containers();
                let ids: Vec<String> = containers.iter().map(|c| container_id(c)).collect();
                // A container being created may not answer `docker inspect` yet.
                (!containers.is_empty() && ids.iter().all(|id| !id.is_empty()))
                    .then_some((containers, ids))
            }),
        )
        .await;
    env.stop_manager(true);
    env.start_manager();
    env.wait_ready().await;
    let (dmp, dms) = env.wait_machine_pool_at(&pool, 3, PROVISION).await;
    let containers = pool.containers();
    for (container, id) in early.iter().zip(&early_ids) {
        assert!(containers.contains(container), "{container} was kept");
        assert_eq!(&container_id(container), id, "{container} is the same");
    }
    let mut expected = containers.clone();
    expected.push(format!("{name}-lb"));
    expected.sort();
    assert_eq!(
        cluster_containers(&name),
        expected,
        "no duplicate container"
    );
    assert_pool(&pool, &dmp, &dms, &containers);
    assert_machine_pool(&env, &pool, &dmp, 3).await;
    let mut spread: Vec<String> = containers
        .iter()
        .map(|c| container_label(c, FAILURE_DOMAIN_LABEL))
        .collect();
    spread.sort();
    assert_eq!(spread, DOMAINS, "one container per failure domain");
    for container in &containers {
        assert_eq!(kubeadm_runs(container), 1, "{container} bootstrapped once");
    }
    let volumes: Vec<String> = containers
        .iter()
        .flat_map(|c| container_volumes(c))
        .collect();
    assert!(!volumes.is_empty(), "pool nodes have anonymous volumes");

    // 3 -> 1: the Machine annotated `cluster.x-k8s.io/delete-machine` goes first. It is the
    // oldest, which the default order (newest first) would keep.
    let mut machines = env.pool_objects(&capi("Machine"), &pool).await;
    machines.sort_by_key(|m| {
        (
            m.metadata.creation_timestamp.clone(),
            m.metadata.name.clone(),
        )
    });
    let victim = machines[0].metadata.name.clone().unwrap();
    env.merge_patch(
        &capi("Machine"),
        &victim,
        json!({"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: ""}}}),
    )
    .await;
    env.scale_machine_pool(&pool, 1).await;
    let (dmp, dms) = env.wait_machine_pool_at(&pool, 1, PROVISION).await;
    let remaining = pool.containers();
    assert!(
        !remaining.contains(&format!("{name}-{victim}")),
        "the annotated Machine's container is removed"
    );
    assert!(env.get(&capi("Machine"), &victim).await.is_none());
    assert!(
        containers.contains(&remaining[0]),
        "a surviving container is kept, not replaced"
    );
    assert_pool(&pool, &dmp, &dms, &remaining);
    assert_machine_pool(&env, &pool, &dmp, 1).await;

    // 1 -> 0.
    env.scale_machine_pool(&pool, 0).await;
    let (dmp, dms) = env.wait_machine_pool_at(&pool, 0, PROVISION).await;
    assert!(dms.is_empty());
    assert_eq!(
        dmp.data["spec"]["providerIDList"]
            .as_array()
            .map_or(0, Vec::len),
        0
    );
    // What core reads from a pool scaled to zero: a zero count (not its last one) and no IDs.
    assert_machine_pool(&env, &pool, &dmp, 0).await;
    assert_eq!(cluster_containers(&name), vec![format!("{name}-lb")]);
    // Never a second launch in a container, across the kill. (A manager killed right after it
    // launched one may not have logged it; the next one then follows it, and each container's
    // kubeadm ran once, as checked above.)
    let log = env.manager_log();
    for container in &containers {
        let launches = log
            .matches(&format!("Started bootstrap container={container} "))
            .count();
        assert!(launches <= 1, "{container}: {launches} bootstrap launches");
    }

    // Deleting the pool, then the cluster, as core does: nothing is left.
    env.delete_machine_pool_as_core(&pool, Duration::from_secs(90))
        .await;
    env.delete_cluster_as_core(&name, Duration::from_secs(90))
        .await;
    env.assert_nothing_left(&name, &volumes).await;
}

/// What a user sees of a pool settled at `containers.len()` replicas: running containers named
/// `<cluster>-worker-<suffix>`, one provisioned infrastructure machine each (owned by the pool
/// and by core's Machine), the pool's own provider ID (CAPD's `docker:////<cluster>-dmp-<pool>`
/// for a DockerMachinePool, `dev:////…` for a DevMachinePool), the sorted provider ID list, the
/// replica count and Ready conditions.
pub fn assert_pool(pool: &Pool, dmp: &DynamicObject, dms: &[DynamicObject], containers: &[String]) {
    let cluster = &pool.cluster;
    let prefix = format!("{cluster}-worker-");
    for container in containers {
        assert!(container.starts_with(&prefix), "{container}");
        assert!(container_running(container), "{container} runs");
    }
    let names: Vec<String> = dms
        .iter()
        .map(|dm| format!("{cluster}-{}", dm.metadata.name.as_deref().unwrap()))
        .collect();
    assert_eq!(
        names,
        containers,
        "one {} per container",
        pool.kinds.machine()
    );
    for dm in dms {
        let dm_name = dm.metadata.name.clone().unwrap();
        assert_eq!(
            dm.data["spec"]["providerID"],
            json!(format!("docker:////{cluster}-{dm_name}"))
        );
        assert_eq!(condition_state(dm, "Ready").unwrap().0, "True", "{dm_name}");
        let owners: Vec<(String, Option<bool>)> = dm
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| (r.kind.clone(), r.controller))
            .collect();
        assert!(
            owners.iter().any(|o| o.0 == pool.kinds.pool()),
            "{owners:?}"
        );
        assert!(
            owners.contains(&("Machine".into(), Some(true))),
            "{owners:?}"
        );
        let labels = dm.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(POOL_NAME_LABEL), Some(&label_value(&pool.name)));
    }
    let ids: Vec<String> = containers
        .iter()
        .map(|c| format!("docker:////{c}"))
        .collect();
    assert_eq!(dmp.data["spec"]["providerIDList"], json!(ids), "sorted IDs");
    let scheme = match pool.kinds {
        InfraKinds::Docker => "docker",
        InfraKinds::Dev => "dev",
    };
    assert_eq!(
        dmp.data["spec"]["providerID"],
        json!(format!("{scheme}:////{cluster}-dmp-{}", pool.name))
    );
    assert_eq!(
        dmp.data["status"]["infrastructureMachineKind"],
        json!(pool.kinds.machine())
    );
    assert_eq!(dmp.data["status"]["replicas"], json!(containers.len()));
    assert_eq!(dmp.data["status"]["ready"], json!(true));
    for type_ in ["Ready", "ReplicasReady"] {
        assert_eq!(
            condition_state(dmp, type_).map(|c| c.0).as_deref(),
            Some("True"),
            "{type_}: {:?}",
            condition(dmp, type_)
        );
    }
}

/// What a user sees of the MachinePool once core copied the settled pool's provider IDs
/// (`dmp`'s) and a count: `status.replicas` and as many provider IDs as the pool has replicas.
pub async fn assert_machine_pool(env: &Env, pool: &Pool, dmp: &DynamicObject, replicas: usize) {
    // Absent and empty are the same list to core.
    let list = |object: &DynamicObject| {
        object.data["spec"]["providerIDList"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let ids = list(dmp);
    let what = format!("the MachinePool to take the provider IDs {ids:?}");
    let machine_pool = env
        .playing_machine_pool(
            pool,
            eventually(Duration::from_secs(30), &what, || async {
                let machine_pool = env.get(&capi("MachinePool"), &pool.name).await?;
                // Core writes the count before (or with) the IDs; a fresh pool has none yet.
                (list(&machine_pool) == ids && !machine_pool.data["status"]["replicas"].is_null())
                    .then_some(machine_pool)
            }),
        )
        .await;
    assert_eq!(
        machine_pool.data["status"]["replicas"],
        json!(replicas),
        "MachinePool status.replicas"
    );
    assert_eq!(
        list(&machine_pool).len(),
        replicas,
        "MachinePool spec.providerIDList"
    );
}
