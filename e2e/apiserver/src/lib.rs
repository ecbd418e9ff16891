//! A test-only Kubernetes API server.
//!
//! It serves the Kubernetes REST API from memory, close enough to kube-apiserver that the
//! provider's manager and the e2e suite use it through an ordinary kubeconfig. See README.md for
//! what it implements, the choices it makes and what it leaves out.

pub mod admission;
pub mod builtin;
pub mod cacher;
pub mod convert;
pub mod crd;
mod deletion;
pub mod error;
pub mod faults;
mod gc;
mod handlers;
pub mod jsonpath;
pub mod kubeconfig;
pub mod meta;
mod openapi;
pub mod patch;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod ssa;
mod state;
pub mod store;
pub mod table;
pub mod tls;
pub mod typed;
mod webhook;

pub use server::{Handle, Options, StartError, TestApiServer};
