//! The bootstrap task: reads what the node says about bootstrap, launches the detached runner
//! when (and only when) bootstrap never started there, then follows the runner until it ends.
//! A restarted manager runs the same task and simply picks up the observation.
//!
//! `spec.bootstrapTimeout` never stops bootstrap (as in CAPD, which only stops waiting): past
//! it the task reports itself overdue and keeps following the runner, so a slow bootstrap that
//! completes later is accepted. CABPK's success file ([`SUCCESS_PATH`]) counts as completion,
//! before the start and while following. A command that fails is final.

use std::sync::Arc;
use std::time::Duration;

use crate::bootstrap::{Plan, SUCCESS_PATH};
use crate::controllers::redact::redacted_tail;
use crate::controllers::runner::{
    self, Probe, ProbeResult, RunnerState, RunnerStatus, START_GRACE, progress_message,
};
use crate::controllers::tasks::{Progress, TaskFailure, TaskResult};
use crate::docker::{ContainerRuntime, ExecOutput, ExecRequest};
use crate::manager::error_chain;

/// How often the runner's status is read when the node cannot wait for a change, and the
/// longest wait for a change inside the node otherwise.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Shortest time between two reads of the runner's status.
const MIN_PROBE_SPACING: Duration = Duration::from_millis(100);

/// Consecutive failed reads of the runner's status tolerated before giving up (for a retry).
const READ_FAILURES: u32 = 5;

/// Lines of output kept in a failure message (CAPD keeps 10 of stdout and 5 of stderr).
const TAIL_LINES: usize = 15;

/// What the task needs.
pub struct BootstrapJob {
    /// Container engine.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Node container.
    pub container: String,
    /// The commands, or why there are none (missing or unreadable bootstrap data). Only needed
    /// when bootstrap never started in the node.
    pub plan: Result<Plan, String>,
    /// `spec.bootstrapTimeout`: past it, a bootstrap still running is reported overdue (never
    /// stopped).
    pub timeout: Duration,
    /// Unique suffix of the staged script.
    pub attempt: String,
    /// How often the runner's status is read ([`POLL_INTERVAL`]).
    pub poll_interval: Duration,
}

async fn exec(
    job: &BootstrapJob,
    request: &ExecRequest,
    what: &str,
) -> Result<ExecOutput, TaskFailure> {
    let out = job
        .runtime
        .exec(&job.container, request)
        .await
        .map_err(|e| {
            TaskFailure::retryable(format!(
                "Failed to {what} in container {}: {}",
                job.container,
                error_chain(&e)
            ))
        })?;
    if out.success() {
        Ok(out)
    } else {
        Err(TaskFailure::retryable(format!(
            "Failed to {what} in container {}: exit code {}: {}",
            job.container,
            out.exit_code,
            redacted_tail(&out.output_tail(2000), 5)
        )))
    }
}

async fn probe(job: &BootstrapJob) -> Result<ProbeResult, TaskFailure> {
    probe_with(job, runner::probe_request()).await
}

async fn probe_with(job: &BootstrapJob, request: ExecRequest) -> Result<ProbeResult, TaskFailure> {
    let out = exec(job, &request, "read the bootstrap status").await?;
    let result = runner::parse_probe(&out.stdout_text());
    if !result.complete {
        return Err(TaskFailure::retryable(format!(
            "Failed to read the bootstrap status in container {}: the output was cut short (was the connection to the Docker engine cut?)",
            job.container
        )));
    }
    Ok(result)
}

/// Runs the task to its end.
pub async fn run(job: BootstrapJob, progress: Progress) -> TaskResult {
    let first = probe(&job).await?;
    if first.success_file && !matches!(first.probe, Probe::Launched(_)) {
        return Ok(format!(
            "bootstrap completed before ({SUCCESS_PATH} found); not starting it again"
        ));
    }
    match first.probe {
        Probe::SentinelOnly => {
            return Ok(
                "bootstrap was started before (sentinel file found); not starting it again".into(),
            );
        }
        Probe::Fresh => {
            let plan = job
                .plan
                .as_ref()
                .map_err(|message| TaskFailure::retryable(message.clone()))?;
            for warning in &plan.warnings {
                tracing::info!(container = %job.container, warning = %warning, "Bootstrap data part skipped");
            }
            let script = runner::script(&plan.commands)
                .map_err(|e| TaskFailure::terminal(format!("Invalid bootstrap data: {e}")))?;
            let staged = runner::staging_path(&job.attempt);
            let launch = runner::launch_request(&staged, &script);
            let launched = exec(&job, &launch, "start bootstrap").await?;
            if launched.stdout_text().trim() == "launched" {
                tracing::info!(container = %job.container, commands = plan.commands.len(), "Started bootstrap");
                progress.report("Starting bootstrap");
            }
        }
        Probe::Launched(_) => {
            tracing::info!(container = %job.container, "Following a bootstrap started earlier");
        }
    }
    observe(&job, &progress).await
}

async fn observe(job: &BootstrapJob, progress: &Progress) -> TaskResult {
    let mut failures = 0;
    let mut pending_since = tokio::time::Instant::now();
    let mut overdue_logged = false;
    // The status last seen: the next probe waits in the node until it changes (a long poll)
    // rather than sleeping here; without a digest (no `cksum` in the node) it polls.
    let mut previous: Option<String> = None;
    loop {
        let request = match &previous {
            Some(digest) => runner::wait_probe_request(digest, job.poll_interval),
            None => runner::probe_request(),
        };
        let probed_at = tokio::time::Instant::now();
        let result = match probe_with(job, request).await {
            Ok(result) => {
                failures = 0;
                result
            }
            Err(failure) => {
                failures += 1;
                if failures >= READ_FAILURES {
                    return Err(failure);
                }
                previous = None;
                tokio::time::sleep(job.poll_interval).await;
                continue;
            }
        };
        let status = match result.probe {
            Probe::Launched(status) => status,
            _ if result.success_file => return Ok(success_file_found()),
            Probe::SentinelOnly => {
                return Ok("bootstrap was started before (sentinel file found)".into());
            }
            Probe::Fresh => {
                return Err(TaskFailure::retryable(
                    "The bootstrap status disappeared from the node (was the container restarted?)",
                ));
            }
        };
        match status.state {
            RunnerState::Succeeded => {
                return Ok(format!("ran {} bootstrap commands", status.total));
            }
            RunnerState::Failed => return Err(failed(job, &status).await),
            // kubeadm succeeded; what the runner still does (later commands) is not awaited.
            _ if result.success_file => return Ok(success_file_found()),
            RunnerState::Pending => {
                if pending_since.elapsed() > START_GRACE {
                    return Err(TaskFailure::terminal(
                        "The bootstrap runner was launched but never started; bootstrap is not started again on this node",
                    ));
                }
            }
            RunnerState::Running => {
                pending_since = tokio::time::Instant::now();
                match overdue(job, &status, result.now) {
                    Some(message) => {
                        if !overdue_logged {
                            overdue_logged = true;
                            tracing::warn!(container = %job.container, timeout_seconds = job.timeout.as_secs(), "Bootstrap timeout passed; bootstrap keeps running and is still followed");
                        }
                        progress.report_overdue(message);
                    }
                    None => progress.report(progress_message(&status)),
                }
            }
        }
        previous = result.digest;
        if previous.is_none() {
            tokio::time::sleep(job.poll_interval).await;
        } else {
            // A status that keeps changing must not turn the long poll into a busy loop.
            tokio::time::sleep_until(probed_at + MIN_PROBE_SPACING).await;
        }
    }
}

fn success_file_found() -> String {
    format!("bootstrap completed ({SUCCESS_PATH} found)")
}

/// The message of a runner still running past `spec.bootstrapTimeout` (container clock), or
/// `None` within it. Bootstrap is not stopped: CAPD only stops waiting, and a slow node (still
/// pulling images) may yet complete.
fn overdue(job: &BootstrapJob, status: &RunnerStatus, now: Option<i64>) -> Option<String> {
    let (Some(started), Some(now)) = (status.started, now) else {
        return None;
    };
    let elapsed = u64::try_from(now.saturating_sub(started)).unwrap_or(0);
    (elapsed > job.timeout.as_secs()).then(|| {
        format!(
            "Bootstrap did not complete within {}s (spec.bootstrapTimeout) and is still running command [{}] ({} of {}); it is not stopped and is accepted when it completes",
            job.timeout.as_secs(),
            status.description,
            status.step,
            status.total
        )
    })
}

async fn failed(job: &BootstrapJob, status: &RunnerStatus) -> TaskFailure {
    let tail = tail(job).await;
    let exit = status
        .exit_code
        .map_or_else(|| "unknown".to_string(), |c| c.to_string());
    TaskFailure::terminal(format!(
        "Bootstrap command [{}] ({} of {}) failed with exit code {exit}{}",
        status.description,
        status.step,
        status.total,
        with_output(&tail)
    ))
}

fn with_output(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; last output:\n{tail}")
    }
}

/// The redacted end of the runner's output.
async fn tail(job: &BootstrapJob) -> String {
    match job
        .runtime
        .exec(&job.container, &runner::tail_request(TAIL_LINES * 3))
        .await
    {
        Ok(out) => redacted_tail(&out.stdout_text(), TAIL_LINES),
        Err(e) => {
            tracing::warn!(container = %job.container, error = %error_chain(&e), "Reading the bootstrap output failed");
            String::new()
        }
    }
}
