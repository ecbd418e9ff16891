//! The shared watch's subscriptions, read by kube's `Controller` as the controllers read them.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

use super::{SharedWatch, Subscription};
use crate::api::v1beta2::DockerMachine;
use crate::controllers::fixtures::*;

fn shared_watch() -> SharedWatch<DockerMachine> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    SharedWatch::new(
        Api::all(client),
        watcher::Config::default(),
        "DockerMachine",
    )
}

#[derive(Debug, thiserror::Error)]
#[error("never fails")]
struct Never;

/// Runs a controller on `subscription`; the name of the first object it reconciles, if any.
async fn first_reconciled(
    subscription: Subscription<DockerMachine>,
    store: Store<DockerMachine>,
) -> Option<String> {
    let (sender, mut reconciled) = mpsc::unbounded_channel();
    let controller = Controller::for_shared_stream(subscription, store).run(
        |object: Arc<DockerMachine>, sender: Arc<mpsc::UnboundedSender<String>>| async move {
            let _ = sender.send(object.name_any());
            Ok::<_, Never>(Action::await_change())
        },
        |_, _, _| Action::await_change(),
        Arc::new(sender),
    );
    let running = tokio::spawn(controller.for_each(|_| async {}));
    // A stalled subscription reconciles nothing: the guard stops waiting (paused time jumps
    // ahead as soon as nothing else can happen).
    let first = tokio::time::timeout(Duration::from_secs(600), reconciled.recv())
        .await
        .ok()
        .flatten();
    running.abort();
    first
}

#[tokio::test(start_paused = true)]
async fn a_change_after_another_object_was_deleted_still_reaches_the_controller() {
    let watch = shared_watch();
    let subscription = watch.subscribe();
    let store = watch.reader.clone();
    // Machine a is updated and then deleted, then machine b is updated (its deletion begins),
    // all before the controller reads its subscription: under load the watch runs ahead of
    // the controllers. The watch then stays open.
    let (a, b) = (
        DockerMachine::test("a"),
        DockerMachine::test("b").deleting(),
    );
    let events = [
        Event::Init,
        Event::InitDone,
        Event::Apply(a.clone()),
        Event::Delete(a),
        Event::Apply(b),
    ];
    let events = futures::stream::iter(events.map(Ok)).chain(futures::stream::pending());
    let mut driver = watch.driver_from(events);
    assert!(
        futures::poll!(&mut driver).is_pending(),
        "the watch stays open"
    );

    assert_eq!(
        first_reconciled(subscription, store).await.as_deref(),
        Some("b"),
        "b's change is reconciled (a is gone)"
    );
}

#[tokio::test(start_paused = true)]
async fn every_subscriber_gets_every_change_and_all_objects_after_a_list() {
    let watch = shared_watch();
    let (first, second) = (watch.subscribe(), watch.subscribe());
    let (a, b) = (DockerMachine::test("a"), DockerMachine::test("b"));
    let events = [
        Event::Init,
        Event::InitApply(a.clone()),
        Event::InitDone,
        Event::Apply(b.clone()),
        Event::Apply(a),
    ];
    watch
        .driver_from(futures::stream::iter(events.map(Ok)))
        .await;

    for subscription in [first, second] {
        let names: Vec<String> = subscription.map(|o| o.name_any()).collect().await;
        assert_eq!(names, ["a", "b", "a"]);
    }
}

/// Where a reconcile reports whether it saw a deletion, and what releases it.
type Gate = (mpsc::UnboundedSender<bool>, Arc<tokio::sync::Semaphore>);

#[tokio::test(start_paused = true)]
async fn a_change_that_arrives_during_a_reconcile_leads_to_another_reconcile() {
    let watch = shared_watch();
    let subscription = watch.subscribe();
    let store = watch.reader.clone();
    let (events, watched) = futures::channel::mpsc::unbounded();
    tokio::spawn(watch.driver_from(watched.map(Ok)));
    let b = DockerMachine::test("b");
    for event in [Event::Init, Event::InitDone, Event::Apply(b.clone())] {
        events.unbounded_send(event).unwrap();
    }
    // Each reconcile reports whether it saw the deletion, then waits until released.
    let (sender, mut reconciled) = mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let controller = Controller::for_shared_stream(subscription, store).run(
        |object: Arc<DockerMachine>, ctx: Arc<Gate>| async move {
            let _ = ctx.0.send(object.metadata.deletion_timestamp.is_some());
            ctx.1.acquire().await.unwrap().forget();
            Ok::<_, Never>(Action::await_change())
        },
        |_, _, _| Action::await_change(),
        Arc::new((sender, release.clone())),
    );
    let running = tokio::spawn(controller.for_each(|_| async {}));
    let guard = Duration::from_secs(600);

    assert_eq!(
        tokio::time::timeout(guard, reconciled.recv())
            .await
            .unwrap(),
        Some(false)
    );
    // b's deletion begins while its reconcile runs.
    events.unbounded_send(Event::Apply(b.deleting())).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    release.add_permits(2);

    assert_eq!(
        tokio::time::timeout(guard, reconciled.recv())
            .await
            .ok()
            .flatten(),
        Some(true),
        "the deletion is reconciled once the running reconcile ends"
    );
    running.abort();
}
