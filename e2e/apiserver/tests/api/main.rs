//! Integration tests: the `kube` client drives a real server over HTTPS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod crd;
mod crud;
mod deletion;
mod list;
mod ssa;
mod watch;
