use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::*;

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn later() -> Timestamp {
    t0() + SignedDuration::from_secs(90)
}

fn state(status: &InfrastructureObjectStatus) -> (&str, &str, i32) {
    let last = status.last_operation.as_ref().unwrap();
    (&last.type_, &last.state, last.progress)
}

fn published() -> Published {
    Published {
        provider_status: Some(json!({"kind": "InfrastructureStatus"})),
        nodes_cidr: Some("10.213.0.0/24".into()),
        state: Some(json!({"kind": "InfrastructureState"})),
        nodes: vec!["10.213.0.0/24".into(), "fd00:1::/64".into()],
    }
}

#[test]
fn create_goes_processing_then_succeeded() {
    let empty = InfrastructureObjectStatus::default();
    let started = processing(&empty, OperationType::Create, t0());
    assert_eq!(state(&started), ("Create", "Processing", 1));
    assert_eq!(
        started.last_operation.as_ref().unwrap().description,
        "Reconciling the infrastructure"
    );
    let done = succeeded(
        &started,
        OperationType::Create,
        Some(1),
        Some(published()),
        "Docker network n is ready".into(),
        later(),
    );
    assert_eq!(state(&done), ("Create", "Succeeded", 100));
    assert_eq!(done.observed_generation, Some(1));
    assert_eq!(done.nodes_cidr.as_deref(), Some("10.213.0.0/24"));
    assert_eq!(
        done.networking.as_ref().unwrap().nodes,
        ["10.213.0.0/24", "fd00:1::/64"]
    );
    assert_eq!(done.last_error, None);
    assert_eq!(
        done.last_operation.unwrap().last_update_time,
        whole_seconds(later())
    );
}

#[test]
fn a_failure_sets_last_error_with_codes_and_success_clears_it() {
    let started = processing(
        &InfrastructureObjectStatus::default(),
        OperationType::Create,
        t0(),
    );
    let broken = failed(
        &started,
        OperationType::Create,
        Some(1),
        "invalid providerConfig: x",
        &[ERR_CONFIGURATION_PROBLEM],
        t0(),
    );
    assert_eq!(state(&broken), ("Create", "Error", 50));
    let error = broken.last_error.clone().unwrap();
    assert_eq!(
        error.description,
        "Error reconciling the infrastructure: invalid providerConfig: x"
    );
    assert_eq!(error.codes, ["ERR_CONFIGURATION_PROBLEM"]);
    assert_eq!(broken.observed_generation, Some(1));

    let fixed = succeeded(
        &broken,
        OperationType::Create,
        Some(2),
        Some(published()),
        "ok".into(),
        later(),
    );
    assert_eq!(fixed.last_error, None);
    assert_eq!(fixed.observed_generation, Some(2));
}

#[test]
fn every_attempt_stamps_processing_and_its_result() {
    let started = processing(
        &InfrastructureObjectStatus::default(),
        OperationType::Create,
        t0(),
    );
    let broken = failed(&started, OperationType::Create, Some(1), "e", &[], t0());
    let retry = processing(&broken, OperationType::Create, later());
    assert_eq!(
        state(&retry),
        ("Create", "Processing", 1),
        "a retry shows Processing again, as Gardener's status updater does"
    );
    assert_eq!(
        retry.last_operation.as_ref().unwrap().last_update_time,
        whole_seconds(later())
    );
    assert_eq!(
        retry.last_error, broken.last_error,
        "the last error stays until the attempt ends"
    );
    let again = failed(&retry, OperationType::Create, Some(1), "e", &[], later());
    assert_eq!(
        again.last_error.unwrap().last_update_time,
        Some(whole_seconds(later())),
        "the same failure again is stamped again"
    );
    assert_eq!(
        again.last_operation.unwrap().last_update_time,
        whole_seconds(later())
    );
    let done = succeeded(
        &broken,
        OperationType::Create,
        Some(1),
        Some(published()),
        "ok".into(),
        later(),
    );
    assert_eq!(
        done.last_operation.unwrap().last_update_time,
        whole_seconds(later())
    );
}

#[test]
fn a_new_operation_after_success_starts_processing() {
    let done = succeeded(
        &InfrastructureObjectStatus::default(),
        OperationType::Create,
        Some(1),
        Some(published()),
        "ok".into(),
        t0(),
    );
    let reconciling = processing(&done, OperationType::Reconcile, later());
    assert_eq!(state(&reconciling), ("Reconcile", "Processing", 1));
    assert_eq!(
        reconciling.nodes_cidr, done.nodes_cidr,
        "published fields stay while processing"
    );
    let deleting = processing(&done, OperationType::Delete, later());
    assert_eq!(
        deleting.last_operation.unwrap().description,
        "Deleting the infrastructure"
    );
    let migrated = succeeded(
        &done,
        OperationType::Migrate,
        Some(1),
        None,
        "kept".into(),
        later(),
    );
    assert_eq!(state(&migrated), ("Migrate", "Succeeded", 100));
    assert_eq!(
        migrated.provider_status, done.provider_status,
        "None keeps what was published"
    );
}

#[test]
fn timestamps_are_whole_seconds() {
    let precise = Timestamp::from_millisecond(1_700_000_000_987).unwrap();
    assert_eq!(whole_seconds(precise).0.as_second(), 1_700_000_000);
    assert_eq!(whole_seconds(precise).0.subsec_nanosecond(), 0);
}

#[test]
fn what_others_wrote_in_the_status_is_kept_and_never_written() {
    let read: InfrastructureObjectStatus = serde_json::from_value(json!({
        "conditions": [{"type": "Healthy", "status": "True"}],
        "networking": {"pods": ["100.64.0.0/12"], "nodes": ["10.0.0.0/24"]},
        "lastError": {"description": "e", "taskID": "t1"},
    }))
    .unwrap();
    let done = succeeded(
        &read,
        OperationType::Reconcile,
        Some(1),
        Some(published()),
        "ok".into(),
        later(),
    );
    let networking = done.networking.as_ref().unwrap();
    assert_eq!(networking.nodes, ["10.213.0.0/24", "fd00:1::/64"]);
    assert_eq!(networking.others["pods"], json!(["100.64.0.0/12"]));
    assert_eq!(done.others["conditions"], read.others["conditions"]);

    let sent = serde_json::to_value(&done).unwrap();
    assert_eq!(
        sent.get("conditions"),
        None,
        "conditions are not ours to write"
    );
    assert_eq!(
        sent["networking"],
        json!({"nodes": ["10.213.0.0/24", "fd00:1::/64"]}),
        "only nodes is ours in networking"
    );
    let broken = failed(&read, OperationType::Reconcile, Some(1), "e", &[], later());
    assert_eq!(
        serde_json::to_value(broken.last_error.unwrap())
            .unwrap()
            .get("taskID"),
        None
    );
}
