//! What every controller runs on: the pieces the manager builds once and the controllers, the
//! webhooks and the Gardener extension share.
//!
//! - [`context`]: the [`Context`] shared as `Arc<Context>` (management cluster client, Event
//!   recorder, metrics, readiness, flag values), the [`ControllerTask`] each controller runs as,
//!   and the namespace of the process's Leases.
//! - [`client`]: Kubernetes clients with our user agent and client-go's rate limit
//!   ([`ratelimit`]), for the management cluster and the workload clusters alike.
//! - [`errors`]: [`error_chain`], the one-line error chain of every log line and Event message.
//! - [`metrics`]: the Prometheus registry (controller-runtime's metric names).
//! - [`health`]: the [`Readiness`] checks behind `/readyz`, and the `/healthz` `/readyz` routes.
//! - [`feature_gates`]: `--feature-gates`, read by the controllers through the context.
//!
//! This module sits below [`crate::controllers`], [`crate::gardener`] and [`crate::webhooks`],
//! and imports none of them; the process wiring on top (flags, start-up, leader election, the
//! servers) is [`crate::manager`]. Nothing below the manager imports the manager
//! (`tests/layering.rs` checks it).

pub mod client;
pub mod context;
pub mod errors;
pub mod feature_gates;
pub mod health;
pub mod metrics;
pub mod ratelimit;

pub use context::{Concurrency, Context, ControllerConfig, ControllerTask};
pub use errors::error_chain;
pub use feature_gates::{Feature, FeatureGates};
pub use health::Readiness;
pub use metrics::{Metrics, ReconcileTimer};
