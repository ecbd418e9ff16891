//! Which controllers this manager runs (`--controllers`, `--gardener-infrastructure`), what each
//! set needs from the API server, and the [`Wiring`] that starts them on one Docker engine client.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::apiserver::{CLUSTER_API_RESOURCES, GARDENER_RESOURCES, ResourceTable};
use super::args::ArgsError;
use super::run::{EngineCheck, Wiring};
use crate::controllers::UNPRIVILEGED_ENV;
use crate::docker::counting::{COUNT_ENV, CountingRuntime};
use crate::docker::monitor::{EngineReport, EngineWatcher, monitor};
use crate::docker::{ContainerRuntime, DockerEngine};
use crate::runtime::{Context, ControllerTask, error_chain};

/// `--controllers` name of the Cluster API controllers (DockerCluster, DockerMachine,
/// DockerMachinePool, DockerMachineTemplate and the Dev* kinds) and their webhooks.
pub const CLUSTER_API: &str = "cluster-api";

/// `--controllers` name of the Gardener `Infrastructure` extension controller.
pub const GARDENER_INFRASTRUCTURE: &str = "gardener-infrastructure";

/// The controllers a manager runs: never empty (the flag parser refuses an empty set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerSet {
    /// The Cluster API controllers, which need the CAPD and Cluster API core CRDs and serve the
    /// webhooks.
    pub cluster_api: bool,
    /// The Gardener `Infrastructure` controller, which needs only Gardener's `Infrastructure`
    /// CRD.
    pub gardener_infrastructure: bool,
    /// The Gardener controller acts on every new generation instead of waiting for Gardener's
    /// operation annotation (`--gardener-ignore-operation-annotation`).
    pub gardener_ignore_operation_annotation: bool,
}

impl Default for ControllerSet {
    /// `cluster-api`: what CAPD runs.
    fn default() -> Self {
        Self {
            cluster_api: true,
            gardener_infrastructure: false,
            gardener_ignore_operation_annotation: false,
        }
    }
}

impl ControllerSet {
    /// This set, plus the Gardener controller when `add` (`--gardener-infrastructure`).
    pub fn with_gardener_infrastructure(self, add: bool) -> Self {
        Self {
            gardener_infrastructure: self.gardener_infrastructure || add,
            ..self
        }
    }

    /// This set, its Gardener controller ignoring the operation annotation when `ignore`.
    pub fn with_gardener_ignoring_operation_annotation(self, ignore: bool) -> Self {
        Self {
            gardener_ignore_operation_annotation: ignore,
            ..self
        }
    }

    /// The resources start-up waits for: those the controllers of this set watch.
    pub fn required_resources(self) -> Vec<ResourceTable> {
        let mut required = Vec::new();
        if self.cluster_api {
            required.extend(CLUSTER_API_RESOURCES);
        }
        if self.gardener_infrastructure {
            required.extend(GARDENER_RESOURCES);
        }
        required
    }

    /// Builds the tasks of this set's controllers.
    fn start(
        self,
        context: Arc<Context>,
        runtime: Arc<dyn ContainerRuntime>,
        stop: CancellationToken,
    ) -> Vec<ControllerTask> {
        let mut tasks = Vec::new();
        if self.cluster_api {
            tasks.extend(crate::controllers::start::start(
                context.clone(),
                runtime.clone(),
                stop.clone(),
            ));
        }
        if self.gardener_infrastructure {
            let mode = crate::gardener::trigger::Mode::from_flag(
                self.gardener_ignore_operation_annotation,
            );
            tasks.extend(crate::gardener::controller_tasks(
                context, runtime, stop, mode,
            ));
        }
        tasks
    }
}

impl FromStr for ControllerSet {
    type Err = ArgsError;

    /// A comma-separated list of [`CLUSTER_API`] and [`GARDENER_INFRASTRUCTURE`].
    fn from_str(value: &str) -> Result<Self, ArgsError> {
        let mut set = Self {
            cluster_api: false,
            gardener_infrastructure: false,
            gardener_ignore_operation_annotation: false,
        };
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                CLUSTER_API => set.cluster_api = true,
                GARDENER_INFRASTRUCTURE => set.gardener_infrastructure = true,
                _ => return Err(ArgsError::UnknownController(name.to_owned())),
            }
        }
        if !set.cluster_api && !set.gardener_infrastructure {
            return Err(ArgsError::NoControllers);
        }
        Ok(set)
    }
}

impl fmt::Display for ControllerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (self.cluster_api, CLUSTER_API),
            (self.gardener_infrastructure, GARDENER_INFRASTRUCTURE),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        f.write_str(&names.join(","))
    }
}

/// The `/readyz` check that fails while the Docker engine cannot be reached.
pub const ENGINE_CHECK: &str = "docker-engine";

/// The manager wiring of this provider: the Docker engine check (which also opens the engine
/// client the controllers use) and the controllers of `controllers`, which reach the engine
/// through a [`monitor`] whose watcher runs as the `docker-engine` task.
pub fn wiring(controllers: ControllerSet) -> Wiring {
    let (engine_check, engine) = docker_engine();
    Wiring {
        engine_check: Some(engine_check),
        start_controllers: Box::new(move |context, stop| match engine.get() {
            Some(runtime) => {
                context.metrics.set_docker_engine(&runtime.engine());
                let (runtime, watcher) = monitor(runtime.clone());
                let mut tasks = vec![watch_engine(&context, watcher, stop.clone())];
                tasks.extend(controllers.start(context, runtime, stop));
                tasks
            }
            None => vec![ControllerTask {
                name: "docker-engine",
                future: async {
                    tracing::error!("The Docker engine client is missing; no controller can run");
                }
                .boxed(),
            }],
        }),
    }
}

/// The task that reports the engine's state: `/readyz` ([`ENGINE_CHECK`]), the metrics
/// `capd_docker_engine_up` and `capd_docker_engine_outages_total`, and a log line per change.
fn watch_engine(
    context: &Context,
    watcher: EngineWatcher,
    stop: CancellationToken,
) -> ControllerTask {
    let (readiness, metrics) = (context.readiness.clone(), context.metrics.clone());
    readiness.mark_ready(ENGINE_CHECK);
    metrics.set_docker_engine_up(true);
    let report = move |report| match report {
        EngineReport::Down(error) => {
            readiness.mark_not_ready(ENGINE_CHECK);
            metrics.set_docker_engine_up(false);
            tracing::warn!(
                error = %error_chain(&error),
                "The Docker engine cannot be reached; reconciles that need it fail until it answers again"
            );
        }
        EngineReport::Up => {
            metrics.set_docker_engine_up(true);
            readiness.mark_ready(ENGINE_CHECK);
            tracing::info!("The Docker engine answers again");
        }
    };
    ControllerTask {
        name: ENGINE_CHECK,
        future: watcher.run(report, stop).boxed(),
    }
}

/// The engine check, and the slot where it leaves the engine client once it answered.
fn docker_engine() -> (EngineCheck, Arc<OnceLock<Arc<dyn ContainerRuntime>>>) {
    let engine: Arc<OnceLock<Arc<dyn ContainerRuntime>>> = Arc::new(OnceLock::new());
    let slot = engine.clone();
    let check = async move {
        let mut client = DockerEngine::connect().await?;
        if std::env::var(UNPRIVILEGED_ENV).is_ok_and(|v| v == "true") {
            tracing::warn!(
                "Running containers unprivileged ({UNPRIVILEGED_ENV}=true): test engines only"
            );
            client = client.without_privileges();
        }
        let host = client.host_info().await?;
        if let Some(shortfall) = host.rootless_shortfall() {
            return Err(format!("{} cannot run nodes: {shortfall}", client.engine()).into());
        }
        let description = format!(
            "{} at {} (API {})",
            client.engine(),
            client.host(),
            client.api_version()
        );
        let mut runtime: Arc<dyn ContainerRuntime> = Arc::new(client);
        if let Some(file) = std::env::var_os(COUNT_ENV).filter(|f| !f.is_empty()) {
            tracing::info!("Counting Docker calls ({COUNT_ENV} is set): benchmarks only");
            runtime = Arc::new(CountingRuntime::new(runtime, file));
        }
        let _ = slot.set(runtime);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(description)
    }
    .boxed();
    (check, engine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::apiserver::{CLUSTER_API_GROUP_VERSION, GARDENER_GROUP_VERSION};

    fn set(value: &str) -> Result<ControllerSet, ArgsError> {
        value.parse()
    }

    #[test]
    fn names_parse_in_any_order_and_print_in_one() {
        let both = ControllerSet {
            cluster_api: true,
            gardener_infrastructure: true,
            gardener_ignore_operation_annotation: false,
        };
        assert_eq!(set("cluster-api"), Ok(ControllerSet::default()));
        assert_eq!(set("gardener-infrastructure,cluster-api"), Ok(both));
        assert_eq!(set(" cluster-api , gardener-infrastructure "), Ok(both));
        assert_eq!(both.to_string(), "cluster-api,gardener-infrastructure");
        assert_eq!(
            set("gardener-infrastructure").unwrap().to_string(),
            "gardener-infrastructure"
        );
    }

    #[test]
    fn an_empty_or_unknown_set_is_refused() {
        assert_eq!(set(""), Err(ArgsError::NoControllers));
        assert_eq!(set(" , "), Err(ArgsError::NoControllers));
        assert_eq!(
            set("cluster-api,gardener"),
            Err(ArgsError::UnknownController("gardener".into()))
        );
    }

    #[test]
    fn the_gardener_flag_adds_to_the_set() {
        let gardener = ControllerSet::default().with_gardener_infrastructure(true);
        assert!(gardener.cluster_api && gardener.gardener_infrastructure);
        assert_eq!(
            ControllerSet::default().with_gardener_infrastructure(false),
            ControllerSet::default()
        );
    }

    #[test]
    fn each_set_waits_only_for_what_its_controllers_watch() {
        let groups = |value: &str| -> Vec<&str> {
            set(value)
                .unwrap()
                .required_resources()
                .into_iter()
                .map(|(group_version, _)| group_version)
                .collect()
        };
        let gardener_only = groups("gardener-infrastructure");
        assert_eq!(gardener_only, [GARDENER_GROUP_VERSION]);
        let cluster_api = groups("cluster-api");
        assert!(cluster_api.contains(&CLUSTER_API_GROUP_VERSION));
        assert!(!cluster_api.contains(&GARDENER_GROUP_VERSION));
        let both = groups("cluster-api,gardener-infrastructure");
        assert_eq!(both.len(), cluster_api.len() + 1);
    }
}
