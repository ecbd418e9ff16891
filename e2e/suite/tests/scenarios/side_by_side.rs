//! Scenario 8: two clusters in two namespaces, one manager: each cluster's containers carry its
//! own label, each load balancer routes to its own control plane only, and deleting one leaves
//! the other working.

use std::time::Duration;

use capd_e2e::tls::https_get_until;
use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_in_two_namespaces_keep_to_their_own_containers() {
    if !capd_e2e::installed::runs_with_stand_in(
        "two_clusters_in_two_namespaces_keep_to_their_own_containers",
    ) {
        return;
    }
    let mut env = Env::scenario("side", &[]).await;
    let mut clusters = Vec::new();
    for prefix in ["e2e-a-", "e2e-b-"] {
        env.namespace = env.create_namespace(prefix).await;
        let name = env.cluster_name();
        env.create_kubeconfig_secret(&name).await;
        env.provisioned_cluster(&name, json!({})).await;
        env.create_secret("cp1-bootstrap", &cloud_config(0)).await;
        env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
            .await;
        clusters.push((env.namespace.clone(), name));
    }
    for (namespace, name) in &clusters {
        env.namespace = namespace.clone();
        let dm = env.wait_machine_provisioned("cp1", PROVISION).await;
        assert_eq!(
            dm.data["spec"]["providerID"],
            json!(format!("docker:////{name}-cp1"))
        );
        assert_eq!(
            cluster_containers(name),
            vec![format!("{name}-cp1"), format!("{name}-lb")]
        );
        let lb = format!("{name}-lb");
        let own = format!("{name}-cp1");
        eventually(
            Duration::from_secs(30),
            "the load balancer's backend",
            || async {
                let backends = haproxy_backends(&haproxy_config(&lb));
                (backends.len() == 1 && backends[0].0 == own).then_some(())
            },
        )
        .await;
        let port = published_port(&lb, 6443).unwrap();
        let answer = https_get_until(port, "/healthz", Duration::from_secs(30), |a| {
            a.status == 200
        })
        .await
        .unwrap();
        assert_eq!(answer.header("X-Capd-Node"), Some(own.as_str()));
    }

    // Deleting the first cluster leaves the second one's containers and endpoint working.
    let (namespace, first) = clusters[0].clone();
    env.namespace = namespace;
    env.delete_cluster_as_core(&first, Duration::from_secs(90))
        .await;
    assert!(cluster_containers(&first).is_empty());
    let (_, second) = &clusters[1];
    assert_eq!(
        cluster_containers(second),
        vec![format!("{second}-cp1"), format!("{second}-lb")]
    );
    let port = published_port(&format!("{second}-lb"), 6443).unwrap();
    let answer = https_get_until(port, "/healthz", Duration::from_secs(30), |a| {
        a.status == 200
    })
    .await
    .unwrap();
    assert_eq!(answer.status, 200);
}
