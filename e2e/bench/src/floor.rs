//! The floor: what the engine needs to do the provider's work, driven directly through the
//! provider's Docker layer (no Kubernetes, no manager, no polling intervals).
//!
//! A node: create and start the container the provider would run (same [`NodeSpec`], so the same
//! run options, and its addresses pinned as the provider pins them, from the network read once per
//! run), wait for its init to report the multi-user target (on the engine's followed log,
//! as the provider does: the line is seen as it is written, with one call), and run the bootstrap
//! commands the provider would run (the translated plan of the same cloud-config), one `exec`
//! each. Nodes run concurrently up to the manager's `--dockermachine-concurrency`. The load
//! balancer: the provider's network, container and configuration, applied once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use capd::bootstrap::{Format, KindMode as BootstrapMode, Options, Plan, translate};
use capd::docker::kind::mapping;
use capd::docker::loadbalancer::{
    ConfigData, LoadBalancerSpec, apply_config, create_load_balancer, render_config,
};
use capd::docker::network::ensure_network;
use capd::docker::node::{HostQuirks, NodeRole, NodeSpec, wait_for_multi_user};
use capd::docker::pinning::{Pinning, run_pinned};
use capd::docker::runtime::RunFailure;
use capd::docker::{ContainerRuntime, ExecRequest, Labels, NetworkInfo};
use futures::{StreamExt, TryStreamExt};

/// Everything a floor run needs.
pub struct Floor {
    /// The engine, privileged or not as the manager runs it.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Node image.
    pub node_image: String,
    /// Load balancer image.
    pub haproxy_image: String,
    /// The Machine's Kubernetes version (chooses the image mode as the provider does).
    pub version: String,
    /// The cloud-config every node runs.
    pub cloud_config: String,
    /// `--dockermachine-concurrency` of the manager.
    pub concurrency: usize,
}

/// How long one node may take to boot.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a node may take to stop after `SIGKILL`.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

impl Floor {
    fn plan(&self) -> Result<Plan> {
        let mode = mapping(&self.version, Some(&self.node_image))
            .context("map the node image")?
            .mode;
        let options = Options {
            kind_mode: match mode {
                capd::docker::kind::KindMode::Kind0_19 => BootstrapMode::V0_19,
                _ => BootstrapMode::V0_20,
            },
            kubernetes_version: Some(self.version.clone()),
        };
        translate(self.cloud_config.as_bytes(), Format::CloudConfig, &options)
            .context("translate the cloud-config")
    }

    /// The spec of node `name`; `host` is read once per run, as the manager reads it once.
    fn node_spec(
        &self,
        host: &HostQuirks,
        network: &NetworkInfo,
        cluster: &str,
        name: &str,
    ) -> Result<NodeSpec> {
        let mode = mapping(&self.version, Some(&self.node_image))?.mode;
        let mut spec = NodeSpec::new(
            cluster,
            name,
            NodeRole::Worker,
            &self.node_image,
            &network.name,
        );
        spec.mode = mode;
        spec.network_subnets.clone_from(&network.subnets);
        spec.host = host.clone();
        Ok(spec)
    }

    /// Creates, boots and bootstraps `n` nodes of `cluster` on `network`; returns the time it took
    /// and the names of the containers.
    pub async fn provision(
        &self,
        network: &str,
        cluster: &str,
        n: usize,
    ) -> Result<(Duration, Vec<String>)> {
        let plan = self.plan()?;
        let info = ensure_network(self.runtime.as_ref(), network, &Labels::new()).await?;
        let host = HostQuirks::detect(&self.runtime.host_info().await?);
        let names: Vec<String> = (0..n).map(|i| format!("{cluster}-w{i}")).collect();
        let started = Instant::now();
        futures::stream::iter(names.iter())
            .map(|name| self.node(&host, &info, cluster, name, &plan))
            .buffer_unordered(self.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok((started.elapsed(), names))
    }

    async fn node(
        &self,
        host: &HostQuirks,
        network: &NetworkInfo,
        cluster: &str,
        name: &str,
        plan: &Plan,
    ) -> Result<()> {
        let spec = self.node_spec(host, network, cluster, name)?;
        run_pinned(
            self.runtime.as_ref(),
            &spec.container_spec(),
            &Pinning::default(),
            Some(network),
        )
        .await
        .map_err(|(RunFailure::Image(e) | RunFailure::Container(e))| e)
        .with_context(|| format!("run {name}"))?;
        wait_for_multi_user(self.runtime.as_ref(), name, BOOT_TIMEOUT)
            .await
            .with_context(|| format!("boot {name}"))?;
        for command in &plan.commands {
            let mut request = ExecRequest::new(command.argv.clone());
            if let Some(stdin) = &command.stdin {
                request = request.stdin_bytes(stdin.clone());
            }
            let out = self.runtime.exec(name, &request).await?;
            if !out.success() {
                bail!(
                    "bootstrap command [{}] failed in {name}: {}",
                    command.description,
                    out.output_tail(400)
                );
            }
        }
        Ok(())
    }

    /// Stops `names` as a forced removal stops a node (`SIGKILL`), concurrently, and waits until
    /// none runs; returns the time it took, the first part of the floor's deletion.
    ///
    /// The floor's nodes are set aside so that the provider's phase, which comes next, creates its
    /// nodes beside none running, as the floor did: N nodes left running make every creation
    /// slower (at N = 300 a second floor beside the first took 1.20× as long, and one beside N
    /// stopped nodes 0.99×). They are removed only after the provider's phase (see `storage`).
    pub async fn set_aside(&self, names: &[String]) -> Result<Duration> {
        self.each(names, |name| self.stop(name)).await
    }

    async fn stop(&self, name: &str) -> Result<()> {
        let deadline = Instant::now() + STOP_TIMEOUT;
        self.runtime
            .kill_container(name, "SIGKILL")
            .await
            .with_context(|| format!("stop {name}"))?;
        // Docker answers a SIGKILL once the container has stopped; an engine that answers
        // sooner is waited for.
        while self
            .runtime
            .inspect_container(name)
            .await?
            .is_some_and(|c| c.running)
        {
            if Instant::now() > deadline {
                bail!("{name} still runs {STOP_TIMEOUT:?} after SIGKILL");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Deletes `names` concurrently; returns the time it took.
    pub async fn delete(&self, names: &[String]) -> Result<Duration> {
        self.each(names, |name| async move {
            self.runtime.delete_container(name).await?;
            Ok(())
        })
        .await
    }

    /// Runs `op` for every one of `names`, as many at a time as the manager's concurrency;
    /// returns the time it took.
    async fn each<'a, F, Fut>(&self, names: &'a [String], op: F) -> Result<Duration>
    where
        F: FnMut(&'a String) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let started = Instant::now();
        futures::stream::iter(names)
            .map(op)
            .buffer_unordered(self.concurrency.max(1))
            .try_collect::<Vec<()>>()
            .await?;
        Ok(started.elapsed())
    }

    /// Creates the network and the load balancer of `cluster` and applies its configuration;
    /// returns the time it took.
    pub async fn load_balancer(&self, network: &str, cluster: &str) -> Result<Duration> {
        let started = Instant::now();
        let info = ensure_network(self.runtime.as_ref(), network, &Labels::new()).await?;
        let spec = LoadBalancerSpec::new(cluster, &self.haproxy_image, network);
        create_load_balancer(self.runtime.as_ref(), &spec, Some(&info)).await?;
        let config = render_config(
            &ConfigData {
                frontend_port: spec.effective_frontend_port(),
                ..ConfigData::default()
            },
            None,
        )?;
        apply_config(self.runtime.as_ref(), &spec.name(), &config).await?;
        Ok(started.elapsed())
    }
}
