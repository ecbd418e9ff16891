//! Scenario 6: bad input (a missing bootstrap secret, malformed cloud-init, an image that does
//! not exist, a failing bootstrap command) ends in a clear condition and Event each, while the
//! manager keeps serving a healthy cluster, and deleting the bad machines leaves nothing behind.

use std::time::Duration;

use capd_e2e::*;
use kube::api::DynamicObject;
use serde_json::json;

use crate::PROVISION;

/// Waits until `condition` of a DockerMachine is False with a message starting `prefix`.
async fn reported(env: &Env, machine: &str, condition_type: &str, prefix: &str) -> DynamicObject {
    eventually(
        PROVISION,
        &format!("{machine}: {condition_type} False '{prefix}...'"),
        || async {
            let dm = env.get(&infra("DockerMachine"), machine).await?;
            let c = condition(&dm, condition_type)?;
            (c["status"] == "False" && c["message"].as_str()?.starts_with(prefix)).then_some(dm)
        },
    )
    .await
}

async fn warned(env: &Env, machine: &str, reason: &str) {
    eventually(
        Duration::from_secs(30),
        &format!("a Warning {reason} event for {machine}"),
        || async {
            env.events_about("DockerMachine", machine)
                .await
                .iter()
                .any(|(t, r, _)| t == "Warning" && r == reason)
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_reported_while_other_clusters_are_served_and_nothing_leaks() {
    if !capd_e2e::installed::runs_with_stand_in(
        "bad_input_is_reported_while_other_clusters_are_served_and_nothing_leaks",
    ) {
        return;
    }
    let mut env = Env::scenario("bad", &[]).await;
    let bad = env.cluster_name();
    env.create_kubeconfig_secret(&bad).await;
    env.provisioned_cluster(&bad, json!({})).await;
    env.mark_control_plane_initialized(&bad).await;
    let ns = env.namespace.clone();

    env.create_machine(&bad, "nosecret", false, Some("nosecret-bootstrap"))
        .await;
    env.create_secret("malformed-bootstrap", "#cloud-config\nruncmd: [unclosed\n")
        .await;
    env.create_machine(&bad, "malformed", false, Some("malformed-bootstrap"))
        .await;
    env.create_secret("noimage-bootstrap", &cloud_config(0))
        .await;
    let spec = MachineSpec {
        control_plane: false,
        bootstrap_secret: Some("noimage-bootstrap".into()),
        failure_domain: None,
        image: Some("capd-test/does-not-exist:0".into()),
        ..MachineSpec::default()
    };
    env.create_machine_with(&bad, "noimage", &spec).await;
    env.create_secret(
        "failing-bootstrap",
        &cloud_config_running(0, "sh -c 'echo kubeadm preflight failed >&2; exit 3'"),
    )
    .await;
    env.create_machine(&bad, "failing", false, Some("failing-bootstrap"))
        .await;

    // Meanwhile, a healthy cluster is served.
    let good = env.cluster_name();
    env.create_kubeconfig_secret(&good).await;
    env.provisioned_cluster(&good, json!({})).await;
    env.create_secret("good-bootstrap", &cloud_config(0)).await;
    env.create_machine(&good, "good", true, Some("good-bootstrap"))
        .await;
    env.wait_machine_provisioned("good", PROVISION).await;

    let dm = reported(
        &env,
        "nosecret",
        "BootstrapCompleted",
        "Bootstrap data secret",
    )
    .await;
    assert_eq!(
        condition(&dm, "BootstrapCompleted").unwrap()["message"],
        json!(format!(
            "Bootstrap data secret {ns}/nosecret-bootstrap not found"
        ))
    );
    warned(&env, "nosecret", "BootstrapNotCompleted").await;

    reported(
        &env,
        "malformed",
        "BootstrapCompleted",
        "Invalid bootstrap data",
    )
    .await;
    warned(&env, "malformed", "BootstrapNotCompleted").await;

    let dm = reported(
        &env,
        "noimage",
        "ContainerProvisioned",
        "Failed to create container",
    )
    .await;
    let message = condition(&dm, "ContainerProvisioned").unwrap()["message"].clone();
    assert!(
        message.as_str().unwrap().contains("does-not-exist"),
        "the message names the image: {message}"
    );
    assert!(!cluster_containers(&bad).contains(&format!("{bad}-noimage")));
    eventually(
        Duration::from_secs(30),
        "a Warning event for noimage",
        || async {
            env.events_about("DockerMachine", "noimage")
                .await
                .iter()
                .any(|(t, _, m)| t == "Warning" && m.contains("does-not-exist"))
                .then_some(())
        },
    )
    .await;

    let dm = reported(&env, "failing", "BootstrapCompleted", "").await;
    eventually(
        PROVISION,
        "the failing bootstrap to be reported",
        || async {
            let dm = env.get(&infra("DockerMachine"), "failing").await?;
            let c = condition(&dm, "BootstrapCompleted")?;
            (c["status"] == "False" && c["reason"] == "Failed").then_some(())
        },
    )
    .await;
    let _ = dm;
    warned(&env, "failing", "BootstrapFailed").await;
    assert_eq!(kubeadm_runs(&format!("{bad}-failing")), 0);

    // The healthy cluster is unaffected; deleting the bad one leaves nothing behind.
    assert_eq!(
        condition_state(
            &env.get(&infra("DockerMachine"), "good").await.unwrap(),
            "Ready"
        )
        .unwrap()
        .0,
        "True"
    );
    env.delete_cluster_as_core(&bad, Duration::from_secs(90))
        .await;
    assert_eq!(cluster_containers(&bad), Vec::<String>::new());
    assert_eq!(
        cluster_containers(&good),
        vec![format!("{good}-good"), format!("{good}-lb")]
    );
}
