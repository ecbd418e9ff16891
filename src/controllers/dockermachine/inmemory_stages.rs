//! Pure decisions of the in-memory backend of a DevMachine: when each fake part is due, and the
//! conditions that say so (CAPD 1.12's types and reasons).
//!
//! Stages run in CAPD's order, each timed from the end of the one before it:
//! - `VMProvisioned`, from the moment the waits are over (recorded on the DevMachine as the
//!   [`VM_STARTED_ANNOTATION`], so a manager restart does not start it again);
//! - `NodeProvisioned`, from the VM's end;
//! - for control planes `EtcdProvisioned` and `APIServerProvisioned`, both from the Node's end.
//!
//! Once a machine is bootstrapped (its API server up for a control plane, its Node for a
//! worker), its Machine gets the [`MACHINE_BOOTSTRAPPED_ANNOTATION`], as CAPD 1.14 writes it; a
//! Machine carrying it (written by us or by CAPD) has no delays: every stage is due at once,
//! whatever the DevMachine recorded, so a manager that lost its fake clusters, or took over
//! from CAPD, brings a bootstrapped machine back in one pass.
//!
//! A stage ends the moment it falls due, not at the pass that sees it: every deadline is the
//! VM's start plus the delays of the stages up to it, to the nanosecond (`lastTransitionTime`
//! records it in the whole seconds that field keeps), so a late pass (a manager at its client's
//! rate limit) provisions every stage due by then at once, in one status write, and the stages
//! after it keep their timeline.
//!
//! A stage lasts its `startupDuration` (0 s when omitted) plus up to `startupJitter` of it. The
//! jitter is drawn from the machine's uid and the stage, not anew on each pass as CAPD does, so
//! a stage's deadline never moves between passes.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::conditions::{
    Condition, ConditionStatus, INTERNAL_ERROR_REASON, PROVISIONED_REASON, set_condition,
};
use crate::api::duration::parse_go_duration;
use crate::api::v1beta2::{InMemoryComponentSpec, InMemoryMachineBackendSpec};
use crate::controllers::conditions::{condition, set_ready_summary};

/// Annotation recording when the fake VM of a DevMachine began provisioning (RFC 3339).
pub const VM_STARTED_ANNOTATION: &str =
    "devmachine.infrastructure.cluster.x-k8s.io/in-memory-vm-started";

/// Annotation on a Machine whose in-memory machine is bootstrapped (CAPD 1.14's; value empty).
pub const MACHINE_BOOTSTRAPPED_ANNOTATION: &str =
    "machine.inmemory.infrastructure.cluster.x-k8s.io/bootstrapped";

/// Condition: the fake VM is provisioned.
pub const VM_PROVISIONED_CONDITION: &str = "VMProvisioned";
/// Condition: the fake Node is provisioned.
pub const NODE_PROVISIONED_CONDITION: &str = "NodeProvisioned";
/// Condition: the fake etcd member is provisioned (control planes).
pub const ETCD_PROVISIONED_CONDITION: &str = "EtcdProvisioned";
/// Condition: the fake API server is provisioned (control planes).
pub const API_SERVER_PROVISIONED_CONDITION: &str = "APIServerProvisioned";
/// Reason: the part's startup duration has not passed yet.
pub const WAITING_FOR_STARTUP_TIMEOUT_REASON: &str = "WaitingForStartupTimeout";
/// Reason: the part waits for the VM.
pub const WAITING_FOR_VM_PROVISIONED_REASON: &str = "WaitingForVMProvisioned";
/// Reason: the part waits for the Node.
pub const WAITING_FOR_NODE_PROVISIONED_REASON: &str = "WaitingForNodeProvisioned";

/// The stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The VM.
    Vm,
    /// The Node.
    Node,
    /// The etcd member.
    Etcd,
    /// The API server.
    ApiServer,
}

impl Stage {
    /// The stage's condition type.
    pub fn condition(self) -> &'static str {
        match self {
            Self::Vm => VM_PROVISIONED_CONDITION,
            Self::Node => NODE_PROVISIONED_CONDITION,
            Self::Etcd => ETCD_PROVISIONED_CONDITION,
            Self::ApiServer => API_SERVER_PROVISIONED_CONDITION,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Vm => "vm",
            Self::Node => "node",
            Self::Etcd => "etcd",
            Self::ApiServer => "apiServer",
        }
    }
}

/// How long each stage takes for one machine (jitter applied).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delays {
    /// The VM.
    pub vm: Duration,
    /// The Node.
    pub node: Duration,
    /// The etcd member.
    pub etcd: Duration,
    /// The API server.
    pub api_server: Duration,
}

/// A number in [0, 1) drawn from `seed` and the stage (FNV-1a), the same on every pass.
fn draw(seed: &str, stage: Stage) -> f64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.bytes().chain([0]).chain(stage.name().bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The top 53 bits as a fraction: exact in an f64.
    (hash >> 11) as f64 / (1_u64 << 53) as f64
}

/// One stage's delay: its duration plus `draw × jitter × duration`.
///
/// # Errors
/// A message naming the field when the duration or the jitter does not parse.
pub fn delay(
    spec: Option<&InMemoryComponentSpec>,
    seed: &str,
    stage: Stage,
) -> Result<Duration, String> {
    let Some(settings) = spec.and_then(|s| s.provisioning.as_ref()) else {
        return Ok(Duration::ZERO);
    };
    let field = stage.name();
    let duration = if settings.startup_duration.is_empty() {
        Duration::ZERO
    } else {
        parse_go_duration(&settings.startup_duration).map_err(|e| {
            format!("spec.backend.inMemory.{field}.provisioning.startupDuration: {e}")
        })?
    };
    if settings.startup_jitter.is_empty() {
        return Ok(duration);
    }
    let jitter: f64 = settings.startup_jitter.trim().parse().map_err(|_| {
        format!(
            "spec.backend.inMemory.{field}.provisioning.startupJitter: {:?} is not a number",
            settings.startup_jitter
        )
    })?;
    if !jitter.is_finite() || jitter < 0.0 {
        return Err(format!(
            "spec.backend.inMemory.{field}.provisioning.startupJitter: {jitter} must be a non-negative number"
        ));
    }
    Ok(duration.mul_f64(1.0 + draw(seed, stage) * jitter))
}

/// The delays of every stage of a machine whose jitter is drawn from `seed` (its uid).
///
/// # Errors
/// As [`delay`].
pub fn delays(spec: &InMemoryMachineBackendSpec, seed: &str) -> Result<Delays, String> {
    Ok(Delays {
        vm: delay(spec.vm.as_ref(), seed, Stage::Vm)?,
        node: delay(spec.node.as_ref(), seed, Stage::Node)?,
        etcd: delay(spec.etcd.as_ref(), seed, Stage::Etcd)?,
        api_server: delay(spec.api_server.as_ref(), seed, Stage::ApiServer)?,
    })
}

/// What a pass makes exist, and when to look again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The VM is provisioned: set the provider ID and `initialization.provisioned`.
    pub vm: bool,
    /// The Node exists.
    pub node: bool,
    /// The etcd pod exists.
    pub etcd: bool,
    /// The API server pod (and the scheduler's and controller manager's) exist, and the
    /// cluster's listener is open.
    pub api_server: bool,
    /// The nearest deadline not reached yet.
    pub requeue: Option<Duration>,
}

fn seconds(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// When a stage timed from `start` that lasts `delay` falls due.
fn due(start: Timestamp, delay: Duration) -> Timestamp {
    start
        .checked_add(jiff::SignedDuration::try_from(delay).unwrap_or(jiff::SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// Remaining time until `start + delay`, `None` once reached.
fn remaining(start: Timestamp, delay: Duration, now: Timestamp) -> Option<Duration> {
    let left = now.duration_until(due(start, delay));
    (left.is_positive()).then(|| Duration::try_from(left).unwrap_or_default())
}

/// Runs the stages at `now` for a machine whose VM began at `vm_started`: updates `conditions`
/// (stage conditions and the `Ready` summary) and says what must exist.
pub fn plan(
    conditions: &mut Vec<Condition>,
    vm_started: Timestamp,
    now: Timestamp,
    control_plane: bool,
    delays: &Delays,
    generation: Option<i64>,
) -> Plan {
    let mut plan = Plan::default();
    let at = seconds(now);
    let set = |conditions: &mut Vec<Condition>, stage: Stage, status, reason: &str| {
        set_condition(
            conditions,
            condition(stage.condition(), status, reason, "", generation).at(at),
        );
    };
    // A stage is provisioned at the moment it fell due, not at the pass that saw it (which a
    // busy manager makes late): the next stage is timed from there, so lateness does not add
    // up stage after stage, and a pass that comes late provisions every stage due by then in
    // one status write.
    let provisioned = |conditions: &mut Vec<Condition>, stage: Stage, start, delay| {
        set_condition(
            conditions,
            condition(
                stage.condition(),
                ConditionStatus::True,
                PROVISIONED_REASON,
                "",
                generation,
            )
            .at(seconds(due(start, delay)).min(at)),
        );
    };
    let later = |plan: &mut Plan, left: Duration| {
        plan.requeue = Some(plan.requeue.map_or(left, |r| r.min(left)));
    };
    let parts: &[Stage] = if control_plane {
        &[Stage::Node, Stage::Etcd, Stage::ApiServer]
    } else {
        &[Stage::Node]
    };

    if let Some(left) = remaining(vm_started, delays.vm, now) {
        set(
            conditions,
            Stage::Vm,
            ConditionStatus::False,
            WAITING_FOR_STARTUP_TIMEOUT_REASON,
        );
        for stage in parts {
            set(
                conditions,
                *stage,
                ConditionStatus::False,
                WAITING_FOR_VM_PROVISIONED_REASON,
            );
        }
        later(&mut plan, left);
    } else {
        provisioned(conditions, Stage::Vm, vm_started, delays.vm);
        plan.vm = true;
        let vm_done = due(vm_started, delays.vm);
        if let Some(left) = remaining(vm_done, delays.node, now) {
            set(
                conditions,
                Stage::Node,
                ConditionStatus::False,
                WAITING_FOR_STARTUP_TIMEOUT_REASON,
            );
            for stage in &parts[1..] {
                set(
                    conditions,
                    *stage,
                    ConditionStatus::False,
                    WAITING_FOR_NODE_PROVISIONED_REASON,
                );
            }
            later(&mut plan, left);
        } else {
            provisioned(conditions, Stage::Node, vm_done, delays.node);
            plan.node = true;
            let node_done = due(vm_done, delays.node);
            for (stage, delay) in [
                (Stage::Etcd, delays.etcd),
                (Stage::ApiServer, delays.api_server),
            ] {
                if !control_plane {
                    break;
                }
                if let Some(left) = remaining(node_done, delay, now) {
                    set(
                        conditions,
                        stage,
                        ConditionStatus::False,
                        WAITING_FOR_STARTUP_TIMEOUT_REASON,
                    );
                    later(&mut plan, left);
                } else {
                    provisioned(conditions, stage, node_done, delay);
                    match stage {
                        Stage::Etcd => plan.etcd = true,
                        _ => plan.api_server = true,
                    }
                }
            }
        }
    }
    summarize(conditions, control_plane, generation);
    plan
}

/// `Ready` from the stage conditions of the machine's role.
pub fn summarize(conditions: &mut Vec<Condition>, control_plane: bool, generation: Option<i64>) {
    let inputs: &[&str] = if control_plane {
        &[
            VM_PROVISIONED_CONDITION,
            NODE_PROVISIONED_CONDITION,
            ETCD_PROVISIONED_CONDITION,
            API_SERVER_PROVISIONED_CONDITION,
        ]
    } else {
        &[VM_PROVISIONED_CONDITION, NODE_PROVISIONED_CONDITION]
    };
    set_ready_summary(conditions, inputs, generation);
}

/// The `VMProvisioned` condition for settings that do not parse.
pub fn invalid_settings(message: String, generation: Option<i64>) -> Condition {
    condition(
        VM_PROVISIONED_CONDITION,
        ConditionStatus::False,
        INTERNAL_ERROR_REASON,
        message,
        generation,
    )
}
