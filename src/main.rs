//! The controller manager binary (`/manager` in the image).
//!
//! Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT), 1 when the manager fails (the
//! reason is logged as one line with its full error chain), 2 for invalid flags.

use std::process::ExitCode;

use capd::manager::{self, Args, telemetry};
use capd::runtime::error_chain;
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
        let wiring = manager::wiring(args.controller_set());
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
