//! The four operations of the contract's `Actuator`: reconcile (create or adopt the network),
//! delete, migrate and restore, each ending with the status it leads to; and the steps Gardener's
//! generic reconciler and its `OperationAnnotationWrapper` take before them
//! (gardener/gardener `extensions/pkg/controller/infrastructure/reconciler.go`,
//! `pkg/controllerutils/reconciler/operation_annotation_wrapper.go`).

use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::cluster::{Shoot, shoot_of};
use super::config::{ShootNetwork, default_network_name, validate, validate_with};
pub use super::context::Reason;
use super::error::Error;
use super::infrastructure::Infrastructure;
use super::network::{self, Ensured, NetworkAction, Removal, remove_if_owned};
use super::operation::{OperationState, OperationType, failed, succeeded};
use super::session::Session;
use super::status::{InfrastructureState, InfrastructureStatus, Published};
use super::step::{Step, gate, has_finalizer, next_step, operation_annotation};
use super::{OPERATION_MIGRATE, OPERATION_RECONCILE};
use crate::docker::NetworkInfo;
use crate::runtime::error_chain;

/// Runs one reconcile of the object in `session`, as Gardener's reconciler does: nothing for
/// another type or class or while gardenlet waits to restore the state; the `reconcile`
/// annotation removed as the reconcile starts; nothing for a failed shoot or a migrated object;
/// then the step [`next_step`] decides.
pub(super) async fn reconcile_infrastructure(
    session: &mut Session<'_>,
    reason: Reason,
) -> Result<Action, Error> {
    if let Some(why) = gate(session.infra()) {
        tracing::debug!(reason = why, "Nothing to do");
        return Ok(Action::await_change());
    }
    if operation_annotation(session.infra()) == Some(OPERATION_RECONCILE) {
        session.remove_operation_annotation().await?;
    }
    let namespace = session.infra().namespace().unwrap_or_default();
    let shoot = shoot_of(&session.ctx.client, &namespace).await?;
    let network = shoot.as_ref().map(Shoot::network).unwrap_or_default();
    match next_step(session.infra(), shoot.as_ref()) {
        Step::Ignore(why) => {
            tracing::info!(reason = why, "Skipping the Infrastructure");
            Ok(Action::await_change())
        }
        Step::Reconcile { operation } => {
            reconcile(session, operation, reason == Reason::Asked, &network).await
        }
        Step::Delete { force } => delete(session, force).await,
        Step::Migrate => migrate(session).await,
        Step::Restore => restore(session, &network).await,
    }
}

/// What the Docker side produced.
struct Actuated {
    ensured: Ensured,
    published: Published,
}

/// Validates the configuration (its gaps filled from the Shoot's `network`), ensures the network
/// and removes the `previous` one when the configuration moved away from it (only if it is ours
/// and unused; first, when its subnet is in the way of the new one).
async fn actuate(
    session: &Session<'_>,
    previous: Option<String>,
    network: &ShootNetwork,
) -> Result<Actuated, Error> {
    let infra = session.infra();
    let owner = session.owner();
    let plan = validate_with(
        infra.spec.provider_config.as_ref(),
        owner.namespace,
        owner.name,
        network,
    )
    .map_err(Error::InvalidConfig)?;
    let runtime = &*session.ctx.runtime;
    let previous = previous.filter(|p| *p != plan.name);
    let ensured = match network::ensure(runtime, &plan, owner).await {
        Err(error) if in_the_way(&error, previous.as_deref()) => {
            let Some(previous) = previous.as_deref() else {
                return Err(error);
            };
            if !remove_previous(session, previous).await {
                return Err(error);
            }
            network::ensure(runtime, &plan, owner).await?
        }
        result => result?,
    };
    let network = &ensured.network;
    match ensured.action {
        NetworkAction::Adopted => {}
        NetworkAction::Created | NetworkAction::Recreated => {
            let verb = if ensured.action == NetworkAction::Created {
                "Created"
            } else {
                "Recreated"
            };
            tracing::info!(network = %network.name, id = %network.id, "{verb} the network");
            let note = format!("{verb} Docker network {}", describe(network));
            session
                .event(EventType::Normal, "NetworkCreated", "Create", note)
                .await;
        }
    }
    if let Some(previous) = previous {
        remove_previous(session, &previous).await;
    }
    let published = Published::of(network, ensured.managed, &plan);
    Ok(Actuated { ensured, published })
}

/// Whether `error` is the subnet of our `previous` network standing in the way of the new one.
fn in_the_way(error: &Error, previous: Option<&str>) -> bool {
    matches!(error, Error::SubnetOverlap { other: Some(other), .. } if Some(other.as_str()) == previous)
}

/// Removes the `previous` network of this object if it is ours and unused, saying so in an
/// Event; returns whether it was removed.
async fn remove_previous(session: &Session<'_>, previous: &str) -> bool {
    let runtime = &*session.ctx.runtime;
    match remove_if_owned(runtime, previous, session.owner()).await {
        Ok(Removal::Removed) => {
            let note = format!("Removed the previous Docker network {previous}");
            session
                .event(EventType::Normal, "NetworkRemoved", "Delete", note)
                .await;
            true
        }
        Ok(Removal::Absent | Removal::NotOwned) => false,
        Err(error) => {
            let note = format!(
                "Kept the previous Docker network {previous}: {}",
                error_chain(&error)
            );
            tracing::warn!(network = %previous, error = %error_chain(&error), "Keeping the previous network");
            session
                .event(EventType::Warning, "NetworkKept", "Delete", note)
                .await;
            false
        }
    }
}

/// `name (id 0123456789ab, subnets ...)` for Events.
fn describe(network: &NetworkInfo) -> String {
    let id: String = network.id.chars().take(12).collect();
    let subnets: Vec<String> = network.subnets.iter().map(ToString::to_string).collect();
    format!("{} (id {id}, subnets {})", network.name, subnets.join(", "))
}

/// Writes the status after `operation` failed with `error`, says so in an Event, and returns the
/// error for the retry policy.
async fn fail(session: &mut Session<'_>, operation: OperationType, error: Error) -> Error {
    let chain = error_chain(&error);
    let next = failed(
        &session.status(),
        operation,
        session.generation(),
        &chain,
        error.codes(),
        Timestamp::now(),
    );
    match session.write_status(next).await {
        Ok(true) => {
            let note = format!("{}: {chain}", operation.error_description());
            session
                .event(
                    EventType::Warning,
                    operation.event_reason(OperationState::Error),
                    operation.as_str(),
                    note,
                )
                .await;
        }
        Ok(false) => {}
        Err(write) => {
            tracing::warn!(error = %error_chain(&write), "Recording the failure in the status failed");
        }
    }
    error
}

/// Writes the status after `operation` succeeded and says so in an Event when it changed.
async fn succeed(
    session: &mut Session<'_>,
    operation: OperationType,
    published: Option<Published>,
    description: String,
) -> Result<(), Error> {
    let next = succeeded(
        &session.status(),
        operation,
        session.generation(),
        published,
        description.clone(),
        Timestamp::now(),
    );
    if session.write_status(next).await? {
        tracing::info!(operation = operation.as_str(), "{description}");
        session
            .event(
                EventType::Normal,
                operation.event_reason(OperationState::Succeeded),
                operation.as_str(),
                description,
            )
            .await;
    }
    Ok(())
}

fn previous_network(session: &Session<'_>) -> Option<String> {
    InfrastructureStatus::from_value(session.status().provider_status.as_ref())
        .map(|s| s.network.name)
}

/// What a successful attempt returns: nothing more to do until Gardener asks again, or (in the
/// ignore-operation-annotation mode) a drift check after the sync period.
fn settled(session: &Session<'_>) -> Action {
    session.ctx.settled()
}

async fn reconcile(
    session: &mut Session<'_>,
    operation: OperationType,
    requested: bool,
    network: &ShootNetwork,
) -> Result<Action, Error> {
    session.ensure_finalizer().await?;
    if requested {
        session.start(operation).await?;
    }
    let actuated = match actuate(session, previous_network(session), network).await {
        Ok(actuated) => actuated,
        Err(error) => return Err(fail(session, operation, error).await),
    };
    let current = session.status();
    let published = &actuated.published;
    let unchanged = current.provider_status == published.provider_status
        && current.nodes_cidr == published.nodes_cidr
        && current.state == published.state
        && current
            .networking
            .as_ref()
            .map(|n| n.nodes.as_slice())
            .unwrap_or_default()
            == published.nodes.as_slice();
    if !requested && unchanged {
        // A drift check found everything in place: nothing to write.
        return Ok(settled(session));
    }
    // A drift check that had to repair the network reports it as a reconcile.
    let operation = if requested {
        operation
    } else {
        OperationType::Reconcile
    };
    let description = format!("Docker network {} is ready", actuated.ensured.network.name);
    succeed(session, operation, Some(actuated.published), description).await?;
    Ok(settled(session))
}

/// Restores from the state gardenlet wrote into `status.state` (the network recorded there is
/// adopted again), then removes the `restore` annotation once it succeeded.
async fn restore(session: &mut Session<'_>, network: &ShootNetwork) -> Result<Action, Error> {
    session.ensure_finalizer().await?;
    session.start(OperationType::Restore).await?;
    let recorded = InfrastructureState::from_value(session.status().state.as_ref());
    let previous = recorded.as_ref().map(|s| s.network.name.clone());
    let actuated = match actuate(session, previous, network).await {
        Ok(actuated) => actuated,
        Err(error) => return Err(fail(session, OperationType::Restore, error).await),
    };
    let network = &actuated.ensured.network;
    let description = match (&recorded, actuated.ensured.action) {
        (Some(state), NetworkAction::Adopted) if state.network.id == network.id => {
            format!(
                "Adopted Docker network {} recorded in the state",
                network.name
            )
        }
        (_, NetworkAction::Adopted) => format!("Adopted Docker network {}", network.name),
        _ => format!("Created Docker network {}", network.name),
    };
    // Restore (like migrate) removes its annotation once it has succeeded.
    session.remove_operation_annotation().await?;
    succeed(
        session,
        OperationType::Restore,
        Some(actuated.published),
        description,
    )
    .await?;
    Ok(settled(session))
}

/// Records the state for the destination seed and lets go of the object (finalizer, then the
/// `migrate` annotation), keeping every Docker resource.
///
/// Every `migrate` is an attempt, on an object already migrated too: it shows `Processing` and
/// `Succeeded` again, as Gardener's reconciler does.
async fn migrate(session: &mut Session<'_>) -> Result<Action, Error> {
    session.start(OperationType::Migrate).await?;
    let current = session.status();
    let provider_status = InfrastructureStatus::from_value(current.provider_status.as_ref());
    let state = provider_status
        .as_ref()
        .and_then(|s| serde_json::to_value(s.state()).ok())
        .or(current.state.clone());
    let description = match &provider_status {
        Some(s) => format!(
            "Docker network {} kept for the destination seed",
            s.network.name
        ),
        None => "No Docker network to hand over".to_string(),
    };
    let published = Published {
        provider_status: current.provider_status.clone(),
        nodes_cidr: current.nodes_cidr.clone(),
        state,
        nodes: current.networking.map(|n| n.nodes).unwrap_or_default(),
    };
    succeed(
        session,
        OperationType::Migrate,
        Some(published),
        description,
    )
    .await?;
    // The Docker resources stay; the object is let go without cleanup.
    session.remove_finalizer().await?;
    if operation_annotation(session.infra()) == Some(OPERATION_MIGRATE) {
        session.remove_operation_annotation().await?;
    }
    Ok(Action::await_change())
}

/// The networks a deletion looks at: the one in the status and the one the configuration names
/// (they differ only when a status write was lost).
fn networks_to_delete(infra: &Infrastructure) -> Vec<String> {
    let namespace = infra.namespace().unwrap_or_default();
    let name = infra.name_any();
    let from_status = InfrastructureStatus::from_value(
        infra
            .status
            .as_ref()
            .and_then(|s| s.provider_status.as_ref()),
    )
    .map(|s| s.network.name);
    let from_config = validate(infra.spec.provider_config.as_ref(), &namespace, &name)
        .map(|p| p.name)
        .unwrap_or_else(|_| default_network_name(&namespace, &name));
    let mut names: Vec<String> = from_status.into_iter().collect();
    if !names.contains(&from_config) {
        names.push(from_config);
    }
    names
}

/// Removes the networks we created for the object, then the finalizer. A forced deletion (the
/// shoot is force-deleted, Gardener's `ForceDelete`) removes what it can and lets go of the
/// object even when a network cannot be removed (still in use, or the engine unreachable).
async fn delete(session: &mut Session<'_>, force: bool) -> Result<Action, Error> {
    if !has_finalizer(session.infra()) {
        return Ok(Action::await_change());
    }
    session.start(OperationType::Delete).await?;
    let owner = session.owner();
    let mut notes = Vec::new();
    let mut left = Vec::new();
    for name in networks_to_delete(session.infra()) {
        match remove_if_owned(&*session.ctx.runtime, &name, owner).await {
            Ok(Removal::Removed) => notes.push(format!("removed Docker network {name}")),
            Ok(Removal::NotOwned) => notes.push(format!(
                "kept Docker network {name}: it was not created for this Infrastructure"
            )),
            Ok(Removal::Absent) => {}
            Err(error) if force => {
                tracing::warn!(network = %name, error = %error_chain(&error), "Leaving the network behind: the shoot is force-deleted");
                left.push(format!(
                    "left Docker network {name} behind: {}",
                    error_chain(&error)
                ));
            }
            Err(error) => return Err(fail(session, OperationType::Delete, error).await),
        }
    }
    for note in &left {
        session
            .event(EventType::Warning, "NetworkKept", "Delete", note.clone())
            .await;
    }
    notes.extend(left);
    let verb = if force { "force-deleted" } else { "deleted" };
    let description = if notes.is_empty() {
        format!("Infrastructure {verb}: no Docker network to remove")
    } else {
        format!("Infrastructure {verb}: {}", notes.join(", "))
    };
    succeed(session, OperationType::Delete, None, description).await?;
    session.remove_finalizer().await?;
    Ok(Action::await_change())
}
