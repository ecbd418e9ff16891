//! In-memory storage: objects, one global resourceVersion counter, per-resource event history, watchers.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::resources::{ResKey, ResourceDef};

/// Type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// Wire name of the event type.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// A change to one object, as stored (storage version).
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Object after the change (the last state for deletions).
    pub object: Arc<Value>,
    /// Object before the change, for modifications.
    pub old: Option<Arc<Value>>,
}

#[derive(Debug, Default)]
struct History {
    events: VecDeque<Arc<StoreEvent>>,
    /// Highest resourceVersion whose event has been dropped.
    compacted: u64,
}

struct Watcher {
    key: ResKey,
    tx: mpsc::UnboundedSender<Arc<StoreEvent>>,
}

/// A list of objects kept for paginated lists.
pub type Snapshot = Arc<Vec<Arc<Value>>>;

/// Object key inside a resource: namespace ("" when cluster-scoped) and name.
pub type ObjKey = (String, String);

/// Everything the server stores, guarded by one lock.
pub struct Store {
    rv: u64,
    /// The resourceVersion the server started at: watches cannot start before it (kube-apiserver's
    /// watch cache is filled by a list at its start and knows nothing older).
    started: u64,
    /// Served resources (built-ins and those of established CRDs).
    pub defs: Vec<ResourceDef>,
    objects: HashMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: HashMap<ResKey, History>,
    history_limit: usize,
    watchers: Vec<Watcher>,
    snapshots: VecDeque<(ResKey, u64, Snapshot)>,
    /// Where in-cluster services used by conversion webhooks are reachable (`namespace/name` → `host:port`).
    pub service_endpoints: std::collections::BTreeMap<String, String>,
    /// Stored changes waiting to be converted into every listed version ([`crate::cacher`]).
    pub fill_queue: Vec<(ResKey, Arc<Value>)>,
    /// Wakes the [`crate::cacher`] task when something is queued.
    pub fill_wakeup: Arc<tokio::sync::Notify>,
    /// What the garbage collector knows of the stored objects ([`crate::gc::Index`]).
    pub gc: crate::gc::Index,
}

impl Store {
    /// An empty store keeping `history_limit` events per resource for watches.
    pub fn new(defs: Vec<ResourceDef>, history_limit: usize) -> Self {
        Store {
            rv: 1,
            started: 1,
            defs,
            objects: HashMap::new(),
            history: HashMap::new(),
            history_limit: history_limit.max(1),
            watchers: Vec::new(),
            snapshots: VecDeque::new(),
            service_endpoints: Default::default(),
            fill_queue: Vec::new(),
            fill_wakeup: Arc::default(),
            gc: crate::gc::Index::default(),
        }
    }

    /// The current (latest) resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Marks the server as started at the current resourceVersion: older ones are too old to
    /// watch from.
    pub fn mark_started(&mut self) {
        self.started = self.rv;
    }

    /// Finds a served resource by group, version and plural name.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceDef> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.plural == plural && d.version(version).is_some())
    }

    /// Finds a served resource by group and kind.
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<&ResourceDef> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.kind == kind)
    }

    /// One stored object.
    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(key)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Stored objects of a resource, optionally in one namespace, ordered by namespace and name.
    pub fn list(&self, key: &ResKey, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(map) = self.objects.get(key) else {
            return Vec::new();
        };
        match ns {
            Some(ns) => map
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => map.values().cloned().collect(),
        }
    }

    /// Every stored object with its resource key.
    pub fn all(&self) -> Vec<(ResKey, Arc<Value>)> {
        self.objects
            .iter()
            .flat_map(|(k, m)| m.values().map(move |v| (k.clone(), v.clone())))
            .collect()
    }

    /// Stores a created or changed object under a new resourceVersion and notifies watchers.
    pub fn put(&mut self, key: &ResKey, mut object: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let id = object_key(&object);
        let object = Arc::new(object);
        let old = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert(id, object.clone());
        self.gc.changed(key, old.as_deref(), Some(&object));
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        if self
            .defs
            .iter()
            .any(|d| d.key() == *key && crate::resources::fills(d))
        {
            self.fill_queue.push((key.clone(), object.clone()));
            self.fill_wakeup.notify_one();
        }
        self.emit(
            key,
            StoreEvent {
                rv,
                kind,
                object: object.clone(),
                old,
            },
        );
        object
    }

    /// Queues every stored object of a resource for the watch caches ([`crate::cacher`]).
    pub fn queue_fill_all(&mut self, key: &ResKey) {
        let objects = self.list(key, None);
        if !objects.is_empty() {
            self.fill_queue
                .extend(objects.into_iter().map(|o| (key.clone(), o)));
            self.fill_wakeup.notify_one();
        }
    }

    /// Removes an object under a new resourceVersion; the DELETED event carries its last state.
    pub fn remove(&mut self, key: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let removed = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.gc.changed(key, Some(&removed), None);
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*removed).clone();
        last["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let last = Arc::new(last);
        self.emit(
            key,
            StoreEvent {
                rv,
                kind: EventType::Deleted,
                object: last.clone(),
                old: Some(removed),
            },
        );
        Some(last)
    }

    /// Drops every object of a resource without events (used when a CRD goes away).
    pub fn drop_resource(&mut self, key: &ResKey) {
        for object in self
            .objects
            .remove(key)
            .into_iter()
            .flat_map(BTreeMap::into_values)
        {
            self.gc.changed(key, Some(&object), None);
        }
        self.history.remove(key);
        self.watchers.retain(|w| &w.key != key);
    }

    fn emit(&mut self, key: &ResKey, event: StoreEvent) {
        let event = Arc::new(event);
        let history = self.history.entry(key.clone()).or_default();
        history.events.push_back(event.clone());
        while history.events.len() > self.history_limit {
            if let Some(dropped) = history.events.pop_front() {
                history.compacted = dropped.rv;
            }
        }
        self.watchers
            .retain(|w| &w.key != key || w.tx.send(event.clone()).is_ok());
    }

    /// Events of a resource after `rv`, or, when `rv` is too old, the oldest resourceVersion a
    /// watch may start from. As in kube-apiserver's watch cache, that is the server's start until
    /// events have been evicted, then the one just before the oldest kept event.
    pub fn events_since(&self, key: &ResKey, rv: u64) -> Result<Vec<Arc<StoreEvent>>, u64> {
        let history = self.history.get(key);
        let evicted = history
            .filter(|h| h.compacted > 0)
            .and_then(|h| h.events.front())
            .map_or(0, |oldest| oldest.rv.saturating_sub(1));
        let oldest = self.started.max(evicted);
        if rv < oldest {
            return Err(oldest);
        }
        Ok(history
            .into_iter()
            .flat_map(|h| h.events.iter())
            .filter(|e| e.rv > rv)
            .cloned()
            .collect())
    }

    /// Registers a watcher of a resource; it receives every later event.
    pub fn subscribe(&mut self, key: &ResKey) -> mpsc::UnboundedReceiver<Arc<StoreEvent>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.watchers.push(Watcher {
            key: key.clone(),
            tx,
        });
        rx
    }

    /// Keeps a list snapshot for paginated lists (continue tokens), bounded in number.
    pub fn keep_snapshot(&mut self, key: &ResKey, rv: u64, items: Arc<Vec<Arc<Value>>>) {
        if self.snapshot(key, rv).is_some() {
            return;
        }
        self.snapshots.push_back((key.clone(), rv, items));
        while self.snapshots.len() > 64 {
            self.snapshots.pop_front();
        }
    }

    /// A kept snapshot of a resource at a resourceVersion.
    pub fn snapshot(&self, key: &ResKey, rv: u64) -> Option<Arc<Vec<Arc<Value>>>> {
        self.snapshots
            .iter()
            .find(|(k, r, _)| k == key && *r == rv)
            .map(|(_, _, items)| items.clone())
    }
}

/// Namespace and name of an object.
pub fn object_key(object: &Value) -> ObjKey {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}
