//! `testapiserver`: runs a test Kubernetes API server beside other processes until SIGTERM/SIGINT.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use testapiserver::{Options, TestApiServer};

/// A test-only Kubernetes API server (in memory, no authentication).
#[derive(Debug, Parser)]
#[command(name = "testapiserver", version)]
struct Args {
    /// Where to write the kubeconfig clients use.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Port to listen on; 0 picks a free port.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
    /// Watch events kept per resource before old resourceVersions answer 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Seconds between bookmarks for watches that allow them.
    #[arg(long, default_value_t = 15)]
    bookmark_interval_seconds: u64,
    /// Name of the cluster, context and user in the kubeconfig.
    #[arg(long, default_value = "testapiserver")]
    context_name: String,
    /// Extra DNS names or IPs for the serving certificate (repeatable).
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Where an in-cluster service used by a conversion webhook listens, as
    /// NAMESPACE/NAME=HOST:PORT (repeatable); its certificate must name NAME.NAMESPACE.svc.
    #[arg(long = "service-endpoint", value_parser = parse_endpoint)]
    service_endpoints: Vec<(String, String)>,
}

fn parse_endpoint(s: &str) -> Result<(String, String), String> {
    let (service, endpoint) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAMESPACE/NAME=HOST:PORT, got {s:?}"))?;
    if !service.contains('/') || endpoint.is_empty() {
        return Err(format!("expected NAMESPACE/NAME=HOST:PORT, got {s:?}"));
    }
    Ok((service.to_string(), endpoint.to_string()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let Args {
        kubeconfig_out,
        port,
        bind,
        http,
        watch_history,
        bookmark_interval_seconds,
        context_name,
        tls_sans,
        service_endpoints,
    } = Args::parse();
    let handle = TestApiServer::start(Options {
        https: !http,
        bind,
        port,
        kubeconfig_path: Some(kubeconfig_out.clone()),
        watch_history,
        bookmark_interval: Duration::from_secs(bookmark_interval_seconds.max(1)),
        extra_sans: tls_sans,
        context_name,
        service_endpoints: service_endpoints.into_iter().collect(),
        ..Options::default()
    })
    .await?;
    println!("{}", handle.url());
    tracing::info!(url = handle.url(), kubeconfig = %kubeconfig_out.display(), "Serving");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("Stopping");
    handle.shutdown().await;
    Ok(())
}
