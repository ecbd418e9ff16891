//! The `workqueue_depth` metric: how many objects a controller has been asked to reconcile and
//! has not started yet.
//!
//! kube's `Controller` keeps its queue to itself, so the depth is counted at its edges: every
//! trigger the controller is fed (its own watch, the mapped watches, background-task progress)
//! marks the object pending, and the start of its reconcile clears it. Like controller-runtime's
//! work queue, an object counts once however often it was triggered, and delayed requeues are not
//! in the queue until they fire. Objects that left the store (deleted) are dropped, because the
//! controller never reconciles them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::runtime::Metrics;

/// The pending objects of one controller, published as its `workqueue_depth`.
pub struct QueueDepth<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    controller: &'static str,
    metrics: Metrics,
    store: Store<K>,
    pending: Mutex<HashSet<ObjectRef<K>>>,
}

impl<K> QueueDepth<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// Counts for `controller`, whose objects are cached in `store`.
    pub fn new(controller: &'static str, metrics: Metrics, store: Store<K>) -> Arc<Self> {
        Arc::new(Self {
            controller,
            metrics,
            store,
            pending: Mutex::new(HashSet::new()),
        })
    }

    /// Marks `object` as waiting for a reconcile; returns it (for use inside stream maps).
    pub fn requested(&self, object: ObjectRef<K>) -> ObjectRef<K> {
        self.update(|pending| {
            pending.insert(object.clone());
        });
        object
    }

    /// Marks `object` as taken out of the queue: its reconcile starts.
    pub fn started(&self, object: &K) {
        let object = ObjectRef::from_obj(object);
        self.update(|pending| {
            pending.remove(&object);
        });
    }

    /// How many objects wait now.
    pub fn depth(&self) -> usize {
        self.update(|_| {})
    }

    fn update(&self, change: impl FnOnce(&mut HashSet<ObjectRef<K>>)) -> usize {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        change(&mut pending);
        pending.retain(|object| self.store.get(object).is_some());
        let depth = pending.len();
        self.metrics
            .set_queue_depth(self.controller, u64::try_from(depth).unwrap_or(u64::MAX));
        depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta2::DockerMachine;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;

    fn machine(name: &str) -> DockerMachine {
        let mut machine = DockerMachine::new(name, Default::default());
        machine.metadata.namespace = Some("ns".into());
        machine
    }

    fn rendered_depth(metrics: &Metrics) -> String {
        metrics
            .render()
            .lines()
            .find(|line| line.starts_with("workqueue_depth{controller=\"dockermachine\""))
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn triggered_objects_count_once_until_their_reconcile_starts() {
        let (reader, mut writer) = store::<DockerMachine>();
        let (a, b) = (machine("a"), machine("b"));
        writer.apply_watcher_event(&Event::Apply(a.clone()));
        writer.apply_watcher_event(&Event::Apply(b.clone()));
        let metrics = Metrics::new();
        let queue = QueueDepth::new("dockermachine", metrics.clone(), reader);

        queue.requested(ObjectRef::from_obj(&a));
        queue.requested(ObjectRef::from_obj(&a));
        queue.requested(ObjectRef::from_obj(&b));
        assert_eq!(queue.depth(), 2, "a triggered twice counts once");
        assert!(
            rendered_depth(&metrics).ends_with(" 2"),
            "{}",
            metrics.render()
        );

        queue.started(&a);
        assert_eq!(queue.depth(), 1);
        queue.started(&b);
        assert_eq!(queue.depth(), 0);
        assert!(rendered_depth(&metrics).ends_with(" 0"));
    }

    #[test]
    fn deleted_objects_leave_the_queue() {
        let (reader, mut writer) = store::<DockerMachine>();
        let a = machine("a");
        writer.apply_watcher_event(&Event::Apply(a.clone()));
        let queue = QueueDepth::new("dockermachine", Metrics::new(), reader);
        queue.requested(ObjectRef::from_obj(&a));
        assert_eq!(queue.depth(), 1);
        writer.apply_watcher_event(&Event::Delete(a));
        assert_eq!(
            queue.depth(),
            0,
            "the controller never reconciles a deleted object"
        );
    }
}
