//! The controllers: DockerCluster, DockerMachine, DockerMachinePool and DockerMachineTemplate.
//!
//! Each reconcile follows the same phases: fetch (the object, its owners, the containers) →
//! decide (pure functions, unit tested) → apply (Docker engine, Kubernetes API) → status
//! (server-side apply, only when it changed).

pub mod apply;
pub mod backoff;
pub mod conditions;
pub mod context;
pub mod dockercluster;
pub mod dockermachine;
pub mod dockermachinepool;
pub mod error;
pub mod kinds;
pub mod loadbalancer;
pub mod meta;
pub mod queue;
pub mod redact;
pub mod runner;
pub mod start;
pub mod tasks;
pub mod template;
pub mod unsupported;
pub mod watches;
pub mod workload;

#[cfg(test)]
mod fixtures;

pub use error::{Error, Result};

use std::sync::{Arc, OnceLock};

use futures::FutureExt;

use crate::docker::counting::{COUNT_ENV, CountingRuntime};
use crate::docker::{ContainerRuntime, DockerEngine};
use crate::manager::{ControllerTask, Wiring};

/// Environment variable that makes every container run unprivileged, for sandboxed engines that
/// refuse privileged containers (test environments with stand-in node images only: real
/// `kindest/node` images need privileges).
pub const UNPRIVILEGED_ENV: &str = "CAPD_RS_UNPRIVILEGED_CONTAINERS";

/// The manager wiring of this provider: the Docker engine check (which also opens the engine
/// client the controllers use) and the controllers themselves, plus the Gardener `Infrastructure`
/// controller when `gardener_infrastructure` is set (`--gardener-infrastructure`).
pub fn wiring(gardener_infrastructure: bool) -> Wiring {
    let engine: Arc<OnceLock<Arc<dyn ContainerRuntime>>> = Arc::new(OnceLock::new());
    let slot = engine.clone();
    let engine_check = async move {
        let mut client = DockerEngine::connect().await?;
        if std::env::var(UNPRIVILEGED_ENV).is_ok_and(|v| v == "true") {
            tracing::warn!(
                "Running containers unprivileged ({UNPRIVILEGED_ENV}=true): test engines only"
            );
            client = client.without_privileges();
        }
        let host = client.host_info().await?;
        let description = format!(
            "Docker {} at {} (API {})",
            host.server_version,
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
    Wiring {
        engine_check: Some(engine_check),
        start_controllers: Box::new(move |context, stop| match engine.get() {
            Some(runtime) => {
                let mut tasks = start::start(context.clone(), runtime.clone(), stop.clone());
                if gardener_infrastructure {
                    tasks.push(crate::gardener::controller_task(
                        context,
                        runtime.clone(),
                        stop,
                    ));
                }
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
