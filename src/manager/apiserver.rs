//! Talking to the management cluster at start-up: the kubeconfig, the reachability check, and the
//! wait until our CRDs are served. The client itself is built by [`crate::runtime::client`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

use crate::runtime::client::ClientError;
use crate::runtime::error_chain;

/// The API group and version our CRDs are served at.
pub const INFRASTRUCTURE_GROUP_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

/// The API group and version of the Cluster API core objects the controllers read.
pub const CLUSTER_API_GROUP_VERSION: &str = "cluster.x-k8s.io/v1beta2";

/// The API group and version of Gardener's extension objects the Gardener controller watches.
pub const GARDENER_GROUP_VERSION: &str = "extensions.gardener.cloud/v1alpha1";

/// Resources by group version: what discovery must list.
pub type ResourceTable = (&'static str, &'static [&'static str]);

/// The resources the Cluster API controllers watch, by group version; start-up waits until
/// discovery lists all of them: ours (installed with the provider) and Cluster API core's
/// (installed by `clusterctl init` with the core provider), without which no watch could start.
pub const CLUSTER_API_RESOURCES: [ResourceTable; 2] = [
    (
        INFRASTRUCTURE_GROUP_VERSION,
        &["dockerclusters", "dockermachines", "dockermachinetemplates"],
    ),
    (CLUSTER_API_GROUP_VERSION, &["clusters", "machines"]),
];

/// The resource the Gardener `Infrastructure` controller watches (Gardener installs its CRD in
/// the seed).
pub const GARDENER_RESOURCES: [ResourceTable; 1] = [(GARDENER_GROUP_VERSION, &["infrastructures"])];

/// The resources the DockerMachinePool controller watches besides [`CLUSTER_API_RESOURCES`]: it runs
/// only where they are served (see [`missing_optional_resources`]).
pub const MACHINE_POOL_RESOURCES: [ResourceTable; 2] = [
    (
        INFRASTRUCTURE_GROUP_VERSION,
        &["dockermachinepools", "dockermachinepooltemplates"],
    ),
    (CLUSTER_API_GROUP_VERSION, &["machinepools"]),
];

/// The resources the DevMachinePool controller watches besides [`MACHINE_POOL_RESOURCES`] and
/// [`DEV_RESOURCES`] (CAPD 1.14's kinds: components of an earlier release lack them, and the
/// other controllers run without them).
pub const DEV_MACHINE_POOL_RESOURCES: [ResourceTable; 1] = [(
    INFRASTRUCTURE_GROUP_VERSION,
    &["devmachinepools", "devmachinepooltemplates"],
)];

/// The resources the DevCluster, DevMachine and DevMachineTemplate controllers watch: they run
/// only where they are served (see [`missing_optional_resources`]), so a manager given only the
/// Docker* CRDs keeps serving those.
pub const DEV_RESOURCES: [ResourceTable; 1] = [(
    INFRASTRUCTURE_GROUP_VERSION,
    &["devclusters", "devmachines", "devmachinetemplates"],
)];

/// How long the reachability check may take.
pub const REACHABILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often discovery is polled while the CRDs are not served.
pub const CRD_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Why the manager could not talk to the management cluster.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    /// The `--kubeconfig` file could not be read.
    #[error("read kubeconfig {}", path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The `--kubeconfig` file holds no usable context.
    #[error("load kubeconfig {}", path.display())]
    LoadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and no in-cluster service account.
    #[error("find Kubernetes credentials (pass --kubeconfig, set KUBECONFIG, or run in a pod)")]
    Infer(#[source] kube::config::InferConfigError),
    /// The HTTP client could not be built (TLS material, proxy).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The API server did not answer `/version`.
    #[error("cannot reach the Kubernetes API server at {url}")]
    Unreachable {
        /// The API server URL.
        url: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The API server rejected our credentials (HTTP 401).
    #[error("the Kubernetes API server at {url} rejected the manager's credentials")]
    Unauthorized {
        /// The API server URL.
        url: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer `/version` in time.
    #[error("cannot reach the Kubernetes API server at {url}: no answer within {seconds}s")]
    Timeout {
        /// The API server URL.
        url: String,
        /// The timeout.
        seconds: u64,
    },
}

/// Loads the client configuration: `--kubeconfig` when given, else kube's inference
/// (`KUBECONFIG`, `~/.kube/config`, then the in-cluster service account).
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<Config, ApiServerError> {
    let Some(path) = kubeconfig else {
        return Config::infer().await.map_err(ApiServerError::Infer);
    };
    let file = Kubeconfig::read_from(path).map_err(|source| ApiServerError::ReadKubeconfig {
        path: path.to_owned(),
        source,
    })?;
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|source| ApiServerError::LoadKubeconfig {
            path: path.to_owned(),
            source,
        })
}

/// Asks the API server for its version; the error names the URL.
pub async fn check_reachable(client: &Client, url: &str) -> Result<String, ApiServerError> {
    match tokio::time::timeout(REACHABILITY_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(info)) => Ok(info.git_version),
        Ok(Err(source)) => Err(ApiServerError::Unreachable {
            url: url.to_owned(),
            source,
        }),
        Err(_) => Err(ApiServerError::Timeout {
            url: url.to_owned(),
            seconds: REACHABILITY_TIMEOUT.as_secs(),
        }),
    }
}

/// The `required` resources that `served` does not list (in `required` order).
pub fn missing_resources(required: &[&'static str], served: &APIResourceList) -> Vec<&'static str> {
    required
        .iter()
        .copied()
        .filter(|required| !served.resources.iter().any(|r| r.name == *required))
        .collect()
}

/// Outcome of [`wait_for_crds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdWait {
    /// Every required resource is served.
    Served,
    /// Shutdown was requested first.
    Cancelled,
}

/// Polls discovery until every group version of `required` lists its resources (see
/// [`super::wiring::ControllerSet::required_resources`]),
/// logging what it waits for when that changes and every 30 seconds. Failures are logged and
/// retried, except rejected credentials (`/version` needs none, so they first show here), which no
/// amount of waiting fixes.
pub async fn wait_for_crds(
    client: &Client,
    url: &str,
    required: &[ResourceTable],
    shutdown: &CancellationToken,
) -> Result<CrdWait, ApiServerError> {
    let mut last_report: Option<(String, tokio::time::Instant)> = None;
    loop {
        let mut waiting_for = Vec::new();
        for &(group_version, required) in required {
            match client.list_api_group_resources(group_version).await {
                Ok(list) => {
                    let missing = missing_resources(required, &list);
                    if !missing.is_empty() {
                        waiting_for.push(format!(
                            "{group_version}: resources {} not served yet",
                            missing.join(", ")
                        ));
                    }
                }
                Err(kube::Error::Api(status)) if status.code == 404 => waiting_for.push(format!(
                    "{group_version}: not served yet (CRDs not installed)"
                )),
                Err(kube::Error::Api(status)) if status.code == 401 => {
                    return Err(ApiServerError::Unauthorized {
                        url: url.to_owned(),
                        source: kube::Error::Api(status),
                    });
                }
                Err(error) => waiting_for.push(format!(
                    "{group_version}: discovery failed: {}",
                    error_chain(&error)
                )),
            }
        }
        if waiting_for.is_empty() {
            tracing::info!("CRDs are served");
            return Ok(CrdWait::Served);
        }
        let waiting_for = waiting_for.join("; ");
        let due = last_report.as_ref().is_none_or(|(said, at)| {
            *said != waiting_for || at.elapsed() >= Duration::from_secs(30)
        });
        if due {
            tracing::info!(reason = waiting_for.as_str(), "Waiting for CRDs");
            last_report = Some((waiting_for, tokio::time::Instant::now()));
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(CrdWait::Cancelled),
            () = tokio::time::sleep(CRD_POLL_INTERVAL) => {}
        }
    }
}

/// The resources of `table` (see [`MACHINE_POOL_RESOURCES`], [`DEV_RESOURCES`]) discovery does
/// not list (`group/version resource`), or the failure that kept discovery from answering.
pub async fn missing_optional_resources(client: &Client, table: &[ResourceTable]) -> Vec<String> {
    let mut missing = Vec::new();
    for (group_version, wanted) in table {
        match client.list_api_group_resources(group_version).await {
            Ok(list) => missing.extend(
                missing_resources(wanted, &list)
                    .into_iter()
                    .map(|r| format!("{group_version} {r}")),
            ),
            Err(error) => missing.push(format!(
                "{group_version} (discovery failed: {})",
                error_chain(&error)
            )),
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::client::{MANAGEMENT_REQUEST_TIMEOUT, build_client};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    fn served(names: &[&str]) -> APIResourceList {
        APIResourceList {
            group_version: INFRASTRUCTURE_GROUP_VERSION.to_owned(),
            resources: names
                .iter()
                .map(|name| APIResource {
                    name: (*name).to_owned(),
                    ..APIResource::default()
                })
                .collect(),
        }
    }

    #[test]
    fn every_watched_resource_of_ours_and_of_cluster_api_is_needed() {
        let [(ours, infra), (core, capi)] = CLUSTER_API_RESOURCES;
        assert_eq!(ours, INFRASTRUCTURE_GROUP_VERSION);
        assert_eq!(core, CLUSTER_API_GROUP_VERSION);
        assert_eq!(missing_resources(infra, &served(&[])), infra.to_vec());
        assert_eq!(
            missing_resources(infra, &served(&["dockerclusters", "dockermachines/status"])),
            ["dockermachines", "dockermachinetemplates"]
        );
        let all = served(&[
            "dockerclusters",
            "dockerclusters/status",
            "dockermachines",
            "dockermachinetemplates",
            "dockerclustertemplates",
        ]);
        assert!(missing_resources(infra, &all).is_empty());
        assert_eq!(
            missing_resources(capi, &served(&["clusters", "machinesets"])),
            ["machines"]
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_in_the_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let client = build_client(
            Config::new(url.parse().unwrap()),
            10.0,
            10,
            MANAGEMENT_REQUEST_TIMEOUT,
        )
        .unwrap();
        let err = check_reachable(&client, &url).await.unwrap_err();
        assert!(matches!(err, ApiServerError::Unreachable { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("cannot reach the Kubernetes API server at {url}")
        );
    }
}
