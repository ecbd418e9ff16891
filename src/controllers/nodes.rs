//! What the node containers of machines and of pools share: the node image of a Kubernetes
//! version, the engine environment a node spec depends on, and the host paths a node mounts.
//! The DockerMachine and DockerMachinePool controllers both build on it.

use ipnetwork::IpNetwork;

use crate::api::v1beta2::Mount;
use crate::controllers::context::Context;
use crate::controllers::error::{Error, Result};
use crate::docker::kind::{KindMode, Mapping, mapping};
use crate::docker::network::ensure_network;
use crate::docker::node::{ExtraMount, HostQuirks, IpFamily, NodeRole, NodeSpec, ProxyEnv};
use crate::docker::types::{Labels, NetworkInfo};

/// The node image for a Kubernetes version and a custom image (empty: none).
///
/// # Errors
/// [`Error::NodeImage`] when there is no custom image and the version is missing or invalid.
pub fn image_for(version: Option<&str>, custom_image: &str) -> Result<Mapping> {
    let custom = Some(custom_image).filter(|i| !i.trim().is_empty());
    match (version, custom) {
        (Some(version), _) => mapping(version, custom).map_err(Error::NodeImage),
        (None, Some(image)) => Ok(Mapping {
            kubernetes_version: String::new(),
            mode: KindMode::LATEST,
            image: image.to_string(),
        }),
        (None, None) => mapping("", None).map_err(Error::NodeImage),
    }
}

/// Everything the node spec depends on besides the objects.
#[derive(Debug, Clone)]
pub struct Environment {
    /// Network name.
    pub network: String,
    /// The network as this pass read it: new containers' pinned addresses are chosen from it.
    pub network_info: NetworkInfo,
    /// Its subnets (for `NO_PROXY`).
    pub subnets: Vec<IpNetwork>,
    /// Cluster IP family.
    pub family: IpFamily,
    /// Proxy variables of the manager.
    pub proxy: ProxyEnv,
    /// Engine host quirks.
    pub quirks: HostQuirks,
    /// Host address a control plane's API server port is published on.
    pub publish_address: String,
}

impl Environment {
    /// Reads the engine and the network the node containers join (created when missing).
    ///
    /// # Errors
    /// [`Error`] when the network cannot be ensured or the engine does not answer.
    pub async fn read(ctx: &Context, family: IpFamily) -> Result<Self> {
        let runtime = ctx.runtime.as_ref();
        let network = ensure_network(runtime, ctx.network(), &Labels::new()).await?;
        let host = runtime
            .host_info()
            .await
            .map_err(Error::runtime("read the Docker host facts"))?;
        Ok(Environment {
            network: ctx.network().to_string(),
            subnets: network.subnets.clone(),
            network_info: network,
            family,
            proxy: ctx.proxy.clone(),
            quirks: HostQuirks::detect(&host),
            publish_address: ctx.publish_address(),
        })
    }

    /// The spec of a node container `name` of `cluster` in this environment.
    pub fn node(&self, cluster: &str, name: &str, role: NodeRole, image: &Mapping) -> NodeSpec {
        let mut spec = NodeSpec::new(cluster, name, role, &image.image, &self.network);
        spec.mode = image.mode;
        spec.network_subnets.clone_from(&self.subnets);
        spec.ip_family = self.family;
        spec.proxy = self.proxy.clone();
        spec.host = self.quirks.clone();
        spec.publish_address.clone_from(&self.publish_address);
        spec
    }
}

/// The host paths a node mounts, from the API's mounts.
pub fn extra_mounts(mounts: &[Mount]) -> Vec<ExtraMount> {
    mounts
        .iter()
        .map(|m| ExtraMount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            read_only: m.read_only,
        })
        .collect()
}
