//! The controller: watches every `Infrastructure` (the type is filtered in the reconcile, since
//! custom resources have no field selector on `spec.type`), one reconcile per object at a time,
//! per-object backoff after failures, and a resync every `--sync-period`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::flows::reconcile_infrastructure;
use super::infrastructure::Infrastructure;
use super::session::Session;
use crate::docker::ContainerRuntime;
use crate::manager::{Context, ControllerTask, Metrics, Readiness, error_chain};

/// Name of the controller in metrics, readiness checks and logs.
pub const CONTROLLER_NAME: &str = "gardener-infrastructure";

/// Field manager of the status we apply.
pub const FIELD_MANAGER: &str = "capd-rs-gardener-infrastructure";

/// Objects reconciled at the same time (one network call each; a seed holds one per shoot).
pub const CONCURRENCY: u16 = 10;

/// How soon a configuration problem is checked again (a spec change triggers a reconcile at once).
pub const CONFIGURATION_RETRY: Duration = Duration::from_secs(300);

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
    /// Every object is checked at least this often (drift of the Docker network).
    pub sync_period: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl InfrastructureContext {
    /// Builds the context.
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
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failure of `key` and returns the delay before the next attempt.
    fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures();
        let count = failures.entry(key.to_string()).or_default();
        *count = count.saturating_add(1);
        backoff_delay(*count)
    }

    fn succeeded(&self, key: &str) {
        self.failures().remove(key);
    }
}

/// The delay after `failures` consecutive failures: 0.5 s, 1 s, 2 s, ... up to [`BACKOFF_MAX`].
pub fn backoff_delay(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    BACKOFF_BASE
        .saturating_mul(1u32 << exponent)
        .min(BACKOFF_MAX)
}

/// The manager's task for this controller: watches `Infrastructure` objects in `--namespace`
/// (all when unset) with the `--watch-filter` label selector, and acts on `runtime`.
pub fn controller_task(
    context: Arc<Context>,
    runtime: Arc<dyn ContainerRuntime>,
    stop: CancellationToken,
) -> ControllerTask {
    context
        .metrics
        .register_controller(CONTROLLER_NAME, CONCURRENCY);
    context.readiness.require(CONTROLLER_NAME);
    let client = context.client.clone();
    let api = match &context.config.namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let mut watch = watcher::Config::default();
    if let Some(selector) = context.config.label_selector() {
        watch = watch.labels(&selector);
    }
    let ctx = Arc::new(InfrastructureContext::new(
        client,
        runtime,
        context.recorder.clone(),
        context.metrics.clone(),
        context.config.sync_period,
    ));
    let readiness = context.readiness.clone();
    ControllerTask {
        name: CONTROLLER_NAME,
        future: Box::pin(run(ctx, api, watch, readiness, stop)),
    }
}

/// Runs the controller until `stop` is cancelled; marks [`CONTROLLER_NAME`] ready on
/// `readiness` once the first list of `Infrastructure` objects arrived.
pub async fn run(
    ctx: Arc<InfrastructureContext>,
    api: Api<DeserializeGuard<Infrastructure>>,
    watch: watcher::Config,
    readiness: Readiness,
    stop: CancellationToken,
) {
    // Readiness comes from the watch's own `InitDone` event: `Store::wait_until_ready` keeps one
    // waker per store and the controller already waits on it, so a second waiter may never wake.
    let (reader, writer) = reflector::store();
    let mut synced = false;
    let trigger = reflector(writer, watcher(api, watch))
        .inspect(move |event| {
            if !synced && matches!(event, Ok(watcher::Event::InitDone)) {
                synced = true;
                tracing::info!(controller = CONTROLLER_NAME, "Watch synced");
                readiness.mark_ready(CONTROLLER_NAME);
            }
        })
        .applied_objects();
    Controller::for_stream(trigger, reader)
        .with_config(Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// One reconcile: never fails towards kube-runtime; failures are logged, counted, recorded in
/// the status by the flows, and retried after a per-object backoff (configuration problems after
/// [`CONFIGURATION_RETRY`]).
async fn reconcile(
    object: Arc<DeserializeGuard<Infrastructure>>,
    ctx: Arc<InfrastructureContext>,
) -> Result<Action, Infallible> {
    let infra = match &object.0 {
        Ok(infra) => infra,
        Err(invalid) => {
            let name = invalid.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(infrastructure = name, error = %invalid.error, "Skipping an Infrastructure that cannot be decoded");
            return Ok(Action::await_change());
        }
    };
    let key = format!(
        "{}/{}",
        infra.namespace().unwrap_or_default(),
        infra.name_any()
    );
    let span =
        tracing::info_span!("reconcile", controller = CONTROLLER_NAME, infrastructure = %key);
    let timer = ctx.metrics.reconcile_started(CONTROLLER_NAME);
    let mut session = Session::new(&ctx, infra);
    let outcome = reconcile_infrastructure(&mut session)
        .instrument(span.clone())
        .await;
    match outcome {
        Ok(action) => {
            ctx.succeeded(&key);
            timer.finish(Ok(()));
            Ok(action)
        }
        Err(error) => {
            timer.finish(Err(error.category()));
            let delay = if error.is_configuration_problem() {
                CONFIGURATION_RETRY
            } else {
                ctx.failed(&key)
            };
            span.in_scope(|| {
                tracing::warn!(error = %error_chain(&error), retry_in_s = delay.as_secs_f64(), "Reconcile failed");
            });
            Ok(Action::requeue(delay))
        }
    }
}

fn error_policy(
    _object: Arc<DeserializeGuard<Infrastructure>>,
    error: &Infallible,
    _ctx: Arc<InfrastructureContext>,
) -> Action {
    match *error {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff_delay(1), Duration::from_millis(500));
        assert_eq!(backoff_delay(2), Duration::from_secs(1));
        assert_eq!(backoff_delay(4), Duration::from_secs(4));
        assert_eq!(backoff_delay(40), BACKOFF_MAX);
    }
}
