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
    self, LaunchResult, Probe, ProbeResult, RunnerState, RunnerStatus, START_GRACE,
    progress_message,
};
use crate::controllers::tasks::{Progress, TaskFailure, TaskResult};
use crate::docker::{ContainerRuntime, ExecOutput, ExecRequest};
use crate::runtime::error_chain;

/// The longest a read of the runner's status waits inside the node for the runner to end: a
/// bootstrap that runs on is read (and its progress reported) this often. Also the pause after a
/// failed read.
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
    complete_probe(job, &out.stdout_text())
}

fn complete_probe(job: &BootstrapJob, text: &str) -> Result<ProbeResult, TaskFailure> {
    let result = runner::parse_probe(text);
    if !result.complete {
        return Err(TaskFailure::retryable(format!(
            "Failed to read the bootstrap status in container {}: the output was cut short (was the connection to the Docker engine cut?)",
            job.container
        )));
    }
    Ok(result)
}

/// The first look at the node: with a script to run, one exec stages it, launches it unless
/// bootstrap happened here already, and reads the status; without one (the data is missing or
/// invalid), a plain read, which is enough where bootstrap was started before.
async fn launch_or_probe(job: &BootstrapJob) -> Result<ProbeResult, TaskFailure> {
    let script = match &job.plan {
        Ok(plan) => runner::script(&plan.commands)
            .map_err(|e| TaskFailure::terminal(format!("Invalid bootstrap data: {e}"))),
        Err(message) => Err(TaskFailure::retryable(message.clone())),
    };
    let script = match script {
        Ok(script) => script,
        Err(failure) => {
            let first = probe(job).await?;
            return match first.probe {
                Probe::Fresh if !first.success_file => Err(failure),
                _ => Ok(first),
            };
        }
    };
    let staged = runner::staging_path(&job.attempt);
    let out = exec(
        job,
        &runner::launch_request(&staged, &script),
        "start bootstrap",
    )
    .await?;
    let text = out.stdout_text();
    let launch = runner::parse_launch(&text);
    if let LaunchResult::RuntimeNotReady(last) = launch {
        return Err(TaskFailure::retryable(format!(
            "The container runtime in the node does not answer: {last}"
        )));
    }
    let first = complete_probe(job, &text)?;
    if launch == LaunchResult::Launched {
        if let Ok(plan) = &job.plan {
            for warning in &plan.warnings {
                tracing::info!(container = %job.container, warning = %warning, "Bootstrap data part skipped");
            }
            tracing::info!(container = %job.container, commands = plan.commands.len(), "Started bootstrap");
        }
    } else if matches!(first.probe, Probe::Launched(_)) {
        tracing::info!(container = %job.container, "Following a bootstrap started earlier");
    }
    Ok(first)
}

/// Runs the task to its end.
pub async fn run(job: BootstrapJob, progress: Progress) -> TaskResult {
    let first = launch_or_probe(&job).await?;
    match first.probe {
        Probe::Launched(_) => observe(&job, &progress, first).await,
        _ if first.success_file => Ok(format!(
            "bootstrap completed before ({SUCCESS_PATH} found); not starting it again"
        )),
        Probe::SentinelOnly => {
            Ok("bootstrap was started before (sentinel file found); not starting it again".into())
        }
        Probe::Fresh => Err(TaskFailure::retryable(
            "Bootstrap did not start in the node (was the container restarted?)",
        )),
    }
}

/// Follows the runner until it ends, from what the launch read (`first`). Each further read
/// waits in the node while the runner is pending or running (a long poll), so a bootstrap that
/// ends is seen at once and one that runs on is read once per poll interval.
async fn observe(job: &BootstrapJob, progress: &Progress, first: ProbeResult) -> TaskResult {
    let mut failures = 0;
    let mut pending_since = tokio::time::Instant::now();
    let mut overdue_logged = false;
    let mut first = Some(first);
    loop {
        let probed_at = tokio::time::Instant::now();
        let read_here = first.is_none();
        let result = match first.take() {
            Some(result) => result,
            None => match probe_with(job, runner::wait_probe_request(job.poll_interval)).await {
                Ok(result) => {
                    failures = 0;
                    result
                }
                Err(failure) => {
                    failures += 1;
                    if failures >= READ_FAILURES {
                        return Err(failure);
                    }
                    tokio::time::sleep(job.poll_interval).await;
                    continue;
                }
            },
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
        // A read that does not wait (a status file it cannot read) must not become a busy loop;
        // the launch's read is followed at once.
        if read_here {
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
