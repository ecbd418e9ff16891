//! `spec.bootstrapTimeout` on a real node: a bootstrap still running past it is reported (the
//! condition and a Warning Event) but not stopped, and is accepted when it completes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_past_its_timeout_is_reported_then_accepted_when_it_completes() {
    let mut env = Env::start("timeout").await;
    env.wait_ready().await;
    let name = env.cluster_name();
    env.provisioned_cluster(&name, json!({})).await;
    // Bootstrap takes about 10 s, the timeout is 2 s. The bootstrap data comes last, so the
    // machine has its timeout before bootstrap can start.
    env.create_secret("cp1-bootstrap", &cloud_config(10)).await;
    env.create_machine(&name, "cp1", true, None).await;
    env.merge_patch(
        &infra("DockerMachine"),
        "cp1",
        json!({"spec": {"bootstrapTimeout": "2s"}}),
    )
    .await;
    env.merge_patch(
        &capi("Machine"),
        "cp1",
        json!({"spec": {"bootstrap": {"dataSecretName": "cp1-bootstrap"}}}),
    )
    .await;

    let message = eventually(
        Duration::from_secs(90),
        "the timeout to be reported",
        || async {
            let dm = env.get(&infra("DockerMachine"), "cp1").await?;
            let c = condition(&dm, "BootstrapCompleted")?;
            (c["status"] == "False" && c["reason"] == "BootstrapTimedOut")
                .then(|| c["message"].as_str().unwrap_or_default().to_string())
        },
    )
    .await;
    assert!(
        message.starts_with("Bootstrap did not complete within 2s")
            && message.contains("still running command"),
        "{message}"
    );

    let dm = eventually(Duration::from_secs(90), "bootstrap to complete", || async {
        let dm = env.get(&infra("DockerMachine"), "cp1").await?;
        (condition_state(&dm, "BootstrapCompleted")? == ("True".into(), "Completed".into()))
            .then_some(dm)
    })
    .await;
    assert_eq!(condition_state(&dm, "Ready").unwrap().0, "True");

    // The Event of a transition is published right after the status write that shows it.
    let events = eventually(
        Duration::from_secs(10),
        "the BootstrapCompleted Event",
        || async {
            let events = env.events_about("DockerMachine", "cp1").await;
            events
                .iter()
                .any(|(kind, reason, _)| kind == "Normal" && reason == "BootstrapCompleted")
                .then_some(events)
        },
    )
    .await;
    assert!(
        events
            .iter()
            .any(|(kind, reason, _)| kind == "Warning" && reason == "BootstrapTimedOut"),
        "{events:?}"
    );

    let container = format!("{name}-cp1");
    let status = docker_exec(
        &container,
        &["cat", "/run/cluster-api/capd-bootstrap/status"],
    );
    assert!(
        status.contains("state=succeeded"),
        "the runner was not stopped: {status}"
    );
    let (inits, kubeadm) = common::kubeadm_inits(&container);
    assert_eq!(inits, 1, "kubeadm ran exactly once: {kubeadm}");
}
