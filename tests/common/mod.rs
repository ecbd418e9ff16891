//! Helpers every integration-test family needs, from the e2e harness library (`capd-e2e`): names
//! no parallel test or other engineer's run can collide with, and a TLS client configuration for
//! servers with self-signed certificates. Included by the test crates with `mod common;`.

// Each test crate uses a different subset of these helpers.
#![allow(unused_imports)]

pub use capd_e2e::tls::accept_any_certificate;

/// `<prefix>-<unique suffix>`: unique across the processes and threads running tests now.
#[allow(dead_code)]
pub fn unique(prefix: &str) -> String {
    capd_e2e::unique(&format!("{prefix}-"))
}

/// How many times `kubeadm init` ran in a node container of the test image (its stand-in kubeadm
/// logs every call), with the log for messages.
#[allow(dead_code)]
pub fn kubeadm_inits(container: &str) -> (usize, String) {
    let log = capd_e2e::docker_exec(container, &["cat", "/var/lib/capd-standin/kubeadm.log"]);
    let count = log
        .lines()
        .filter(|l| l.starts_with("kubeadm init"))
        .count();
    (count, log)
}
