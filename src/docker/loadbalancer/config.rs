//! The haproxy configuration of a cluster's load balancer: a pure function of its backends.
//!
//! Templates (the default one or a user's, from a ConfigMap key `value`) see CAPD's data names:
//!
//! | Name | Type | Meaning |
//! |---|---|---|
//! | `.FrontendControlPlanePort` | string | port haproxy listens on (`controlPlaneEndpoint.port`, 6443 when 0) |
//! | `.BackendControlPlanePort` | string | API server port on the nodes (`6443`) |
//! | `.BackendServers` | map | container name → `{ .Address, .Weight }` (iterated by name) |
//! | `.IPv6` | bool | the cluster is IPv6-only |
//!
//! and the function `JoinHostPort host port`. See [`super::template`] for the syntax (Go's
//! `text/template`) and its limits.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::template::{Template, TemplateError, Value};
use crate::docker::node::API_SERVER_PORT;

/// Port of the haproxy statistics page.
pub const STATS_PORT: u16 = 8404;

/// The default configuration template: TCP frontend on the control-plane port (plus an IPv6 bind
/// for IPv6 clusters, and a bind on 6443 when the control-plane port is another one, so the
/// `6443/tcp` mapping that `kind get kubeconfig` reads always reaches the API servers), TLS `/healthz` checks on every backend with its weight, a statistics page on
/// 8404, and `maxconn` bounded so haproxy's memory stays small. The bound is 8000 rather than
/// CAPD's 100000: haproxy needs two file descriptors per connection and exits at start when the
/// container's open-file limit is lower (engines started with `LimitNOFILE=20000` exist).
pub const DEFAULT_TEMPLATE: &str = include_str!("default.cfg.tmpl");

/// One API server behind the load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// Container name (the haproxy server name).
    pub name: String,
    /// Container address on the provider's network.
    pub address: String,
    /// haproxy weight (0 drains the server, 100 is the normal weight).
    pub weight: u32,
}

/// Everything the configuration depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigData {
    /// Port haproxy listens on for the API (`controlPlaneEndpoint.port`; 0 means 6443).
    pub frontend_port: u16,
    /// The API servers.
    pub backends: Vec<Backend>,
    /// The cluster is IPv6-only.
    pub ipv6: bool,
}

impl ConfigData {
    /// The frontend port with 0 read as 6443.
    pub fn effective_frontend_port(&self) -> u16 {
        if self.frontend_port == 0 {
            API_SERVER_PORT
        } else {
            self.frontend_port
        }
    }

    /// The template data, with CAPD's names.
    pub fn to_value(&self) -> Value {
        let servers: BTreeMap<Arc<str>, Value> = self
            .backends
            .iter()
            .map(|b| {
                let fields = BTreeMap::from([
                    (Arc::from("Address"), Value::from(b.address.as_str())),
                    (Arc::from("Weight"), Value::Int(i64::from(b.weight))),
                ]);
                (Arc::from(b.name.as_str()), Value::Map(Arc::new(fields)))
            })
            .collect();
        let fields: BTreeMap<Arc<str>, Value> = BTreeMap::from([
            (
                Arc::from("FrontendControlPlanePort"),
                Value::from(self.effective_frontend_port().to_string()),
            ),
            (
                Arc::from("BackendControlPlanePort"),
                Value::from(API_SERVER_PORT.to_string()),
            ),
            (Arc::from("BackendServers"), Value::Map(Arc::new(servers))),
            (Arc::from("IPv6"), Value::Bool(self.ipv6)),
        ]);
        Value::Map(Arc::new(fields))
    }
}

/// Renders the configuration with the user's template, or [`DEFAULT_TEMPLATE`] when `None`.
///
/// # Errors
/// [`TemplateError`] when the user's template is invalid or reads data that does not exist.
pub fn render_config(
    data: &ConfigData,
    user_template: Option<&str>,
) -> Result<String, TemplateError> {
    Template::parse(user_template.unwrap_or(DEFAULT_TEMPLATE))?.render(&data.to_value())
}
