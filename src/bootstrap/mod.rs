//! Bootstrap data (cloud-init, Ignition) translated into commands run inside a node container.
//!
//! Node containers have no cloud-init: the provider reads the bootstrap Secret that Cluster API's
//! bootstrap provider wrote and runs an equivalent list of commands with `docker exec`. This module
//! is that translation, as a pure function ([`translate`]) with no I/O: the Docker runtime executes
//! the resulting [`Plan`] one [`Command`] at a time, in order, stopping at the first failure.
//!
//! What the translation adds for node containers (the kubeadm config defaults, the preflight
//! errors kubeadm must ignore, the kube-proxy conntrack setting and the
//! [`SENTINEL_PATH`] written just before `kubeadm init|join`) follows the Go provider (CAPD).
//!
//! Bootstrap data contains private keys and join tokens. Descriptions, warnings and errors never
//! contain file contents or command text; `Command`'s `Debug` output omits argv and stdin.

mod cloudinit;
mod dataurl;
mod error;
mod files;
mod ignition;
mod kubeadm;
mod kubeadm_config;
mod shell;
mod yaml;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use error::{Error, FileProblem};
pub use shell::shell_quote;

/// The file written inside a node container just before `kubeadm init|join` starts.
///
/// Its presence means kubeadm was started once already: the provider must not start bootstrap
/// again (for example after `clusterctl move` or a controller restart), because a second
/// `kubeadm init|join` on the same node fails or corrupts it.
pub const SENTINEL_PATH: &str = "/run/cluster-api/capd.bootstrap.started";

/// The file Cluster API's kubeadm bootstrap provider (CABPK) writes inside the node once
/// `kubeadm init|join` succeeded (`... && echo success > ...`).
///
/// Its presence means bootstrap completed: the provider accepts it as such, before starting
/// bootstrap (a node bootstrapped by another provider instance) and while following a bootstrap
/// that ran past its timeout.
pub const SUCCESS_PATH: &str = "/run/cluster-api/bootstrap-success.complete";

/// How long the runtime waits between two attempts of a command that has [`Command::retries`].
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// Warning of a plan that never writes [`SENTINEL_PATH`].
const NO_SENTINEL_WARNING: &str = "no kubeadm init or join was found: nothing marks this node as \
     bootstrapped, so bootstrap may run again after a controller restart";

/// The encoding of bootstrap data, from the bootstrap Secret's `format` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// cloud-init `#cloud-config` YAML (the default when the key is absent).
    #[default]
    CloudConfig,
    /// Ignition JSON, spec 2.x or 3.x.
    Ignition,
}

impl Format {
    /// Reads the `format` key of a bootstrap Secret; an absent or empty key means cloud-config.
    pub fn from_secret_key(value: Option<&[u8]>) -> Result<Self, Error> {
        match value {
            None => Ok(Format::CloudConfig),
            Some(bytes) => String::from_utf8_lossy(bytes).parse(),
        }
    }
}

impl FromStr for Format {
    type Err = Error;

    /// Accepts `cloud-config` and `ignition` (surrounding whitespace ignored); empty is cloud-config.
    fn from_str(value: &str) -> Result<Self, Error> {
        match value.trim() {
            "" | "cloud-config" => Ok(Format::CloudConfig),
            "ignition" => Ok(Format::Ignition),
            other => Err(Error::UnknownFormat(error::shorten(other))),
        }
    }
}

/// How the node image was built by kind, which changes the kubelet flags a node needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KindMode {
    /// Images built by kind before 0.20 (cgroup namespace shared with the host).
    V0_19,
    /// Images built by kind 0.20 and later (private cgroup namespace): the kubelet also gets
    /// `cgroup-root=/kubelet` and `runtime-cgroups=/system.slice/containerd.service`.
    #[default]
    V0_20,
}

/// Inputs of the translation besides the bootstrap data itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The kind mode of the node image (from the kind image mapping).
    pub kind_mode: KindMode,
    /// The Machine's Kubernetes version (for example `v1.31.2`). Used only to choose between the
    /// kubeadm v1beta3 and v1beta4 shapes of `kubeletExtraArgs` when a kubeadm document has neither
    /// an `apiVersion` nor existing kubelet arguments to go by.
    pub kubernetes_version: Option<String>,
}

/// The outcome of a translation: commands to run in order, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Commands to run one after the other; the first failure (after its retries) ends bootstrap.
    pub commands: Vec<Command>,
    /// Parts of the bootstrap data that were skipped, in words safe to log and to show in
    /// conditions (module and section names only).
    pub warnings: Vec<String>,
}

/// One process to run inside the node container.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    /// Program and arguments, run without a shell (argv\[0\] is looked up in `PATH`).
    pub argv: Vec<String>,
    /// Bytes to feed on standard input (then closed); `None` means no standard input.
    pub stdin: Option<Vec<u8>>,
    /// How many more times to run the command after a failure, [`RETRY_INTERVAL`] apart.
    pub retries: u32,
    /// What the command does, without secret content, e.g. `write /etc/kubernetes/pki/ca.crt`.
    pub description: String,
}

impl Command {
    fn new(argv: Vec<String>, description: impl Into<String>) -> Self {
        Command {
            argv,
            stdin: None,
            retries: 0,
            description: description.into(),
        }
    }

    fn with_stdin(mut self, stdin: Vec<u8>) -> Self {
        self.stdin = Some(stdin);
        self
    }

    fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }
}

impl fmt::Debug for Command {
    /// Shows the description and sizes only: argv and stdin may hold tokens and private keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("description", &self.description)
            .field("argc", &self.argv.len())
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("retries", &self.retries)
            .finish()
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

/// Translates bootstrap data into the commands that bootstrap a node container.
///
/// The result is deterministic and does no I/O. Valid cloud-config always translates; modules
/// that make no sense in a container are skipped with a warning in [`Plan::warnings`]. A plan
/// that never starts `kubeadm init|join` (so never writes [`SENTINEL_PATH`]) also gets a warning.
pub fn translate(data: &[u8], format: Format, opts: &Options) -> Result<Plan, Error> {
    let mut plan = match format {
        Format::CloudConfig => cloudinit::translate(data, opts)?,
        Format::Ignition => ignition::translate(data, opts)?,
    };
    let writes_sentinel = plan.commands.iter().any(|c| {
        c.argv.iter().any(|a| a.contains(SENTINEL_PATH))
            || c.stdin.as_deref().is_some_and(|s| {
                s.windows(SENTINEL_PATH.len())
                    .any(|w| w == SENTINEL_PATH.as_bytes())
            })
    });
    if !plan.commands.is_empty() && !writes_sentinel {
        plan.warnings.push(NO_SENTINEL_WARNING.into());
    }
    Ok(plan)
}

/// The command that tells whether [`SENTINEL_PATH`] exists in a node container.
///
/// It prints `true` or `false` and exits 0 either way; read its output with
/// [`sentinel_exists`].
pub fn sentinel_check_command() -> Command {
    Command::new(
        vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("if test -e {SENTINEL_PATH}; then echo true; else echo false; fi"),
        ],
        "check whether bootstrap was started before",
    )
}

/// Reads the standard output of [`sentinel_check_command`]; `None` when it is neither answer.
pub fn sentinel_exists(stdout: &[u8]) -> Option<bool> {
    match String::from_utf8_lossy(stdout).trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}
