//! Scenario 5: a provisioned cluster paused by core: nothing changes in Docker or in status
//! (but the Paused condition) while paused, and work resumes after. An externally managed
//! DockerCluster beside it is never touched.

use std::time::Duration;

use capd_e2e::*;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::PROVISION;

/// The status without the Paused condition (the one thing pausing may change).
fn status_but_paused(object: &DynamicObject) -> Value {
    let mut status = object.data["status"].clone();
    for path in ["/conditions", "/deprecated/v1beta1/conditions"] {
        if let Some(list) = status.pointer_mut(path).and_then(Value::as_array_mut) {
            list.retain(|c| c["type"] != "Paused");
        }
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_is_frozen_then_resumes_and_an_external_one_is_untouched() {
    if !capd_e2e::installed::runs_with_stand_in(
        "a_paused_cluster_is_frozen_then_resumes_and_an_external_one_is_untouched",
    ) {
        return;
    }
    let mut env = Env::scenario("pause", &[]).await;
    let name = env.cluster_name();
    env.create_kubeconfig_secret(&name).await;
    env.provisioned_cluster(&name, json!({})).await;
    env.create_secret("cp1-bootstrap", &cloud_config(0)).await;
    env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    env.wait_machine_provisioned("cp1", PROVISION).await;
    env.mark_control_plane_initialized(&name).await;

    // An externally managed DockerCluster: someone else's infrastructure.
    let external = env.cluster_name();
    let external_cluster = env.create_cluster(&external, false).await;
    let created = env
        .create_docker_cluster(
            &external_cluster,
            json!({"cluster.x-k8s.io/managed-by": "someone-else"}),
        )
        .await;

    env.merge_patch(&capi("Cluster"), &name, json!({"spec": {"paused": true}}))
        .await;
    let paused = |kind: &'static str, object: String| {
        let env = &env;
        async move {
            eventually(Duration::from_secs(30), "the Paused condition", || async {
                let o = env.get(&infra(kind), &object).await?;
                (condition_state(&o, "Paused")? == ("True".into(), "Paused".into())).then_some(o)
            })
            .await
        }
    };
    let dc = paused("DockerCluster", name.clone()).await;
    let dm = paused("DockerMachine", "cp1".into()).await;
    let containers = cluster_containers(&name);
    let ids: Vec<String> = containers.iter().map(|c| container_id(c)).collect();
    let lb_config = haproxy_config(&format!("{name}-lb"));

    // While paused: a new worker gets no container, nothing changes.
    env.create_secret("md1-bootstrap", &cloud_config(0)).await;
    env.create_machine(&name, "md1", false, Some("md1-bootstrap"))
        .await;
    paused("DockerMachine", "md1".into()).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        cluster_containers(&name),
        containers,
        "no container while paused"
    );
    assert_eq!(
        containers
            .iter()
            .map(|c| container_id(c))
            .collect::<Vec<_>>(),
        ids
    );
    assert_eq!(haproxy_config(&format!("{name}-lb")), lb_config);
    let dc_now = env.get(&infra("DockerCluster"), &name).await.unwrap();
    let dm_now = env.get(&infra("DockerMachine"), "cp1").await.unwrap();
    assert_eq!(
        dc_now.metadata.resource_version,
        dc.metadata.resource_version
    );
    assert_eq!(
        dm_now.metadata.resource_version,
        dm.metadata.resource_version
    );
    assert_eq!(status_but_paused(&dc_now), status_but_paused(&dc));
    let md1 = env.get(&infra("DockerMachine"), "md1").await.unwrap();
    assert!(md1.data["spec"]["providerID"].is_null());

    // Resumed: the worker is provisioned, Paused is False everywhere.
    env.merge_patch(&capi("Cluster"), &name, json!({"spec": {"paused": false}}))
        .await;
    let md1 = env.wait_machine_provisioned("md1", PROVISION).await;
    assert_eq!(condition_state(&md1, "Paused").unwrap().0, "False");
    eventually(Duration::from_secs(30), "the cluster to resume", || async {
        let dc = env.get(&infra("DockerCluster"), &name).await?;
        (condition_state(&dc, "Paused")?.0 == "False").then_some(())
    })
    .await;
    assert_eq!(kubeadm_runs(&format!("{name}-md1")), 1);

    // The externally managed DockerCluster was never written to and has no containers.
    let untouched = env.get(&infra("DockerCluster"), &external).await.unwrap();
    assert_eq!(
        untouched.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(untouched.data["status"].is_null());
    assert!(cluster_containers(&external).is_empty());
}
