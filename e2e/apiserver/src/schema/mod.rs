//! Structural schemas of custom resources: pruning, defaulting and validation.

mod prune;
mod validate;

pub use prune::{default, prune};
pub use validate::{show as show_value, validate};
