//! Unit tests of the DockerMachine status: the `Ready` summary, the legacy (v1beta1) conditions
//! and the Events published for condition changes.

use super::status::summarize;
use super::tests::OVERDUE;
use super::transition_events;
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, CGROUPS_READY_CONDITION, CONTAINER_PROVISIONED_CONDITION,
    Condition, ConditionStatus, PAUSED_CONDITION, PRELOADED_IMAGES_READY_CONDITION,
    READY_CONDITION, V1Beta1Condition, find_condition,
};
use crate::api::v1beta2::DockerMachineStatus;
use crate::controllers::context::EventKind;

fn full_status(conditions: &[(&str, ConditionStatus, &str)]) -> DockerMachineStatus {
    let mut status = DockerMachineStatus::default();
    for (type_, s, reason) in conditions {
        status
            .conditions
            .push(Condition::new(*type_, *s, *reason, ""));
    }
    summarize(&mut status, Some(3));
    status
}

/// The legacy (v1beta1) `BootstrapExecSucceeded` condition.
fn legacy_bootstrap(status: &DockerMachineStatus) -> &V1Beta1Condition {
    status
        .deprecated
        .v1beta1
        .conditions
        .iter()
        .find(|c| c.type_ == "BootstrapExecSucceeded")
        .unwrap()
}

#[test]
fn ready_summarizes_every_step_and_legacy_conditions_follow() {
    let done = full_status(&[
        (
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::True,
            "Provisioned",
        ),
        (CGROUPS_READY_CONDITION, ConditionStatus::True, "Ready"),
        (
            PRELOADED_IMAGES_READY_CONDITION,
            ConditionStatus::True,
            "Ready",
        ),
        (
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::True,
            "Completed",
        ),
    ]);
    let ready = find_condition(&done.conditions, READY_CONDITION).unwrap();
    assert!(ready.is_true());
    assert_eq!(ready.observed_generation, Some(3));
    assert!(
        !find_condition(&done.conditions, PAUSED_CONDITION)
            .unwrap()
            .is_true()
    );
    let legacy: Vec<(&str, &str)> = done
        .deprecated
        .v1beta1
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert!(legacy.contains(&("Ready", "True")));
    assert!(legacy.contains(&("BootstrapExecSucceeded", "True")));

    let failed = full_status(&[
        (
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::True,
            "Provisioned",
        ),
        (
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            "Failed",
        ),
    ]);
    assert_eq!(legacy_bootstrap(&failed).reason, "BootstrapFailed");
}

#[test]
fn a_waiting_machine_has_a_legacy_waiting_reason() {
    let waiting = full_status(&[(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::False,
        "WaitingForClusterInfrastructureReady",
    )]);
    let legacy = &waiting.deprecated.v1beta1.conditions;
    let container = legacy
        .iter()
        .find(|c| c.type_ == "ContainerProvisioned")
        .unwrap();
    assert_eq!(container.reason, "WaitingForClusterInfrastructure");
    assert!(
        !legacy.iter().any(|c| c.type_ == "BootstrapExecSucceeded"),
        "no bootstrap condition before the container exists"
    );
    for restart_wait in ["WaitingForLoadBalancer", "WaitingForControlPlane"] {
        let waiting = full_status(&[(
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::False,
            restart_wait,
        )]);
        let container = waiting
            .deprecated
            .v1beta1
            .conditions
            .iter()
            .find(|c| c.type_ == "ContainerProvisioned")
            .unwrap();
        assert_eq!(
            (container.reason.as_str(), container.severity.as_str()),
            ("WaitingForClusterInfrastructure", "Info"),
            "a stopped container waiting to start again is no failure"
        );
    }
}

#[test]
fn summarizing_twice_changes_nothing() {
    let once = full_status(&[(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::True,
        "Provisioned",
    )]);
    let mut twice = once.clone();
    summarize(&mut twice, Some(3));
    assert_eq!(once, twice);
}

/// The conditions of a machine with only `BootstrapCompleted`.
fn bootstrap(status: ConditionStatus, reason: &str, message: &str) -> Vec<Condition> {
    vec![Condition::new(
        BOOTSTRAP_COMPLETED_CONDITION,
        status,
        reason,
        message,
    )]
}

#[test]
fn events_are_published_for_the_changes_users_care_about() {
    let before = bootstrap(ConditionStatus::False, "NotReady", "");
    let after = bootstrap(
        ConditionStatus::False,
        "Failed",
        "Bootstrap command [run kubeadm init] (7 of 9) failed with exit code 1",
    );
    let events = transition_events(&before, &after);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, EventKind::Warning);
    assert_eq!(events[0].1, "BootstrapFailed");
    assert!(
        transition_events(&after, &after).is_empty(),
        "no event without a change"
    );
}

#[test]
fn a_timeout_is_a_warning_event_and_a_later_completion_a_normal_one() {
    let running = bootstrap(
        ConditionStatus::False,
        "NotReady",
        "Running bootstrap command [run kubeadm join] (9 of 12)",
    );
    let timed_out = bootstrap(ConditionStatus::False, "BootstrapTimedOut", OVERDUE);
    assert_eq!(
        transition_events(&running, &timed_out),
        vec![(EventKind::Warning, "BootstrapTimedOut", OVERDUE.to_string())]
    );
    let completed = bootstrap(ConditionStatus::True, "Completed", "");
    let events = transition_events(&timed_out, &completed);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].0, events[0].1),
        (EventKind::Normal, "BootstrapCompleted")
    );

    let status = full_status(&[
        (
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::True,
            "Provisioned",
        ),
        (
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            "BootstrapTimedOut",
        ),
    ]);
    let legacy = legacy_bootstrap(&status);
    assert_eq!(
        (legacy.reason.as_str(), legacy.severity.as_str()),
        ("Bootstrapping", "Warning"),
        "v1beta1 readers see bootstrap still going, with a warning"
    );
}
