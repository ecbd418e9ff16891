//! The controller manager binary (`/manager` in the image).
//!
//! Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT), 1 when the manager fails (the
//! reason is logged as one line with its full error chain), 2 for invalid flags.

use std::process::ExitCode;

use std::sync::Arc;

use capd::docker::{ContainerRuntime, DockerEngine};
use capd::gardener;
use capd::manager::{self, Args, Wiring, error_chain, telemetry};
use clap::Parser;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(error) = telemetry::init(args.v, args.logging_format) {
        eprintln!("error: {}", error_chain(&error));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(error = %error_chain(&error), "Cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        manager::spawn_signal_handler(shutdown.clone())
            .map_err(|e| format!("install signal handlers: {}", error_chain(&e)))?;
        let wiring = if args.gardener_infrastructure {
            gardener_wiring().await?
        } else {
            capd::controllers::wiring()
        };
        manager::run(args, wiring, shutdown)
            .await
            .map_err(|e| error_chain(&e))
    });
    // Background tasks (server connections, watches) must not delay the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => {
            tracing::info!("Manager stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(error = %error, "Manager failed");
            ExitCode::FAILURE
        }
    }
}

/// The Gardener `Infrastructure` controller (`--gardener-infrastructure`) on the Docker engine
/// named by `DOCKER_HOST` (default: the local socket), which the manager checks before starting.
async fn gardener_wiring() -> Result<Wiring, String> {
    let engine = DockerEngine::connect()
        .await
        .map_err(|e| format!("cannot reach the Docker engine: {}", error_chain(&e)))?;
    let runtime: Arc<dyn ContainerRuntime> = Arc::new(engine);
    let checked = runtime.clone();
    Ok(Wiring {
        engine_check: Some(Box::pin(async move {
            let host = checked.host_info().await?;
            Ok(format!("Docker {}", host.server_version))
        })),
        start_controllers: Box::new(move |context, stop| {
            vec![gardener::controller_task(context, runtime, stop)]
        }),
    })
}
