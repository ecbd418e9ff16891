//! The object store of one fake workload cluster: JSON objects keyed by resource, namespace and
//! name, one resourceVersion counter, and a bounded history of changes that watches replay from
//! the resourceVersion they ask for.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use watchlist::{Refusal, Start};

use super::resources::ResourceType;
use super::selectors::{FieldSelector, LabelSelector};

/// How many changes a store keeps for watches that resume from an older resourceVersion.
const HISTORY: usize = 4096;

/// Why a store operation was refused; each maps to the HTTP status kube-apiserver uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such object (404).
    #[error("{0} not found")]
    NotFound(String),
    /// An object of that name exists (409).
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The resourceVersion sent is not the current one (409).
    #[error(
        "the object has been modified; please apply your changes to the latest version and try again: {0}"
    )]
    Conflict(String),
    /// The request cannot be understood (400).
    #[error("{0}")]
    Invalid(String),
    /// The request body is in a format this server does not read (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A list or watch kube-apiserver refuses, with its own code and `Status`.
    #[error("{}", .0.message)]
    Refused(Box<Refusal>),
}

impl StoreError {
    /// A refusal of kube-apiserver's list and watch rules.
    pub fn refused(refusal: Refusal) -> Self {
        Self::Refused(Box::new(refusal))
    }

    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound(_) => 404,
            Self::AlreadyExists(_) | Self::Conflict(_) => 409,
            Self::Invalid(_) => 400,
            Self::UnsupportedMediaType(_) => 415,
            Self::Refused(refusal) => refusal.code,
        }
    }

    /// The `reason` of the Status kube-apiserver answers with.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "NotFound",
            Self::AlreadyExists(_) => "AlreadyExists",
            Self::Conflict(_) => "Conflict",
            Self::Invalid(_) => "BadRequest",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::Refused(refusal) => refusal.reason,
        }
    }

    /// The error as a `Status` object.
    pub fn status(&self) -> Value {
        if let Self::Refused(refusal) = self {
            return refusal.status();
        }
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        })
    }
}

/// Kind of change of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub kind: EventType,
    /// Plural of the resource.
    pub resource: &'static str,
    /// Namespace of the object (`""` for cluster-scoped ones).
    pub namespace: String,
    /// The resourceVersion of this change.
    pub version: u64,
    /// The object after the change (before it, for a deletion, with the new resourceVersion).
    pub object: Arc<Value>,
}

/// Which objects a list or watch asks for.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this namespace; all when `None`.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether a change of the resource `plural` matches.
    pub fn matches(&self, plural: &str, change: &Change) -> bool {
        change.resource == plural
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == change.namespace)
            && self.labels.matches(&change.object)
            && self.fields.matches(&change.object)
    }
}

type Key = (&'static str, String, String);

#[derive(Debug, Default)]
struct State {
    version: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Change>,
    /// The resourceVersion of the newest change dropped from `history` (0: none yet); a watch
    /// from an older one would miss changes.
    forgotten: u64,
}

/// The objects of one fake cluster.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    changes: broadcast::Sender<Change>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// A started watch: what it sends first, and the changes to come.
#[derive(Debug)]
pub struct Subscription {
    /// The changes after the resourceVersion the watch started from, or, for a
    /// [`Start::Snapshot`], the current objects as `ADDED`; filtered by resource but not by the
    /// [`Filter`].
    pub backlog: Vec<Change>,
    /// For a snapshot that ends with the initial-events-end bookmark, the resourceVersion the
    /// snapshot was read at (the bookmark's).
    pub end_bookmark: Option<u64>,
    /// Live changes up to this resourceVersion are not sent (a watch from a resourceVersion
    /// the store has not reached yet).
    pub after: u64,
    /// Changes to come.
    pub live: broadcast::Receiver<Change>,
}

fn describe(resource: &ResourceType, name: &str) -> String {
    let group = if resource.group.is_empty() {
        String::new()
    } else {
        format!(".{}", resource.group)
    };
    format!("{}{group} {name:?}", resource.plural)
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn finalizers(object: &Value) -> usize {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

fn set_meta(object: &mut Value, field: &str, value: Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(field.to_string(), value);
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        let (changes, _) = broadcast::channel(1024);
        Self {
            state: Mutex::default(),
            changes,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current resourceVersion.
    pub fn version(&self) -> u64 {
        self.state().version
    }

    fn record(&self, state: &mut State, kind: EventType, key: &Key, object: Value) {
        let change = Change {
            kind,
            resource: key.0,
            namespace: key.1.clone(),
            version: state.version,
            object: Arc::new(object),
        };
        if state.history.len() == HISTORY
            && let Some(dropped) = state.history.pop_front()
        {
            state.forgotten = dropped.version;
        }
        state.history.push_back(change.clone());
        // No receiver is not an error: nobody watches.
        let _ = self.changes.send(change);
    }

    fn key(resource: &ResourceType, namespace: &str, name: &str) -> Key {
        let namespace = if resource.namespaced { namespace } else { "" };
        (resource.plural, namespace.to_string(), name.to_string())
    }

    /// One object.
    ///
    /// # Errors
    /// [`StoreError::NotFound`].
    pub fn get(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, StoreError> {
        self.state()
            .objects
            .get(&Self::key(resource, namespace, name))
            .cloned()
            .ok_or_else(|| StoreError::NotFound(describe(resource, name)))
    }

    /// The objects matching `filter`, and the resourceVersion they were read at.
    pub fn list(&self, resource: &ResourceType, filter: &Filter) -> (Vec<Value>, u64) {
        let state = self.state();
        let items = state
            .objects
            .iter()
            .filter(|((plural, namespace, _), _)| {
                *plural == resource.plural
                    && filter.namespace.as_ref().is_none_or(|ns| ns == namespace)
            })
            .map(|(_, object)| object)
            .filter(|o| filter.labels.matches(o) && filter.fields.matches(o))
            .cloned()
            .collect();
        (items, state.version)
    }

    /// Creates an object: sets its namespace, uid, creationTimestamp, resourceVersion and
    /// generation (a name from `generateName` when it has none).
    ///
    /// # Errors
    /// [`StoreError::AlreadyExists`], or [`StoreError::Invalid`] without a name.
    pub fn create(
        &self,
        resource: &ResourceType,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value, StoreError> {
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let mut name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            let prefix = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if prefix.is_empty() {
                return Err(StoreError::Invalid(
                    "name or generateName is required".into(),
                ));
            }
            name = format!("{prefix}{}", random_suffix());
            set_meta(&mut object, "name", json!(name));
        }
        let mut state = self.state();
        let key = Self::key(resource, namespace, &name);
        if state.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists(describe(resource, &name)));
        }
        state.version += 1;
        if resource.namespaced {
            set_meta(&mut object, "namespace", json!(namespace));
        }
        set_meta(&mut object, "uid", json!(random_uid()));
        set_meta(&mut object, "creationTimestamp", json!(now()));
        set_meta(
            &mut object,
            "resourceVersion",
            json!(state.version.to_string()),
        );
        set_meta(&mut object, "generation", json!(1));
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        state.objects.insert(key.clone(), object.clone());
        self.record(&mut state, EventType::Added, &key, object.clone());
        Ok(object)
    }

    /// Replaces an object. A resourceVersion in `object` must be the current one; the
    /// identity fields (uid, creationTimestamp, deletionTimestamp) are kept from the stored
    /// object. An object being deleted whose last finalizer goes is removed.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Conflict`].
    pub fn update(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        mut object: Value,
    ) -> Result<Value, StoreError> {
        let mut state = self.state();
        let key = Self::key(resource, namespace, name);
        let Some(current) = state.objects.get(&key) else {
            return Err(StoreError::NotFound(describe(resource, name)));
        };
        let current_version = current
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(sent) = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            && Some(sent) != current_version.as_str()
        {
            return Err(StoreError::Conflict(describe(resource, name)));
        }
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "namespace",
            "name",
        ] {
            match current.pointer(&format!("/metadata/{field}")) {
                Some(value) => set_meta(&mut object, field, value.clone()),
                None => {
                    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove(field);
                    }
                }
            }
        }
        let generation = current
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let spec_changed = current.get("spec") != object.get("spec");
        set_meta(
            &mut object,
            "generation",
            json!(generation + i64::from(spec_changed)),
        );
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        let unchanged = current
            == &{
                let mut same = object.clone();
                set_meta(&mut same, "resourceVersion", current_version.clone());
                same
            };
        if unchanged {
            return Ok(current.clone());
        }
        state.version += 1;
        set_meta(
            &mut object,
            "resourceVersion",
            json!(state.version.to_string()),
        );
        let gone =
            object.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&object) == 0;
        if gone {
            state.objects.remove(&key);
            self.record(&mut state, EventType::Deleted, &key, object.clone());
        } else {
            state.objects.insert(key.clone(), object.clone());
            self.record(&mut state, EventType::Modified, &key, object.clone());
        }
        Ok(object)
    }

    /// Applies `patch` to the current object with `how`, then stores it as [`Store::update`]
    /// does (a resourceVersion in the patch is checked).
    ///
    /// # Errors
    /// As [`Store::update`].
    pub fn patch(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        patch: &Value,
        how: fn(&mut Value, &Value),
    ) -> Result<Value, StoreError> {
        let mut object = self.get(resource, namespace, name)?;
        if !patch.is_object() {
            return Err(StoreError::Invalid("a patch must be a JSON object".into()));
        }
        let sent = patch.pointer("/metadata/resourceVersion").cloned();
        how(&mut object, patch);
        match sent {
            Some(version) => set_meta(&mut object, "resourceVersion", version),
            None => {
                if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
            }
        }
        self.update(resource, namespace, name, object)
    }

    /// Deletes an object: one with finalizers only gets a deletionTimestamp, and goes when
    /// its last finalizer is removed.
    ///
    /// # Errors
    /// [`StoreError::NotFound`].
    pub fn delete(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, StoreError> {
        let mut state = self.state();
        let key = Self::key(resource, namespace, name);
        let Some(mut object) = state.objects.get(&key).cloned() else {
            return Err(StoreError::NotFound(describe(resource, name)));
        };
        if finalizers(&object) > 0 {
            if object.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(object);
            }
            state.version += 1;
            set_meta(&mut object, "deletionTimestamp", json!(now()));
            set_meta(
                &mut object,
                "resourceVersion",
                json!(state.version.to_string()),
            );
            state.objects.insert(key.clone(), object.clone());
            self.record(&mut state, EventType::Modified, &key, object.clone());
            return Ok(object);
        }
        state.objects.remove(&key);
        state.version += 1;
        set_meta(
            &mut object,
            "resourceVersion",
            json!(state.version.to_string()),
        );
        self.record(&mut state, EventType::Deleted, &key, object.clone());
        Ok(object)
    }

    /// Starts a watch of `resource` where `start` says, given the current resourceVersion
    /// ([`watchlist::ListOptions::start`]): the current objects, or the changes after a
    /// resourceVersion that the history still holds.
    ///
    /// # Errors
    /// What `start` refuses, or [`watchlist::expired`] for changes the history no longer holds.
    pub fn watch(
        &self,
        resource: &ResourceType,
        start: impl FnOnce(u64) -> Result<Start, Refusal>,
    ) -> Result<Subscription, Refusal> {
        let state = self.state();
        let live = self.changes.subscribe();
        match start(state.version)? {
            Start::Snapshot { end_bookmark } => Ok(Subscription {
                backlog: state
                    .objects
                    .iter()
                    .filter(|(key, _)| key.0 == resource.plural)
                    .map(|(key, object)| Change {
                        kind: EventType::Added,
                        resource: key.0,
                        namespace: key.1.clone(),
                        version: state.version,
                        object: Arc::new(object.clone()),
                    })
                    .collect(),
                end_bookmark: end_bookmark.then_some(state.version),
                after: state.version,
                live,
            }),
            Start::After(since) if since < state.forgotten => {
                Err(watchlist::expired(since, state.forgotten))
            }
            Start::After(since) => Ok(Subscription {
                backlog: state
                    .history
                    .iter()
                    .filter(|c| c.version > since && c.resource == resource.plural)
                    .cloned()
                    .collect(),
                end_bookmark: None,
                after: since,
                live,
            }),
        }
    }
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

fn random_uid() -> String {
    let hex = |n: usize| -> String {
        (0..n)
            .map(|_| format!("{:x}", fastrand::u8(..16)))
            .collect()
    };
    format!("{}-{}-{}-{}-{}", hex(8), hex(4), hex(4), hex(4), hex(12))
}
