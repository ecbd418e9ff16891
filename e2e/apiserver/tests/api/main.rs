//! Integration tests: the `kube` client drives a real server over HTTPS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod admission;
mod binary;
mod common;
mod crd;
mod crud;
mod deletion;
mod events;
mod faults;
mod list;
mod misc;
mod reference_crds;
mod ssa;
mod stored_versions;
mod watch;
