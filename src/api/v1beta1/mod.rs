//! The v1beta1 API (deprecated): served for older clients, converted to and from v1beta2.

mod common;
mod dockercluster;
mod dockermachine;

pub use common::*;
pub use dockercluster::*;
pub use dockermachine::*;

/// The version string of this module's kinds.
pub const VERSION: &str = "v1beta1";
