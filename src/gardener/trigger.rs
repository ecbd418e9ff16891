//! Which watch events start an attempt (pure): Gardener's predicates for extension controllers
//! (gardener/gardener `extensions/pkg/predicate/default.go`, `DefaultControllerPredicates`, after
//! `pkg/controllerutils/predicate/predicate.go`'s `HasType` and `HasClass`).
//!
//! By default (Gardener's default predicate) an object is acted on when it first shows up
//! (also after a restart) with an operation annotation (`reconcile`, `migrate`, `restore`), a
//! deletion, or a last operation that did not succeed; and on a later change only when it carries
//! an operation annotation, or is being deleted and its status (all of it, what others wrote
//! included) did not change. So Gardener decides when a shoot is reconciled (its maintenance
//! window), and neither status writes, label changes nor re-lists start anything.
//!
//! Gardener's `ShootNotFailedPredicate`, which reads the shoot's `Cluster`, is checked after these
//! by the controller (`super::cluster::shoot_not_failed`).
//!
//! With [`Mode::IgnoreOperationAnnotation`] (Gardener's `--ignore-operation-annotation`,
//! `GenerationChangedPredicate`), every new object and every new generation is acted on.
//!
//! One refinement: a change that only touches the status or the finalizers while the same
//! operation annotation stays (the writes of the very attempt that annotation started) does not
//! start another attempt; Gardener's predicate lets the `Processing` write of a `restore` start a
//! second run once the first is done.

use std::collections::{HashMap, HashSet};

use kube::Resource;

use super::infrastructure::{Infrastructure, operation_annotation};
use super::operation::OperationState;
use super::{
    EXTENSION_CLASS, EXTENSION_TYPE, OPERATION_MIGRATE, OPERATION_RECONCILE, OPERATION_RESTORE,
};

/// When Gardener's operation annotation is needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Gardener's default: act when Gardener asks (see the module documentation).
    #[default]
    RespectOperationAnnotation,
    /// Gardener's ignore-operation-annotation mode: act on every new generation, and check every
    /// object for drift each sync period.
    IgnoreOperationAnnotation,
}

impl Mode {
    /// The mode of `--gardener-ignore-operation-annotation`.
    pub fn from_flag(ignore_operation_annotation: bool) -> Self {
        if ignore_operation_annotation {
            Self::IgnoreOperationAnnotation
        } else {
            Self::RespectOperationAnnotation
        }
    }
}

/// Gardener's `HasType` and `HasClass` (an empty class is `shoot`).
pub fn serves(infra: &Infrastructure) -> bool {
    let class = infra.spec.class.as_deref().filter(|c| !c.is_empty());
    infra.spec.type_ == EXTENSION_TYPE && class.is_none_or(|c| c == EXTENSION_CLASS)
}

/// Gardener's `hasOperationAnnotation`: `reconcile`, `restore` or `migrate` (not
/// `wait-for-state`).
pub fn has_operation_annotation(infra: &Infrastructure) -> bool {
    matches!(
        operation_annotation(infra),
        Some(OPERATION_RECONCILE | OPERATION_RESTORE | OPERATION_MIGRATE)
    )
}

/// Gardener's `lastOperationNotSuccessful`: none yet, or not `Succeeded`.
fn last_operation_not_successful(infra: &Infrastructure) -> bool {
    infra
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
        .is_none_or(|l| l.state != OperationState::Succeeded.as_str())
}

/// Whether the predicate admits `infra` appearing (a create event: new, or listed at start-up).
pub fn admits_create(infra: &Infrastructure, mode: Mode) -> bool {
    if !serves(infra) {
        return false;
    }
    match mode {
        Mode::IgnoreOperationAnnotation => true,
        Mode::RespectOperationAnnotation => {
            has_operation_annotation(infra)
                || infra.meta().deletion_timestamp.is_some()
                || last_operation_not_successful(infra)
        }
    }
}

/// `infra` without what the extension itself writes during an attempt.
fn without_own_writes(infra: &Infrastructure) -> Infrastructure {
    let mut bare = infra.clone();
    bare.status = None;
    bare.metadata.finalizers = None;
    bare.metadata.resource_version = None;
    bare.metadata.managed_fields = None;
    bare
}

/// Whether the predicate admits the change from `old` to `new` (an update event).
pub fn admits_update(old: &Infrastructure, new: &Infrastructure, mode: Mode) -> bool {
    if !serves(new) {
        return false;
    }
    match mode {
        Mode::IgnoreOperationAnnotation => old.meta().generation != new.meta().generation,
        Mode::RespectOperationAnnotation => {
            let asked =
                has_operation_annotation(new) && without_own_writes(old) != without_own_writes(new);
            let deleting = new.meta().deletion_timestamp.is_some() && old.status == new.status;
            asked || deleting
        }
    }
}

/// The predicate over a watch: remembers the last version of each object, so that an event is
/// judged as a create (first sight) or an update (against the version seen before), as
/// controller-runtime's informer presents them, re-lists included.
#[derive(Debug, Default)]
pub struct Triggers {
    mode: Mode,
    seen: HashMap<String, Infrastructure>,
    relisted: Option<HashSet<String>>,
}

impl Triggers {
    /// A predicate in `mode` that has seen nothing yet.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// `infra` (keyed `key`) was added or changed: whether that starts an attempt.
    pub fn applied(&mut self, key: &str, infra: &Infrastructure) -> bool {
        if let Some(relisted) = &mut self.relisted {
            relisted.insert(key.to_string());
        }
        let admitted = match self.seen.get(key) {
            None => admits_create(infra, self.mode),
            Some(old) => admits_update(old, infra, self.mode),
        };
        self.seen.insert(key.to_string(), infra.clone());
        admitted
    }

    /// The object `key` is gone.
    pub fn deleted(&mut self, key: &str) {
        self.seen.remove(key);
    }

    /// A (re-)list starts: objects not listed again until [`Triggers::relist_done`] are gone.
    pub fn relist_started(&mut self) {
        self.relisted = Some(HashSet::new());
    }

    /// The (re-)list is complete.
    pub fn relist_done(&mut self) {
        if let Some(listed) = self.relisted.take() {
            self.seen.retain(|key, _| listed.contains(key));
        }
    }

    /// How many objects are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no object is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
#[path = "trigger_tests.rs"]
mod tests;
