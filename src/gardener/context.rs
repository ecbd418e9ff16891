//! What every reconcile of the Gardener controller needs ([`InfrastructureContext`]): the seed's
//! client, the Docker engine, Events and metrics, and the per-object retry and attempt
//! bookkeeping. Below the controller, its flows and their session, which all use it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;

use super::trigger::Mode;
use crate::docker::ContainerRuntime;
use crate::runtime::Metrics;

/// Field manager of the status we apply.
pub const FIELD_MANAGER: &str = "capd-rs-gardener-infrastructure";

/// Why a reconcile runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// An event Gardener's predicate admitted, or the retry of a failed attempt: an attempt,
    /// which shows `Processing` and then its result.
    Asked,
    /// The periodic check of the ignore-operation-annotation mode: it repairs drift and writes
    /// only what changed.
    Resync,
}

/// First retry delay after a failure; doubles per consecutive failure.
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);

/// Longest retry delay after failures.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// What every reconcile of this controller needs.
pub struct InfrastructureContext {
    /// Client of the seed cluster.
    pub client: Client,
    /// The Docker engine.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Publishes Events about `Infrastructure` objects.
    pub recorder: Recorder,
    /// Reconcile metrics.
    pub metrics: Metrics,
    /// In the ignore-operation-annotation mode, every object is checked for drift this often.
    pub sync_period: Duration,
    mode: Mode,
    failures: Mutex<HashMap<String, u32>>,
    asked: Mutex<HashSet<String>>,
    /// The resourceVersion each object's last attempt started from.
    attempted: Mutex<HashMap<String, String>>,
}

impl InfrastructureContext {
    /// Builds the context, respecting Gardener's operation annotation.
    pub fn new(
        client: Client,
        runtime: Arc<dyn ContainerRuntime>,
        recorder: Recorder,
        metrics: Metrics,
        sync_period: Duration,
    ) -> Self {
        Self {
            client,
            runtime,
            recorder,
            metrics,
            sync_period,
            mode: Mode::default(),
            failures: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashSet::new()),
            attempted: Mutex::new(HashMap::new()),
        }
    }

    /// This context in `mode`.
    #[must_use]
    pub fn with_mode(self, mode: Mode) -> Self {
        Self { mode, ..self }
    }

    /// When Gardener's operation annotation is needed.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn asked(&self) -> MutexGuard<'_, HashSet<String>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns the delay before the next attempt.
    pub(super) fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures();
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        backoff_delay(*count)
    }

    pub(super) fn succeeded(&self, key: &str) {
        self.failures().remove(key);
    }

    fn attempted(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.attempted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The next reconcile of `key` is an attempt: a retry asked for it.
    pub(super) fn ask(&self, key: &str) {
        self.asked().insert(key.to_string());
    }

    /// The next reconcile of `key` is an attempt: an event admitted `key` at `version`, unless
    /// an attempt already started from that version. Events are admitted in order but an
    /// attempt reads the latest object: the attempt that an earlier event asked for may have
    /// seen this event's version already (a create, then the `restore` annotation at once), and
    /// a second attempt would then run on what the first one left (a `Reconcile` right after the
    /// `Restore`).
    pub(super) fn ask_at(&self, key: &str, version: Option<&str>) {
        if version.is_some() && self.attempted().get(key).map(String::as_str) == version {
            return;
        }
        self.ask(key);
    }

    /// Why this reconcile of `key`, which reads the object at `version`, runs: an attempt when
    /// one was asked for, else the periodic drift check.
    pub(super) fn take_reason(&self, key: &str, version: Option<&str>) -> Reason {
        if self.asked().remove(key) {
            match version {
                Some(version) => self
                    .attempted()
                    .insert(key.to_string(), version.to_string()),
                None => self.attempted().remove(key),
            };
            Reason::Asked
        } else {
            Reason::Resync
        }
    }

    /// `key` is gone: nothing about it is kept.
    pub(super) fn forget(&self, key: &str) {
        self.asked().remove(key);
        self.failures().remove(key);
        self.attempted().remove(key);
    }

    /// What follows a successful attempt: nothing until Gardener asks again, or a drift check
    /// after the sync period in the ignore-operation-annotation mode.
    pub(super) fn settled(&self) -> Action {
        match self.mode {
            Mode::RespectOperationAnnotation => Action::await_change(),
            Mode::IgnoreOperationAnnotation => Action::requeue(self.sync_period),
        }
    }
}

/// The delay after `failures` consecutive failures: 0.5 s, 1 s, 2 s, ... up to [`BACKOFF_MAX`].
pub fn backoff_delay(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    BACKOFF_BASE
        .saturating_mul(1u32 << exponent)
        .min(BACKOFF_MAX)
}
