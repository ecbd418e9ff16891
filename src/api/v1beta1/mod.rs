//! The v1beta1 API (deprecated): served for older clients, converted to and from v1beta2.

mod common;
mod dev;
mod dockercluster;
mod dockermachine;
mod dockermachinepool;

pub use common::*;
pub use dev::*;
pub use dockercluster::*;
pub use dockermachine::*;
pub use dockermachinepool::*;

/// The version string of this module's kinds.
pub const VERSION: &str = "v1beta1";
