//! Operations on node containers through a [`ContainerRuntime`].

use std::time::Duration;

use tokio::time::Instant;

use super::addresses::{IpFamily, MachineAddress, endpoint_on_network, machine_addresses};
use super::error::NodeError;
use super::{CLUSTER_LABEL, NodeSpec, cluster_selector};
use crate::docker::pinning::{Pinning, run_pinned};
use crate::docker::runtime::{
    ContainerRuntime, LineMatch, Removal, RunFailure, RuntimeError, ensure_image,
};
use crate::docker::types::{ContainerInfo, ContainerSummary, ExecOutput, ExecRequest, NetworkInfo};

/// What the node image's systemd logs once booted (a regex in CAPD: `Reached target .*Multi-User System.*`).
pub const MULTI_USER_PATTERN: &str = "Reached target .*Multi-User System.*";

/// Pause before following the logs of a container again whose output ended without the line.
const LOG_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Longest command output kept in an error message.
const OUTPUT_TAIL_CHARS: usize = 2000;

/// Time allowed to import one preloaded image.
const PRELOAD_TIMEOUT: Duration = Duration::from_secs(300);

fn runtime_err(action: &'static str, container: &str) -> impl FnOnce(RuntimeError) -> NodeError {
    let container = container.to_string();
    move |source| NodeError::Runtime {
        action,
        container,
        source,
    }
}

/// Creates and starts the node container described by `spec` and returns what the engine reports.
/// The image is used when present locally and pulled otherwise
/// ([`run_from_image`](crate::docker::runtime::run_from_image)); its addresses are pinned
/// ([`crate::docker::pinning`]), from `network` when the caller has just read the node network
/// (it is read otherwise); a failed start leaves nothing.
///
/// # Errors
/// [`NodeError::Image`] when the image is unavailable, [`NodeError::Runtime`] when the engine
/// refuses the container.
pub async fn create_node(
    runtime: &dyn ContainerRuntime,
    spec: &NodeSpec,
    network: Option<&NetworkInfo>,
) -> Result<ContainerInfo, NodeError> {
    run_pinned(
        runtime,
        &spec.container_spec(),
        &Pinning::default(),
        network,
    )
    .await
    .map_err(|failure| match failure {
        RunFailure::Image(source) => NodeError::Image {
            image: spec.image.clone(),
            source,
        },
        RunFailure::Container(source) => runtime_err("run", &spec.name)(source),
    })?;
    runtime
        .inspect_container(&spec.name)
        .await
        .map_err(runtime_err("inspect", &spec.name))?
        .ok_or_else(|| NodeError::NotFound {
            container: spec.name.clone(),
        })
}

/// The container `name` of `cluster` (running or not), or `None`.
///
/// # Errors
/// [`NodeError::Ambiguous`] when several match, [`NodeError::Runtime`] when listing fails.
pub async fn find_container(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
    name: &str,
) -> Result<Option<ContainerSummary>, NodeError> {
    let mut matches: Vec<ContainerSummary> = runtime
        .list_containers(&cluster_selector(cluster))
        .await
        .map_err(runtime_err("list", name))?
        .into_iter()
        .filter(|c| c.name == name)
        .collect();
    match matches.len() {
        0 | 1 => Ok(matches.pop()),
        count => Err(NodeError::Ambiguous {
            cluster: cluster.to_string(),
            container: name.to_string(),
            count,
        }),
    }
}

/// The container `name` of `cluster` (running or not) as one inspect reports it, addresses
/// included, or `None` when there is no such container or it belongs to another cluster.
///
/// # Errors
/// [`NodeError::Runtime`] when the engine cannot inspect it.
pub async fn inspect_node(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
    name: &str,
) -> Result<Option<ContainerInfo>, NodeError> {
    let info = runtime
        .inspect_container(name)
        .await
        .map_err(runtime_err("inspect", name))?;
    Ok(info.filter(|c| {
        c.name == name && c.labels.get(CLUSTER_LABEL).map(String::as_str) == Some(cluster)
    }))
}

/// Whether an inspected container runs, in the sense of a listing's state word (a paused
/// container does not).
pub fn is_running(info: &ContainerInfo) -> bool {
    info.running && info.status == "running"
}

/// The machine addresses of container `name`, read from `network` only.
///
/// # Errors
/// [`NodeError`] when the container is missing, not on the network, or lacks an address.
pub async fn node_addresses(
    runtime: &dyn ContainerRuntime,
    name: &str,
    network: &str,
    family: IpFamily,
) -> Result<Vec<MachineAddress>, NodeError> {
    let info = runtime
        .inspect_container(name)
        .await
        .map_err(runtime_err("inspect", name))?
        .ok_or_else(|| NodeError::NotFound {
            container: name.to_string(),
        })?;
    addresses_on_network(&info, network, family)
}

/// The machine addresses of an inspected container, read from `network` only.
///
/// # Errors
/// [`NodeError`] when the container is not on the network or lacks an address.
pub fn addresses_on_network(
    info: &ContainerInfo,
    network: &str,
    family: IpFamily,
) -> Result<Vec<MachineAddress>, NodeError> {
    let endpoint = endpoint_on_network(info, network).ok_or_else(|| NodeError::NotOnNetwork {
        container: info.name.clone(),
        network: network.to_string(),
    })?;
    machine_addresses(&info.name, &endpoint, family)
}

/// Removes a node container by force with its anonymous volumes; succeeds when already gone,
/// and says whether it is gone or another removal of it is still in progress.
///
/// # Errors
/// [`NodeError::Runtime`] when the engine refuses.
pub async fn delete_node(runtime: &dyn ContainerRuntime, name: &str) -> Result<Removal, NodeError> {
    runtime
        .delete_container(name)
        .await
        .map_err(runtime_err("delete", name))
}

/// Runs a command and fails when it exits non-zero, with the tail of its output in the error.
/// `action` says what the command does, for messages (arguments are never logged).
///
/// # Errors
/// [`NodeError::Exec`] when it cannot run, [`NodeError::CommandFailed`] when it exits non-zero.
pub async fn exec_checked(
    runtime: &dyn ContainerRuntime,
    container: &str,
    request: &ExecRequest,
    action: &str,
) -> Result<ExecOutput, NodeError> {
    let out = runtime
        .exec(container, request)
        .await
        .map_err(|source| NodeError::Exec {
            action: action.to_string(),
            container: container.to_string(),
            source,
        })?;
    if out.success() {
        Ok(out)
    } else {
        Err(NodeError::CommandFailed {
            action: action.to_string(),
            container: container.to_string(),
            exit_code: out.exit_code,
            output: out.output_tail(OUTPUT_TAIL_CHARS),
        })
    }
}

/// Follows the container's logs until a line satisfies `matches`; output that ends without it
/// (a container that stopped, and may be started again) is followed again after a pause.
///
/// # Errors
/// [`NodeError::WaitTimeout`] after `timeout`, [`NodeError::Runtime`] when logs cannot be read.
pub async fn wait_for_log_line(
    runtime: &dyn ContainerRuntime,
    container: &str,
    what: &str,
    matches: &LineMatch,
    timeout: Duration,
) -> Result<(), NodeError> {
    let start = Instant::now();
    loop {
        let remaining = timeout.saturating_sub(start.elapsed());
        if runtime
            .follow_logs(container, matches, remaining)
            .await
            .map_err(runtime_err("follow logs of", container))?
        {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(NodeError::WaitTimeout {
                what: what.to_string(),
                container: container.to_string(),
                timeout,
            });
        }
        tokio::time::sleep(LOG_POLL_INTERVAL.min(timeout.saturating_sub(start.elapsed()))).await;
    }
}

/// Whether a log line says systemd reached the multi-user target ([`MULTI_USER_PATTERN`];
/// terminal colour codes may sit between the words).
pub fn is_multi_user_line(line: &str) -> bool {
    line.find("Reached target ")
        .is_some_and(|at| line[at..].contains("Multi-User System"))
}

/// Waits until the node's init logged that it reached the multi-user target.
///
/// # Errors
/// As [`wait_for_log_line`].
pub async fn wait_for_multi_user(
    runtime: &dyn ContainerRuntime,
    container: &str,
    timeout: Duration,
) -> Result<(), NodeError> {
    wait_for_log_line(
        runtime,
        container,
        "the multi-user target",
        &is_multi_user_line,
        timeout,
    )
    .await
}

/// Loads an image of the engine into the node's containerd (`k8s.io` namespace): the engine's
/// export of the image (`docker save`) is streamed straight into `ctr --namespace=k8s.io images
/// import -`, with no local file (the manager's image has no writable disk) and one chunk in memory.
///
/// # Errors
/// [`NodeError`] when the image is unavailable, cannot be exported, or the import fails.
pub async fn preload_image(
    runtime: &dyn ContainerRuntime,
    container: &str,
    image: &str,
) -> Result<(), NodeError> {
    let image_err = |source| NodeError::Image {
        image: image.to_string(),
        source,
    };
    ensure_image(runtime, image).await.map_err(image_err)?;
    let request = ExecRequest::new(["ctr", "--namespace=k8s.io", "images", "import", "-"])
        .stdin_image(image)
        .timeout(PRELOAD_TIMEOUT);
    exec_checked(
        runtime,
        container,
        &request,
        &format!("import image {image}"),
    )
    .await?;
    Ok(())
}
