//! Process wiring of the manager: flags, telemetry, health and metrics endpoints, leader election.

pub mod args;
pub mod duration;
pub mod feature_gates;
pub mod listen;
