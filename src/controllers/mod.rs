//! The controllers: DockerCluster, DockerMachine, DockerMachinePool and DockerMachineTemplate.
//!
//! Each reconcile follows the same phases: fetch (the object, its owners, the containers) →
//! decide (pure functions, unit tested) → apply (Docker engine, Kubernetes API) → status
//! (server-side apply, only when it changed).
//!
//! The files are layered: the shared vocabulary (the served-kind views in [`kinds`], the
//! [`context`], Events, the task registry in [`tasks`], the load balancer helpers, what node
//! containers and fake workload clusters share, the report of an [`unsupported`] object) sits
//! below the per-kind controllers ([`dockercluster`], [`dockermachine`], [`dockermachinepool`],
//! [`template`]), which never import one another; [`start`] wires them up on top.

pub mod apply;
pub mod backoff;
pub mod conditions;
pub mod context;
pub mod dockercluster;
pub mod dockermachine;
pub mod dockermachinepool;
pub mod error;
pub mod fake_clusters;
pub mod finalize;
pub mod kinds;
pub mod loadbalancer;
pub mod meta;
pub mod nodes;
pub mod queue;
pub mod redact;
pub mod runner;
pub mod start;
pub mod tasks;
pub mod template;
pub mod unsupported;
pub mod watches;
pub mod workload;
pub mod written;

#[cfg(test)]
mod fixtures;

pub use error::{Error, Result};

/// Environment variable that makes every container run unprivileged, for sandboxed engines that
/// refuse privileged containers (test environments with stand-in node images only: real
/// `kindest/node` images need privileges). Read by the engine check of the manager wiring.
pub const UNPRIVILEGED_ENV: &str = "CAPD_RS_UNPRIVILEGED_CONTAINERS";
