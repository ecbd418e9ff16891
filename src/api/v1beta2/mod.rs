//! The v1beta2 API: hub and storage version of every kind.

mod common;
mod devcluster;
mod devmachine;
mod devmachinepool;
mod dockercluster;
mod dockermachine;
mod dockermachinepool;

pub use common::*;
pub use devcluster::*;
pub use devmachine::*;
pub use devmachinepool::*;
pub use dockercluster::*;
pub use dockermachine::*;
pub use dockermachinepool::*;

/// The version string of this module's kinds.
pub const VERSION: &str = "v1beta2";

#[cfg(test)]
mod tests;
