//! The status this manager last wrote on each object, so that a stale cache cannot hide a write.
//!
//! A reconcile writes a status only when it differs from the object's (a reconcile that changes
//! nothing writes nothing). The object comes from the watch cache, and a pass may start before the
//! watch delivered the previous pass's write: compared with that stale object, a status that
//! returns to what the cache still shows looks unchanged and is not written, and the object keeps
//! the previous pass's status. A stopped node container shows how this bites: one pass writes
//! `ContainerProvisioned=False` (waiting for its load balancer), the next starts the container
//! and computes `True` with "was stopped; started it again", which equals the stale cached
//! status, so nothing was written and the note was lost for good.
//!
//! So a write is skipped only when the status equals both the cached object's and the one this
//! manager last wrote on the object (same uid). After a restart the memory is empty and the cache
//! alone decides, as before; a status someone else changed since costs one write, which the API
//! server answers without a change when the status is already there.
//!
//! The same staleness bites a status computed from the cached one, when a pass keeps something
//! of the previous status: the DockerCluster keeps the last recovery's note on its condition,
//! and computed from a cache without the recovery it wrote the note before it back over it.
//! [`WrittenStatuses::latest`] gives the object with the status last written here, to start from.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::object::HasStatus;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The last status written per object (`Kind/namespace/name`, with the object's uid).
#[derive(Debug, Default)]
pub struct WrittenStatuses {
    entries: Mutex<HashMap<String, Written>>,
}

#[derive(Debug)]
struct Written {
    uid: String,
    status: Value,
}

fn key(reference: &ObjectReference) -> String {
    format!(
        "{}/{}/{}",
        reference.kind.as_deref().unwrap_or_default(),
        reference.namespace.as_deref().unwrap_or_default(),
        reference.name.as_deref().unwrap_or_default()
    )
}

fn uid(reference: &ObjectReference) -> String {
    reference.uid.clone().unwrap_or_default()
}

impl WrittenStatuses {
    fn with<T>(&self, work: impl FnOnce(&mut HashMap<String, Written>) -> T) -> T {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        work(&mut entries)
    }

    /// The status last written on the object, when this manager wrote one on this very object.
    pub fn last<S: DeserializeOwned>(&self, reference: &ObjectReference) -> Option<S> {
        let uid = uid(reference);
        let value = self.with(|entries| {
            entries
                .get(&key(reference))
                .filter(|w| w.uid == uid)
                .map(|w| w.status.clone())
        })?;
        serde_json::from_value(value).ok()
    }

    /// `object` with the status last written here on it in place of the cached one: what a pass
    /// computes its status from. The cache may not show the previous pass's write yet, and a
    /// status computed from the stale one would write the older status back over it (a recovery
    /// note replaced by the one before it, for good).
    pub fn latest<K>(&self, reference: &ObjectReference, object: &K) -> K
    where
        K: HasStatus + Clone,
        K::Status: DeserializeOwned,
    {
        let mut latest = object.clone();
        if let Some(status) = self.last(reference) {
            *latest.status_mut() = Some(status);
        }
        latest
    }

    /// Whether `desired` needs no write: it equals the cached object's status and the status
    /// last written here on the object (or nothing was written here yet).
    pub fn unchanged<S: Serialize + PartialEq>(
        &self,
        reference: &ObjectReference,
        cached: Option<&S>,
        desired: &S,
    ) -> bool {
        if cached != Some(desired) {
            return false;
        }
        let Ok(desired) = serde_json::to_value(desired) else {
            return false;
        };
        let uid = uid(reference);
        self.with(|entries| {
            entries
                .get(&key(reference))
                .filter(|w| w.uid == uid)
                .is_none_or(|w| w.status == desired)
        })
    }

    /// Remembers `status` as written on the object.
    pub fn record<S: Serialize>(&self, reference: &ObjectReference, status: &S) {
        let Ok(status) = serde_json::to_value(status) else {
            return;
        };
        let uid = uid(reference);
        self.with(|entries| entries.insert(key(reference), Written { uid, status }));
    }

    /// Forgets the object (it is gone).
    pub fn forget(&self, reference: &ObjectReference) {
        self.with(|entries| entries.remove(&key(reference)));
    }

    /// How many objects are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.with(|entries| entries.len())
    }

    /// Whether no object is remembered.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Status {
        ready: bool,
        message: String,
    }

    fn status(ready: bool, message: &str) -> Status {
        Status {
            ready,
            message: message.into(),
        }
    }

    fn reference(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("DockerMachine".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    #[test]
    fn nothing_written_yet_the_cache_decides() {
        let written = WrittenStatuses::default();
        let m1 = reference("m1", "u1");
        let s = status(true, "runs");
        assert!(written.unchanged(&m1, Some(&s), &s));
        assert!(!written.unchanged(&m1, Some(&status(false, "")), &s));
        assert!(!written.unchanged(&m1, None, &s));
    }

    #[test]
    fn a_stale_cache_does_not_hide_a_write() {
        // The cache still shows the status of two writes ago; the last write changed it.
        let written = WrittenStatuses::default();
        let m1 = reference("m1", "u1");
        let old = status(true, "was stopped; started it again");
        written.record(&m1, &status(false, "waiting for the load balancer"));
        assert!(!written.unchanged(&m1, Some(&old), &old));
        written.record(&m1, &old);
        assert!(
            written.unchanged(&m1, Some(&old), &old),
            "at rest: no write"
        );
    }

    #[test]
    fn another_object_of_the_same_name_starts_afresh() {
        let written = WrittenStatuses::default();
        let s = status(true, "runs");
        written.record(&reference("m1", "u1"), &status(false, "creating"));
        let recreated = reference("m1", "u2");
        assert!(written.unchanged(&recreated, Some(&s), &s));
        assert_eq!(written.last::<Status>(&recreated), None);
        assert_eq!(
            written.last::<Status>(&reference("m1", "u1")),
            Some(status(false, "creating"))
        );
    }

    #[test]
    fn forgotten_objects_leave_nothing() {
        let written = WrittenStatuses::default();
        let m1 = reference("m1", "u1");
        written.record(&m1, &status(true, ""));
        assert_eq!(written.len(), 1);
        written.forget(&m1);
        assert!(written.is_empty());
    }
}
