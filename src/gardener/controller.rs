//! The controller: watches every `Infrastructure` and lets through only the events Gardener's
//! predicate admits ([`super::trigger`]); one reconcile per object at a time, a per-object backoff
//! after failures (each retry is an attempt), and, in the ignore-operation-annotation mode only, a
//! drift check every `--sync-period`. The heartbeat Lease runs next to it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{self, reflector};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::EXTENSION_NAME;
use super::cluster::shoot_not_failed;
pub use super::context::{
    BACKOFF_BASE, BACKOFF_MAX, FIELD_MANAGER, InfrastructureContext, backoff_delay,
};
use super::error::Error;
use super::flows::{Reason, reconcile_infrastructure};
use super::heartbeat;
use super::infrastructure::Infrastructure;
use super::session::Session;
use super::trigger::{Mode, Triggers};
use crate::docker::ContainerRuntime;
use crate::runtime::context::lease_namespace;
use crate::runtime::{Context, ControllerTask, Readiness, error_chain};

/// Name of the controller in metrics, readiness checks and logs.
pub const CONTROLLER_NAME: &str = "gardener-infrastructure";

/// Name of the heartbeat task in logs.
pub const HEARTBEAT_TASK: &str = "gardener-heartbeat";

/// How long one attempt may run before it is abandoned and retried, as Gardener's
/// infrastructure controller sets controller-runtime's `ReconciliationTimeout`.
pub const RECONCILE_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Objects reconciled at the same time (one network call each; a seed holds one per shoot).
pub const CONCURRENCY: u16 = 10;

/// How soon an error with a non-retryable code is tried again (Gardener asks again when the
/// spec changes).
pub const CONFIGURATION_RETRY: Duration = Duration::from_secs(300);

/// The manager's tasks for this extension: the controller, watching `Infrastructure` objects in
/// `--namespace` (all when unset) with the `--watch-filter` label selector and acting on
/// `runtime` in `mode`, and the heartbeat Lease in the manager's namespace (`POD_NAMESPACE`).
pub fn controller_tasks(
    context: Arc<Context>,
    runtime: Arc<dyn ContainerRuntime>,
    stop: CancellationToken,
    mode: Mode,
) -> Vec<ControllerTask> {
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
    let ctx = Arc::new(
        InfrastructureContext::new(
            client.clone(),
            runtime,
            context.recorder.clone(),
            context.metrics.clone(),
            context.config.sync_period,
        )
        .with_mode(mode),
    );
    let readiness = context.readiness.clone();
    let namespace = lease_namespace(std::env::var("POD_NAMESPACE").ok());
    vec![
        ControllerTask {
            name: CONTROLLER_NAME,
            future: Box::pin(run(ctx, api, watch, readiness, stop.clone())),
        },
        ControllerTask {
            name: HEARTBEAT_TASK,
            future: Box::pin(heartbeat::run(
                client,
                namespace,
                EXTENSION_NAME.to_string(),
                heartbeat::RENEW_INTERVAL,
                stop,
            )),
        },
    ]
}

type Guarded = DeserializeGuard<Infrastructure>;

/// `namespace/name` of a watched object, decodable or not.
fn key_of(object: &Guarded) -> String {
    let meta = match &object.0 {
        Ok(infra) => &infra.metadata,
        Err(invalid) => &invalid.metadata,
    };
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Runs the predicate on one watch event: the object when the predicate admits it, else
/// nothing (an object gone is forgotten by `ctx`).
fn admit(
    triggers: &mut Triggers,
    ctx: &InfrastructureContext,
    event: Result<watcher::Event<Guarded>, watcher::Error>,
) -> Option<Result<Guarded, watcher::Error>> {
    let event = match event {
        Ok(event) => event,
        Err(error) => return Some(Err(error)),
    };
    match event {
        watcher::Event::Init => {
            triggers.relist_started();
            None
        }
        watcher::Event::InitDone => {
            triggers.relist_done();
            None
        }
        watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
            let key = key_of(&object);
            let admitted = match &object.0 {
                Ok(infra) => triggers.applied(&key, infra),
                // The reconcile says why it cannot be read.
                Err(_) => true,
            };
            admitted.then_some(Ok(object))
        }
        watcher::Event::Delete(object) => {
            let key = key_of(&object);
            triggers.deleted(&key);
            ctx.forget(&key);
            None
        }
    }
}

/// Gardener's precondition on an admitted event ([`shoot_not_failed`]): the event is dropped
/// when the object's shoot has failed or its `Cluster` cannot be read; else the next reconcile
/// of the object is an attempt (recorded in `ctx`).
async fn precondition(
    ctx: &InfrastructureContext,
    admitted: Result<Guarded, watcher::Error>,
) -> Option<Result<Guarded, watcher::Error>> {
    let object = match admitted {
        Ok(object) => object,
        Err(error) => return Some(Err(error)),
    };
    let mut version = None;
    if let Ok(infra) = &object.0 {
        let namespace = infra.namespace().unwrap_or_default();
        if !shoot_not_failed(&ctx.client, &namespace).await {
            return None;
        }
        version = infra.resource_version();
    }
    ctx.ask_at(&key_of(&object), version.as_deref());
    Some(Ok(object))
}

/// Runs the controller until `stop` is cancelled; marks [`CONTROLLER_NAME`] ready on
/// `readiness` once the first list of `Infrastructure` objects arrived.
pub async fn run(
    ctx: Arc<InfrastructureContext>,
    api: Api<Guarded>,
    watch: watcher::Config,
    readiness: Readiness,
    stop: CancellationToken,
) {
    // Readiness comes from the watch's own `InitDone` event: `Store::wait_until_ready` keeps one
    // waker per store and the controller already waits on it, so a second waiter may never wake.
    let (reader, writer) = reflector::store();
    let mut synced = false;
    let mut triggers = Triggers::new(ctx.mode());
    let forgetting = ctx.clone();
    let asking = ctx.clone();
    let trigger = reflector(writer, watcher(api, watch))
        .inspect(move |event| {
            if !synced && matches!(event, Ok(watcher::Event::InitDone)) {
                synced = true;
                tracing::info!(controller = CONTROLLER_NAME, "Watch synced");
                readiness.mark_ready(CONTROLLER_NAME);
            }
        })
        .filter_map(move |event| futures::future::ready(admit(&mut triggers, &forgetting, event)))
        .filter_map(move |admitted| {
            let ctx = asking.clone();
            async move { precondition(&ctx, admitted).await }
        });
    Controller::for_stream(trigger, reader)
        .with_config(Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// One reconcile: never fails towards kube-runtime; failures are logged, counted, recorded in
/// the status by the flows, and retried after a per-object backoff (errors with a non-retryable
/// code after [`CONFIGURATION_RETRY`]).
async fn reconcile(
    object: Arc<Guarded>,
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
    let reason = ctx.take_reason(&key, infra.resource_version().as_deref());
    if reason == Reason::Resync && ctx.mode() == Mode::RespectOperationAnnotation {
        // Only Gardener starts attempts; the event that scheduled this run was seen by the run
        // before it.
        return Ok(Action::await_change());
    }
    let span =
        tracing::info_span!("reconcile", controller = CONTROLLER_NAME, infrastructure = %key);
    let timer = ctx.metrics.reconcile_started(CONTROLLER_NAME);
    let mut session = Session::new(&ctx, infra);
    let attempt = reconcile_infrastructure(&mut session, reason).instrument(span.clone());
    let outcome = within(RECONCILE_TIMEOUT, attempt).await;
    match outcome {
        Ok(action) => {
            ctx.succeeded(&key);
            timer.finish(Ok(()));
            Ok(action)
        }
        Err(error) => {
            timer.finish(Err(error.category()));
            let delay = if error.is_permanent() {
                CONFIGURATION_RETRY
            } else {
                ctx.failed(&key)
            };
            // The retry is another attempt, as controller-runtime's requeue after an error is.
            ctx.ask(&key);
            span.in_scope(|| {
                tracing::warn!(error = %error_chain(&error), retry_in_s = delay.as_secs_f64(), "Reconcile failed");
            });
            Ok(Action::requeue(delay))
        }
    }
}

/// The outcome of `attempt`, or [`Error::TimedOut`] when it has not ended after `limit`: it is
/// then abandoned where it stands (its status stays `Processing`, as when controller-runtime
/// cancels a reconcile's context) and retried like any failure.
async fn within(
    limit: Duration,
    attempt: impl Future<Output = Result<Action, Error>>,
) -> Result<Action, Error> {
    tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or_else(|_| Err(Error::TimedOut(limit)))
}

fn error_policy(
    _object: Arc<Guarded>,
    error: &Infallible,
    _ctx: Arc<InfrastructureContext>,
) -> Action {
    match *error {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_does_not_end_is_abandoned_as_a_retryable_timeout() {
        let hung = within(RECONCILE_TIMEOUT, std::future::pending()).await;
        let Err(error) = hung else {
            panic!("a hung attempt ends: {hung:?}");
        };
        assert_eq!(error.category(), "timeout");
        assert!(!error.is_permanent(), "retried with the backoff");
        assert_eq!(
            error.to_string(),
            "reconcile abandoned after 1200 s (the reconcile timeout)"
        );
        let quick = within(RECONCILE_TIMEOUT, async { Ok(Action::await_change()) }).await;
        assert!(quick.is_ok());
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff_delay(1), Duration::from_millis(500));
        assert_eq!(backoff_delay(2), Duration::from_secs(1));
        assert_eq!(backoff_delay(4), Duration::from_secs(4));
        assert_eq!(backoff_delay(40), BACKOFF_MAX);
    }
}
