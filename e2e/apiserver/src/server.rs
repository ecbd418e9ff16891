//! Starting and stopping a server.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::faults::{Fault, Faults, Hit};
use crate::resources::builtins;
use crate::state::Shared;
use crate::store::Store;
use crate::tls::{ServingCerts, TlsListener};

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Serve HTTPS with a freshly generated CA (default) or plain HTTP.
    pub https: bool,
    /// Address to bind (default 127.0.0.1).
    pub bind: IpAddr,
    /// Port to bind; 0 picks a free one (default).
    pub port: u16,
    /// Where to write the kubeconfig; a file in the temp dir (removed on drop) when unset.
    pub kubeconfig_path: Option<PathBuf>,
    /// Watch events kept per resource; older resourceVersions answer 410 Expired (default 10000).
    pub watch_history: usize,
    /// How often watches that asked for bookmarks get one (default 15s).
    pub bookmark_interval: Duration,
    /// How often the garbage collector sweeps even without deletions (default 1s).
    pub gc_interval: Duration,
    /// Extra DNS names or IPs for the serving certificate.
    pub extra_sans: Vec<String>,
    /// Name of the cluster, context and user in the kubeconfig (default `testapiserver`).
    pub context_name: String,
    /// Where in-cluster services are reachable, for conversion webhooks addressed by
    /// `clientConfig.service`: `"namespace/name"` → `"host:port"`. The webhook's certificate is
    /// verified for `name.namespace.svc`, as kube-apiserver does.
    pub service_endpoints: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            https: true,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            kubeconfig_path: None,
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(15),
            gc_interval: Duration::from_secs(1),
            extra_sans: Vec::new(),
            context_name: "testapiserver".into(),
            service_endpoints: BTreeMap::new(),
        }
    }
}

/// Failures while starting a server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Certificates could not be made.
    #[error("generate serving certificates")]
    Tls(#[from] crate::tls::TlsError),
    /// The port could not be bound.
    #[error("bind {addr}")]
    Bind {
        /// Address that failed.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("write kubeconfig {path}")]
    Kubeconfig {
        /// Path that failed.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Entry point of the library.
pub struct TestApiServer;

impl TestApiServer {
    /// Starts a server in the current tokio runtime.
    pub async fn start(options: Options) -> Result<Handle, StartError> {
        let addr = SocketAddr::new(options.bind, options.port);
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let local = tcp
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        let host = match local.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut store = Store::new(builtins(), options.watch_history);
        store.service_endpoints = options.service_endpoints.clone();
        let shared = Arc::new(Shared {
            store: tokio::sync::Mutex::new(store),
            bookmark_interval: options.bookmark_interval,
            gc_interval: options.gc_interval,
            counts: Mutex::new(BTreeMap::new()),
            gc_wakeup: Notify::new(),
            shutdown: shutdown_rx.clone(),
            faults: Faults::default(),
            watch_epoch: watch::Sender::new(0),
            watch_caches: Mutex::new(BTreeMap::new()),
        });
        seed(&shared).await;
        let tls = options
            .https
            .then(|| ServingCerts::generate(&options.extra_sans))
            .transpose()?;
        let serving = Serving {
            app: crate::handlers::router(shared.clone()),
            tls: tls.as_ref().map(ServingCerts::server_config).transpose()?,
            addr: local,
            shutdown: shutdown_rx.clone(),
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let server = serving
            .serve(tcp, stop_rx)
            .map_err(|source| StartError::Bind { addr, source })?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{host}:{}", local.port());
        let ca_pem = tls.map(|certs| certs.ca_pem);
        let gc = tokio::spawn(crate::gc::run(shared.clone()));
        let cacher = tokio::spawn(crate::cacher::run(shared.clone()));
        let kubeconfig_yaml =
            crate::kubeconfig::render(&url, ca_pem.as_deref(), &options.context_name);
        let (kubeconfig_path, remove_on_drop) = match &options.kubeconfig_path {
            Some(p) => (p.clone(), false),
            None => (
                std::env::temp_dir().join(format!(
                    "testapiserver-{}-{}.kubeconfig",
                    local.port(),
                    crate::meta::name_suffix()
                )),
                true,
            ),
        };
        std::fs::write(&kubeconfig_path, &kubeconfig_yaml).map_err(|source| {
            StartError::Kubeconfig {
                path: kubeconfig_path.clone(),
                source,
            }
        })?;
        Ok(Handle {
            url,
            ca_pem,
            kubeconfig_yaml,
            kubeconfig_path,
            remove_on_drop,
            shared,
            shutdown_tx,
            serving: Box::new(serving),
            stop_tx,
            server: Some(server),
            gc: Some(gc),
            cacher: Some(cacher),
        })
    }
}

/// Creates the namespaces every cluster starts with, then marks the server as started.
async fn seed(shared: &Shared) {
    let mut store = shared.store.lock().await;
    let key = (String::new(), "namespaces".to_string());
    let now = crate::meta::now();
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        store.put(
            &key,
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": crate::meta::new_uid(), "creationTimestamp": now,
                    "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }),
        );
    }
    store.mark_started();
}

/// A running server; dropping it stops the server.
pub struct Handle {
    url: String,
    ca_pem: Option<String>,
    kubeconfig_yaml: String,
    kubeconfig_path: PathBuf,
    remove_on_drop: bool,
    shared: Arc<Shared>,
    shutdown_tx: watch::Sender<bool>,
    serving: Box<Serving>,
    /// Stops the current serve loop (a restart); `shutdown_tx` stops everything.
    stop_tx: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    gc: Option<JoinHandle<()>>,
    cacher: Option<JoinHandle<()>>,
}

/// What serving needs again after a restart: the routes, the same certificate (so clients'
/// kubeconfigs stay valid) and the same address.
struct Serving {
    app: axum::Router,
    tls: Option<rustls::ServerConfig>,
    addr: SocketAddr,
    shutdown: watch::Receiver<bool>,
}

impl Serving {
    /// Serves on `tcp` until `stop` or the server's shutdown.
    fn serve(
        &self,
        tcp: tokio::net::TcpListener,
        mut stop: watch::Receiver<bool>,
    ) -> std::io::Result<JoinHandle<()>> {
        let mut shutdown = self.shutdown.clone();
        let stopped = async move {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => {}
                _ = shutdown.wait_for(|s| *s) => {}
            }
        };
        let app = self.app.clone();
        Ok(match &self.tls {
            Some(config) => {
                let listener = TlsListener::new(tcp, config.clone())?;
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app)
                        .with_graceful_shutdown(stopped)
                        .await
                    {
                        tracing::error!(error = %e, "Serving stopped");
                    }
                })
            }
            None => tokio::spawn(async move {
                if let Err(e) = axum::serve(tcp, app).with_graceful_shutdown(stopped).await {
                    tracing::error!(error = %e, "Serving stopped");
                }
            }),
        })
    }
}

impl Handle {
    /// Base URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PEM of the CA that signed the serving certificate (HTTPS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The kubeconfig text.
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig_yaml
    }

    /// Where the kubeconfig was written.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Requests received so far by verb and resource, keyed
    /// `"<verb> <resource>[.<group>][/<subresource>]"` (verbs: get, list, watch, create, update,
    /// patch, delete, deletecollection), e.g. `"patch dockermachines.infrastructure.cluster.x-k8s.io/status"`.
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.shared
            .counts
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Write requests received so far (create, update, patch, delete, deletecollection), keyed
    /// like [`Handle::request_counts`]. A write that changed nothing still counts.
    pub fn write_counts(&self) -> BTreeMap<String, u64> {
        self.request_counts()
            .into_iter()
            .filter(|(k, _)| {
                !(k.starts_with("get ") || k.starts_with("list ") || k.starts_with("watch "))
            })
            .collect()
    }

    /// Total write requests received so far.
    pub fn write_total(&self) -> u64 {
        self.write_counts().values().sum()
    }

    /// Sets all request counters back to zero.
    pub fn reset_write_counts(&self) {
        if let Ok(mut c) = self.shared.counts.lock() {
            c.clear();
        }
    }

    /// What the watch cache of each version of each custom resource converting through a webhook
    /// met so far, keyed `<plural>.<group>/<version>`: every version the CRD lists, served or
    /// not, as kube-apiserver keeps them (see [`crate::cacher`]). A failure is also logged as
    /// kube's cacher logs it (`cacher (...): unexpected ListAndWatch error: ...`).
    pub fn watch_caches(&self) -> BTreeMap<String, crate::cacher::WatchCacheStats> {
        self.shared
            .watch_caches
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// The current resourceVersion (the store's revision).
    pub async fn resource_version(&self) -> u64 {
        self.shared.store.lock().await.rv()
    }

    /// Adds a fault (see [`crate::faults`]); the returned id reads what it met with
    /// [`Handle::fault_hits`].
    pub fn inject(&self, fault: Fault) -> usize {
        self.shared.faults.add(fault)
    }

    /// The requests fault `id` matched so far, in order.
    pub fn fault_hits(&self, id: usize) -> Vec<Hit> {
        self.shared.faults.hits(id)
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Ends every open watch now, as a dropped connection or a load balancer's idle timeout
    /// would. Clients must watch again from their last resourceVersion.
    pub fn drop_watches(&self) {
        self.shared.watch_epoch.send_modify(|epoch| *epoch += 1);
    }

    /// Restarts the server, keeping its stored objects and resourceVersions, as kube-apiserver
    /// restarting over the same etcd: open watches end, connections close, new ones are refused
    /// for `downtime`, and afterwards the watch cache starts afresh, so a watch from a
    /// resourceVersion older than the restart answers 410 Expired and the client must list
    /// again.
    pub async fn restart(&mut self, downtime: Duration) -> Result<(), StartError> {
        self.drop_watches();
        let _ = self.stop_tx.send(true);
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), server)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        tokio::time::sleep(downtime).await;
        self.shared.store.lock().await.mark_started();
        let addr = self.serving.addr;
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let (stop_tx, stop_rx) = watch::channel(false);
        self.stop_tx = stop_tx;
        self.server = Some(
            self.serving
                .serve(tcp, stop_rx)
                .map_err(|source| StartError::Bind { addr, source })?,
        );
        Ok(())
    }

    /// Stops the server and waits until it has stopped.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        let tasks = [self.server.take(), self.gc.take(), self.cacher.take()];
        for task in tasks.into_iter().flatten() {
            // A serve loop that does not finish in time is aborted when the handle drops.
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
        for task in [&self.server, &self.gc, &self.cacher].into_iter().flatten() {
            task.abort();
        }
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.kubeconfig_path);
        }
    }
}
