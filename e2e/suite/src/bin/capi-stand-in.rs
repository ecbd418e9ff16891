//! `capi-stand-in`: plays Cluster API core for the sandbox of `hack/run.sh` (test-only, never
//! shipped); see [`capd_e2e::stand_in`].

use std::process::ExitCode;

use capd_e2e::stand_in::{Args, StandIn};
use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    // The suite's steps fail by panicking; the stand-in reports each failure itself, in one line.
    std::panic::set_hook(Box::new(|info| {
        if let Some(at) = info.location() {
            eprintln!("capi-stand-in: a step failed at {at}");
        }
    }));
    let stand_in = StandIn::attach(args).await;
    if stand_in.run().await {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
