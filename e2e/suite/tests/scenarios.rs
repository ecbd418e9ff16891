//! The end-to-end scenarios (issue 5): the real manager binary, a management API (a test API
//! server, or an existing cluster with `CAPD_E2E_USE_EXISTING_CLUSTER=true`), the real Docker
//! engine, and the suite playing Cluster API core. Each scenario checks what a user sees: Docker
//! state, object status, conditions and Events. See docs/src/contributing.md, "End-to-end suite".
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod scenarios {
    pub mod as_shipped;
    pub mod at_rest;
    pub mod bad_input;
    pub mod control_plane_deletion;
    pub mod dev_kinds;
    pub mod installed;
    pub mod machine_pool;
    pub mod outage;
    pub mod pause;
    pub mod quick_start;
    pub mod real_cluster;
    pub mod resilience;
    pub mod scale;
    pub mod side_by_side;
    pub mod takeover;
}

use std::time::Duration;

/// How long a machine may take from creation to provisioned (bootstrap included).
pub const PROVISION: Duration = Duration::from_secs(120);
