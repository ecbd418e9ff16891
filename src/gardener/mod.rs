//! Gardener `Infrastructure` extension for type `docker`: the same Docker backend, serving
//! Gardener's infrastructure extension contract.
//!
//! Gardener creates an `Infrastructure` (`extensions.gardener.cloud/v1alpha1`) in the seed; for
//! `spec.type: docker` this controller creates or adopts the shoot's Docker network and reports it
//! in the status (`providerStatus`, `nodesCIDR`, `lastOperation`, `lastError`,
//! `observedGeneration`, `state`). The manager runs it when `--controllers` names
//! `gardener-infrastructure` (or with `--gardener-infrastructure`), alone or next to the Cluster
//! API controllers.
//!
//! It behaves as Gardener's generic infrastructure reconciler (gardener/gardener
//! `extensions/pkg/controller/infrastructure/reconciler.go`) wrapped in its
//! `OperationAnnotationWrapper`: it acts only when Gardener's default predicate admits an event
//! ([`trigger`]), leaves an object annotated `wait-for-state` alone until gardenlet sets
//! `restore`, skips failed shoots and migrated objects, and keeps a heartbeat Lease
//! ([`heartbeat`]).
//!
//! Phases, as in the other controllers: [`trigger`] and [`step`] decide from the objects alone
//! (pure), [`config`] validates `spec.providerConfig` (pure), [`network`] acts on the Docker
//! engine, [`operation`] computes the next status (pure), and [`controller`] reads and writes the
//! Kubernetes API.
//!
//! - [`config`]: [`InfrastructureConfig`], its validation and defaults.
//! - [`status`]: [`InfrastructureStatus`] (`status.providerStatus`) and [`InfrastructureState`]
//!   (`status.state`).
//! - [`infrastructure`]: a read view of Gardener's `Infrastructure`.
//! - [`cluster`]: a read view of Gardener's `Cluster` and the Shoot embedded in it.

pub mod cluster;
pub mod config;
pub mod context;
pub mod controller;
pub mod error;
#[cfg(test)]
mod fixtures;
mod flows;
pub mod heartbeat;
pub mod infrastructure;
pub mod network;
pub mod operation;
mod session;
pub mod status;
pub mod step;
pub mod trigger;

pub use config::{InfrastructureConfig, Ipv6Config, NetworkPlan, NetworksConfig, validate};
pub use controller::{InfrastructureContext, controller_tasks, run};
pub use error::Error;
pub use infrastructure::{Infrastructure, InfrastructureObjectStatus, InfrastructureSpec};
pub use status::{InfrastructureState, InfrastructureStatus};

/// `spec.type` this extension serves.
pub const EXTENSION_TYPE: &str = "docker";

/// API version of our `InfrastructureConfig`, `InfrastructureStatus` and `InfrastructureState`.
pub const API_VERSION: &str = "docker.provider.extensions.gardener.cloud/v1alpha1";

/// Finalizer of `Infrastructure` objects, the name Gardener's infrastructure controllers use.
pub const FINALIZER: &str = "extensions.gardener.cloud/infrastructure";

/// Annotation by which Gardener asks for an operation.
pub const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";

/// [`OPERATION_ANNOTATION`] value: reconcile now (removed when the reconcile starts).
pub const OPERATION_RECONCILE: &str = "reconcile";

/// [`OPERATION_ANNOTATION`] value: hand the object over to another seed (keep Docker resources).
pub const OPERATION_MIGRATE: &str = "migrate";

/// [`OPERATION_ANNOTATION`] value: take the object over from another seed.
pub const OPERATION_RESTORE: &str = "restore";

/// [`OPERATION_ANNOTATION`] value set by gardenlet on an object it creates during a control plane
/// migration, until it has written `status.state`: the object is left alone until
/// [`OPERATION_RESTORE`] replaces it (Gardener's `GardenerOperationWaitForState`).
pub const OPERATION_WAIT_FOR_STATE: &str = "wait-for-state";

/// Shoot annotation confirming a force deletion (Gardener's
/// `AnnotationConfirmationForceDeletion`): the deletion removes what it can, then the finalizer.
pub const FORCE_DELETION_ANNOTATION: &str = "confirmation.gardener.cloud/force-deletion";

/// The extension class served: `spec.class` must be this or empty (Gardener's `HasClass`
/// predicate with no configured class).
pub const EXTENSION_CLASS: &str = "shoot";

/// Name of this extension: the `ControllerRegistration`'s, and the holder of the heartbeat Lease.
pub const EXTENSION_NAME: &str = "provider-docker";

/// Docker label naming the namespace of the `Infrastructure` a network was created for.
pub const NAMESPACE_LABEL: &str =
    "docker.provider.extensions.gardener.cloud/infrastructure-namespace";

/// Docker label naming the `Infrastructure` a network was created for.
pub const NAME_LABEL: &str = "docker.provider.extensions.gardener.cloud/infrastructure-name";
