//! Bootstrap data (cloud-init, Ignition) translated into commands run inside a node container.
