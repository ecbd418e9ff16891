//! Condition bookkeeping shared by the controllers: the `Paused` condition, the `Ready` summary,
//! and the legacy (v1beta1) conditions kept under `status.deprecated.v1beta1.conditions`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{
    Condition, ConditionStatus, NOT_PAUSED_REASON, NOT_READY_REASON, PAUSED_CONDITION,
    PAUSED_REASON, READY_CONDITION, READY_REASON, READY_UNKNOWN_REASON, V1Beta1Condition,
    find_condition, legacy, set_condition,
};

/// A v1beta2 condition stamped with the object's generation.
pub fn condition(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition::new(type_, status, reason, message).observed_at_generation(generation)
}

/// The `Paused` condition: `True/Paused` when the object or its Cluster is paused.
pub fn paused_condition(paused: bool, generation: Option<i64>) -> Condition {
    if paused {
        condition(
            PAUSED_CONDITION,
            ConditionStatus::True,
            PAUSED_REASON,
            "Reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)",
            generation,
        )
    } else {
        condition(
            PAUSED_CONDITION,
            ConditionStatus::False,
            NOT_PAUSED_REASON,
            "",
            generation,
        )
    }
}

/// Sets `Ready` as the summary of `inputs` (condition types, in order): `True/Ready` when all are
/// `True`; `False/NotReady` when one is `False` (message lists the non-ready conditions with
/// their messages); otherwise `Unknown/ReadyUnknown`.
pub fn set_ready_summary(
    conditions: &mut Vec<Condition>,
    inputs: &[&str],
    generation: Option<i64>,
) {
    let mut not_ready = Vec::new();
    let mut unknown = false;
    for type_ in inputs {
        match find_condition(conditions, type_) {
            Some(c) if c.status == ConditionStatus::True => {}
            Some(c) if c.status == ConditionStatus::False => {
                let detail = if c.message.is_empty() {
                    c.reason.clone()
                } else {
                    first_line(&c.message).to_string()
                };
                not_ready.push(format!("{type_}: {detail}"));
            }
            _ => unknown = true,
        }
    }
    let ready = if !not_ready.is_empty() {
        condition(
            READY_CONDITION,
            ConditionStatus::False,
            NOT_READY_REASON,
            not_ready.join("; "),
            generation,
        )
    } else if unknown {
        condition(
            READY_CONDITION,
            ConditionStatus::Unknown,
            READY_UNKNOWN_REASON,
            "",
            generation,
        )
    } else {
        condition(
            READY_CONDITION,
            ConditionStatus::True,
            READY_REASON,
            "",
            generation,
        )
    };
    set_condition(conditions, ready);
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

/// A legacy condition to set with [`set_legacy_condition`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Legacy {
    /// Condition type.
    pub type_: &'static str,
    /// `true` for `True`, `false` for `False`.
    pub status: bool,
    /// Reason (empty for `True`).
    pub reason: String,
    /// Severity of a `False` condition (`Info`, `Warning`, `Error`).
    pub severity: String,
    /// Message.
    pub message: String,
}

impl Legacy {
    /// A `True` legacy condition.
    pub fn ok(type_: &'static str) -> Self {
        Self {
            type_,
            status: true,
            reason: String::new(),
            severity: String::new(),
            message: String::new(),
        }
    }

    /// A `False` legacy condition.
    pub fn not_ok(
        type_: &'static str,
        reason: &str,
        severity: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status: false,
            reason: reason.to_string(),
            severity: severity.to_string(),
            message: message.into(),
        }
    }
}

/// Inserts or updates a legacy condition; `lastTransitionTime` moves only when the status flips.
/// Returns whether the list changed.
pub fn set_legacy_condition(conditions: &mut Vec<V1Beta1Condition>, new: Legacy) -> bool {
    let status = ConditionStatus::from(new.status).as_str().to_string();
    let severity = if new.status {
        String::new()
    } else {
        new.severity
    };
    let message = truncate(&new.message, 10240);
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            let flipped = existing.status != status;
            if !flipped
                && existing.reason == new.reason
                && existing.severity == severity
                && existing.message == message
            {
                return false;
            }
            if flipped {
                existing.last_transition_time = Time(now_in_seconds());
            }
            existing.status = status;
            existing.reason = new.reason;
            existing.severity = severity;
            existing.message = message;
            true
        }
        None => {
            conditions.push(V1Beta1Condition {
                type_: new.type_.to_string(),
                status,
                severity,
                last_transition_time: Time(now_in_seconds()),
                reason: new.reason,
                message,
            });
            true
        }
    }
}

/// Sets the legacy `Ready` summary over `inputs`: `True` when all are `True`, else `False` with
/// the reason and severity of the first one that is not, and the message "N of M completed".
pub fn set_legacy_ready_summary(conditions: &mut Vec<V1Beta1Condition>, inputs: &[&str]) {
    let present: Vec<&V1Beta1Condition> = inputs
        .iter()
        .filter_map(|t| conditions.iter().find(|c| c.type_ == *t))
        .collect();
    let completed = present.iter().filter(|c| c.status == "True").count();
    let summary = match present.iter().find(|c| c.status != "True") {
        None => Legacy::ok(legacy::READY_CONDITION),
        Some(c) => Legacy::not_ok(
            legacy::READY_CONDITION,
            &c.reason,
            &c.severity,
            format!("{completed} of {} completed", inputs.len()),
        ),
    };
    set_legacy_condition(conditions, summary);
}

/// Now, at whole seconds: the API server keeps condition times at second precision, so a time
/// with fractions would differ from its own stored copy.
fn now_in_seconds() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// `text` cut to at most `max` characters (a condition message has a length limit).
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(3)).collect();
        cut.push_str("...");
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::{
        BOOTSTRAP_COMPLETED_CONDITION, CONTAINER_PROVISIONED_CONDITION,
        WAITING_FOR_CONTAINER_REASON,
    };

    #[test]
    fn ready_summary_is_true_only_when_every_input_is_true() {
        let mut list = vec![
            condition(
                CONTAINER_PROVISIONED_CONDITION,
                ConditionStatus::True,
                "Provisioned",
                "",
                Some(1),
            ),
            condition(
                BOOTSTRAP_COMPLETED_CONDITION,
                ConditionStatus::False,
                WAITING_FOR_CONTAINER_REASON,
                "",
                Some(1),
            ),
        ];
        set_ready_summary(
            &mut list,
            &[
                CONTAINER_PROVISIONED_CONDITION,
                BOOTSTRAP_COMPLETED_CONDITION,
            ],
            Some(1),
        );
        let ready = find_condition(&list, READY_CONDITION).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.message, "BootstrapCompleted: WaitingForContainer");

        set_condition(
            &mut list,
            condition(
                BOOTSTRAP_COMPLETED_CONDITION,
                ConditionStatus::True,
                "Completed",
                "",
                Some(1),
            ),
        );
        set_ready_summary(
            &mut list,
            &[
                CONTAINER_PROVISIONED_CONDITION,
                BOOTSTRAP_COMPLETED_CONDITION,
            ],
            Some(1),
        );
        assert!(find_condition(&list, READY_CONDITION).unwrap().is_true());
    }

    #[test]
    fn ready_summary_is_unknown_when_an_input_is_missing() {
        let mut list = Vec::new();
        set_ready_summary(&mut list, &[CONTAINER_PROVISIONED_CONDITION], None);
        assert_eq!(
            find_condition(&list, READY_CONDITION).unwrap().status,
            ConditionStatus::Unknown
        );
    }

    #[test]
    fn legacy_condition_keeps_its_time_until_it_flips() {
        let mut list = Vec::new();
        assert!(set_legacy_condition(
            &mut list,
            Legacy::not_ok(
                legacy::CONTAINER_PROVISIONED_CONDITION,
                legacy::WAITING_FOR_BOOTSTRAP_DATA_REASON,
                legacy::SEVERITY_INFO,
                ""
            )
        ));
        let first = list[0].last_transition_time.clone();
        assert!(!set_legacy_condition(
            &mut list,
            Legacy::not_ok(
                legacy::CONTAINER_PROVISIONED_CONDITION,
                legacy::WAITING_FOR_BOOTSTRAP_DATA_REASON,
                legacy::SEVERITY_INFO,
                ""
            )
        ));
        assert_eq!(list[0].last_transition_time, first);
        assert!(set_legacy_condition(
            &mut list,
            Legacy::ok(legacy::CONTAINER_PROVISIONED_CONDITION)
        ));
        assert_eq!(list[0].status, "True");
        assert_eq!(list[0].reason, "");
        assert_eq!(list[0].severity, "");
    }

    #[test]
    fn legacy_ready_counts_completed_steps() {
        let mut list = Vec::new();
        set_legacy_condition(
            &mut list,
            Legacy::ok(legacy::CONTAINER_PROVISIONED_CONDITION),
        );
        set_legacy_condition(
            &mut list,
            Legacy::not_ok(
                legacy::BOOTSTRAP_EXEC_SUCCEEDED_CONDITION,
                legacy::BOOTSTRAPPING_REASON,
                legacy::SEVERITY_INFO,
                "",
            ),
        );
        set_legacy_ready_summary(
            &mut list,
            &[
                legacy::CONTAINER_PROVISIONED_CONDITION,
                legacy::BOOTSTRAP_EXEC_SUCCEEDED_CONDITION,
            ],
        );
        let ready = list.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason, "Bootstrapping");
        assert_eq!(ready.message, "1 of 2 completed");
    }

    #[test]
    fn long_messages_are_cut() {
        assert_eq!(truncate("abcdef", 5), "ab...");
        assert_eq!(truncate("abc", 5), "abc");
    }
}
