//! The controllers: DockerCluster, DockerMachine and DockerMachineTemplate.
//!
//! Each reconcile follows the same phases: fetch (the object, its owners, the containers) →
//! decide (pure functions, unit tested) → apply (Docker engine, Kubernetes API) → status
//! (server-side apply, only when it changed).

pub mod apply;
pub mod backoff;
pub mod conditions;
pub mod error;
pub mod meta;
pub mod redact;
pub mod runner;
pub mod tasks;

pub use error::{Error, Result};
