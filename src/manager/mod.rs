//! Process wiring of the manager: flags, telemetry, health and metrics endpoints, leader election.
