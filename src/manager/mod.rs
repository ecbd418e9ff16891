//! Process wiring of the manager, the top layer: flags, logging set-up, start-up checks, the
//! health, diagnostics and webhook servers, leader election, and the order everything stops in.
//!
//! `main` parses [`Args`], calls [`telemetry::init`], installs [`spawn_signal_handler`] and awaits
//! [`run()`] with a [`Wiring`]: the Docker engine check and the function that builds the
//! controllers once this process leads. [`wiring()`] builds it for the controllers `--controllers`
//! names ([`ControllerSet`]); `run` reads the same set to wait only for their CRDs.
//!
//! What the controllers share with the manager (the [`Context`](crate::runtime::Context),
//! metrics, readiness, the client builder, error chains) lives below in [`crate::runtime`]; the
//! manager imports it, and nothing below the manager imports the manager.
//!
//! How a controller plugs in (each one requires its readiness check before it starts, marks it
//! once its watches have synced, and returns when `stop` is cancelled):
//!
//! ```no_run
//! use std::sync::Arc;
//! use capd::manager::Wiring;
//! use capd::runtime::{Context, ControllerTask};
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
pub mod diagnostics;
pub mod leader;
pub mod lease;
pub mod run;
pub mod telemetry;
pub mod wiring;

pub use args::Args;
pub use run::{EngineCheck, RunError, StartControllers, Wiring, run, spawn_signal_handler};
pub use wiring::{ControllerSet, wiring};
