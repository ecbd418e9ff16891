//! What the collector knows of the store between its sweeps ([`Index`]), which the store keeps
//! up to date with every change, and the finalizers it reads on objects.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::resources::ResKey;

/// The finalizer that makes CRD deletion remove every custom resource first.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// What the collector knows of the store between its sweeps: the owners and owner references,
/// kept up to date with every change, and whether a change since the last sweep may give it
/// something to do.
#[derive(Debug, Default)]
pub struct Index {
    /// Stored objects by uid.
    live: HashMap<String, Owner>,
    /// How many owner references name each uid.
    referenced: HashMap<String, usize>,
    /// Namespaces being deleted, and CRDs being deleted with their cleanup finalizer: while there
    /// is one, every change may concern the collector (it empties them).
    terminating: HashSet<String>,
    /// A change since the last sweep that ended idle may give the collector something to do.
    pub pending: bool,
}

/// What an owner reference needs to know of the object it names.
#[derive(Debug)]
struct Owner {
    namespace: String,
    deleting: bool,
}

fn uid(o: &Value) -> &str {
    o["metadata"]["uid"].as_str().unwrap_or_default()
}

fn namespace(o: &Value) -> &str {
    o["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// The uids an object's owner references name (a reference without one names "", which no
/// object has: absent, as [`sweep`](super::sweep) reads it).
fn owner_uids(o: &Value) -> impl Iterator<Item = &str> {
    o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["uid"].as_str().unwrap_or_default())
}

/// Whether `o` of resource `key` makes the collector empty something while it exists: a
/// namespace being deleted, or a CRD being deleted with its cleanup finalizer.
fn empties(key: &ResKey, o: &Value) -> bool {
    let (group, plural) = (key.0.as_str(), key.1.as_str());
    deleting(o)
        && ((group.is_empty() && plural == "namespaces")
            || (group == "apiextensions.k8s.io"
                && plural == "customresourcedefinitions"
                && has(o, CLEANUP_FINALIZER)))
}

impl Index {
    /// Takes note of a change of an object of resource `key` from `old` to `new` (`None`: it did
    /// not exist before, or exists no more), and marks the collector pending when the change may
    /// give it something to do:
    /// - an object went that owner references name (its dependents dangle), or whose owners are
    ///   being deleted (a foreground owner may be waiting for it);
    /// - an object is being deleted with the `orphan` or `foregroundDeletion` finalizer, or is a
    ///   namespace or CRD being emptied;
    /// - an object names an owner that is absent, in another namespace, or being deleted;
    /// - any change while a namespace or CRD is being emptied.
    pub fn changed(&mut self, key: &ResKey, old: Option<&Value>, new: Option<&Value>) {
        if let Some(old) = old {
            for owner in owner_uids(old) {
                if let Some(count) = self.referenced.get_mut(owner) {
                    *count -= 1;
                    if *count == 0 {
                        self.referenced.remove(owner);
                    }
                }
            }
            self.live.remove(uid(old));
            self.terminating.remove(uid(old));
        }
        if let Some(new) = new {
            for owner in owner_uids(new) {
                *self.referenced.entry(owner.to_string()).or_default() += 1;
            }
            self.live.insert(
                uid(new).to_string(),
                Owner {
                    namespace: namespace(new).to_string(),
                    deleting: deleting(new),
                },
            );
            if empties(key, new) {
                self.terminating.insert(uid(new).to_string());
            }
        }
        let concerns = !self.terminating.is_empty()
            || match (old, new) {
                (Some(gone), None) => {
                    self.referenced.contains_key(uid(gone))
                        || owner_uids(gone)
                            .any(|o| self.live.get(o).is_some_and(|owner| owner.deleting))
                }
                (_, Some(new)) => {
                    (deleting(new) && (has(new, "orphan") || has(new, "foregroundDeletion")))
                        || owner_uids(new).any(|o| {
                            self.live.get(o).is_none_or(|owner| {
                                owner.deleting
                                    || !(owner.namespace.is_empty()
                                        || owner.namespace == namespace(new))
                            })
                        })
                }
                (None, None) => false,
            };
        self.pending |= concerns;
    }
}

pub(super) fn finalizers(o: &Value) -> Vec<String> {
    o["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn has(o: &Value, finalizer: &str) -> bool {
    finalizers(o).iter().any(|f| f == finalizer)
}

pub(super) fn deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}
