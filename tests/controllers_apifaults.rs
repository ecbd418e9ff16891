//! The manager against an unreliable management API server (the test API server's fault
//! injection): conflicts, server errors, timeouts and throttling on its status writes, cut
//! connections, dropped watches and a restart. Each time the objects converge, nothing is
//! created twice, the API server's `Retry-After` is waited out, and deletion leaves nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;
use testapiserver::faults::{Fault, Hit};

const PROVISION: Duration = Duration::from_secs(90);
const STATUS: &str = "dockerclusters.infrastructure.cluster.x-k8s.io/status";
const DOCKER_CLUSTERS: &str = "dockerclusters.infrastructure.cluster.x-k8s.io";

/// The gap between the request a fault answered and the next request it saw.
fn wait_after_answer(hits: &[Hit]) -> Duration {
    let answered = hits
        .iter()
        .position(|h| h.faulted)
        .expect("the fault answered");
    let next = hits.get(answered + 1).expect("the request was tried again");
    next.at.duration_since(hits[answered].at)
}

fn answered(hits: &[Hit]) -> usize {
    hits.iter().filter(|h| h.faulted).count()
}

/// The DockerCluster is Ready with one load balancer, and its status says so.
async fn assert_provisioned_once(env: &Env, name: &str) {
    let dc = env.wait_docker_cluster_provisioned(name, PROVISION).await;
    assert_eq!(
        condition_state(&dc, "Ready"),
        Some(("True".into(), "Ready".into())),
        "the last status write was not lost"
    );
    assert_eq!(
        cluster_containers(name),
        vec![format!("{name}-lb")],
        "one load balancer, never a second"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_survive_conflicts_server_errors_timeouts_and_throttling() {
    let mut env = Env::start("apierr").await;
    env.wait_ready().await;
    let name = &env.cluster_name();
    let api = env.mgmt();
    // Every status write of the DockerCluster meets, in turn: a server error that asks for a
    // 3 s wait (the first failure, whose own backoff is 0.5 s), two conflicts, a gateway
    // timeout, and a throttle that asks for 2 s.
    let internal = api.inject(Fault::status("patch", STATUS, 500, 1).retry_after(3));
    let conflict = api.inject(Fault::status("patch", STATUS, 409, 2));
    let timeout = api.inject(Fault::status("patch", STATUS, 504, 1));
    let throttle = api.inject(Fault::status("patch", STATUS, 429, 1).retry_after(2));

    let cluster = env.create_cluster(name, false).await;
    env.create_docker_cluster(&cluster, json!({})).await;
    assert_provisioned_once(&env, name).await;

    for (fault, times) in [(conflict, 2), (internal, 1), (timeout, 1), (throttle, 1)] {
        assert_eq!(answered(&api.fault_hits(fault)), times, "fault {fault}");
    }
    // kube's client waits out a 429's Retry-After itself; our requeue waits out the 500's,
    // which the client does not retry. Lower bounds: a slow machine only makes them longer.
    let after_throttle = wait_after_answer(&api.fault_hits(throttle));
    assert!(
        after_throttle >= Duration::from_secs(2),
        "{after_throttle:?}"
    );
    let after_internal = wait_after_answer(&api.fault_hits(internal));
    assert!(
        after_internal >= Duration::from_secs(3),
        "{after_internal:?}"
    );

    // The failed reconciles are visible to the user as Events.
    env.wait_event("DockerCluster", name, ("Warning", "Conflict"), "")
        .await;
    env.wait_event("DockerCluster", name, ("Warning", "ApiserverError"), "")
        .await;

    env.delete_cluster_as_core(name, PROVISION).await;
    env.assert_nothing_left(name, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_dropped_watches_and_a_restart_are_survived() {
    let mut env = Env::start("apidown").await;
    env.wait_ready().await;

    // A status write whose connection is cut before the answer arrives.
    let cut = env
        .mgmt()
        .inject(Fault::close_connection("patch", STATUS, 1));
    let first = &env.cluster_name();
    let cluster = env.create_cluster(first, false).await;
    env.create_docker_cluster(&cluster, json!({})).await;
    assert_provisioned_once(&env, first).await;
    assert_eq!(answered(&env.mgmt().fault_hits(cut)), 1);

    // Watches end under the manager: it must watch again, or the next object goes unseen.
    env.mgmt().drop_watches();
    let second = &env.cluster_name();
    let cluster = env.create_cluster(second, false).await;
    env.create_docker_cluster(&cluster, json!({})).await;
    assert_provisioned_once(&env, second).await;

    // The API server restarts over the same objects: while it is down the manager cannot
    // reach it, and afterwards its watches from before the restart are expired, so it lists
    // again and carries on.
    let lists = |env: &Env| {
        env.mgmt()
            .request_counts()
            .get(&format!("list {DOCKER_CLUSTERS}"))
            .copied()
            .unwrap_or_default()
    };
    // Something else changes, so the last DockerCluster the manager saw is older than the
    // restart (as on any busy management cluster).
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let unrelated = serde_json::from_value(json!({"metadata": {"name": "unrelated"}})).unwrap();
    config_maps
        .create(&Default::default(), &unrelated)
        .await
        .unwrap();
    config_maps
        .delete("unrelated", &Default::default())
        .await
        .unwrap();
    let lists_before = lists(&env);
    env.mgmt_mut()
        .restart(Duration::from_secs(3))
        .await
        .unwrap();
    let third = &env.cluster_name();
    let cluster = env.create_cluster(third, false).await;
    env.create_docker_cluster(&cluster, json!({})).await;
    assert_provisioned_once(&env, third).await;
    assert!(
        lists(&env) > lists_before,
        "the manager listed DockerClusters again after the restart"
    );
    for name in [first, second] {
        assert_provisioned_once(&env, name).await;
    }

    for name in [first, second, third] {
        env.delete_cluster_as_core(name, PROVISION).await;
    }
    for name in [first, second, third] {
        assert_eq!(cluster_containers(name), Vec::<String>::new());
    }
    env.assert_nothing_left(third, &[]).await;
}
