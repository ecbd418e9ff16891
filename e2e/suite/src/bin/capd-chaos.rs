//! `capd-chaos`: a cluster's life while the manager is SIGKILLed at random points (test-only,
//! never shipped; `hack/chaos.sh` builds what it needs and runs it); see [`capd_e2e::chaos`].

use std::process::ExitCode;

use capd_e2e::chaos::{self, Args};
use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    let kills = args.kills;
    let report = chaos::run(args).await;
    println!("{}", report.markdown());
    if report.passed(kills) {
        println!("capd-chaos: passed");
        ExitCode::SUCCESS
    } else {
        println!("capd-chaos: FAILED");
        ExitCode::FAILURE
    }
}
