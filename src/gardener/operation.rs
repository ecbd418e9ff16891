//! `status.lastOperation` and `status.lastError` transitions (pure), as Gardener's status
//! updater writes them (gardener/gardener `extensions/pkg/controller/status.go`).
//!
//! Every attempt stamps: an operation shows `Processing` (progress 1) when an attempt starts, then
//! `Succeeded` (100) or `Error` (50, with `lastError`), each with the time of that write, so
//! gardenlet sees every retry move `lastUpdateTime` (it compares it with its
//! `gardener.cloud/timestamp`). Attempts happen only when Gardener asks for one (see
//! [`super::trigger`]) or to retry a failure, never on other watch events.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::infrastructure::{
    InfrastructureObjectStatus, InfrastructureStatusNetworking, LastError, LastOperation,
};
use super::status::Published;

/// Code of an invalid or unusable `providerConfig`: gardenlet stops retrying the shoot until
/// its spec changes.
pub const ERR_CONFIGURATION_PROBLEM: &str = "ERR_CONFIGURATION_PROBLEM";

/// Code of a configuration that does not work now but can heal without a change of the spec
/// (a leftover network in the way, containers still attached to a network to recreate, an
/// engine without an IPv6 pool yet).
pub const ERR_RETRYABLE_CONFIGURATION_PROBLEM: &str = "ERR_RETRYABLE_CONFIGURATION_PROBLEM";

/// Code of a dependency on the infrastructure level that should go away (for example containers
/// still attached to the network being deleted).
pub const ERR_RETRYABLE_INFRA_DEPENDENCIES: &str = "ERR_RETRYABLE_INFRA_DEPENDENCIES";

/// Code of exhausted infrastructure resources (no free subnet).
pub const ERR_INFRA_RESOURCES_DEPLETED: &str = "ERR_INFRA_RESOURCES_DEPLETED";

/// Code of an engine that refuses our credentials: HTTP 401, or a TLS handshake that fails on a
/// certificate (ours refused, or the engine's not trusted).
pub const ERR_INFRA_UNAUTHENTICATED: &str = "ERR_INFRA_UNAUTHENTICATED";

/// Code of an engine that authenticated us but denies the request (an authorization plugin's
/// HTTP 403).
pub const ERR_INFRA_UNAUTHORIZED: &str = "ERR_INFRA_UNAUTHORIZED";

/// The codes after which retrying cannot help, as Gardener's `HasNonRetryableErrorCode` lists
/// them (of those this extension reports).
pub const NON_RETRYABLE_CODES: [&str; 3] = [
    ERR_CONFIGURATION_PROBLEM,
    ERR_INFRA_UNAUTHENTICATED,
    ERR_INFRA_UNAUTHORIZED,
];

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

/// A `lastOperation` written at `now` (Gardener's `LastOperation`).
fn stamped(
    operation: OperationType,
    state: OperationState,
    progress: i32,
    description: String,
    now: Timestamp,
) -> LastOperation {
    LastOperation {
        description,
        last_update_time: whole_seconds(now),
        progress,
        state: state.as_str().to_string(),
        type_: operation.as_str().to_string(),
    }
}

/// The status showing an attempt of `operation` as started at `now` (Gardener's `Processing`:
/// everything else stays).
pub fn processing(
    current: &InfrastructureObjectStatus,
    operation: OperationType,
    now: Timestamp,
) -> InfrastructureObjectStatus {
    let mut next = current.clone();
    next.last_operation = Some(stamped(
        operation,
        OperationState::Processing,
        PROGRESS_STARTED,
        operation.processing_description().to_string(),
        now,
    ));
    next
}

/// The status after `operation` succeeded: `published` replaces what the reconcile publishes
/// (`None` keeps the current values), `lastError` is cleared and `observedGeneration` set
/// (Gardener's `Success`).
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
        // `nodes` is ours; what others wrote next to it stays as read.
        let mut networking = next.networking.take().unwrap_or_default();
        networking.nodes = published.nodes;
        next.networking =
            Some(networking).filter(|n| *n != InfrastructureStatusNetworking::default());
    }
    next.last_operation = Some(stamped(
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

/// The status after `operation` failed with `error` (its full chain) and `codes` (Gardener's
/// `Error`: `lastError` stamped at `now` too).
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
        operation,
        OperationState::Error,
        PROGRESS_FAILED,
        description.clone(),
        now,
    ));
    next.last_error = Some(LastError {
        description,
        codes: codes.iter().map(ToString::to_string).collect(),
        last_update_time: Some(whole_seconds(now)),
        others: BTreeMap::new(),
    });
    next.observed_generation = generation.or(current.observed_generation);
    next
}

#[cfg(test)]
#[path = "operation_tests.rs"]
mod tests;
