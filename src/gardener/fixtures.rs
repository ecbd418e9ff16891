//! Test fixtures of `Infrastructure` objects, built as sentences:
//! `infra().annotated("migrate").last("Reconcile", "Succeeded")`.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::cluster::Shoot;
use super::infrastructure::{
    Infrastructure, InfrastructureObjectStatus, InfrastructureSpec, LastOperation,
};
use super::{FINALIZER, FORCE_DELETION_ANNOTATION, OPERATION_ANNOTATION};

/// A docker `Infrastructure` of generation 1 in `shoot--p--s`, never reconciled.
pub fn infra() -> Infrastructure {
    let mut infra = Infrastructure::new(
        "infra",
        InfrastructureSpec {
            type_: "docker".into(),
            ..Default::default()
        },
    );
    infra.metadata.namespace = Some("shoot--p--s".into());
    infra.metadata.generation = Some(1);
    infra.metadata.resource_version = Some("1".into());
    infra
}

/// Sentence builders on an `Infrastructure`.
pub trait Fixture {
    /// With `gardener.cloud/operation: <operation>`.
    fn annotated(self, operation: &str) -> Self;
    /// With a last operation `operation` in `state`.
    fn last(self, operation: &str, state: &str) -> Self;
    /// With `status.observedGeneration`.
    fn observed(self, generation: i64) -> Self;
    /// With our finalizer.
    fn finalized(self) -> Self;
    /// With a deletion timestamp.
    fn deleting(self) -> Self;
    /// Of another `spec.type`.
    fn typed(self, type_: &str) -> Self;
    /// Of `spec.class`.
    fn classed(self, class: &str) -> Self;
    /// With a new generation (a spec change).
    fn next_generation(self) -> Self;
    /// With a label.
    fn labelled(self, key: &str, value: &str) -> Self;
    /// With another resourceVersion (any write).
    fn written(self) -> Self;
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
        self.written()
    }
    fn observed(mut self, generation: i64) -> Self {
        self.status
            .get_or_insert_with(InfrastructureObjectStatus::default)
            .observed_generation = Some(generation);
        self.written()
    }
    fn finalized(mut self) -> Self {
        self.finalizers_mut().push(FINALIZER.into());
        self.written()
    }
    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self.next_generation()
    }
    fn typed(mut self, type_: &str) -> Self {
        self.spec.type_ = type_.into();
        self
    }
    fn classed(mut self, class: &str) -> Self {
        self.spec.class = Some(class.into());
        self
    }
    fn next_generation(mut self) -> Self {
        self.metadata.generation = self.metadata.generation.map(|g| g + 1);
        self.written()
    }
    fn labelled(mut self, key: &str, value: &str) -> Self {
        self.labels_mut().insert(key.into(), value.into());
        self.written()
    }
    fn written(mut self) -> Self {
        let next = self
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
            + 1;
        self.metadata.resource_version = Some(next.to_string());
        self
    }
}

/// A Shoot whose last operation is in `state`.
pub fn shoot_in(state: &str) -> Shoot {
    let mut shoot = Shoot::default();
    shoot.status.last_operation = Some(super::cluster::ShootLastOperation {
        state: state.into(),
    });
    shoot
}

/// A Shoot confirmed for force deletion.
pub fn force_deleted_shoot() -> Shoot {
    let mut shoot = Shoot::default();
    shoot
        .metadata
        .annotations
        .insert(FORCE_DELETION_ANNOTATION.into(), "true".into());
    shoot
}
