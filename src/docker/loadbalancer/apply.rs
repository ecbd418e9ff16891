//! Writing a configuration into the load balancer and reloading haproxy, never leaving a broken
//! configuration in place.
//!
//! Steps: read the current file (nothing to do when it already matches); write the new one to a
//! staging file and validate it with `haproxy -c` (skipped when the image has no haproxy binary
//! to run); copy it over the live file, read it back and compare (restoring the previous file on
//! a mismatch); then send SIGHUP so haproxy's master process reloads.

use std::time::Duration;

use super::LoadBalancerError;
use crate::docker::runtime::ContainerRuntime;
use crate::docker::types::{ExecOutput, ExecRequest};

/// Where haproxy reads its configuration.
pub const CONFIG_PATH: &str = "/usr/local/etc/haproxy/haproxy.cfg";
/// The directory of [`CONFIG_PATH`].
const CONFIG_DIR: &str = "/usr/local/etc/haproxy";
/// Where a new configuration is staged and validated.
const STAGING_PATH: &str = "/usr/local/etc/haproxy/haproxy.cfg.new";
/// Time limit of each command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest output kept in an error.
const OUTPUT_TAIL_CHARS: usize = 2000;

/// What [`apply_config`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The running configuration already matched; nothing was written and haproxy not reloaded.
    Unchanged,
    /// The configuration was written, validated by haproxy, and haproxy reloaded.
    Reloaded,
    /// The configuration was written and haproxy reloaded; the image had no haproxy to validate with.
    ReloadedUnvalidated,
}

struct Lb<'a> {
    runtime: &'a dyn ContainerRuntime,
    container: &'a str,
}

impl Lb<'_> {
    async fn run(
        &self,
        request: ExecRequest,
        action: &str,
    ) -> Result<ExecOutput, LoadBalancerError> {
        let request = request.timeout(COMMAND_TIMEOUT);
        self.runtime
            .exec(self.container, &request)
            .await
            .map_err(|source| {
                if source.is_not_found() || source.is_conflict() {
                    LoadBalancerError::NotRunning {
                        container: self.container.to_string(),
                    }
                } else {
                    LoadBalancerError::Runtime {
                        action: "exec in",
                        container: self.container.to_string(),
                        source,
                    }
                }
            })
            .inspect(|_| tracing::trace!(container = self.container, action, "Ran command"))
    }

    async fn run_ok(
        &self,
        request: ExecRequest,
        action: &str,
    ) -> Result<ExecOutput, LoadBalancerError> {
        let out = self.run(request, action).await?;
        if out.success() {
            Ok(out)
        } else {
            Err(LoadBalancerError::CommandFailed {
                action: action.to_string(),
                container: self.container.to_string(),
                exit_code: out.exit_code,
                output: out.output_tail(OUTPUT_TAIL_CHARS),
            })
        }
    }

    async fn read(&self, path: &str) -> Result<Option<Vec<u8>>, LoadBalancerError> {
        let out = self
            .run(
                ExecRequest::new(["cp", path, "/dev/stdout"]),
                "read haproxy config",
            )
            .await?;
        Ok(out.success().then_some(out.stdout))
    }

    async fn write(&self, path: &str, content: &[u8]) -> Result<(), LoadBalancerError> {
        let request = ExecRequest::new(["cp", "/dev/stdin", path]).stdin_bytes(content.to_vec());
        self.run_ok(request, "write haproxy config")
            .await
            .map(|_| ())
    }
}

/// Exit codes of a command the container does not have.
fn is_missing_program(out: &ExecOutput) -> bool {
    matches!(out.exit_code, 126 | 127)
        || (!out.success() && out.output_tail(400).contains("executable file not found"))
}

/// Installs `config` in the load balancer `container` and reloads haproxy.
///
/// # Errors
/// [`LoadBalancerError::InvalidConfig`] when haproxy rejects the configuration (the running one is
/// untouched), [`LoadBalancerError::ReadBackMismatch`] when the written file reads back different
/// (the previous one is restored), [`LoadBalancerError::NotRunning`] when the container is gone or
/// stopped, and other variants when commands or the reload signal fail.
pub async fn apply_config(
    runtime: &dyn ContainerRuntime,
    container: &str,
    config: &str,
) -> Result<ApplyOutcome, LoadBalancerError> {
    let lb = Lb { runtime, container };
    let wanted = config.as_bytes();
    let previous = lb.read(CONFIG_PATH).await?;
    if previous.as_deref() == Some(wanted) {
        return Ok(ApplyOutcome::Unchanged);
    }
    lb.run_ok(
        ExecRequest::new(["mkdir", "-p", CONFIG_DIR]),
        "create the haproxy config directory",
    )
    .await?;

    lb.write(STAGING_PATH, wanted).await?;
    let check = lb
        .run(
            ExecRequest::new(["haproxy", "-c", "-f", STAGING_PATH]),
            "validate haproxy config",
        )
        .await?;
    let validated = if check.success() {
        true
    } else if is_missing_program(&check) {
        tracing::info!(
            container,
            "No haproxy binary to validate the config with, applying it unvalidated"
        );
        false
    } else {
        return Err(LoadBalancerError::InvalidConfig {
            container: container.to_string(),
            output: check.output_tail(OUTPUT_TAIL_CHARS),
        });
    };

    lb.write(CONFIG_PATH, wanted).await?;
    if lb.read(CONFIG_PATH).await?.as_deref() != Some(wanted) {
        if let Some(previous) = &previous {
            lb.write(CONFIG_PATH, previous).await?;
        }
        return Err(LoadBalancerError::ReadBackMismatch {
            container: container.to_string(),
        });
    }

    runtime
        .kill_container(container, "SIGHUP")
        .await
        .map_err(|source| LoadBalancerError::Runtime {
            action: "reload haproxy in",
            container: container.to_string(),
            source,
        })?;
    Ok(if validated {
        ApplyOutcome::Reloaded
    } else {
        ApplyOutcome::ReloadedUnvalidated
    })
}
