//! The Kubernetes writes of one reconcile: status (server-side apply of every field we own, only
//! when it changed), finalizer and operation annotation (merge patches guarded by the
//! resourceVersion, only when needed), and Events. It keeps the latest object returned by the API
//! so successive writes build on each other.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::{FIELD_MANAGER, InfrastructureContext};
use super::error::Error;
use super::infrastructure::{Infrastructure, InfrastructureObjectStatus};
use super::network::Owner;
use super::operation::{OperationState, OperationType, processing};
use super::step::{has_finalizer, operation_annotation};
use super::{FINALIZER, OPERATION_ANNOTATION};

/// One reconcile's view of an `Infrastructure` and the writes made to it.
pub(super) struct Session<'a> {
    pub(super) ctx: &'a InfrastructureContext,
    api: Api<Infrastructure>,
    infra: Infrastructure,
    reference: ObjectReference,
}

impl<'a> Session<'a> {
    /// Starts from the object the watch delivered.
    pub(super) fn new(ctx: &'a InfrastructureContext, infra: &Infrastructure) -> Self {
        let namespace = infra.namespace().unwrap_or_default();
        Self {
            ctx,
            api: Api::namespaced(ctx.client.clone(), &namespace),
            reference: infra.object_ref(&()),
            infra: infra.clone(),
        }
    }

    /// The latest object.
    pub(super) fn infra(&self) -> &Infrastructure {
        &self.infra
    }

    /// The latest status.
    pub(super) fn status(&self) -> InfrastructureObjectStatus {
        self.infra.status_or_default()
    }

    /// `metadata.generation`.
    pub(super) fn generation(&self) -> Option<i64> {
        self.infra.meta().generation
    }

    /// Namespace and name, as the owner of Docker networks.
    pub(super) fn owner(&self) -> Owner<'_> {
        Owner {
            namespace: self.infra.meta().namespace.as_deref().unwrap_or_default(),
            name: self.infra.meta().name.as_deref().unwrap_or_default(),
        }
    }

    fn name(&self) -> String {
        self.infra.name_any()
    }

    /// Applies `next` as the status unless it equals the current one; returns whether it wrote.
    pub(super) async fn write_status(
        &mut self,
        next: InfrastructureObjectStatus,
    ) -> Result<bool, Error> {
        if next == self.status() {
            return Ok(false);
        }
        let name = self.name();
        let body = json!({
            "apiVersion": Infrastructure::api_version(&()),
            "kind": Infrastructure::kind(&()),
            "status": next,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.infra = self
            .api
            .patch_status(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(Error::kube(format!(
                "apply status of Infrastructure {name}"
            )))?;
        Ok(true)
    }

    /// Shows an attempt of `operation` as started (Gardener's `Processing`, stamped now) and
    /// says so in an Event.
    pub(super) async fn start(&mut self, operation: OperationType) -> Result<(), Error> {
        let next = processing(&self.status(), operation, Timestamp::now());
        if self.write_status(next).await? {
            tracing::info!(operation = operation.as_str(), "Starting");
            self.event(
                EventType::Normal,
                operation.event_reason(OperationState::Processing),
                operation.as_str(),
                operation.processing_description().to_string(),
            )
            .await;
        }
        Ok(())
    }

    async fn patch_metadata(&mut self, metadata: Value, action: String) -> Result<(), Error> {
        let mut metadata = metadata;
        if let Value::Object(fields) = &mut metadata {
            // Guards against a concurrent change: the API answers 409 and we retry.
            fields.insert(
                "resourceVersion".to_string(),
                json!(self.infra.resource_version()),
            );
        }
        let body = json!({ "metadata": metadata });
        let name = self.name();
        self.infra = self
            .api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(Error::kube(action))?;
        Ok(())
    }

    /// Adds our finalizer when missing.
    pub(super) async fn ensure_finalizer(&mut self) -> Result<(), Error> {
        if has_finalizer(&self.infra) {
            return Ok(());
        }
        let mut finalizers = self.infra.finalizers().to_vec();
        finalizers.push(FINALIZER.to_string());
        let action = format!("add finalizer to Infrastructure {}", self.name());
        self.patch_metadata(json!({ "finalizers": finalizers }), action)
            .await
    }

    /// Removes our finalizer when present.
    pub(super) async fn remove_finalizer(&mut self) -> Result<(), Error> {
        if !has_finalizer(&self.infra) {
            return Ok(());
        }
        let finalizers: Vec<String> = self
            .infra
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        let action = format!("remove finalizer from Infrastructure {}", self.name());
        self.patch_metadata(json!({ "finalizers": finalizers }), action)
            .await
    }

    /// Removes the `gardener.cloud/operation` annotation when present.
    pub(super) async fn remove_operation_annotation(&mut self) -> Result<(), Error> {
        let Some(value) = operation_annotation(&self.infra).map(str::to_string) else {
            return Ok(());
        };
        let action = format!(
            "remove annotation {OPERATION_ANNOTATION}={value} from Infrastructure {}",
            self.name()
        );
        self.patch_metadata(
            json!({ "annotations": { OPERATION_ANNOTATION: Value::Null } }),
            action,
        )
        .await
    }

    /// Publishes an Event about the object; a failure is only logged.
    pub(super) async fn event(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(error) = self.ctx.recorder.publish(&event, &self.reference).await {
            tracing::warn!(reason, error = %error, "Publishing an Event failed");
        }
    }
}
