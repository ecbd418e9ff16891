//! What to do with an `Infrastructure`, decided from the object alone (pure), in the order
//! Gardener's generic infrastructure reconciler uses: migrate, delete, restore, then reconcile.

use kube::{Resource, ResourceExt};

use super::infrastructure::{Infrastructure, LastOperation};
use super::operation::{OperationState, OperationType};
use super::{
    EXTENSION_TYPE, FINALIZER, OPERATION_ANNOTATION, OPERATION_MIGRATE, OPERATION_RECONCILE,
    OPERATION_RESTORE,
};

/// The next step for one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do (with the reason, for the log).
    Ignore(&'static str),
    /// Create or reconcile the network.
    Reconcile {
        /// `Create` until a create succeeded, `Restore` while an unfinished restore goes on,
        /// `Reconcile` afterwards.
        operation: OperationType,
        /// Whether Gardener asked for an operation (annotation, new generation, or the last
        /// operation did not succeed). When `false` the reconcile only checks for drift and
        /// writes nothing unless the network changed.
        requested: bool,
    },
    /// Remove what we created, then the finalizer.
    Delete,
    /// Record the state and let go of the object, keeping the Docker resources.
    Migrate,
    /// Adopt the Docker resources recorded in `status.state`, then reconcile.
    Restore,
}

/// Whether the object carries our finalizer.
pub fn has_finalizer(infra: &Infrastructure) -> bool {
    infra.finalizers().iter().any(|f| f == FINALIZER)
}

/// The value of the `gardener.cloud/operation` annotation.
pub fn operation_annotation(infra: &Infrastructure) -> Option<&str> {
    infra
        .annotations()
        .get(OPERATION_ANNOTATION)
        .map(String::as_str)
}

fn is(last: Option<&LastOperation>, operation: OperationType, state: OperationState) -> bool {
    last.is_some_and(|l| l.type_ == operation.as_str() && l.state == state.as_str())
}

fn unfinished(last: Option<&LastOperation>, operation: OperationType) -> bool {
    last.is_some_and(|l| {
        l.type_ == operation.as_str() && l.state != OperationState::Succeeded.as_str()
    })
}

/// Decides the next step for `infra`.
pub fn next_step(infra: &Infrastructure) -> Step {
    if infra.spec.type_ != EXTENSION_TYPE {
        return Step::Ignore("the type is not docker");
    }
    let status = infra.status.as_ref();
    let last = status.and_then(|s| s.last_operation.as_ref());
    let annotation = operation_annotation(infra);
    if annotation == Some(OPERATION_MIGRATE) || unfinished(last, OperationType::Migrate) {
        return Step::Migrate;
    }
    if infra.meta().deletion_timestamp.is_some() {
        return if has_finalizer(infra) {
            Step::Delete
        } else {
            Step::Ignore("deleting without our finalizer")
        };
    }
    if annotation == Some(OPERATION_RESTORE) {
        return Step::Restore;
    }
    if is(last, OperationType::Migrate, OperationState::Succeeded) {
        return Step::Ignore("migrated to another seed");
    }
    let operation = if last.is_none() || unfinished(last, OperationType::Create) {
        OperationType::Create
    } else if unfinished(last, OperationType::Restore) {
        OperationType::Restore
    } else {
        OperationType::Reconcile
    };
    let observed = status.and_then(|s| s.observed_generation);
    let requested = annotation == Some(OPERATION_RECONCILE)
        || last.is_none_or(|l| l.state != OperationState::Succeeded.as_str())
        || observed != infra.meta().generation;
    Step::Reconcile {
        operation,
        requested,
    }
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
