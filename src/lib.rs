//! Cluster API infrastructure provider for Docker: a Rust drop-in for CAPD.
//!
//! Module map:
//! - [`api`]: the `infrastructure.cluster.x-k8s.io` kinds (v1beta1 and v1beta2), conversions, conditions,
//!   and read-only views of the Cluster API core objects.
//! - [`docker`]: the container runtime seam (one trait, a bollard implementation, an in-memory fake),
//!   networks, node containers and the haproxy load balancer.
//! - [`bootstrap`]: pure translation of cloud-init and Ignition bootstrap data into commands.
//! - [`controllers`]: the DockerCluster, DockerMachine, DockerMachinePool and template controllers.
//! - [`crdmigrator`]: rewrites our kinds' objects in the storage version and trims the CRDs'
//!   `status.storedVersions`, at start-up and when a CRD changes (CAPD's CRD migrator).
//! - [`inmemory`]: the fake workload clusters (object store and TLS API server) of the Dev*
//!   kinds' `inMemory` backend.
//! - [`gardener`]: Gardener's `Infrastructure` extension for type `docker` (behind a manager flag).
//! - [`runtime`]: what the controllers, webhooks and Gardener extension share: the controller
//!   [`Context`](runtime::Context) and task type, the Kubernetes client builder, error chains,
//!   metrics, readiness and feature gates.
//! - [`serving`]: listeners and TLS shared by the diagnostics and webhook servers.
//! - [`webhooks`]: the HTTPS conversion, defaulting and validation webhooks.
//! - [`manager`]: the process wiring on top: flags, logging set-up, start-up checks, the servers,
//!   leader election.
//!
//! Layers, each importing only those below it: [`api`], [`bootstrap`], [`docker`] and [`serving`]
//! at the bottom ([`inmemory`] on [`serving`]); then [`runtime`]; then [`controllers`], [`crdmigrator`], [`gardener`] and [`webhooks`]; then
//! [`manager`], which only the `manager` binary (`main`) imports. `tests/layering.rs` fails when
//! anything below the manager imports it.

pub mod api;
pub mod bootstrap;
pub mod controllers;
pub mod crdmigrator;
pub mod docker;
#[cfg(test)]
mod fuzz;
pub mod gardener;
pub mod inmemory;
pub mod manager;
pub mod runtime;
pub mod serving;
pub mod webhooks;
