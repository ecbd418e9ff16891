//! The controllers: DockerCluster, DockerMachine and DockerMachineTemplate.
//!
//! Each reconcile follows the same phases: fetch (the object, its owners, the containers) →
//! decide (pure functions, unit tested) → apply (Docker engine, Kubernetes API) → status
//! (server-side apply, only when it changed).

pub mod apply;
pub mod backoff;
pub mod conditions;
pub mod context;
pub mod dockercluster;
pub mod error;
pub mod loadbalancer;
pub mod meta;
pub mod redact;
pub mod runner;
pub mod tasks;
pub mod workload;

#[cfg(test)]
mod fixtures;

pub use error::{Error, Result};
