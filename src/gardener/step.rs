//! What to do with an `Infrastructure`, decided from the object and its shoot alone (pure), as
//! Gardener's generic infrastructure reconciler decides it (gardener/gardener
//! `extensions/pkg/controller/infrastructure/reconciler.go`, `Reconcile`): skip a failed shoot,
//! compute the operation type (`ComputeOperationType`), skip a migrated object
//! (`ShouldSkipOperation`), then migrate, delete, restore or reconcile, in that order.

use kube::{Resource, ResourceExt};

use super::cluster::Shoot;
pub use super::infrastructure::operation_annotation;
use super::infrastructure::{Infrastructure, LastOperation};
use super::operation::{OperationState, OperationType};
use super::trigger::serves;
use super::{FINALIZER, OPERATION_MIGRATE, OPERATION_RESTORE, OPERATION_WAIT_FOR_STATE};

/// The next step for one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do (with the reason, for the log).
    Ignore(&'static str),
    /// Create or reconcile the network.
    Reconcile {
        /// `Create` until a create succeeded, `Reconcile` afterwards.
        operation: OperationType,
    },
    /// Remove what we created, then the finalizer.
    Delete {
        /// The shoot is force-deleted: remove what can be removed, then the finalizer, even when
        /// something is left behind.
        force: bool,
    },
    /// Record the state and let go of the object, keeping the Docker resources.
    Migrate,
    /// Adopt the Docker resources recorded in `status.state`, then reconcile.
    Restore,
}

/// Whether the object carries our finalizer.
pub fn has_finalizer(infra: &Infrastructure) -> bool {
    infra.finalizers().iter().any(|f| f == FINALIZER)
}

/// Why the object is none of this controller's business at all, checked before anything is
/// read or written: another `spec.type` or `spec.class` (Gardener's `HasType` and `HasClass`
/// predicates; an empty class is `shoot`), or gardenlet still restoring its state
/// (`OperationAnnotationWrapper` returns at once on `wait-for-state`).
pub fn gate(infra: &Infrastructure) -> Option<&'static str> {
    if !serves(infra) {
        return Some("another type or extension class");
    }
    if operation_annotation(infra) == Some(OPERATION_WAIT_FOR_STATE) {
        return Some("gardenlet has not restored the state yet (wait-for-state)");
    }
    None
}

fn not_succeeded(last: &LastOperation, operation: OperationType) -> bool {
    last.type_ == operation.as_str() && last.state != OperationState::Succeeded.as_str()
}

/// The operation the object asks for, as Gardener's `ComputeOperationType`: the `migrate`
/// annotation, a deletion, the `restore` annotation, then a create, migrate or restore that has
/// not succeeded yet, else a reconcile.
pub fn operation_type(infra: &Infrastructure) -> OperationType {
    let annotation = operation_annotation(infra);
    let last = infra
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref());
    if annotation == Some(OPERATION_MIGRATE) {
        return OperationType::Migrate;
    }
    if infra.meta().deletion_timestamp.is_some() {
        return OperationType::Delete;
    }
    if annotation == Some(OPERATION_RESTORE) {
        return OperationType::Restore;
    }
    let Some(last) = last else {
        return OperationType::Create;
    };
    [
        OperationType::Create,
        OperationType::Migrate,
        OperationType::Restore,
    ]
    .into_iter()
    .find(|operation| not_succeeded(last, *operation))
    .unwrap_or(OperationType::Reconcile)
}

/// Whether the last operation is a successful migration (Gardener's `IsMigrated`).
pub fn is_migrated(infra: &Infrastructure) -> bool {
    infra
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
        .is_some_and(|l| {
            l.type_ == OperationType::Migrate.as_str()
                && l.state == OperationState::Succeeded.as_str()
        })
}

/// Gardener's `ShouldSkipOperation`: a migrated object is left alone by everything but another
/// migrate or a restore; in particular its deletion in the source seed never removes the network
/// the destination seed uses.
pub fn should_skip_operation(operation: OperationType, infra: &Infrastructure) -> bool {
    operation != OperationType::Migrate && operation != OperationType::Restore && is_migrated(infra)
}

/// Decides the next step for `infra`, whose shoot is `shoot` (`None` when the seed holds no
/// `Cluster` for its namespace).
pub fn next_step(infra: &Infrastructure, shoot: Option<&Shoot>) -> Step {
    if let Some(reason) = gate(infra) {
        return Step::Ignore(reason);
    }
    if shoot.is_some_and(Shoot::is_failed) {
        return Step::Ignore("the shoot has failed");
    }
    let operation = operation_type(infra);
    if should_skip_operation(operation, infra) {
        return Step::Ignore("migrated to another seed");
    }
    if operation == OperationType::Migrate {
        return Step::Migrate;
    }
    if infra.meta().deletion_timestamp.is_some() {
        return if has_finalizer(infra) {
            Step::Delete {
                force: shoot.is_some_and(Shoot::needs_force_deletion),
            }
        } else {
            Step::Ignore("deleting without our finalizer")
        };
    }
    if operation == OperationType::Restore {
        return Step::Restore;
    }
    Step::Reconcile { operation }
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
