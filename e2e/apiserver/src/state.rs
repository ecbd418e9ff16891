//! The state a running server's tasks share: the router's handlers, the garbage collector and the
//! [`crate::Handle`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::faults::Faults;
use crate::store::Store;

/// What the watch cache of one version of one custom resource met so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchCacheStats {
    /// Fills that converted every object asked for.
    pub fills: u64,
    /// Fills that failed (each logged as kube's cacher logs it).
    pub failures: u64,
    /// The error of the last failed fill.
    pub last_error: Option<String>,
}

/// State shared by every handler.
pub struct Shared {
    /// Objects, history and served resources.
    pub store: tokio::sync::Mutex<Store>,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// How often the garbage collector sweeps even without deletions.
    pub gc_interval: Duration,
    /// Requests by `verb resource[/subresource]`.
    pub counts: Mutex<BTreeMap<String, u64>>,
    /// Wakes the garbage collector.
    pub gc_wakeup: Notify,
    /// Becomes true on shutdown; long requests (watches) end.
    pub shutdown: watch::Receiver<bool>,
    /// Injected faults ([`crate::Handle::inject`]).
    pub faults: Faults,
    /// Bumped to end every open watch ([`crate::Handle::drop_watches`], [`crate::Handle::restart`]).
    pub watch_epoch: watch::Sender<u64>,
    /// What each custom resource version's watch cache met, by `<plural>.<group>/<version>`
    /// ([`crate::cacher`]).
    pub watch_caches: Mutex<BTreeMap<String, WatchCacheStats>>,
}

impl Shared {
    /// Counts one write request.
    pub fn count(&self, key: String) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(key).or_default() += 1;
        }
    }
}

/// Resolves once the server is shutting down.
pub async fn until_shutdown(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
