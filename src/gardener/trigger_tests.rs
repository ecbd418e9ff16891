use super::*;
use crate::gardener::fixtures::{Fixture, infra};

const DEFAULT: Mode = Mode::RespectOperationAnnotation;
const IGNORE: Mode = Mode::IgnoreOperationAnnotation;

/// An object at rest: created, reconciled, finalized.
fn at_rest() -> Infrastructure {
    infra().finalized().last("Create", "Succeeded").observed(1)
}

#[test]
fn a_create_is_admitted_for_an_annotation_a_deletion_or_an_unsuccessful_last_operation() {
    assert!(admits_create(&infra(), DEFAULT), "no last operation yet");
    assert!(admits_create(&infra().last("Reconcile", "Error"), DEFAULT));
    assert!(
        !admits_create(&at_rest(), DEFAULT),
        "a restart does not reconcile what is at rest"
    );
    assert!(admits_create(&at_rest().annotated("reconcile"), DEFAULT));
    assert!(admits_create(&at_rest().annotated("migrate"), DEFAULT));
    assert!(admits_create(&at_rest().annotated("restore"), DEFAULT));
    assert!(!admits_create(
        &at_rest().annotated("wait-for-state"),
        DEFAULT
    ));
    assert!(admits_create(&at_rest().deleting(), DEFAULT));
    assert!(admits_create(&at_rest(), IGNORE));
}

#[test]
fn only_our_type_and_class_are_admitted() {
    assert!(!admits_create(&infra().typed("aws"), DEFAULT));
    assert!(!admits_create(&infra().classed("seed"), IGNORE));
    assert!(admits_create(&infra().classed("shoot"), DEFAULT));
    assert!(!admits_update(
        &at_rest().typed("aws"),
        &at_rest().typed("aws").annotated("reconcile"),
        DEFAULT
    ));
}

#[test]
fn an_update_is_admitted_only_when_gardener_asks() {
    let old = at_rest();
    assert!(!admits_update(
        &old,
        &old.clone().labelled("a", "b"),
        DEFAULT
    ));
    assert!(
        !admits_update(&old, &old.clone().next_generation(), DEFAULT),
        "gardenlet sets the annotation when it changes the spec"
    );
    assert!(!admits_update(&old, &old.clone(), DEFAULT), "a re-list");
    assert!(
        !admits_update(
            &infra().last("Create", "Processing"),
            &infra().last("Create", "Error"),
            DEFAULT
        ),
        "a failed attempt does not retrigger itself through its status write"
    );
    assert!(admits_update(
        &old,
        &old.clone().annotated("reconcile"),
        DEFAULT
    ));
    assert!(admits_update(
        &old,
        &old.clone().annotated("restore"),
        DEFAULT
    ));
    assert!(!admits_update(
        &old,
        &old.clone().annotated("wait-for-state"),
        DEFAULT
    ));
}

#[test]
fn a_deletion_is_admitted_while_the_status_does_not_change() {
    let deleting = at_rest().deleting();
    assert!(admits_update(&at_rest(), &deleting, DEFAULT));
    let touched = deleting.clone().labelled("gardener.cloud/timestamp", "now");
    assert!(admits_update(&deleting, &touched, DEFAULT));
    let our_status_write = deleting.clone().last("Delete", "Error");
    assert!(!admits_update(&deleting, &our_status_write, DEFAULT));
}

/// `infra` after another controller wrote `status.<field>`.
fn with_status_field(
    infra: &Infrastructure,
    field: &str,
    value: serde_json::Value,
) -> Infrastructure {
    let mut raw = serde_json::to_value(infra).unwrap();
    raw["status"][field] = value;
    serde_json::from_value::<Infrastructure>(raw)
        .unwrap()
        .written()
}

#[test]
fn a_deletion_is_not_admitted_when_any_field_of_the_status_changes() {
    // Gardener's predicate compares the whole status, not only the fields this extension owns.
    let deleting = at_rest().deleting();
    let condition = serde_json::json!([{"type": "Healthy", "status": "True"}]);
    let healthy = with_status_field(&deleting, "conditions", condition);
    assert!(!admits_update(&deleting, &healthy, DEFAULT));
    let pods = serde_json::json!({"pods": ["100.64.0.0/12"]});
    let networked = with_status_field(&healthy, "networking", pods);
    assert!(!admits_update(&healthy, &networked, DEFAULT));
    let touched = networked
        .clone()
        .labelled("gardener.cloud/timestamp", "now");
    assert!(
        admits_update(&networked, &touched, DEFAULT),
        "the same whole status still admits the deletion"
    );
}

#[test]
fn the_writes_of_an_annotated_attempt_do_not_start_another() {
    let asked = at_rest().annotated("restore");
    let processing = asked.clone().last("Restore", "Processing");
    assert!(!admits_update(&asked, &processing, DEFAULT));
    let finalized = asked.clone().finalized();
    assert!(!admits_update(&asked, &finalized, DEFAULT));
    let asked_again = processing.clone().labelled("retry", "1");
    assert!(
        admits_update(&processing, &asked_again, DEFAULT),
        "anything else changing while the annotation is there asks again"
    );
}

#[test]
fn ignoring_the_annotation_admits_every_new_generation_only() {
    let old = at_rest();
    assert!(admits_update(&old, &old.clone().next_generation(), IGNORE));
    assert!(!admits_update(
        &old,
        &old.clone().annotated("reconcile"),
        IGNORE
    ));
    assert!(!admits_update(
        &old,
        &old.clone().labelled("a", "b"),
        IGNORE
    ));
}

#[test]
fn the_watch_predicate_tells_creates_from_updates_across_relists() {
    let mut triggers = Triggers::new(DEFAULT);
    assert!(
        !triggers.applied("ns/a", &at_rest()),
        "first sight of an object at rest"
    );
    assert!(!triggers.applied("ns/a", &at_rest().labelled("x", "y")));
    assert!(triggers.applied("ns/a", &at_rest().annotated("reconcile")));
    assert!(triggers.applied("ns/b", &infra()), "a new object");
    assert_eq!(triggers.len(), 2);

    // A re-list: ns/b is gone meanwhile, ns/a listed again unchanged.
    triggers.relist_started();
    assert!(!triggers.applied("ns/a", &at_rest().annotated("reconcile")));
    triggers.relist_done();
    assert_eq!(triggers.len(), 1);
    assert!(
        triggers.applied("ns/b", &infra()),
        "seen again after it was gone: a create"
    );
    triggers.deleted("ns/b");
    assert_eq!(triggers.len(), 1);
    assert!(!triggers.is_empty());
}
