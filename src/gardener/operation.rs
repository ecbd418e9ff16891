//! `status.lastOperation` and `status.lastError` transitions (pure).
//!
//! An operation shows `Processing` (progress 1) when it starts, then `Succeeded` (100) or `Error`
//! (50, with `lastError`). Retrying after an `Error` of the same type does not flip back to
//! `Processing`, and a result identical to the current one keeps its `lastUpdateTime`, so retries
//! and resyncs write nothing when nothing changed.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::infrastructure::{InfrastructureObjectStatus, LastError, LastOperation};
use super::status::Published;

/// Code of an invalid or unusable `providerConfig` (not retried until the spec changes).
pub const ERR_CONFIGURATION_PROBLEM: &str = "ERR_CONFIGURATION_PROBLEM";

/// Code of a dependency on the infrastructure level that should go away (for example containers
/// still attached to the network being deleted).
pub const ERR_RETRYABLE_INFRA_DEPENDENCIES: &str = "ERR_RETRYABLE_INFRA_DEPENDENCIES";

/// Code of exhausted infrastructure resources (no free subnet).
pub const ERR_INFRA_RESOURCES_DEPLETED: &str = "ERR_INFRA_RESOURCES_DEPLETED";

/// Progress of a started operation.
pub const PROGRESS_STARTED: i32 = 1;

/// Progress of a failed operation (Gardener's convention).
pub const PROGRESS_FAILED: i32 = 50;

/// Progress of a finished operation.
pub const PROGRESS_DONE: i32 = 100;

/// Gardener's operation types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationType {
    /// The first reconcile, until it succeeds.
    Create,
    /// Every later reconcile.
    Reconcile,
    /// Deletion.
    Delete,
    /// Hand-over to another seed.
    Migrate,
    /// Take-over from another seed.
    Restore,
}

impl OperationType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "Create",
            Self::Reconcile => "Reconcile",
            Self::Delete => "Delete",
            Self::Migrate => "Migrate",
            Self::Restore => "Restore",
        }
    }

    /// `lastOperation.description` while it runs.
    pub fn processing_description(self) -> &'static str {
        match self {
            Self::Create | Self::Reconcile => "Reconciling the infrastructure",
            Self::Delete => "Deleting the infrastructure",
            Self::Migrate => "Migrating the infrastructure",
            Self::Restore => "Restoring the infrastructure",
        }
    }

    /// The start of `lastOperation.description` when it failed.
    pub fn error_description(self) -> &'static str {
        match self {
            Self::Create | Self::Reconcile => "Error reconciling the infrastructure",
            Self::Delete => "Error deleting the infrastructure",
            Self::Migrate => "Error migrating the infrastructure",
            Self::Restore => "Error restoring the infrastructure",
        }
    }

    /// Event reason when the operation reaches `state` (Gardener's event naming: `Reconciling`,
    /// `Reconciled`, `ReconcileError`, ...). Distinct per state, so the Event recorder does not
    /// fold a result into the Event of its start.
    pub fn event_reason(self, state: OperationState) -> &'static str {
        use OperationState::{Error, Processing, Succeeded};
        match (self, state) {
            (Self::Create | Self::Reconcile, Processing) => "Reconciling",
            (Self::Create | Self::Reconcile, Succeeded) => "Reconciled",
            (Self::Create | Self::Reconcile, Error) => "ReconcileError",
            (Self::Delete, Processing) => "Deleting",
            (Self::Delete, Succeeded) => "Deleted",
            (Self::Delete, Error) => "DeleteError",
            (Self::Migrate, Processing) => "Migrating",
            (Self::Migrate, Succeeded) => "Migrated",
            (Self::Migrate, Error) => "MigrateError",
            (Self::Restore, Processing) => "Restoring",
            (Self::Restore, Succeeded) => "Restored",
            (Self::Restore, Error) => "RestoreError",
        }
    }
}

/// Gardener's operation states used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationState {
    /// Running.
    Processing,
    /// Done.
    Succeeded,
    /// Failed; will be retried.
    Error,
}

impl OperationState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processing => "Processing",
            Self::Succeeded => "Succeeded",
            Self::Error => "Error",
        }
    }
}

/// A timestamp at whole seconds, so it compares equal after an API round trip.
pub fn whole_seconds(time: Timestamp) -> Time {
    Time(Timestamp::from_second(time.as_second()).unwrap_or(time))
}

/// `next` with the `lastUpdateTime` of `current` when nothing else differs, else `now`.
fn stamped(
    current: Option<&LastOperation>,
    operation: OperationType,
    state: OperationState,
    progress: i32,
    description: String,
    now: Timestamp,
) -> LastOperation {
    let mut next = LastOperation {
        description,
        last_update_time: whole_seconds(now),
        progress,
        state: state.as_str().to_string(),
        type_: operation.as_str().to_string(),
    };
    if let Some(current) = current {
        let same = current.description == next.description
            && current.progress == next.progress
            && current.state == next.state
            && current.type_ == next.type_;
        if same {
            next.last_update_time = current.last_update_time.clone();
        }
    }
    next
}

/// The status showing `operation` as started, or `None` when it already shows it running or
/// failing (a retry), so no write is needed.
pub fn processing(
    current: &InfrastructureObjectStatus,
    operation: OperationType,
    now: Timestamp,
) -> Option<InfrastructureObjectStatus> {
    let last = current.last_operation.as_ref();
    let running_or_retrying = last.is_some_and(|l| {
        l.type_ == operation.as_str()
            && (l.state == OperationState::Processing.as_str()
                || l.state == OperationState::Error.as_str())
    });
    if running_or_retrying {
        return None;
    }
    let mut next = current.clone();
    next.last_operation = Some(stamped(
        last,
        operation,
        OperationState::Processing,
        PROGRESS_STARTED,
        operation.processing_description().to_string(),
        now,
    ));
    Some(next)
}

/// The status after `operation` succeeded: `published` replaces what the reconcile publishes
/// (`None` keeps the current values), `lastError` is cleared and `observedGeneration` set.
pub fn succeeded(
    current: &InfrastructureObjectStatus,
    operation: OperationType,
    generation: Option<i64>,
    published: Option<Published>,
    description: String,
    now: Timestamp,
) -> InfrastructureObjectStatus {
    let mut next = current.clone();
    if let Some(published) = published {
        next.provider_status = published.provider_status;
        next.nodes_cidr = published.nodes_cidr;
        next.state = published.state;
    }
    next.last_operation = Some(stamped(
        current.last_operation.as_ref(),
        operation,
        OperationState::Succeeded,
        PROGRESS_DONE,
        description,
        now,
    ));
    next.last_error = None;
    next.observed_generation = generation.or(current.observed_generation);
    next
}

/// The status after `operation` failed with `error` (its full chain) and `codes`.
pub fn failed(
    current: &InfrastructureObjectStatus,
    operation: OperationType,
    generation: Option<i64>,
    error: &str,
    codes: &[&str],
    now: Timestamp,
) -> InfrastructureObjectStatus {
    let description = format!("{}: {error}", operation.error_description());
    let mut next = current.clone();
    next.last_operation = Some(stamped(
        current.last_operation.as_ref(),
        operation,
        OperationState::Error,
        PROGRESS_FAILED,
        description.clone(),
        now,
    ));
    let codes: Vec<String> = codes.iter().map(ToString::to_string).collect();
    let unchanged = current
        .last_error
        .as_ref()
        .filter(|e| e.description == description && e.codes == codes);
    next.last_error = Some(LastError {
        description,
        codes,
        last_update_time: Some(
            unchanged
                .and_then(|e| e.last_update_time.clone())
                .unwrap_or_else(|| whole_seconds(now)),
        ),
    });
    next.observed_generation = generation.or(current.observed_generation);
    next
}

#[cfg(test)]
#[path = "operation_tests.rs"]
mod tests;
