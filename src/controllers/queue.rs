//! The `workqueue_depth` metric: how many objects a controller has been asked to reconcile and
//! has not started yet.
//!
//! kube's `Controller` keeps its queue to itself, so the depth is counted at its edges: every
//! trigger the controller is fed (its own watch, the mapped watches, background-task progress)
//! marks the object pending, and the start of its reconcile clears it. Like controller-runtime's
//! work queue, an object counts once however often it was triggered, and delayed requeues are not
//! in the queue until they fire. Objects that left the store (deleted) are dropped, because the
//! controller never reconciles them.
//!
//! The same bookkeeping remembers what triggered each pending object, so that the log says why
//! each reconcile ran ([`QueueDepth::started`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::runtime::Metrics;

/// What asked a controller to reconcile an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The object itself changed (its own watch).
    Changed,
    /// A related object changed: its kind and `namespace/name`.
    Related(&'static str, String),
    /// A background task of the object made progress.
    Task,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Changed => f.write_str("the object changed"),
            Self::Related(kind, name) => write!(f, "{kind} {name} changed"),
            Self::Task => f.write_str("a background task progressed"),
        }
    }
}

/// The reason of a reconcile that no watch or task asked for: the retry the previous pass or
/// its failure scheduled.
pub const REQUEUE: &str = "requeue (scheduled by the previous pass or its failure)";

/// How many distinct triggers of one object are named; more are counted.
const NAMED_TRIGGERS: usize = 3;

/// The pending objects of one controller, published as its `workqueue_depth`, with what
/// triggered each.
pub struct QueueDepth<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    controller: &'static str,
    metrics: Metrics,
    store: Store<K>,
    pending: Mutex<HashMap<ObjectRef<K>, Triggers>>,
}

/// The triggers of one pending object: the first few, and how many there were.
#[derive(Debug, Default)]
struct Triggers {
    named: Vec<Trigger>,
    count: usize,
}

impl Triggers {
    fn add(&mut self, trigger: Trigger) {
        self.count += 1;
        if self.named.len() < NAMED_TRIGGERS && !self.named.contains(&trigger) {
            self.named.push(trigger);
        }
    }

    fn describe(&self) -> String {
        let named: Vec<String> = self.named.iter().map(Trigger::to_string).collect();
        let mut text = named.join(", ");
        if self.count > self.named.len() {
            text.push_str(&format!(" ({} triggers)", self.count));
        }
        text
    }
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
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// Marks `object` as waiting for a reconcile because of `trigger`; returns it (for use
    /// inside stream maps).
    pub fn requested(&self, object: ObjectRef<K>, trigger: Trigger) -> ObjectRef<K> {
        self.update(|pending| {
            pending.entry(object.clone()).or_default().add(trigger);
        });
        object
    }

    /// Marks `object` as taken out of the queue: its reconcile starts. Returns why: what
    /// triggered it since its last reconcile started, or [`REQUEUE`].
    pub fn started(&self, object: &K) -> String {
        let object = ObjectRef::from_obj(object);
        let mut triggers = None;
        self.update(|pending| triggers = pending.remove(&object));
        triggers.map_or_else(|| REQUEUE.to_string(), |t| t.describe())
    }

    /// How many objects wait now.
    pub fn depth(&self) -> usize {
        self.update(|_| {})
    }

    fn update(&self, change: impl FnOnce(&mut HashMap<ObjectRef<K>, Triggers>)) -> usize {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        change(&mut pending);
        pending.retain(|object, _| self.store.get(object).is_some());
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

        queue.requested(ObjectRef::from_obj(&a), Trigger::Changed);
        queue.requested(ObjectRef::from_obj(&a), Trigger::Changed);
        queue.requested(ObjectRef::from_obj(&b), Trigger::Task);
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
    fn a_reconcile_starts_with_what_triggered_it_since_the_last_one() {
        let (reader, mut writer) = store::<DockerMachine>();
        let a = machine("a");
        writer.apply_watcher_event(&Event::Apply(a.clone()));
        let queue = QueueDepth::new("dockermachine", Metrics::new(), reader);
        let object = ObjectRef::from_obj(&a);

        queue.requested(object.clone(), Trigger::Related("Machine", "ns/a".into()));
        queue.requested(object.clone(), Trigger::Changed);
        queue.requested(object.clone(), Trigger::Changed);
        assert_eq!(
            queue.started(&a),
            "Machine ns/a changed, the object changed (3 triggers)"
        );
        assert_eq!(
            queue.started(&a),
            REQUEUE,
            "nothing triggered it since: a retry"
        );
        queue.requested(object, Trigger::Task);
        assert_eq!(queue.started(&a), "a background task progressed");
    }

    #[test]
    fn deleted_objects_leave_the_queue() {
        let (reader, mut writer) = store::<DockerMachine>();
        let a = machine("a");
        writer.apply_watcher_event(&Event::Apply(a.clone()));
        let queue = QueueDepth::new("dockermachine", Metrics::new(), reader);
        queue.requested(ObjectRef::from_obj(&a), Trigger::Changed);
        assert_eq!(queue.depth(), 1);
        writer.apply_watcher_event(&Event::Delete(a));
        assert_eq!(
            queue.depth(),
            0,
            "the controller never reconciles a deleted object"
        );
    }
}
