//! Watches: resume from a resourceVersion, 410 Expired, bookmarks, and kube-runtime's watcher,
//! reflector and Controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use testapiserver::Options;

use crate::common::{cm, eventually, start, start_with};

#[tokio::test]
async fn watch_resumes_after_a_resource_version() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let stream = cms
        .watch(&WatchParams::default().timeout(2), &rv)
        .await
        .unwrap();
    let names: Vec<String> = stream
        .take(2)
        .map(|e| match e.unwrap() {
            WatchEvent::Added(o) => o.metadata.name.unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
        .await;
    assert_eq!(names, vec!["b", "c"]);
}

#[tokio::test]
async fn watch_from_a_compacted_version_gets_410_expired() {
    let (_h, client) = start_with(Options {
        watch_history: 2,
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    for n in ["b", "c", "d", "e"] {
        cms.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(2), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version:"),
                "{}",
                e.message
            );
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
}

/// The first event of a watch from `rv`.
async fn first_event<K>(api: &Api<K>, rv: &str) -> WatchEvent<K>
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + 'static,
{
    let mut stream = api
        .watch(&WatchParams::default().timeout(2), rv)
        .await
        .unwrap()
        .boxed();
    stream.next().await.unwrap().unwrap()
}

/// Code, reason and message of an ERROR event.
fn expired<K: std::fmt::Debug>(event: WatchEvent<K>) -> (u16, String, String) {
    match event {
        WatchEvent::Error(e) => (e.code, e.reason, e.message),
        other => panic!("expected an ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_from_before_the_server_started_gets_410_expired() {
    let (h, client) = start().await;
    let started = h.resource_version().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let rv = namespaces
        .get("default")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    assert!(
        rv.parse::<u64>().unwrap() < started,
        "seeded before the start"
    );
    assert_eq!(
        expired(first_event(&namespaces, &rv).await),
        (
            410,
            "Expired".to_string(),
            format!("too old resource version: {rv} ({started})")
        )
    );
    // Configmaps have no history at all: anything before the start is still too old.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(
        expired(first_event(&cms, "1").await).2,
        format!("too old resource version: 1 ({started})")
    );
    // From the start itself, a watch gets the changes after it.
    let watch = tokio::spawn({
        let cms = cms.clone();
        async move { first_event(&cms, &started.to_string()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    cms.create(&PostParams::default(), &cm("after-start"))
        .await
        .unwrap();
    match watch.await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("after-start")),
        other => panic!("expected ADDED, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_watcher_relists_after_410_expired() {
    let (_h, client) = start_with(Options {
        watch_history: 2,
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    // The watch sees no event and no bookmark, so it resumes from its list's resourceVersion,
    // which the unlabelled writes below push out of the history.
    let config = watcher::Config::default()
        .labels("watched=yes")
        .timeout(1)
        .disable_bookmarks();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(watcher(cms.clone(), config).for_each(move |e| {
        let _ = tx.send(e);
        async {}
    }));
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a watcher event in time")
            .expect("the watcher runs")
    };
    assert!(matches!(next().await, Ok(watcher::Event::Init)));
    assert!(matches!(next().await, Ok(watcher::Event::InitDone)));
    for n in ["x1", "x2", "x3"] {
        cms.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    match next().await {
        Err(watcher::Error::WatchError(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version:"),
                "{}",
                status.message
            );
        }
        other => panic!("expected the 410, got {other:?}"),
    }
    assert!(
        matches!(next().await, Ok(watcher::Event::Init)),
        "it relists"
    );
    assert!(matches!(next().await, Ok(watcher::Event::InitDone)));
    let mut watched = cm("watched");
    watched.metadata.labels = Some([("watched".to_string(), "yes".to_string())].into());
    cms.create(&PostParams::default(), &watched).await.unwrap();
    match next().await {
        Ok(watcher::Event::Apply(o)) => assert_eq!(o.metadata.name.as_deref(), Some("watched")),
        other => panic!("expected the new object, got {other:?}"),
    }
    task.abort();
}

#[tokio::test]
async fn bookmarks_arrive_when_asked() {
    let (_h, client) = start_with(Options {
        bookmark_interval: Duration::from_millis(100),
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(3), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => assert!(
            b.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap()
        ),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn a_metadata_only_watch_gets_its_bookmarks_as_partial_object_metadata() {
    let (_h, client) = start_with(Options {
        bookmark_interval: Duration::from_millis(100),
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    // What controller-runtime's metadata informers ask for (client-go decodes every event of such
    // a watch, bookmarks included, as PartialObjectMetadata).
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1"
    ))
    .header(
        "accept",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    )
    .body(Vec::new())
    .unwrap();
    let text = client.request_text(request).await.unwrap();
    let bookmarks: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "BOOKMARK")
        .collect();
    assert!(!bookmarks.is_empty(), "{text}");
    for bookmark in bookmarks {
        assert_eq!(
            (
                &bookmark["object"]["kind"],
                &bookmark["object"]["apiVersion"]
            ),
            (
                &serde_json::json!("PartialObjectMetadata"),
                &serde_json::json!("meta.k8s.io/v1")
            ),
            "{bookmark}"
        );
    }
}

#[tokio::test]
async fn watcher_and_reflector_follow_changes() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(cms.clone(), watcher::Config::default()))
        .applied_objects()
        .try_for_each(|_| async { Ok(()) });
    let task = tokio::spawn(stream);
    reader.wait_until_ready().await.unwrap();
    cms.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    eventually("reflector sees both objects", || {
        let reader = reader.clone();
        async move { reader.state().len() == 2 }
    })
    .await;
    cms.delete("before", &Default::default()).await.unwrap();
    eventually("reflector drops the deleted object", || {
        let reader = reader.clone();
        async move { reader.state().len() == 1 }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("x")).await.unwrap();
    let (reader, writer) = reflector::store();
    let task = tokio::spawn(
        reflector(
            writer,
            watcher(cms.clone(), watcher::Config::default().streaming_lists()),
        )
        .try_for_each(|_| async { Ok(()) }),
    );
    tokio::time::timeout(Duration::from_secs(5), reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 1);
    task.abort();
}

#[tokio::test]
async fn metadata_watcher_gets_partial_object_metadata() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("meta"))
        .await
        .unwrap();
    let listed = cms.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let types = listed.items[0].types.clone().unwrap();
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
    let metadata_only: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(cms.clone().into_client(), "default");
    let (reader, writer) = reflector::store();
    let task = tokio::spawn(
        reflector(writer, watcher(metadata_only, watcher::Config::default()))
            .try_for_each(|_| async { Ok(()) }),
    );
    tokio::time::timeout(Duration::from_secs(5), reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    cms.create(&PostParams::default(), &cm("meta2"))
        .await
        .unwrap();
    eventually("the metadata reflector sees both", || {
        let reader = reader.clone();
        async move { reader.state().len() == 2 }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn controller_reconciles_objects() {
    let (_h, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let seen = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(
            |obj: Arc<ConfigMap>, ctx: Arc<(Api<ConfigMap>, Arc<AtomicUsize>)>| async move {
                let (api, seen) = &*ctx;
                let mut labelled = (*obj).clone();
                labelled.metadata.managed_fields = None;
                labelled
                    .metadata
                    .labels
                    .get_or_insert_default()
                    .insert("reconciled".into(), "yes".into());
                api.replace(
                    obj.metadata.name.as_deref().unwrap_or_default(),
                    &PostParams::default(),
                    &labelled,
                )
                .await?;
                seen.fetch_add(1, Ordering::SeqCst);
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_millis(100)),
            Arc::new((cms.clone(), seen.clone())),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    cms.create(&PostParams::default(), &cm("ctl"))
        .await
        .unwrap();
    eventually("the controller labelled the object", || {
        let cms = cms.clone();
        async move {
            cms.get("ctl")
                .await
                .ok()
                .and_then(|c| c.metadata.labels)
                .is_some_and(|l| l.contains_key("reconciled"))
        }
    })
    .await;
    assert!(seen.load(Ordering::SeqCst) >= 1);
    task.abort();
}

/// The list and watch rules shared with the in-memory backend: kube-apiserver's 422 for
/// `sendInitialEvents` on a list, and the one `ERROR` event (504, `ResourceVersionTooLarge`) for
/// initial events asked from beyond the current resourceVersion, after which client-go streams
/// again from `""`.
#[tokio::test]
async fn illegal_or_future_streaming_lists_are_refused_as_kube_apiserver_refuses_them() {
    let (_h, client) = start().await;
    let request =
        http::Request::get("/api/v1/namespaces/default/configmaps?sendInitialEvents=true")
            .body(Vec::new())
            .unwrap();
    match client.request::<serde_json::Value>(request).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert_eq!(
                status.message,
                "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
            );
        }
        other => panic!("a list with sendInitialEvents was not refused: {other:?}"),
    }
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let events: Vec<_> = cms
        .watch(&WatchParams::streaming_lists(), "999999")
        .await
        .unwrap()
        .collect()
        .await;
    match events.as_slice() {
        [Ok(WatchEvent::Error(status))] => {
            assert_eq!(status.code, 504);
            assert!(
                status
                    .message
                    .starts_with("Too large resource version: 999999")
            );
        }
        other => panic!("expected one ERROR event, got {other:?}"),
    }
}
