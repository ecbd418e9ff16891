//! Process wiring of the manager: flags, telemetry, health and metrics endpoints, leader election,
//! and the [`Context`] the controllers share.
//!
//! `main` parses [`Args`], calls [`telemetry::init`], installs [`spawn_signal_handler`] and awaits
//! [`run`] with a [`Wiring`]: the Docker engine check and the function that builds the
//! controllers once this process leads.

pub mod apiserver;
pub mod args;
pub mod context;
pub mod diagnostics;
pub mod duration;
pub mod feature_gates;
pub mod health;
pub mod leader;
pub mod lease;
pub mod listen;
pub mod metrics;
pub mod ratelimit;
pub mod run;
pub mod telemetry;
pub mod tls;

pub use args::Args;
pub use context::{Concurrency, Context, ControllerConfig};
pub use feature_gates::{Feature, FeatureGates};
pub use health::Readiness;
pub use metrics::{Metrics, ReconcileTimer};
pub use run::{
    ControllerTask, EngineCheck, RunError, StartControllers, Wiring, run, spawn_signal_handler,
};
pub use telemetry::error_chain;
