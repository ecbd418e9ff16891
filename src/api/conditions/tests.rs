use super::*;

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn ready(status: ConditionStatus, reason: &str, at: &str) -> Condition {
    Condition::new(READY_CONDITION, status, reason, "").at(ts(at))
}

#[test]
fn new_condition_is_appended_with_its_own_time() {
    let mut list = Vec::new();
    assert!(set_condition(
        &mut list,
        ready(
            ConditionStatus::False,
            NOT_READY_REASON,
            "2025-01-01T00:00:00Z"
        )
    ));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].last_transition_time.0, ts("2025-01-01T00:00:00Z"));
}

#[test]
fn same_status_keeps_transition_time_but_takes_new_reason() {
    let mut list = vec![ready(
        ConditionStatus::False,
        NOT_READY_REASON,
        "2025-01-01T00:00:00Z",
    )];
    let changed = set_condition(
        &mut list,
        ready(
            ConditionStatus::False,
            "WaitingForBootstrapData",
            "2025-01-02T00:00:00Z",
        ),
    );
    assert!(changed);
    assert_eq!(list[0].reason, "WaitingForBootstrapData");
    assert_eq!(list[0].last_transition_time.0, ts("2025-01-01T00:00:00Z"));
}

#[test]
fn flipping_status_moves_transition_time() {
    let mut list = vec![ready(
        ConditionStatus::False,
        NOT_READY_REASON,
        "2025-01-01T00:00:00Z",
    )];
    assert!(set_condition(
        &mut list,
        ready(ConditionStatus::True, READY_REASON, "2025-01-03T00:00:00Z")
    ));
    assert_eq!(list[0].status, ConditionStatus::True);
    assert_eq!(list[0].last_transition_time.0, ts("2025-01-03T00:00:00Z"));
}

#[test]
fn identical_condition_reports_no_change() {
    let mut list = vec![ready(
        ConditionStatus::True,
        READY_REASON,
        "2025-01-01T00:00:00Z",
    )];
    let before = list.clone();
    assert!(!set_condition(
        &mut list,
        ready(ConditionStatus::True, READY_REASON, "2025-02-01T00:00:00Z")
    ));
    assert_eq!(list, before);
}

#[test]
fn observed_generation_change_is_a_change_without_moving_time() {
    let mut list = vec![
        ready(ConditionStatus::True, READY_REASON, "2025-01-01T00:00:00Z")
            .observed_at_generation(Some(1)),
    ];
    assert!(set_condition(
        &mut list,
        ready(ConditionStatus::True, READY_REASON, "2025-02-01T00:00:00Z")
            .observed_at_generation(Some(2))
    ));
    assert_eq!(list[0].observed_generation, Some(2));
    assert_eq!(list[0].last_transition_time.0, ts("2025-01-01T00:00:00Z"));
}

#[test]
fn other_types_are_untouched() {
    let paused = Condition::new(
        PAUSED_CONDITION,
        ConditionStatus::False,
        NOT_PAUSED_REASON,
        "",
    )
    .at(ts("2025-01-01T00:00:00Z"));
    let mut list = vec![paused.clone()];
    set_condition(
        &mut list,
        ready(ConditionStatus::True, READY_REASON, "2025-01-05T00:00:00Z"),
    );
    assert_eq!(list.len(), 2);
    assert_eq!(find_condition(&list, PAUSED_CONDITION), Some(&paused));
    assert!(is_condition_true(&list, READY_CONDITION));
    assert!(!is_condition_true(&list, PAUSED_CONDITION));
    assert!(remove_condition(&mut list, PAUSED_CONDITION));
    assert!(!remove_condition(&mut list, PAUSED_CONDITION));
}

#[test]
fn condition_wire_format_matches_metav1() {
    let c = ready(
        ConditionStatus::Unknown,
        READY_UNKNOWN_REASON,
        "2025-01-01T00:00:00Z",
    )
    .observed_at_generation(Some(3));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "type": "Ready",
            "status": "Unknown",
            "observedGeneration": 3,
            "lastTransitionTime": "2025-01-01T00:00:00Z",
            "reason": "ReadyUnknown",
            "message": ""
        })
    );
    let back: Condition = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
}

#[test]
fn legacy_condition_omits_empty_optional_fields() {
    let c = V1Beta1Condition {
        type_: legacy::READY_CONDITION.into(),
        status: "True".into(),
        severity: String::new(),
        last_transition_time: Time(ts("2025-01-01T00:00:00Z")),
        reason: String::new(),
        message: String::new(),
    };
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"})
    );
}

#[test]
fn every_reason_constant_matches_the_schema_pattern() {
    for reason in [
        READY_REASON,
        NOT_READY_REASON,
        READY_UNKNOWN_REASON,
        PAUSED_REASON,
        NOT_PAUSED_REASON,
        DELETING_REASON,
        INTERNAL_ERROR_REASON,
        AVAILABLE_REASON,
        NOT_AVAILABLE_REASON,
        WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON,
        WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON,
        WAITING_FOR_BOOTSTRAP_DATA_REASON,
        NOT_PROVISIONED_REASON,
        PROVISIONED_REASON,
        WAITING_FOR_CONTAINER_REASON,
        WAITING_FOR_CGROUPS_REASON,
        WAITING_FOR_PRELOADED_IMAGES_REASON,
        COMPLETED_REASON,
        FAILED_REASON,
        NOT_COMPLETED_REASON,
        BOOTSTRAP_TIMED_OUT_REASON,
        SUCCEEDED_REASON,
        NOT_SUCCEEDED_REASON,
        WAITING_FOR_MULTI_USER_TARGET_REASON,
    ] {
        assert!(
            matches_reason_pattern(reason),
            "reason {reason} does not match the API pattern"
        );
    }
}

/// Hand-written check of `CONDITION_REASON_PATTERN`: a letter, then letters, digits, `_`, `,`
/// or `:`, not ending in `,` or `:`.
fn matches_reason_pattern(s: &str) -> bool {
    let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_,:".contains(c));
    let last_ok = s
        .chars()
        .last()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first_ok && rest_ok && last_ok
}

#[test]
fn new_conditions_carry_whole_seconds_like_the_api_server() {
    let c = Condition::new(READY_CONDITION, ConditionStatus::True, READY_REASON, "");
    assert_eq!(c.last_transition_time.0.subsec_nanosecond(), 0);
    let json = serde_json::to_value(&c).unwrap();
    let back: Condition = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
}
