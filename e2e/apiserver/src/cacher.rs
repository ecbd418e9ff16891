//! kube-apiserver's per-version watch caches of custom resources, as far as a webhook sees them.
//!
//! For a CRD, kube-apiserver keeps a cacher for **every version the CRD lists, served or not**,
//! and fills it by listing every stored object converted into that version; with a `Webhook`
//! conversion, that calls the webhook for each version the objects are not stored in. When the
//! list fails, the cacher logs (`staging/src/k8s.io/apiserver/pkg/storage/cacher`)
//!
//! `cacher (<plural>.<group>): unexpected ListAndWatch error: failed to list <group>/<version>,
//! Kind=<Kind>: <error>; reinitializing...`
//!
//! and lists again about a second later, for as long as it fails.
//!
//! Here the fill is incremental and cheap: every stored change of such a resource is queued (and
//! every object of it when its CRD changes, as kube-apiserver then builds new cachers); a task
//! waits [`BATCH_DELAY`] for more, then converts the queued objects of each resource into each
//! listed version with one ConversionReview (as one list would). A failure is logged as above,
//! counted in [`WatchCacheStats`] (read with `Handle::watch_caches`), and the version is listed
//! again, all its objects, [`RETRY_INTERVAL`] later, at most [`RETRIES`] times; the next change
//! of the resource starts over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use crate::resources::fills;
use crate::resources::{ResKey, ResourceDef};
pub use crate::state::WatchCacheStats;
use crate::state::{Shared, until_shutdown};
use crate::store::object_key;

/// How long the task waits after a change for more changes to convert in the same review.
pub const BATCH_DELAY: Duration = Duration::from_millis(50);
/// How long after a failed fill the version is listed again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// How many times a failed fill is retried before waiting for the next change.
pub const RETRIES: u32 = 5;

/// The key [`WatchCacheStats`] are kept under: `<plural>.<group>/<version>`.
pub fn stats_key(def: &ResourceDef, version: &str) -> String {
    format!("{}.{}/{version}", def.plural, def.group)
}

/// One conversion of objects into a version: a list, or the changed objects.
struct Fill {
    def: Arc<ResourceDef>,
    version: String,
    objects: Vec<Arc<Value>>,
    attempt: u32,
}

struct Retry {
    key: ResKey,
    version: String,
    attempt: u32,
    at: Instant,
}

/// Runs until shutdown, filling the watch caches as changes are queued.
pub async fn run(shared: Arc<Shared>) {
    let wakeup = shared.store.lock().await.fill_wakeup.clone();
    let mut retries: Vec<Retry> = Vec::new();
    loop {
        let next_retry = retries.iter().map(|r| r.at).min();
        tokio::select! {
            () = wakeup.notified() => tokio::time::sleep(BATCH_DELAY).await,
            () = sleep_until(next_retry) => {}
            () = until_shutdown(shared.shutdown.clone()) => return,
        }
        let now = Instant::now();
        let (due, later): (Vec<Retry>, Vec<Retry>) = retries.into_iter().partition(|r| r.at <= now);
        retries = later;
        // Only references are taken under the store's lock, and the objects are never copied.
        let mut work: Vec<Fill> = Vec::new();
        {
            let mut store = shared.store.lock().await;
            let queued = std::mem::take(&mut store.fill_queue);
            let mut changed: BTreeMap<ResKey, BTreeMap<(String, String), Arc<Value>>> =
                BTreeMap::new();
            for (key, object) in queued {
                changed
                    .entry(key)
                    .or_default()
                    .insert(object_key(&object), object);
            }
            for (key, objects) in changed {
                let Some(def) = store.defs.iter().find(|d| d.key() == key && fills(d)) else {
                    continue;
                };
                let def = Arc::new(def.clone());
                let objects: Vec<Arc<Value>> = objects.into_values().collect();
                for version in &def.listed_versions {
                    // A version still retrying lists everything when its retry is due.
                    if !retries
                        .iter()
                        .any(|r| r.key == key && &r.version == version)
                    {
                        work.push(Fill {
                            def: def.clone(),
                            version: version.clone(),
                            objects: objects.clone(),
                            attempt: 0,
                        });
                    }
                }
            }
            for retry in due {
                let Some(def) = store.defs.iter().find(|d| d.key() == retry.key && fills(d)) else {
                    continue;
                };
                let objects = store.list(&retry.key, None);
                work.push(Fill {
                    def: Arc::new(def.clone()),
                    version: retry.version,
                    objects,
                    attempt: retry.attempt,
                });
            }
        }
        for Fill {
            def,
            version,
            objects,
            attempt,
        } in work
        {
            if !fill(&shared, &def, &version, &objects).await && attempt < RETRIES {
                retries.push(Retry {
                    key: def.key(),
                    version,
                    attempt: attempt + 1,
                    at: Instant::now() + RETRY_INTERVAL,
                });
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Converts `objects` into `version` through the webhook, recording and logging the outcome;
/// whether it succeeded.
async fn fill(shared: &Shared, def: &ResourceDef, version: &str, objects: &[Arc<Value>]) -> bool {
    let objects: Vec<&Value> = objects.iter().map(AsRef::as_ref).collect();
    let outcome = crate::convert::converts(def, &objects, version).await;
    let key = stats_key(def, version);
    let mut caches = shared
        .watch_caches
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let stats = caches.entry(key).or_default();
    match outcome {
        Ok(_) => {
            stats.fills += 1;
            true
        }
        Err(e) => {
            let message = format!(
                "failed to list {}, Kind={}: {}",
                def.api_version(version),
                def.kind,
                e.message.trim_start_matches("Internal error occurred: ")
            );
            tracing::warn!(
                "cacher ({}.{}): unexpected ListAndWatch error: {message}; reinitializing...",
                def.plural,
                def.group
            );
            stats.failures += 1;
            stats.last_error = Some(message);
            false
        }
    }
}
