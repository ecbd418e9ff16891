//! Process wiring of the manager: flags, telemetry, health and metrics endpoints, leader election,
//! and the [`Context`] the controllers share.
//!
//! `main` parses [`Args`], calls [`telemetry::init`], installs [`spawn_signal_handler`] and awaits
//! [`run`] with a [`Wiring`]: the Docker engine check and the function that builds the
//! controllers once this process leads. [`wiring()`] builds it for the controllers `--controllers`
//! names ([`ControllerSet`]); `run` reads the same set to wait only for their CRDs.
//!
//! How a controller plugs in (each one requires its readiness check before it starts, marks it
//! once its watches have synced, and returns when `stop` is cancelled):
//!
//! ```no_run
//! use std::sync::Arc;
//! use capd::manager::{Context, ControllerTask, Wiring};
//! use tokio_util::sync::CancellationToken;
//!
//! let wiring = Wiring {
//!     engine_check: None,
//!     start_controllers: Box::new(|context: Arc<Context>, stop: CancellationToken| {
//!         let concurrency = context.config.concurrency.docker_cluster;
//!         context.metrics.register_controller("dockercluster", concurrency);
//!         context.readiness.require("dockercluster");
//!         vec![ControllerTask {
//!             name: "dockercluster",
//!             future: Box::pin(async move {
//!                 // kube::runtime::Controller::new(..)
//!                 //     .graceful_shutdown_on(stop.cancelled_owned()) ...
//!                 context.readiness.mark_ready("dockercluster");
//!                 stop.cancelled().await;
//!             }),
//!         }]
//!     }),
//! };
//! ```

pub mod apiserver;
pub mod args;
pub mod context;
pub mod diagnostics;
pub mod feature_gates;
pub mod health;
pub mod leader;
pub mod lease;
pub mod metrics;
pub mod ratelimit;
pub mod run;
pub mod telemetry;
pub mod wiring;

pub use args::Args;
pub use context::{Concurrency, Context, ControllerConfig};
pub use feature_gates::{Feature, FeatureGates};
pub use health::Readiness;
pub use metrics::{Metrics, ReconcileTimer};
pub use run::{
    ControllerTask, EngineCheck, RunError, StartControllers, Wiring, run, spawn_signal_handler,
};
pub use telemetry::error_chain;
pub use wiring::{ControllerSet, wiring};
