//! Scenario 3: the manager killed (SIGKILL) during bootstrap and during deletion, then
//! restarted: one container, one bootstrap, flows complete. Our finalizers deleted by hand come
//! back. (Owner references are Cluster API core's to restore; the suite plays core, so that part
//! is not ours to prove.)

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_manager_resumes_without_duplicates_and_finalizers_come_back() {
    if !capd_e2e::installed::runs_with_stand_in(
        "a_killed_manager_resumes_without_duplicates_and_finalizers_come_back",
    ) {
        return;
    }
    let mut env = Env::scenario("resil", &[]).await;
    let name = env.cluster_name();
    env.create_kubeconfig_secret(&name).await;
    env.provisioned_cluster(&name, json!({})).await;
    let container = format!("{name}-cp1");

    // Killed while bootstrap runs in the node.
    env.create_secret("cp1-bootstrap", &cloud_config(6)).await;
    env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    env.wait_bootstrap_running("cp1", PROVISION).await;
    let id = container_id(&container);
    env.stop_manager(true);
    env.start_manager();
    env.wait_ready().await;
    let dm = env.wait_machine_provisioned("cp1", PROVISION).await;
    assert_eq!(condition_state(&dm, "Ready").unwrap().0, "True");
    assert_eq!(container_id(&container), id, "the same container");
    assert_eq!(
        cluster_containers(&name),
        vec![container.clone(), format!("{name}-lb")]
    );
    assert_eq!(kubeadm_runs(&container), 1, "no second bootstrap");

    // Our finalizers, removed by hand, are restored.
    for (kind, object, finalizer) in [
        ("DockerMachine", "cp1", DOCKER_MACHINE_FINALIZER),
        ("DockerCluster", name.as_str(), DOCKER_CLUSTER_FINALIZER),
    ] {
        env.merge_patch(
            &infra(kind),
            object,
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
        eventually(
            Duration::from_secs(30),
            &format!("the {kind} finalizer to be restored"),
            || async {
                let o = env.get(&infra(kind), object).await?;
                o.metadata
                    .finalizers?
                    .iter()
                    .any(|f| f == finalizer)
                    .then_some(())
            },
        )
        .await;
    }

    // Killed right after core asks for deletion; the next manager finishes it.
    env.begin_machine_deletion("cp1").await;
    env.delete(&infra("DockerMachine"), "cp1").await;
    env.stop_manager(true);
    env.start_manager();
    env.wait_ready().await;
    env.finish_machine_deletion("cp1", Duration::from_secs(60))
        .await;
    assert_eq!(cluster_containers(&name), vec![format!("{name}-lb")]);
    env.delete(&infra("DockerCluster"), &name).await;
    env.stop_manager(true);
    env.start_manager();
    env.wait_gone(&infra("DockerCluster"), &name, Duration::from_secs(60))
        .await;
    assert_eq!(cluster_containers(&name), Vec::<String>::new());
    assert!(!network_exists(&env.network));
    let log = env.manager_log();
    assert_eq!(
        log.matches("Started bootstrap").count(),
        1,
        "one bootstrap launch"
    );
}
