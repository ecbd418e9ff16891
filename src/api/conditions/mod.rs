//! Conditions: the metav1-shaped [`Condition`] used by v1beta2 objects, the legacy
//! [`V1Beta1Condition`] kept under `status.deprecated.v1beta1`, the type and reason vocabulary
//! ([`catalogue`]), and [`set_condition`], which only moves `lastTransitionTime` when a status
//! flips.

pub mod catalogue;

pub use catalogue::*;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pattern every v1beta2 condition `type` must match (a CamelCase word, optionally prefixed by a
/// DNS subdomain and a slash).
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// Pattern every v1beta2 condition `reason` must match.
pub const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// The most conditions one object may carry in `status.conditions`.
pub const MAX_CONDITIONS: usize = 32;

/// Whether a condition holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    #[default]
    Unknown,
}

impl ConditionStatus {
    /// The wire form: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// One observation of an aspect of an object's state, in the shape of Kubernetes'
/// `metav1.Condition` (what Cluster API v1beta2 reads from `status.conditions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Kind of observation, in CamelCase (optionally prefixed by a domain and a slash),
    /// for example `Ready` or `ContainerProvisioned`. Unique within the list.
    #[serde(rename = "type")]
    #[schemars(length(max = 316), pattern(CONDITION_TYPE_PATTERN))]
    pub type_: String,
    /// Whether the observation holds: `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// The `metadata.generation` of the object this observation was made against; a value
    /// lower than the current generation means the condition may be stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// When `status` last changed value (not when the condition was last written).
    pub last_transition_time: Time,
    /// Machine-readable CamelCase word saying why the condition has its current status.
    #[schemars(length(min = 1, max = 1024), pattern(CONDITION_REASON_PATTERN))]
    pub reason: String,
    /// Human-readable details about the current status; may be empty.
    #[schemars(length(max = 32768))]
    pub message: String,
}

impl Condition {
    /// A condition observed now (whole seconds, as the API stores it), without
    /// `observedGeneration`.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            observed_generation: None,
            last_transition_time: Time(now_in_seconds()),
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Records the object generation this condition was computed from.
    #[must_use]
    pub fn observed_at_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    /// Overrides the transition time (tests and conversions).
    #[must_use]
    pub fn at(mut self, time: jiff::Timestamp) -> Self {
        self.last_transition_time = Time(time);
        self
    }

    /// True when the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// The current time truncated to whole seconds, so a condition built in memory equals the same
/// condition read back from the API server.
fn now_in_seconds() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// Finds the condition of the given type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition of the given type exists and is `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(Condition::is_true)
}

/// Inserts or updates the condition with `new.type_` and reports whether the list changed.
///
/// `lastTransitionTime` keeps its old value unless the status flips (a new condition takes the
/// time carried by `new`). Reason, message and `observedGeneration` are always taken from `new`.
/// A call that changes nothing returns `false`, so callers can skip the status write.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(new);
            true
        }
        Some(existing) => {
            let flipped = existing.status != new.status;
            let changed = flipped
                || existing.reason != new.reason
                || existing.message != new.message
                || existing.observed_generation != new.observed_generation;
            if !changed {
                return false;
            }
            let keep_time = (!flipped).then(|| existing.last_transition_time.clone());
            *existing = new;
            if let Some(time) = keep_time {
                existing.last_transition_time = time;
            }
            true
        }
    }
}

/// Removes the condition of the given type; returns whether one was removed.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// A legacy (Cluster API v1beta1) condition, kept in `status.deprecated.v1beta1.conditions` of
/// v1beta2 objects and in `status.conditions` of v1beta1 objects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    /// Kind of observation in CamelCase, for example `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub type_: String,
    /// Whether the observation holds: `True`, `False` or `Unknown`.
    pub status: String,
    /// How bad a `False` status is: `Error`, `Warning` or `Info`; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 32))]
    pub severity: String,
    /// When `status` last changed value.
    pub last_transition_time: Time,
    /// CamelCase word saying why the condition last changed; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 256))]
    pub reason: String,
    /// Human-readable details about the last change; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 10240))]
    pub message: String,
}

#[cfg(test)]
mod tests;
