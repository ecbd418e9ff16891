//! Cluster API infrastructure provider for Docker: a Rust drop-in for CAPD.
//!
//! Module map:
//! - [`api`]: the `infrastructure.cluster.x-k8s.io` kinds (v1beta1 and v1beta2), conversions, conditions,
//!   and read-only views of the Cluster API core objects.
//! - [`docker`]: the container runtime seam (one trait, a bollard implementation, an in-memory fake),
//!   networks, node containers and the haproxy load balancer.
//! - [`bootstrap`]: pure translation of cloud-init and Ignition bootstrap data into commands.
//! - [`controllers`]: the DockerCluster, DockerMachine, DockerMachinePool and template controllers.
//! - [`gardener`]: Gardener's `Infrastructure` extension for type `docker` (behind a manager flag).
//! - [`manager`]: process wiring: flags, telemetry, health, metrics, leader election.
//! - [`webhooks`]: the HTTPS conversion, defaulting and validation webhooks.

pub mod api;
pub mod bootstrap;
pub mod controllers;
pub mod docker;
#[cfg(test)]
mod fuzz;
pub mod gardener;
pub mod manager;
pub mod serving;
pub mod webhooks;
