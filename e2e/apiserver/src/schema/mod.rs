//! Structural schemas of custom resources: pruning, defaulting and validation.

mod prune;
mod structural;
mod validate;

pub use prune::{default, prune};
pub use structural::validate_crd_schema;
pub use validate::{show as show_value, validate};
