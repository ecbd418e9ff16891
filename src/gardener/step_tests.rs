use super::*;
use crate::gardener::fixtures::{Fixture, force_deleted_shoot, infra, shoot_in};

fn reconcile(operation: OperationType) -> Step {
    Step::Reconcile { operation }
}

fn step(infra: &Infrastructure) -> Step {
    next_step(infra, None)
}

#[test]
fn other_types_and_classes_are_ignored() {
    assert!(matches!(step(&infra().typed("aws")), Step::Ignore(_)));
    assert!(matches!(
        step(&infra().typed("aws").annotated("migrate")),
        Step::Ignore(_)
    ));
    assert!(matches!(step(&infra().classed("seed")), Step::Ignore(_)));
    assert_eq!(
        step(&infra().classed("shoot")),
        reconcile(OperationType::Create)
    );
    assert_eq!(
        step(&infra().classed("")),
        reconcile(OperationType::Create),
        "an empty class is shoot"
    );
}

#[test]
fn wait_for_state_is_left_alone_until_restore() {
    let waiting = infra().annotated("wait-for-state");
    assert_eq!(gate(&waiting), step(&waiting).ignored());
    assert!(matches!(step(&waiting), Step::Ignore(_)));
    assert_eq!(
        step(&waiting.annotated("restore")),
        Step::Restore,
        "gardenlet replaces wait-for-state by restore"
    );
}

#[test]
fn the_operation_type_is_computed_as_gardener_does() {
    assert_eq!(operation_type(&infra()), OperationType::Create);
    assert_eq!(
        operation_type(&infra().last("Create", "Error")),
        OperationType::Create
    );
    assert_eq!(
        operation_type(&infra().last("Create", "Succeeded")),
        OperationType::Reconcile
    );
    assert_eq!(
        operation_type(&infra().last("Restore", "Processing")),
        OperationType::Restore,
        "a restore whose annotation is gone still finishes as a restore"
    );
    assert_eq!(
        operation_type(&infra().last("Migrate", "Error")),
        OperationType::Migrate
    );
    assert_eq!(
        operation_type(&infra().last("Migrate", "Error").deleting()),
        OperationType::Delete,
        "a deletion comes before an unfinished migration"
    );
    assert_eq!(
        operation_type(&infra().deleting().annotated("migrate")),
        OperationType::Migrate
    );
}

#[test]
fn a_new_object_is_created_until_the_create_succeeds() {
    assert_eq!(step(&infra()), reconcile(OperationType::Create));
    assert_eq!(
        step(&infra().last("Create", "Error").observed(1)),
        reconcile(OperationType::Create)
    );
    assert_eq!(
        step(&infra().last("Create", "Succeeded").observed(1)),
        reconcile(OperationType::Reconcile)
    );
    assert_eq!(step(&infra().last("Restore", "Processing")), Step::Restore);
}

#[test]
fn migrate_comes_first_then_delete_then_restore() {
    assert_eq!(
        step(&infra().finalized().deleting().annotated("migrate")),
        Step::Migrate
    );
    assert_eq!(
        step(&infra().last("Migrate", "Error")),
        Step::Migrate,
        "an unfinished migration goes on"
    );
    assert_eq!(
        step(&infra().finalized().deleting().annotated("restore")),
        Step::Delete { force: false }
    );
    assert!(matches!(step(&infra().deleting()), Step::Ignore(_)));
    assert_eq!(
        step(&infra().last("Migrate", "Succeeded").annotated("restore")),
        Step::Restore
    );
}

#[test]
fn a_migrated_object_is_left_alone_even_when_deleted() {
    let migrated = || infra().last("Migrate", "Succeeded").observed(1);
    assert_eq!(step(&migrated()), Step::Ignore("migrated to another seed"));
    assert_eq!(
        step(&migrated().annotated("reconcile")),
        Step::Ignore("migrated to another seed")
    );
    assert_eq!(
        step(&migrated().finalized().deleting()),
        Step::Ignore("migrated to another seed"),
        "ShouldSkipOperation comes before the deletion: the destination's network stays"
    );
    assert!(should_skip_operation(OperationType::Delete, &migrated()));
    assert!(!should_skip_operation(OperationType::Restore, &migrated()));
    assert!(!should_skip_operation(OperationType::Migrate, &migrated()));
}

#[test]
fn a_failed_shoot_is_skipped_and_a_force_deleted_one_forces_the_deletion() {
    let failed = shoot_in("Failed");
    assert_eq!(
        next_step(&infra(), Some(&failed)),
        Step::Ignore("the shoot has failed")
    );
    assert_eq!(
        next_step(&infra().finalized().deleting(), Some(&failed)),
        Step::Ignore("the shoot has failed")
    );
    assert_eq!(
        next_step(&infra(), Some(&shoot_in("Error"))),
        reconcile(OperationType::Create)
    );
    assert_eq!(
        next_step(
            &infra().finalized().deleting(),
            Some(&force_deleted_shoot())
        ),
        Step::Delete { force: true }
    );
}

trait Ignored {
    fn ignored(self) -> Option<&'static str>;
}

impl Ignored for Step {
    fn ignored(self) -> Option<&'static str> {
        match self {
            Step::Ignore(reason) => Some(reason),
            _ => None,
        }
    }
}
