use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::gardener::infrastructure::{InfrastructureObjectStatus, InfrastructureSpec};

/// An `Infrastructure` fixture built as a sentence:
/// `infra().annotated("migrate").last("Reconcile", "Succeeded")`.
fn infra() -> Infrastructure {
    let mut infra = Infrastructure::new(
        "infra",
        InfrastructureSpec {
            type_: "docker".into(),
            ..Default::default()
        },
    );
    infra.metadata.namespace = Some("shoot--p--s".into());
    infra.metadata.generation = Some(1);
    infra
}

trait Fixture {
    fn annotated(self, operation: &str) -> Self;
    fn last(self, operation: &str, state: &str) -> Self;
    fn observed(self, generation: i64) -> Self;
    fn finalized(self) -> Self;
    fn deleting(self) -> Self;
}

impl Fixture for Infrastructure {
    fn annotated(mut self, operation: &str) -> Self {
        self.annotations_mut()
            .insert(OPERATION_ANNOTATION.into(), operation.into());
        self
    }
    fn last(mut self, operation: &str, state: &str) -> Self {
        let status = self
            .status
            .get_or_insert_with(InfrastructureObjectStatus::default);
        status.last_operation = Some(LastOperation {
            description: String::new(),
            last_update_time: Time(Timestamp::UNIX_EPOCH),
            progress: 100,
            state: state.into(),
            type_: operation.into(),
        });
        self
    }
    fn observed(mut self, generation: i64) -> Self {
        self.status
            .get_or_insert_with(InfrastructureObjectStatus::default)
            .observed_generation = Some(generation);
        self
    }
    fn finalized(mut self) -> Self {
        self.finalizers_mut().push(FINALIZER.into());
        self
    }
    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }
}

fn reconcile(operation: OperationType, requested: bool) -> Step {
    Step::Reconcile {
        operation,
        requested,
    }
}

#[test]
fn other_types_are_ignored() {
    let mut aws = infra();
    aws.spec.type_ = "aws".into();
    assert!(matches!(next_step(&aws), Step::Ignore(_)));
    assert!(matches!(
        next_step(&aws.annotated("migrate")),
        Step::Ignore(_)
    ));
}

#[test]
fn a_new_object_is_created_until_the_create_succeeds() {
    assert_eq!(next_step(&infra()), reconcile(OperationType::Create, true));
    assert_eq!(
        next_step(&infra().last("Create", "Error").observed(1)),
        reconcile(OperationType::Create, true)
    );
    assert_eq!(
        next_step(&infra().last("Create", "Succeeded").observed(1)),
        reconcile(OperationType::Reconcile, false),
        "at rest: only a drift check"
    );
}

#[test]
fn reconcile_is_requested_by_annotation_generation_or_failure() {
    let at_rest = || {
        infra()
            .last("Reconcile", "Succeeded")
            .observed(1)
            .finalized()
    };
    assert_eq!(
        next_step(&at_rest().annotated("reconcile")),
        reconcile(OperationType::Reconcile, true)
    );
    let mut changed = at_rest();
    changed.metadata.generation = Some(2);
    assert_eq!(
        next_step(&changed),
        reconcile(OperationType::Reconcile, true)
    );
    assert_eq!(
        next_step(&infra().last("Reconcile", "Error").observed(1)),
        reconcile(OperationType::Reconcile, true)
    );
    assert_eq!(
        next_step(&infra().last("Restore", "Processing").observed(1)),
        reconcile(OperationType::Restore, true),
        "a restore whose annotation is gone still finishes as a restore"
    );
}

#[test]
fn migrate_comes_first_then_delete_then_restore() {
    assert_eq!(
        next_step(&infra().finalized().deleting().annotated("migrate")),
        Step::Migrate
    );
    assert_eq!(
        next_step(&infra().last("Migrate", "Error")),
        Step::Migrate,
        "an unfinished migration goes on"
    );
    assert_eq!(
        next_step(&infra().finalized().deleting().annotated("restore")),
        Step::Delete
    );
    assert!(matches!(next_step(&infra().deleting()), Step::Ignore(_)));
    assert_eq!(
        next_step(&infra().last("Migrate", "Succeeded").annotated("restore")),
        Step::Restore
    );
}

#[test]
fn a_migrated_object_is_left_alone() {
    assert!(matches!(
        next_step(&infra().last("Migrate", "Succeeded").observed(1)),
        Step::Ignore("migrated to another seed")
    ));
    assert!(matches!(
        next_step(&infra().last("Migrate", "Succeeded").annotated("reconcile")),
        Step::Ignore(_)
    ));
}
