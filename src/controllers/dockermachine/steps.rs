//! Bodies of the background tasks that wait for the node to boot and preload images.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::controllers::tasks::{Progress, TaskFailure, TaskResult};
use crate::docker::node::{preload_image, wait_for_multi_user};
use crate::docker::{ContainerRuntime, ExecRequest};
use crate::manager::error_chain;

/// How long the node's init may take to reach the multi-user target (CAPD: 30 s per attempt).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `crictl ps` may keep failing after boot (CAPD: 4 s, polled every 500 ms).
pub const CRI_TIMEOUT: Duration = Duration::from_secs(4);

const CRI_POLL: Duration = Duration::from_millis(500);

/// Waits until systemd in the node reached the multi-user target and the container runtime
/// answers `crictl ps`.
pub async fn wait_for_node(
    runtime: Arc<dyn ContainerRuntime>,
    container: String,
    progress: Progress,
) -> TaskResult {
    // The task started as "Waiting for the node to boot", which is what this does until the
    // runtime answers; it says it waits for the runtime only when that does not answer at once.
    wait_for_multi_user(runtime.as_ref(), &container, BOOT_TIMEOUT)
        .await
        .map_err(|e| TaskFailure::retryable(error_chain(&e)))?;
    let request = ExecRequest::new(["crictl", "ps"]).timeout(Duration::from_secs(10));
    let started = Instant::now();
    loop {
        let last = match runtime.exec(&container, &request).await {
            Ok(out) if out.success() => return Ok("the node booted".to_string()),
            Ok(out) => format!(
                "crictl ps in container {container} exited with status {}",
                out.exit_code
            ),
            Err(e) => error_chain(&e),
        };
        if started.elapsed() >= CRI_TIMEOUT {
            return Err(TaskFailure::retryable(format!(
                "The container runtime in the node does not answer: {last}"
            )));
        }
        progress.report("Waiting for the container runtime in the node");
        tokio::time::sleep(CRI_POLL).await;
    }
}

/// Imports `images` from the Docker host into the node's containerd, one after the other.
pub async fn preload_images(
    runtime: Arc<dyn ContainerRuntime>,
    container: String,
    images: Vec<String>,
    progress: Progress,
) -> TaskResult {
    let total = images.len();
    for (index, image) in images.iter().enumerate() {
        progress.report(format!("Loading image {image} ({} of {total})", index + 1));
        preload_image(runtime.as_ref(), &container, image)
            .await
            .map_err(|e| {
                TaskFailure::retryable(format!("Failed to load image {image}: {}", error_chain(&e)))
            })?;
    }
    Ok(format!("loaded {total} images"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::tasks::{TaskKind, TaskRegistry, TaskState};
    use crate::docker::FakeRuntime;
    use crate::docker::node::{NodeRole, NodeSpec, create_node};

    async fn running_node(fake: &FakeRuntime) -> String {
        fake.add_image("node:test");
        fake.add_network(crate::docker::NetworkInfo {
            id: "net".into(),
            name: "kind".into(),
            ..Default::default()
        });
        let spec = NodeSpec::new("c1", "c1-m1", NodeRole::Worker, "node:test", "kind");
        create_node(fake, &spec).await.unwrap();
        "c1-m1".to_string()
    }

    async fn run_task(fake: FakeRuntime, container: String) -> TaskState {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        let machine = crate::controllers::kinds::MachineRef::docker("default", "m1");
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(fake);
        tasks.start(&machine, "u", TaskKind::CGroups, "", |p| {
            wait_for_node(runtime, container, p)
        });
        loop {
            rx.recv().await.unwrap();
            match tasks.state(&machine, "u", TaskKind::CGroups) {
                Some(TaskState::Running(_)) | None => continue,
                Some(done) => return done,
            }
        }
    }

    #[tokio::test]
    async fn a_booted_node_with_a_working_runtime_is_ready() {
        let fake = FakeRuntime::new();
        let container = running_node(&fake).await;
        fake.set_logs(
            &container,
            "systemd[1]: Reached target \u{1b}[0;1;39mMulti-User System\u{1b}[0m.\n",
        );
        fake.on_exec(|_, request| {
            (request.argv == ["crictl", "ps"]).then(crate::docker::ExecOutput::default)
        });
        assert_eq!(
            run_task(fake.clone(), container.clone()).await,
            TaskState::Succeeded("the node booted".into())
        );
        assert!(
            fake.execs(&container)
                .iter()
                .any(|r| r.argv == ["crictl", "ps"])
        );
    }

    #[tokio::test]
    async fn a_node_whose_runtime_never_answers_fails_for_a_retry() {
        let fake = FakeRuntime::new();
        let container = running_node(&fake).await;
        fake.set_logs(&container, "Reached target Multi-User System.\n");
        fake.on_exec(|_, request| {
            (request.argv == ["crictl", "ps"]).then(|| crate::docker::ExecOutput {
                exit_code: 1,
                ..Default::default()
            })
        });
        let state = run_task(fake, container).await;
        let TaskState::Failed { message, terminal } = state else {
            panic!("expected a failure, got {state:?}");
        };
        assert!(!terminal);
        assert!(message.contains("does not answer"), "{message}");
    }
}
