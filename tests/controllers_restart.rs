//! A manager that dies in the middle of bootstrap: the next one follows the bootstrap that is
//! still running in the node instead of starting another one, and never creates a second
//! container.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_restarted_during_bootstrap_never_bootstraps_twice() {
    let mut env = Env::start("restart").await;
    env.wait_ready().await;
    let name = env.cluster_name();
    env.provisioned_cluster(&name, json!({})).await;
    // Bootstrap takes a while: the manager is killed while it runs.
    env.create_secret("cp1-bootstrap", &cloud_config(8)).await;
    env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    let container = format!("{name}-cp1");
    env.wait_bootstrap_running("cp1", Duration::from_secs(90))
        .await;
    let container_id = docker(&["inspect", "--format", "{{.Id}}", &container]).1;
    env.stop_manager(true);

    env.start_manager();
    env.wait_ready().await;
    let dm = eventually(Duration::from_secs(90), "bootstrap to complete", || async {
        let dm = env.get(&infra("DockerMachine"), "cp1").await?;
        (condition_state(&dm, "BootstrapCompleted")? == ("True".into(), "Completed".into()))
            .then_some(dm)
    })
    .await;
    assert_eq!(condition_state(&dm, "Ready").unwrap().0, "True");
    assert_eq!(
        cluster_containers(&name),
        vec![format!("{name}-cp1"), format!("{name}-lb")]
    );
    assert_eq!(
        docker(&["inspect", "--format", "{{.Id}}", &container]).1,
        container_id,
        "the same container, not a new one"
    );
    let (inits, kubeadm) = common::kubeadm_inits(&container);
    assert_eq!(inits, 1, "kubeadm ran exactly once: {kubeadm}");
    let status = docker_exec(
        &container,
        &["cat", "/run/cluster-api/capd-bootstrap/status"],
    );
    assert!(status.contains("state=succeeded"), "{status}");
    assert!(
        !docker(&[
            "exec",
            &container,
            "test",
            "-e",
            "/run/cluster-api/capd-bootstrap/run.sh"
        ])
        .0,
        "the script holding the bootstrap data is removed once done"
    );
    let log = env.manager_log();
    assert_eq!(
        log.matches("Started bootstrap").count(),
        1,
        "only the first manager launched bootstrap"
    );
    assert!(
        log.contains("Following a bootstrap started earlier"),
        "{log}"
    );
}
