//! Bodies of the background tasks that wait for the node to boot and preload images.

use std::sync::Arc;
use std::time::Duration;

use crate::controllers::tasks::{Progress, TaskFailure, TaskResult};
use crate::docker::ContainerRuntime;
use crate::docker::node::{preload_image, wait_for_multi_user};
use crate::runtime::error_chain;

/// How long the node's init may take to reach the multi-user target (CAPD: 30 s per attempt).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until systemd in the node reached the multi-user target, on the engine's followed log.
/// That the container runtime answers (`crictl ps`) is checked by the exec that launches
/// bootstrap, the first thing that needs it (`runner::launch_request`).
pub async fn wait_for_node(runtime: Arc<dyn ContainerRuntime>, container: String) -> TaskResult {
    wait_for_multi_user(runtime.as_ref(), &container, BOOT_TIMEOUT)
        .await
        .map_err(|e| TaskFailure::retryable(error_chain(&e)))?;
    Ok("the node booted".to_string())
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
        create_node(fake, &spec, None).await.unwrap();
        "c1-m1".to_string()
    }

    async fn run_task(fake: FakeRuntime, container: String) -> TaskState {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        let machine = crate::controllers::kinds::MachineRef::docker("default", "m1");
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(fake);
        tasks.start(&machine, "u", TaskKind::CGroups, "", |_| {
            wait_for_node(runtime, container)
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
    async fn a_node_is_ready_once_its_init_reached_the_multi_user_target() {
        let fake = FakeRuntime::new();
        let container = running_node(&fake).await;
        fake.set_logs(
            &container,
            "systemd[1]: Reached target \u{1b}[0;1;39mMulti-User System\u{1b}[0m.\n",
        );
        assert_eq!(
            run_task(fake.clone(), container.clone()).await,
            TaskState::Succeeded("the node booted".into())
        );
        assert!(
            fake.execs(&container).is_empty(),
            "the runtime is checked by the launch of bootstrap, not by an exec of its own"
        );
    }
}
