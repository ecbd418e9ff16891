//! Watches: resume from a resourceVersion, 410 Expired, bookmarks, and kube-runtime's watcher,
//! reflector and Controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use testapiserver::Options;

use crate::common::{eventually, start, start_with};

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

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
