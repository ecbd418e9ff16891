//! Exec inside a container: argv, env and stdin in; stdout, stderr and exit code out.
//!
//! The call returns only once the process has ended: the output stream is drained (while stdin is
//! written concurrently, so a chatty process cannot block on a full pipe), then the exec is
//! inspected until the engine reports it is no longer running.

use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::convert::map_err;
use crate::docker::runtime::RuntimeError;
use crate::docker::types::{ExecOutput, ExecRequest, ExecStdin};

/// How often the exec is inspected after its output closed.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Runs `request` in `container`, bounded by the request's timeout.
pub(super) async fn run(
    docker: &Docker,
    client_timeout: Duration,
    privileged: bool,
    container: &str,
    request: &ExecRequest,
) -> Result<ExecOutput, RuntimeError> {
    let action = format!("exec {} in container {container}", describe(&request.argv));
    let inner = run_inner(
        docker,
        client_timeout,
        privileged,
        container,
        request,
        &action,
    );
    match tokio::time::timeout(request.timeout, inner).await {
        Ok(result) => result,
        Err(_) => Err(RuntimeError::Timeout {
            action,
            timeout: request.timeout,
        }),
    }
}

/// The program name only: arguments may carry data that must not reach logs.
fn describe(argv: &[String]) -> String {
    argv.first()
        .map_or_else(|| "(empty argv)".to_string(), |p| format!("`{p}`"))
}

async fn run_inner(
    docker: &Docker,
    client_timeout: Duration,
    privileged: bool,
    container: &str,
    request: &ExecRequest,
    action: &str,
) -> Result<ExecOutput, RuntimeError> {
    if request.argv.is_empty() {
        return Err(RuntimeError::InvalidResponse {
            action: action.to_string(),
            detail: "no program given".to_string(),
        });
    }
    let env: Vec<String> = request
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let options = CreateExecOptions {
        attach_stdin: Some(request.stdin.is_some()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: (!env.is_empty()).then_some(env),
        cmd: Some(request.argv.clone()),
        privileged: Some(privileged),
        ..Default::default()
    };
    let err = |e| map_err(action, client_timeout, e);
    let exec_id = docker
        .create_exec(container, options)
        .await
        .map_err(err)?
        .id;
    let started = docker
        .start_exec(&exec_id, Some(StartExecOptions::default()))
        .await
        .map_err(err)?;
    let StartExecResults::Attached { mut output, input } = started else {
        return Err(RuntimeError::InvalidResponse {
            action: action.to_string(),
            detail: "exec started detached".to_string(),
        });
    };

    let writer = write_stdin(
        docker,
        client_timeout,
        input,
        request.stdin.as_ref(),
        action,
    );
    let reader = async {
        let mut out = ExecOutput::default();
        while let Some(chunk) = output.next().await {
            match chunk.map_err(err)? {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    out.stdout.extend_from_slice(&message);
                }
                LogOutput::StdErr { message } => out.stderr.extend_from_slice(&message),
                LogOutput::StdIn { .. } => {}
            }
        }
        Ok::<_, RuntimeError>(out)
    };
    let (written, read) = tokio::join!(writer, reader);
    let mut out = read?;
    written?;

    loop {
        let inspect = docker.inspect_exec(&exec_id).await.map_err(err)?;
        if !inspect.running.unwrap_or(false) {
            out.exit_code = inspect.exit_code.unwrap_or(-1);
            return Ok(out);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Writes stdin (if any) and closes it, so the process sees end-of-file.
/// A process that exits without reading all of its input is not an error: its exit code says.
/// An image export that fails is: the input is closed all the same, so the process ends.
async fn write_stdin(
    docker: &Docker,
    client_timeout: Duration,
    mut input: std::pin::Pin<Box<dyn AsyncWrite + Send>>,
    stdin: Option<&ExecStdin>,
    action: &str,
) -> Result<(), RuntimeError> {
    let mut export_failed = None;
    let result = match stdin {
        None => return Ok(()),
        Some(ExecStdin::Bytes(data)) => input.write_all(data).await,
        Some(ExecStdin::Image(image)) => {
            // One chunk in memory at a time: the next is read once this one is written.
            let mut export = docker.export_image(image);
            let mut written = Ok(());
            while let Some(chunk) = export.next().await {
                match chunk {
                    Ok(chunk) => {
                        written = input.write_all(&chunk).await;
                        if written.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let export_action = format!("{action}: export image {image}");
                        export_failed = Some(map_err(export_action, client_timeout, e));
                        break;
                    }
                }
            }
            written
        }
    };
    if let Err(e) = result {
        tracing::debug!(action, error = %e, "Exec stopped reading its input early");
    }
    if let Err(e) = input.shutdown().await {
        tracing::debug!(action, error = %e, "Closing exec input failed");
    }
    export_failed.map_or(Ok(()), Err)
}
