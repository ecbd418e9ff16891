//! One watch of a kind, shared by every controller that reads it: one store, and a stream of
//! the changed objects for each subscriber.
//!
//! Why not kube's shared reflector (`reflect_shared` and its `ReflectHandle`s): a handle sends
//! object references and looks each one up in the store when it is polled; an object deleted in
//! between (its last update and its deletion both arrived first, as when a machine's finalizer
//! is removed under load) makes the handle answer "pending" without asking to be woken. Inside a
//! kube `Controller`, whose trigger streams are polled only when they wake it, that stream was
//! then never polled again: every later event of the kind was lost to that controller, until a
//! restart (issue 43: a DockerMachine whose deletion began was never reconciled again). Here each
//! subscriber receives the objects themselves, on a channel that always wakes its reader.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use crate::runtime::error_chain;

/// The objects of a shared watch that changed, for one subscriber, in the order of their events.
pub type Subscription<K> = BoxStream<'static, Arc<K>>;

/// One watch of a kind, shared by every consumer: a store, subscribers, and a sync signal.
///
/// Readiness is taken from the watch's own `InitDone` event, never from
/// `Store::wait_until_ready`: that future keeps only one waker per store, and the controller's
/// applier already waits on it, so a second waiter could leave the controller stalled.
pub struct SharedWatch<K: Resource<DynamicType = ()> + Clone + 'static> {
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    pub(super) reader: Store<K>,
    writer: reflector::store::Writer<K>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>,
    synced: watch::Sender<bool>,
}

impl<K> SharedWatch<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    pub fn new(api: Api<K>, config: watcher::Config, kind: &'static str) -> Self {
        let (reader, writer) = reflector::store::<K>();
        Self {
            api,
            config,
            kind,
            reader,
            writer,
            subscribers: Mutex::new(Vec::new()),
            synced: watch::channel(false).0,
        }
    }

    /// A new subscriber: every object the watch applies from now on (each update, and all of
    /// them again after each full list), in order. It ends when the watch ends.
    pub fn subscribe(&self) -> Subscription<K> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sender);
        receiver_stream(receiver).boxed()
    }

    /// A receiver that turns `true` once the first list is in the store.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// The future that runs the watch (must be polled).
    pub fn into_driver(self) -> BoxFuture<'static, ()> {
        let events = watcher(self.api.clone(), self.config.clone()).default_backoff();
        self.driver_from(events)
    }

    /// The future that applies `events` to the store and hands each applied object to the
    /// subscribers (a subscriber that went away is dropped).
    fn driver_from(
        self,
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    ) -> BoxFuture<'static, ()> {
        let Self {
            kind,
            reader,
            mut writer,
            subscribers,
            synced,
            ..
        } = self;
        let mut subscribers = subscribers
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        events
            .for_each(move |event| {
                match event {
                    Ok(event) => {
                        writer.apply_watcher_event(&event);
                        let changed: Vec<Arc<K>> = match &event {
                            watcher::Event::Apply(object) => {
                                reader.get(&ObjectRef::from_obj(object)).into_iter().collect()
                            }
                            // After a (re)list, every object: what changed while the watch was
                            // down is among them.
                            watcher::Event::InitDone => {
                                synced.send_replace(true);
                                reader.state()
                            }
                            _ => Vec::new(),
                        };
                        for object in changed {
                            subscribers.retain(|s| s.send(object.clone()).is_ok());
                        }
                    }
                    Err(error) => {
                        tracing::warn!(kind, error = %error_chain(&error), "Watch failed; retrying");
                    }
                }
                std::future::ready(())
            })
            .boxed()
    }
}

/// The items of a channel, as a stream.
pub fn receiver_stream<T: Send + 'static>(
    receiver: mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send + 'static {
    futures::stream::unfold(receiver, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

#[cfg(test)]
#[path = "shared_tests.rs"]
mod tests;
