//! Structural schemas of custom resources: pruning, defaulting and validation.

mod hoist;
mod prune;
mod structural;
mod validate;

pub use hoist::hoisted;
pub use prune::{default, prune};
pub use structural::validate_crd_schema;
pub use validate::{Checks, RuleEvaluator, validate};
