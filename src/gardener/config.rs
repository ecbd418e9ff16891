//! `InfrastructureConfig`: what a Gardener user writes in `spec.providerConfig`, and its
//! validation (the contract's `ConfigValidator`: every problem found is reported at once, with
//! the error code `ERR_CONFIGURATION_PROBLEM`). What the configuration leaves open is taken from
//! the Shoot ([`ShootNetwork`]): its nodes CIDR, and IPv6 for a dual-stack or IPv6 shoot.
//!
//! ```yaml
//! providerConfig:
//!   apiVersion: docker.provider.extensions.gardener.cloud/v1alpha1
//!   kind: InfrastructureConfig
//!   networks:
//!     name: my-shoot-net      # optional: the Docker network to use, created when missing
//!     cidr: 10.213.0.0/24     # optional: IPv4 subnet of the nodes
//!     ipv6:
//!       enabled: true         # optional, default false
//!       cidr: fd00:10::/64    # optional, implies enabled; derived from the name when omitted
//! ```

use std::fmt;
use std::net::Ipv4Addr;

use ipnetwork::{Ipv4Network, Ipv6Network};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha1::{Digest, Sha1};

use super::API_VERSION;

/// `kind` of [`InfrastructureConfig`].
pub const CONFIG_KIND: &str = "InfrastructureConfig";

/// Longest Docker network name this provider uses or accepts.
pub const MAX_NETWORK_NAME_LEN: usize = 128;

/// Networks Docker predefines: not user-defined bridges, so never usable for nodes.
const PREDEFINED_NETWORKS: [&str; 3] = ["bridge", "host", "none"];

/// The provider configuration of an `Infrastructure` of type `docker`
/// (`docker.provider.extensions.gardener.cloud/v1alpha1`, kind `InfrastructureConfig`).
///
/// Every field is optional: an empty configuration gives the shoot its own Docker network,
/// named after the `Infrastructure`, with a subnet chosen by the Docker engine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InfrastructureConfig {
    /// Must be `docker.provider.extensions.gardener.cloud/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// Must be `InfrastructureConfig`.
    #[serde(default)]
    pub kind: String,
    /// The Docker network the shoot's nodes join.
    #[serde(default)]
    pub networks: NetworksConfig,
}

/// The nodes network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworksConfig {
    /// Name of the Docker network. An existing network of that name is used (adopted) as it is,
    /// provided it matches `cidr` and `ipv6`; a missing one is created. Default:
    /// `gardener-<namespace>-<name>` of the `Infrastructure`. The predefined networks `bridge`,
    /// `host` and `none` are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// IPv4 subnet of the nodes (for example `10.213.0.0/24`, prefix /8 to /29). A network we
    /// create gets it; an existing network must have it. Default: the Shoot's
    /// `spec.networking.nodes` when it is an IPv4 CIDR, else chosen by the Docker engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// IPv6 for the nodes. Default: IPv6 when the Shoot's `spec.networking.ipFamilies` names
    /// `IPv6` (with its `spec.networking.nodes` as the subnet when that is an IPv6 CIDR), else
    /// IPv4 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Config>,
}

/// IPv6 on the nodes network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ipv6Config {
    /// Turn IPv6 on. Default: on when `cidr` is set or the Shoot is dual-stack or IPv6, off
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// IPv6 subnet (prefix /32 to /120). Default: a unique-local /64 derived from the network
    /// name, as kind derives it (`fc00:f853:ccd:e793::/64` for `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
}

/// What the configuration asks for, checked and resolved: the input of the Docker side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkPlan {
    /// Network name (configured or derived from the `Infrastructure`).
    pub name: String,
    /// Required IPv4 subnet; `None` lets the engine choose (or accepts the existing one).
    pub ipv4: Option<Ipv4Network>,
    /// IPv6 wish.
    pub ipv6: Ipv6Plan,
}

/// What the Shoot (`spec.networking`) says about the nodes network: the defaults of what the
/// configuration leaves open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShootNetwork {
    /// `spec.networking.nodes`: the subnet of a network we create (IPv4, or IPv6 for an IPv6
    /// shoot) when `networks.cidr` (respectively `networks.ipv6.cidr`) is not set.
    pub nodes: Option<String>,
    /// `spec.networking.ipFamilies` names `IPv6`: IPv6 is on unless `networks.ipv6` says
    /// otherwise.
    pub ipv6: bool,
}

/// Field path of the Shoot's nodes CIDR in error messages.
const SHOOT_NODES_FIELD: &str = "shoot.spec.networking.nodes";

/// IPv6 part of a [`NetworkPlan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ipv6Plan {
    /// IPv4 only (an existing network with IPv6 is still accepted).
    Disabled,
    /// IPv6 with kind's derived unique-local /64.
    Derived,
    /// IPv6 with this subnet.
    Subnet(Ipv6Network),
}

/// One problem in the configuration, located by its field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path such as `providerConfig.networks.cidr`.
    pub field: String,
    /// What is wrong, for the user.
    pub message: String,
}

/// Every problem found in a configuration (never empty when returned as an error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<FieldError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        f.write_str(&parts.join("; "))
    }
}

impl ConfigErrors {
    fn push(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.to_string(),
            message: message.into(),
        });
    }
}

/// The network name used when the configuration names none: `gardener-<namespace>-<name>`,
/// shortened with a hash suffix when it would exceed [`MAX_NETWORK_NAME_LEN`].
pub fn default_network_name(namespace: &str, name: &str) -> String {
    let full = format!("gardener-{namespace}-{name}");
    if full.len() <= MAX_NETWORK_NAME_LEN {
        return full;
    }
    let hash = Sha1::digest(full.as_bytes());
    let suffix: String = hash.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NETWORK_NAME_LEN - suffix.len() - 1;
    let prefix: String = full.chars().take(keep).collect();
    format!("{prefix}-{suffix}")
}

/// Decodes `spec.providerConfig` (absent means all defaults) and checks it.
///
/// # Errors
/// [`ConfigErrors`] listing every problem found.
pub fn validate(
    provider_config: Option<&Value>,
    namespace: &str,
    name: &str,
) -> Result<NetworkPlan, ConfigErrors> {
    validate_with(provider_config, namespace, name, &ShootNetwork::default())
}

/// [`validate`], taking what the configuration leaves open from the Shoot.
///
/// # Errors
/// [`ConfigErrors`] listing every problem found.
pub fn validate_with(
    provider_config: Option<&Value>,
    namespace: &str,
    name: &str,
    shoot: &ShootNetwork,
) -> Result<NetworkPlan, ConfigErrors> {
    let config = match provider_config {
        None | Some(Value::Null) => InfrastructureConfig::default(),
        Some(raw) => decode(raw)?,
    };
    plan_with(&config, namespace, name, shoot)
}

fn decode(raw: &Value) -> Result<InfrastructureConfig, ConfigErrors> {
    let mut errors = ConfigErrors(Vec::new());
    let config: InfrastructureConfig = match serde_json::from_value(raw.clone()) {
        Ok(config) => config,
        Err(e) => {
            errors.push("providerConfig", format!("cannot be decoded: {e}"));
            return Err(errors);
        }
    };
    if config.api_version != API_VERSION {
        errors.push(
            "providerConfig.apiVersion",
            format!("must be {API_VERSION:?}, got {:?}", config.api_version),
        );
    }
    if config.kind != CONFIG_KIND {
        errors.push(
            "providerConfig.kind",
            format!("must be {CONFIG_KIND:?}, got {:?}", config.kind),
        );
    }
    if errors.0.is_empty() {
        Ok(config)
    } else {
        Err(errors)
    }
}

/// Checks a decoded configuration and resolves its defaults.
///
/// # Errors
/// [`ConfigErrors`] listing every problem found.
pub fn plan(
    config: &InfrastructureConfig,
    namespace: &str,
    name: &str,
) -> Result<NetworkPlan, ConfigErrors> {
    plan_with(config, namespace, name, &ShootNetwork::default())
}

/// [`plan`], taking what the configuration leaves open from the Shoot.
///
/// # Errors
/// [`ConfigErrors`] listing every problem found.
pub fn plan_with(
    config: &InfrastructureConfig,
    namespace: &str,
    name: &str,
    shoot: &ShootNetwork,
) -> Result<NetworkPlan, ConfigErrors> {
    let mut errors = ConfigErrors(Vec::new());
    let networks = &config.networks;
    let network_name = match networks.name.as_deref() {
        None => default_network_name(namespace, name),
        Some(given) => {
            if let Some(problem) = network_name_problem(given) {
                errors.push("providerConfig.networks.name", problem);
            }
            given.to_string()
        }
    };
    // The Shoot's nodes CIDR stands in for the subnet of its family the configuration leaves
    // open: an IPv4 one for `networks.cidr`, an IPv6 one for `networks.ipv6.cidr`.
    let shoot_nodes = shoot.nodes.as_deref().map(str::trim);
    let shoot_v6 = shoot_nodes.filter(|n| n.contains(':'));
    let shoot_v4 = shoot_nodes.filter(|n| !n.contains(':'));
    let (ipv4_field, ipv4_given) = match networks.cidr.as_deref() {
        Some(cidr) => ("providerConfig.networks.cidr", Some(cidr)),
        None => (SHOOT_NODES_FIELD, shoot_v4),
    };
    let ipv4 = ipv4_given.and_then(|cidr| {
        ipv4_cidr(cidr)
            .map_err(|problem| errors.push(ipv4_field, problem))
            .ok()
    });
    let (enabled, ipv6_given) = match &networks.ipv6 {
        None => (None, None),
        Some(v6) => (v6.enabled, v6.cidr.as_deref()),
    };
    let ipv6 = match (enabled, ipv6_given) {
        (Some(false), Some(_)) => {
            errors.push(
                "providerConfig.networks.ipv6.cidr",
                "is set while ipv6.enabled is false: remove one of them",
            );
            Ipv6Plan::Disabled
        }
        (Some(false), None) => Ipv6Plan::Disabled,
        (_, Some(cidr)) => ipv6_plan(cidr, "providerConfig.networks.ipv6.cidr", &mut errors),
        (_, None) => match shoot_v6 {
            Some(cidr) => ipv6_plan(cidr, SHOOT_NODES_FIELD, &mut errors),
            None if enabled == Some(true) || shoot.ipv6 => Ipv6Plan::Derived,
            None => Ipv6Plan::Disabled,
        },
    };
    if errors.0.is_empty() {
        Ok(NetworkPlan {
            name: network_name,
            ipv4,
            ipv6,
        })
    } else {
        Err(errors)
    }
}

/// The plan for the IPv6 subnet `cidr` given at `field`, or `Disabled` with the problem recorded.
fn ipv6_plan(cidr: &str, field: &str, errors: &mut ConfigErrors) -> Ipv6Plan {
    match ipv6_cidr(cidr) {
        Ok(subnet) => Ipv6Plan::Subnet(subnet),
        Err(problem) => {
            errors.push(field, problem);
            Ipv6Plan::Disabled
        }
    }
}

/// Why `name` is not a usable Docker network name, if it is not.
fn network_name_problem(name: &str) -> Option<String> {
    let valid_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    let starts_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() {
        Some("must not be empty (omit it for the default name)".to_string())
    } else if !valid_chars || !starts_ok {
        Some(format!(
            "{name:?} is not a Docker network name: use letters, digits, '_', '.' and '-', starting with a letter or digit"
        ))
    } else if name.len() > MAX_NETWORK_NAME_LEN {
        Some(format!(
            "is {} characters long, at most {MAX_NETWORK_NAME_LEN} are allowed",
            name.len()
        ))
    } else if PREDEFINED_NETWORKS.contains(&name) {
        Some(format!(
            "{name:?} is a network predefined by Docker; nodes need a user-defined bridge network"
        ))
    } else {
        None
    }
}

/// Parses an IPv4 nodes CIDR and checks it is a network address in a usable range.
fn ipv4_cidr(cidr: &str) -> Result<Ipv4Network, String> {
    let net: Ipv4Network = cidr
        .trim()
        .parse()
        .map_err(|_| format!("{cidr:?} is not an IPv4 CIDR such as 10.213.0.0/24"))?;
    if net.ip() != net.network() {
        return Err(format!(
            "{cidr:?} has host bits set: the network address is {}/{}",
            net.network(),
            net.prefix()
        ));
    }
    if !(8..=29).contains(&net.prefix()) {
        return Err(format!(
            "{cidr:?} has prefix /{}: use /8 to /29 (room for a gateway and nodes)",
            net.prefix()
        ));
    }
    let first = net.network();
    let reserved = first.is_loopback()
        || first.is_link_local()
        || first.is_multicast()
        || first.is_unspecified()
        || first.octets()[0] == 0
        || first.octets()[0] >= 240
        || net.contains(Ipv4Addr::LOCALHOST);
    if reserved {
        return Err(format!(
            "{cidr:?} is a reserved range (loopback, link-local, multicast or reserved)"
        ));
    }
    Ok(net)
}

/// Parses an IPv6 nodes CIDR and checks it is a network address in a usable range.
fn ipv6_cidr(cidr: &str) -> Result<Ipv6Network, String> {
    let net: Ipv6Network = cidr
        .trim()
        .parse()
        .map_err(|_| format!("{cidr:?} is not an IPv6 CIDR such as fd00:10::/64"))?;
    if net.ip() != net.network() {
        return Err(format!(
            "{cidr:?} has host bits set: the network address is {}/{}",
            net.network(),
            net.prefix()
        ));
    }
    if !(32..=120).contains(&net.prefix()) {
        return Err(format!(
            "{cidr:?} has prefix /{}: use /32 to /120",
            net.prefix()
        ));
    }
    let first = net.network();
    let link_local = (first.segments()[0] & 0xffc0) == 0xfe80;
    if first.is_loopback() || first.is_unspecified() || first.is_multicast() || link_local {
        return Err(format!(
            "{cidr:?} is a reserved range (loopback, link-local or multicast)"
        ));
    }
    Ok(net)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
