//! The v1beta1 API (deprecated): served for older clients, converted to and from v1beta2.

/// The version string of this module's kinds.
pub const VERSION: &str = "v1beta1";
