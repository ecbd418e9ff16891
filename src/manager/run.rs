//! The manager's life: check dependencies, serve health and metrics, wait for the CRDs, win the
//! Lease, run the controllers, and stop everything in order on one signal.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::apiserver::{self, ApiServerError, CrdWait, ResourceTable};
use super::args::Args;
use super::diagnostics::{self, AccessReviewer, Security};
use super::leader::{self, LeaderConfigError, LeaderElectionConfig};
use super::lease::{LeaderElector, LeaseError};
use crate::crdmigrator;
use crate::runtime::client::{MANAGEMENT_REQUEST_TIMEOUT, build_client};
use crate::runtime::context::lease_namespace;
use crate::runtime::feature_gates::Feature;
use crate::runtime::health::{self, Readiness};
use crate::runtime::{
    Concurrency, Context, ControllerConfig, ControllerTask, Metrics, error_chain,
};
use crate::serving::ListenError;
use crate::serving::tls::{self, TlsError};
use crate::webhooks::{self, WebhookError, WebhookServer};

/// How long controllers get to finish after being told to stop, before they are aborted. Short,
/// because reconciles do not block on slow work and CAPD's pods have a 10 s grace period that must
/// also cover releasing the Lease.
pub const CONTROLLER_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the container engine check may take.
pub const ENGINE_CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the HTTP servers get to finish their requests at shutdown.
pub const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// The `/readyz` check the manager itself requires: the CRDs its controllers watch are served.
pub const CRDS_CHECK: &str = "crds";

/// Builds the controllers once this process leads. Called once; it should `require` each
/// controller's readiness check on `context.readiness` before returning.
pub type StartControllers =
    Box<dyn FnOnce(Arc<Context>, CancellationToken) -> Vec<ControllerTask> + Send>;

/// A check that the container engine answers, resolving to a short description of it for the
/// log (for example its version).
pub type EngineCheck = BoxFuture<'static, Result<String, Box<dyn Error + Send + Sync>>>;

/// What the rest of the program plugs into the manager.
pub struct Wiring {
    /// Run before anything is served; a failure stops the manager with "cannot reach the Docker
    /// engine". `None` until the Docker backend provides one.
    pub engine_check: Option<EngineCheck>,
    /// The controllers.
    pub start_controllers: StartControllers,
}

impl Wiring {
    /// No engine check and no controllers: the manager serves health and metrics, waits for the
    /// CRDs and the Lease, then idles until signalled.
    pub fn without_controllers() -> Self {
        Self {
            engine_check: None,
            start_controllers: Box::new(|_, _| Vec::new()),
        }
    }
}

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The leader election flags are inconsistent.
    #[error("invalid leader election settings")]
    LeaderConfig(#[from] LeaderConfigError),
    /// The management cluster is unusable.
    #[error(transparent)]
    ApiServer(#[from] ApiServerError),
    /// The container engine check failed.
    #[error("cannot use the container engine")]
    Engine(#[source] Box<dyn Error + Send + Sync>),
    /// The diagnostics certificate could not be made.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A server could not bind its address.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// Leadership was lost; the controllers were stopped.
    #[error(transparent)]
    LeaderElectionLost(LeaseError),
    /// A controller's future returned while the manager was running.
    #[error("controller {0} stopped unexpectedly")]
    ControllerExited(&'static str),
    /// A controller's future panicked.
    #[error("controller {0} panicked")]
    ControllerPanicked(&'static str),
    /// The webhook server could not start.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The CRD migrator could not be set up (our CRDs could not be built to learn their names).
    #[error("cannot set up the CRD migrator")]
    CrdMigrator(#[source] crate::api::crd::CrdError),
    /// An HTTP server stopped while the manager was running.
    #[error("the {server} server stopped")]
    Server {
        /// `health`, `diagnostics` or `webhook`.
        server: &'static str,
        /// Why, when it said.
        #[source]
        source: std::io::Error,
    },
}

/// Runs the manager until `shutdown` is cancelled (`Ok`) or something fails (`Err`).
pub async fn run(args: Args, wiring: Wiring, shutdown: CancellationToken) -> Result<(), RunError> {
    // The same set `main` builds the wiring from.
    let controller_set = args.controller_set();
    let skipped_crd_migration_phases = args.skipped_crd_migration_phases();
    let Args {
        namespace,
        watch_filter,
        leader_elect,
        leader_elect_lease_duration,
        leader_elect_renew_deadline,
        leader_elect_retry_period,
        health_addr,
        diagnostics_address,
        insecure_diagnostics,
        tls_min_version,
        sync_period,
        dockermachine_concurrency,
        dockercluster_concurrency,
        dockermachinetemplate_concurrency,
        dockermachinepool_concurrency,
        devmachine_concurrency,
        devcluster_concurrency,
        devmachinetemplate_concurrency,
        devmachinepool_concurrency,
        kube_api_qps,
        kube_api_burst,
        clustercache_client_qps,
        clustercache_client_burst,
        // Read through `skipped_crd_migration_phases` above.
        skip_crd_migration_phases: _,
        feature_gates,
        webhook_port,
        webhook_cert_dir,
        webhook_cert_name,
        webhook_key_name,
        // Used by telemetry set-up before `run`.
        v: _,
        logging_format: _,
        docker_network,
        publish_address,
        // Read through `controller_set` above.
        controllers: _,
        gardener_infrastructure: _,
        gardener_ignore_operation_annotation: _,
        kubeconfig,
    } = args;

    let pod_name = env_var("POD_NAME");
    let instance = pod_name.clone().or_else(hostname);
    let leader_config = if leader_elect {
        Some(LeaderElectionConfig::new(
            lease_namespace(env_var("POD_NAMESPACE")),
            leader::holder_identity(pod_name, hostname()),
            leader_elect_lease_duration,
            leader_elect_renew_deadline,
            leader_elect_retry_period,
        )?)
    } else {
        None
    };
    let webhook_config = webhooks::WebhookConfig {
        host: None,
        port: webhook_port,
        cert_dir: webhook_cert_dir,
        cert_name: webhook_cert_name,
        key_name: webhook_key_name,
        tls_min_version,
        reload_interval: webhooks::server::DEFAULT_RELOAD_INTERVAL,
        settings: webhooks::Settings {
            cluster_topology: feature_gates.enabled(Feature::ClusterTopology),
        },
    };
    let controller_config = ControllerConfig {
        namespace: Some(namespace).filter(|ns| !ns.is_empty()),
        watch_filter: Some(watch_filter).filter(|f| !f.is_empty()),
        machine_pools: feature_gates.enabled(Feature::MachinePool),
        dev_kinds: true,
        dev_machine_pools: true,
        feature_gates,
        docker_network,
        publish_address,
        sync_period,
        concurrency: Concurrency {
            docker_machine: dockermachine_concurrency,
            docker_cluster: dockercluster_concurrency,
            docker_machine_template: dockermachinetemplate_concurrency,
            docker_machine_pool: dockermachinepool_concurrency,
            dev_machine: devmachine_concurrency,
            dev_cluster: devcluster_concurrency,
            dev_machine_template: devmachinetemplate_concurrency,
            dev_machine_pool: devmachinepool_concurrency,
        },
        workload_client_qps: clustercache_client_qps,
        workload_client_burst: clustercache_client_burst,
    };
    tracing::info!(
        controllers = %controller_set,
        namespace = controller_config.namespace.as_deref().unwrap_or("(all)"),
        watch_filter = controller_config.watch_filter.as_deref().unwrap_or("(none)"),
        feature_gates = %controller_config.feature_gates,
        docker_network = %controller_config.docker_network,
        leader_elect,
        "Starting manager"
    );

    let config = apiserver::load_config(kubeconfig.as_deref()).await?;
    let url = config.cluster_url.to_string();
    let client = build_client(
        config,
        kube_api_qps,
        kube_api_burst,
        MANAGEMENT_REQUEST_TIMEOUT,
    )
    .map_err(ApiServerError::Client)?;
    let version = apiserver::check_reachable(&client, &url).await?;
    tracing::info!(url = %url, version = %version, "Kubernetes API server is reachable");

    match wiring.engine_check {
        Some(check) => {
            let engine = tokio::time::timeout(ENGINE_CHECK_TIMEOUT, check)
                .await
                .unwrap_or_else(|_| {
                    let seconds = ENGINE_CHECK_TIMEOUT.as_secs();
                    Err(format!("no answer within {seconds}s").into())
                })
                .map_err(RunError::Engine)?;
            tracing::info!(engine = %engine, "Container engine is reachable");
        }
        None => tracing::warn!("No Docker engine check is wired into this build"),
    }

    let metrics = Metrics::new();
    let readiness = Readiness::new();
    readiness.require(CRDS_CHECK);
    let stop_servers = CancellationToken::new();
    let mut servers = JoinSet::new();
    // Webhooks first: every replica serves them (leader or not), and the CRDs' conversion needs
    // them before anything else works. They are for our Cluster API kinds only: the Gardener
    // controller alone needs no webhook server and no serving certificate.
    if controller_set.cluster_api {
        start_webhooks(webhook_config, &mut servers, &stop_servers).await?;
    } else {
        tracing::info!("Webhooks are not served: the Cluster API controllers do not run");
    }
    if let Some(listener) = health_addr.bind().await? {
        log_listening("health", &listener, "http");
        let router = health::router(readiness.clone());
        let stop = stop_servers.clone();
        servers.spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            ("health", served)
        });
    }
    if let Some(listener) = diagnostics_address.bind().await? {
        let security = if insecure_diagnostics {
            log_listening("diagnostics", &listener, "http");
            Security::Insecure
        } else {
            let names = ["localhost".to_owned()]
                .into_iter()
                .chain(hostname())
                .collect();
            let tls = tls::self_signed_server_config(names, tls_min_version)?;
            log_listening("diagnostics", &listener, "https");
            Security::Secure {
                tls: tls.config,
                reviewer: AccessReviewer::new(client.clone()),
            }
        };
        let (metrics, stop) = (metrics.clone(), stop_servers.clone());
        servers.spawn(async move {
            let served = diagnostics::serve(listener, security, metrics, stop).await;
            ("diagnostics", served)
        });
    }

    let required = controller_set.required_resources();
    match apiserver::wait_for_crds(&client, &url, &required, &shutdown).await {
        Ok(CrdWait::Served) => {}
        Ok(CrdWait::Cancelled) => {
            stop(servers, &stop_servers).await;
            return Ok(());
        }
        Err(error) => {
            stop(servers, &stop_servers).await;
            return Err(error.into());
        }
    }
    readiness.mark_ready(CRDS_CHECK);
    let mut controller_config = controller_config;
    if controller_set.cluster_api {
        check_optional_resources(&client, &mut controller_config).await;
    }

    let migrator = match controller_set.cluster_api {
        true => crd_migrator(&client, &skipped_crd_migration_phases, &metrics)
            .map_err(RunError::CrdMigrator)?,
        false => None,
    };

    let mut elector = leader_config.map(|c| LeaderElector::new(client.clone(), c, metrics.clone()));
    if let Some(elector) = elector.as_mut()
        && !elector.acquire(&shutdown).await
    {
        stop(servers, &stop_servers).await;
        return Ok(());
    }

    // The CRD migrator's first pass, before the controllers that read those kinds (the Lease is
    // renewed meanwhile); what failed is retried by its watch, which runs with the controllers.
    let mut migrator_task = None;
    if let Some(migrator) = migrator {
        let started = tokio::select! {
            failed = migrator.start_up(&shutdown) => Ok(failed),
            held = hold(elector.as_mut(), &shutdown) => Err(held),
        };
        match started {
            Ok(_) if shutdown.is_cancelled() => {
                if let Some(elector) = elector.as_mut() {
                    elector.release().await;
                }
                stop(servers, &stop_servers).await;
                return Ok(());
            }
            Ok(failed) => migrator_task = Some((migrator, failed)),
            Err(held) => {
                stop(servers, &stop_servers).await;
                return match held {
                    Ok(()) => Ok(()),
                    Err(lost) => Err(RunError::LeaderElectionLost(lost)),
                };
            }
        }
    }

    let context = Arc::new(Context::new(
        client,
        metrics,
        readiness,
        controller_config,
        instance,
    ));
    let stop_controllers = CancellationToken::new();
    let mut tasks = (wiring.start_controllers)(context, stop_controllers.clone());
    if let Some((migrator, failed)) = migrator_task {
        let stop = stop_controllers.clone();
        tasks.insert(
            0,
            ControllerTask {
                name: crdmigrator::MIGRATOR,
                future: Box::pin(crdmigrator::run(migrator, failed, stop)),
            },
        );
    }
    let mut controllers = JoinSet::new();
    let mut names_by_task = std::collections::HashMap::new();
    let names: Vec<&str> = tasks.iter().map(|t| t.name).collect();
    tracing::info!(controllers = %names.join(","), "Starting controllers");
    for task in tasks {
        let handle = controllers.spawn(task.future);
        names_by_task.insert(handle.id(), task.name);
    }

    let outcome = tokio::select! {
        () = shutdown.cancelled() => Ok(()),
        held = hold(elector.as_mut(), &shutdown) => held.map_err(RunError::LeaderElectionLost),
        Some(exited) = controllers.join_next_with_id() => {
            let name = |id| names_by_task.get(&id).copied().unwrap_or("(unknown)");
            Err(match exited {
                Ok((id, ())) => RunError::ControllerExited(name(id)),
                Err(join) => RunError::ControllerPanicked(name(join.id())),
            })
        }
        Some(finished) = servers.join_next() => Err(server_stopped(finished)),
    };
    // The error itself is reported once, by the caller.
    match &outcome {
        Ok(()) => tracing::info!("Shutdown requested; stopping controllers"),
        Err(_) => tracing::info!("Stopping controllers after a failure"),
    }

    stop_controllers.cancel();
    let drained = tokio::time::timeout(CONTROLLER_STOP_TIMEOUT, async {
        while controllers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            timeout_s = CONTROLLER_STOP_TIMEOUT.as_secs(),
            "Controllers did not stop in time; aborting them"
        );
        controllers.shutdown().await;
    }
    if outcome.is_ok()
        && let Some(elector) = elector.as_mut()
    {
        elector.release().await;
    }
    stop(servers, &stop_servers).await;
    outcome
}

/// The CRD migrator of our CRDs (the ones `crdgen` writes), with the phases not skipped; `None`
/// when every phase is skipped.
fn crd_migrator(
    client: &kube::Client,
    skipped: &[crdmigrator::Phase],
    metrics: &Metrics,
) -> Result<Option<crdmigrator::Migrator>, crate::api::crd::CrdError> {
    let phases = crdmigrator::Phases::without(skipped);
    if phases.is_empty() {
        tracing::info!("Every CRD migration phase is skipped; the CRD migrator does not run");
        return Ok(None);
    }
    let names = crate::api::crd::all()?
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    Ok(Some(crdmigrator::Migrator::new(
        client.clone(),
        names,
        phases,
        metrics.clone(),
    )))
}

/// Turns off the Cluster API controllers whose optional CRDs are not served (machine pools, the
/// Dev* kinds, DevMachinePools), with a warning naming what is missing.
async fn check_optional_resources(client: &kube::Client, controller_config: &mut ControllerConfig) {
    if controller_config.machine_pools {
        controller_config.machine_pools = served(
            client,
            &apiserver::MACHINE_POOL_RESOURCES,
            "The MachinePool feature gate is on but the machine pool CRDs are not served; the DockerMachinePool controller does not run (install them and restart the manager)",
        )
        .await;
    }
    controller_config.dev_kinds = served(
        client,
        &apiserver::DEV_RESOURCES,
        "The Dev* CRDs are not served; the DevCluster, DevMachine and DevMachineTemplate controllers do not run (install them and restart the manager)",
    )
    .await;
    if controller_config.machine_pools && controller_config.dev_kinds {
        controller_config.dev_machine_pools = served(
            client,
            &apiserver::DEV_MACHINE_POOL_RESOURCES,
            "The DevMachinePool CRDs are not served; the DevMachinePool controller does not run (install them and restart the manager)",
        )
        .await;
    }
}

/// Whether every resource of `table` is served; if not, logs `consequence` with what is missing.
async fn served(client: &kube::Client, table: &[ResourceTable], consequence: &str) -> bool {
    let missing = apiserver::missing_optional_resources(client, table).await;
    if missing.is_empty() {
        return true;
    }
    tracing::warn!(missing = missing.join(", ").as_str(), "{consequence}");
    false
}

/// Binds the webhook server and adds it to `servers`. A certificate that does not exist yet
/// (a manager run outside a cluster) is waited for with a warning; any other failure stops the
/// start, as controller-runtime's webhook server does.
async fn start_webhooks(
    config: webhooks::WebhookConfig,
    servers: &mut JoinSet<(&'static str, std::io::Result<()>)>,
    stop: &CancellationToken,
) -> Result<(), RunError> {
    let stop = stop.clone();
    match WebhookServer::bind(config.clone()).await {
        Ok(server) => {
            match server.local_addr() {
                Ok(address) => {
                    tracing::info!(server = "webhook", address = %address, scheme = "https", "Serving")
                }
                Err(_) => tracing::info!(server = "webhook", scheme = "https", "Serving"),
            }
            servers.spawn(async move { ("webhook", server.serve(stop).await) });
        }
        Err(error) if error.is_missing_certificate() => {
            tracing::warn!(
                error = %error_chain(&error),
                "Webhooks are not served until the serving certificate exists (cert-manager writes it into the mounted Secret)"
            );
            servers.spawn(async move {
                let served = webhooks::serve_once_certificate_exists(config, stop)
                    .await
                    .map_err(|e| std::io::Error::other(error_chain(&e)));
                ("webhook", served)
            });
        }
        Err(error) => return Err(error.into()),
    }
    Ok(())
}

/// Renews the Lease while leading; without leader election, never returns.
async fn hold(
    elector: Option<&mut LeaderElector>,
    shutdown: &CancellationToken,
) -> Result<(), LeaseError> {
    match elector {
        Some(elector) => {
            elector.hold(shutdown).await?;
            // Shutdown: let the select's shutdown branch win.
            std::future::pending().await
        }
        None => std::future::pending().await,
    }
}

type ServerResult = Result<(&'static str, std::io::Result<()>), tokio::task::JoinError>;

fn server_stopped(finished: ServerResult) -> RunError {
    match finished {
        Ok((server, Ok(()))) => RunError::Server {
            server,
            source: std::io::Error::other("it returned without being asked to stop"),
        },
        Ok((server, Err(source))) => RunError::Server { server, source },
        Err(join) => RunError::Server {
            server: "HTTP",
            source: std::io::Error::other(join.to_string()),
        },
    }
}

/// Stops the HTTP servers, giving open requests a moment.
async fn stop(
    mut servers: JoinSet<(&'static str, std::io::Result<()>)>,
    token: &CancellationToken,
) {
    token.cancel();
    let drained = tokio::time::timeout(SERVER_STOP_TIMEOUT, async {
        while servers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        servers.shutdown().await;
    }
}

fn log_listening(server: &'static str, listener: &tokio::net::TcpListener, scheme: &str) {
    match listener.local_addr() {
        Ok(address) => tracing::info!(server, address = %address, scheme, "Serving"),
        Err(_) => tracing::info!(server, scheme, "Serving"),
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The host name: `HOSTNAME` (the pod name in Kubernetes), else the kernel's.
pub fn hostname() -> Option<String> {
    env_var("HOSTNAME").or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
    })
}

/// Cancels `token` on the first SIGTERM or SIGINT; a second signal exits at once with code 1
/// (as controller-runtime's signal handler does). Must be called inside the Tokio runtime; the
/// handlers are installed before it returns.
pub fn spawn_signal_handler(token: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let first = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::info!(
            signal = first,
            "Received signal; shutting down (send again to exit at once)"
        );
        token.cancel();
        let second = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        tracing::warn!(signal = second, "Received second signal; exiting");
        std::process::exit(1);
    });
    Ok(())
}
