//! Dev* objects that name no backend (the defaulting webhook was bypassed; both `docker` and
//! `inMemory` are served): they get `Ready=False/BackendNotSupported` and a Warning Event, and
//! nothing else happens. No finalizer is added, so deletion is not held up; one left
//! from an earlier docker backend is released when the object is deleted.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use serde_json::json;

use super::apply::apply_status_unless_gone;
use super::conditions::condition;
use super::context::{Context, EventKind};
use super::error::{Error, Result, finalizer_gone};
use super::finalize::finalizer;
use super::kinds::{ServedKind, UnsupportedBackend};
use crate::api::conditions::{Condition, ConditionStatus, READY_CONDITION};

/// Reason of the `Ready` condition of an object whose backend is not implemented.
pub const BACKEND_NOT_SUPPORTED_REASON: &str = "BackendNotSupported";

/// The message saying the backend is missing, and how to name one.
pub const MESSAGE: &str =
    "spec.backend names no backend; set spec.backend.docker or spec.backend.inMemory";

/// The same for a DevMachinePool, whose only backend is `docker` (as in CAPD 1.14).
pub const POOL_MESSAGE: &str = "spec.backend names no backend; set spec.backend.docker";

/// Reports the object unsupported (once: the status and Event are written only when the
/// condition changes), and releases our finalizer when it is being deleted.
///
/// # Errors
/// [`Error::Kube`] when the API server refuses the status or the finalizer removal.
pub async fn reconcile<K: ServedKind>(
    ctx: &Context,
    object: &K,
    finalizer_name: &str,
    backend: UnsupportedBackend,
) -> Result<Action> {
    reconcile_with(ctx, object, finalizer_name, MESSAGE, backend).await
}

/// As [`reconcile`], with the kind's own `message` ([`POOL_MESSAGE`] for a pool).
///
/// # Errors
/// As [`reconcile`].
pub async fn reconcile_with<K: ServedKind>(
    ctx: &Context,
    object: &K,
    finalizer_name: &str,
    message: &str,
    _: UnsupportedBackend,
) -> Result<Action> {
    let namespace = object.namespace().unwrap_or_default();
    if object.meta().deletion_timestamp.is_some() {
        if object.finalizers().iter().any(|f| f == finalizer_name) {
            finalizer(
                &ctx.finalizers,
                &ctx.api::<K>(&namespace),
                finalizer_name,
                Arc::new(object.clone()),
                |_| async { Ok::<_, Error>(Action::await_change()) },
            )
            .await
            .or_else(finalizer_gone)?;
        }
        return Ok(Action::await_change());
    }
    let message = message.to_string();
    let current = ready_condition(object);
    if current.as_ref().is_some_and(|c| {
        c.status == ConditionStatus::False
            && c.reason == BACKEND_NOT_SUPPORTED_REASON
            && c.message == message
    }) {
        return Ok(Action::await_change());
    }
    let ready = condition(
        READY_CONDITION,
        ConditionStatus::False,
        BACKEND_NOT_SUPPORTED_REASON,
        message.clone(),
        object.meta().generation,
    );
    tracing::warn!("No backend named; nothing is provisioned");
    if apply_status_unless_gone(
        &ctx.api::<K>(&namespace),
        &object.name_any(),
        &json!({"conditions": [ready]}),
    )
    .await?
    {
        ctx.event(
            object,
            EventKind::Warning,
            BACKEND_NOT_SUPPORTED_REASON,
            message,
        )
        .await;
    }
    Ok(Action::await_change())
}

/// The object's `Ready` condition, read from its serialized status (both Dev* kinds keep
/// `status.conditions` in the same place).
fn ready_condition<K: ServedKind>(object: &K) -> Option<Condition> {
    let value = serde_json::to_value(object).ok()?;
    let conditions: Vec<Condition> =
        serde_json::from_value(value.pointer("/status/conditions")?.clone()).ok()?;
    conditions.into_iter().find(|c| c.type_ == READY_CONDITION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_way_out() {
        assert!(MESSAGE.contains("no backend"), "{MESSAGE}");
        assert!(MESSAGE.contains("spec.backend.docker"), "{MESSAGE}");
        assert!(MESSAGE.contains("spec.backend.inMemory"), "{MESSAGE}");
        assert!(
            POOL_MESSAGE.contains("spec.backend.docker"),
            "{POOL_MESSAGE}"
        );
        assert!(!POOL_MESSAGE.contains("inMemory"), "{POOL_MESSAGE}");
    }
}
