//! Process wiring of the manager: flags, telemetry, health and metrics endpoints, leader election.

pub mod args;
pub mod duration;
pub mod feature_gates;
pub mod health;
pub mod leader;
pub mod listen;
pub mod metrics;
pub mod telemetry;
