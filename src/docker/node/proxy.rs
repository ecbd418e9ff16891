//! Proxy variables passed from the controller to node containers.

use ipnetwork::IpNetwork;

/// The controller's proxy settings (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `HTTP_PROXY`.
    pub http_proxy: Option<String>,
    /// `HTTPS_PROXY`.
    pub https_proxy: Option<String>,
    /// `NO_PROXY`.
    pub no_proxy: Option<String>,
}

fn read_var(name: &str) -> Option<String> {
    [name.to_string(), name.to_lowercase()]
        .iter()
        .filter_map(|n| std::env::var(n).ok())
        .find(|v| !v.is_empty())
}

impl ProxyEnv {
    /// Reads the upper-case variables, falling back to the lower-case ones.
    pub fn from_env() -> Self {
        ProxyEnv {
            http_proxy: read_var("HTTP_PROXY"),
            https_proxy: read_var("HTTPS_PROXY"),
            no_proxy: read_var("NO_PROXY"),
        }
    }

    /// Whether any variable is set.
    pub fn is_set(&self) -> bool {
        [&self.http_proxy, &self.https_proxy, &self.no_proxy]
            .iter()
            .any(|v| v.as_deref().is_some_and(|v| !v.is_empty()))
    }

    /// The environment of a node container (upper- and lower-case names). When any proxy variable
    /// is set, `NO_PROXY` is extended as kind does (see [`no_proxy_list`]).
    pub fn container_env(&self, subnets: &[IpNetwork], node_name: &str) -> Vec<(String, String)> {
        if !self.is_set() {
            return Vec::new();
        }
        let mut env = Vec::new();
        let mut push = |name: &str, value: &str| {
            env.push((name.to_string(), value.to_string()));
            env.push((name.to_lowercase(), value.to_string()));
        };
        if let Some(v) = self.http_proxy.as_deref().filter(|v| !v.is_empty()) {
            push("HTTP_PROXY", v);
        }
        if let Some(v) = self.https_proxy.as_deref().filter(|v| !v.is_empty()) {
            push("HTTPS_PROXY", v);
        }
        push(
            "NO_PROXY",
            &no_proxy_list(self.no_proxy.as_deref(), subnets, node_name),
        );
        env
    }
}

/// `NO_PROXY` for a node: the network's subnets, the existing value, the node name, and the
/// in-cluster service domains `.svc`, `.svc.cluster`, `.svc.cluster.local`.
pub fn no_proxy_list(existing: Option<&str>, subnets: &[IpNetwork], node_name: &str) -> String {
    let mut items: Vec<String> = subnets.iter().map(ToString::to_string).collect();
    items.extend(
        existing
            .into_iter()
            .flat_map(|e| e.split(','))
            .map(|s| s.trim().to_string()),
    );
    items.push(node_name.to_string());
    items.extend([".svc", ".svc.cluster", ".svc.cluster.local"].map(String::from));
    let mut seen = std::collections::BTreeSet::new();
    items.retain(|i| !i.is_empty() && seen.insert(i.clone()));
    items.join(",")
}
