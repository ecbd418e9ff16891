//! Fault injection: error statuses with Retry-After, cut connections, dropped watches, and a
//! restart that keeps the stored objects.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use testapiserver::Handle;
use testapiserver::faults::Fault;

use crate::common::{cm, config, start, status};

/// A client that does not retry 429/503/504 itself, so the test sees each answer.
async fn plain_client(handle: &Handle) -> Client {
    let mut config = config(handle).await;
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

#[tokio::test]
async fn injected_statuses_answer_as_kube_apiserver_would_then_let_requests_through() {
    let (handle, _) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(plain_client(&handle).await, "default");
    let conflict = handle.inject(Fault::status("create", "configmaps", 409, 1));
    handle.inject(Fault::status("get", "configmaps", 429, 1).retry_after(3));
    handle.inject(Fault::status("get", "configmaps", 500, 1));

    let refused = status(
        cms.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"));
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();

    let throttled = status(cms.get("a").await.unwrap_err());
    assert_eq!(
        (throttled.code, throttled.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(throttled.details.map(|d| d.retry_after_seconds), Some(3));
    let internal = status(cms.get("a").await.unwrap_err());
    assert_eq!(
        (internal.code, internal.reason.as_str()),
        (500, "InternalError")
    );
    assert_eq!(
        cms.get("a").await.unwrap().metadata.name.as_deref(),
        Some("a")
    );

    let faulted: Vec<bool> = handle
        .fault_hits(conflict)
        .iter()
        .map(|h| h.faulted)
        .collect();
    assert_eq!(
        faulted,
        [true, false],
        "the fault answered once, then let one through"
    );
    handle.clear_faults();
    assert!(handle.fault_hits(conflict).is_empty());
}

#[tokio::test]
async fn a_cut_connection_fails_the_request_and_the_next_one_is_served() {
    let (handle, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    handle.inject(Fault::close_connection("list", "configmaps", 1));
    let error = cms.list(&Default::default()).await.unwrap_err();
    assert!(
        !matches!(error, kube::Error::Api(_)),
        "a transport error, not an answer: {error:?}"
    );
    assert_eq!(cms.list(&Default::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn dropped_watches_end_and_a_new_watch_resumes_from_its_resource_version() {
    let (handle, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = a.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    handle.drop_watches();
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the watch ends when dropped");
    assert!(ended.is_none(), "no event, the stream ended: {ended:?}");

    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    let mut resumed = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match resumed.next().await {
        Some(Ok(WatchEvent::Added(object))) => {
            assert_eq!(object.metadata.name.as_deref(), Some("b"))
        }
        other => panic!("expected b to be replayed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_restart_keeps_objects_refuses_connections_meanwhile_and_expires_older_watches() {
    let (mut handle, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let a = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let before = a.metadata.resource_version.clone().unwrap();
    // The restart happens at a later resourceVersion than `before`.
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();

    let during = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cms.get("a").await
    };
    let (restarted, during) = tokio::join!(handle.restart(Duration::from_secs(2)), during);
    restarted.unwrap();
    let refused = during.unwrap_err();
    assert!(
        !matches!(refused, kube::Error::Api(_)),
        "no answer while down: {refused:?}"
    );

    let kept = cms.get("a").await.unwrap();
    assert_eq!(kept.metadata.uid, a.metadata.uid);
    assert_eq!(
        kept.metadata.resource_version.as_deref(),
        Some(before.as_str())
    );

    let mut old = cms
        .watch(&WatchParams::default(), &before)
        .await
        .unwrap()
        .boxed();
    match old.next().await {
        Some(Ok(WatchEvent::Error(error))) => assert_eq!(error.code, 410, "{error:?}"),
        other => panic!("expected 410 Expired for a watch from before the restart, got {other:?}"),
    }
    let now = handle.resource_version().await.to_string();
    let mut fresh = cms
        .watch(&WatchParams::default(), &now)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    match fresh.next().await {
        Some(Ok(WatchEvent::Added(object))) => {
            assert_eq!(object.metadata.name.as_deref(), Some("c"))
        }
        other => panic!("expected c, got {other:?}"),
    }
}
