//! The error type of bootstrap translation.
//!
//! Bootstrap data carries private keys and join tokens, so no variant holds file contents, command
//! text or values read from the input: only file paths, module names, item positions and fixed
//! descriptions of the problem.

/// Why bootstrap data could not be translated into commands.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The bootstrap Secret names a format this provider does not know.
    #[error(
        "read bootstrap format: unknown format {0:?} (expected \"cloud-config\" or \"ignition\")"
    )]
    UnknownFormat(String),

    /// The cloud-config is not valid YAML.
    #[error("parse cloud-config: invalid YAML at line {line}, column {column}")]
    InvalidYaml {
        /// 1-based line of the problem (0 when unknown).
        line: u64,
        /// 1-based column of the problem (0 when unknown).
        column: u64,
    },

    /// The bootstrap data is valid YAML but its top level is not a mapping of modules.
    #[error("parse cloud-config: the document is not a mapping of cloud-init modules ({found})")]
    NotCloudConfig {
        /// What was found instead, e.g. "a shell script" or "a list".
        found: &'static str,
    },

    /// A cloud-init module has a shape cloud-init would reject.
    #[error("read cloud-init module {module}: {problem}")]
    InvalidModule {
        /// Module name, e.g. `runcmd`.
        module: &'static str,
        /// What is wrong, without any value from the input.
        problem: String,
    },

    /// The Ignition config is not valid JSON.
    #[error("parse ignition config: invalid JSON at line {line}, column {column}")]
    InvalidJson {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
    },

    /// The Ignition config has a version this provider does not translate.
    #[error("read ignition config: unsupported version {0:?} (expected 2.x or 3.x)")]
    UnsupportedIgnitionVersion(String),

    /// A part of the Ignition config has a shape the specification does not allow.
    #[error("read ignition config: {0}")]
    InvalidIgnition(String),

    /// A file (or directory, link or unit) entry cannot be turned into commands.
    #[error("translate file {path:?}: {problem}")]
    InvalidFile {
        /// The path as given in the input (may be empty or contain control characters; shown escaped).
        path: String,
        /// What is wrong with it.
        problem: FileProblem,
    },

    /// A kubeadm configuration file could not be patched for node containers.
    #[error("patch kubeadm config {path:?}: {problem}")]
    KubeadmConfig {
        /// Path of the kubeadm configuration file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// What is wrong with one file entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileProblem {
    /// The entry has no path.
    #[error("the path is missing")]
    MissingPath,
    /// The path does not start with `/`.
    #[error("the path is not absolute")]
    NotAbsolute,
    /// The path contains NUL, newline or carriage return.
    #[error("the path contains a NUL, newline or carriage-return character")]
    ControlCharacter,
    /// The path ends with `/` or `/.` and so names a directory.
    #[error("the path names a directory, not a file")]
    NamesDirectory,
    /// The `encoding` value is not one cloud-init knows.
    #[error("unknown encoding {0:?}")]
    UnknownEncoding(String),
    /// The content is not valid base64.
    #[error("the content is not valid base64")]
    BadBase64,
    /// The content is not a valid gzip stream.
    #[error("the content is not a valid gzip stream")]
    BadGzip,
    /// The decompressed content is larger than the limit.
    #[error("the decompressed content exceeds {0} bytes")]
    TooLarge(usize),
    /// The `permissions` or `mode` value is not an octal mode between 0 and 07777.
    #[error("invalid permissions (expected an octal mode between 0000 and 7777)")]
    InvalidPermissions,
    /// The `owner` (or Ignition user/group) value is not a usable `user[:group]`.
    #[error("invalid owner (expected user, user:group or :group without spaces)")]
    InvalidOwner,
    /// A field has the wrong type.
    #[error("field {0} has the wrong type")]
    WrongType(&'static str),
    /// The content is fetched from a remote source, which translation cannot do.
    #[error("content from a remote source ({0}) is not supported, only data URLs")]
    RemoteSource(String),
    /// The Ignition `source` is not a well-formed data URL.
    #[error("the source is not a valid data URL ({0})")]
    BadDataUrl(&'static str),
    /// The Ignition `compression` value is not supported.
    #[error("unsupported compression {0:?}")]
    UnsupportedCompression(String),
    /// A systemd unit or drop-in name is not usable.
    #[error("invalid unit name")]
    InvalidUnitName,
    /// A link has no target.
    #[error("the link target is missing or invalid")]
    InvalidLinkTarget,
}

impl Error {
    /// A short stable label for metrics and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Error::UnknownFormat(_) => "UnknownFormat",
            Error::InvalidYaml { .. } | Error::NotCloudConfig { .. } => "InvalidCloudConfig",
            Error::InvalidModule { .. } => "InvalidCloudInitModule",
            Error::InvalidJson { .. }
            | Error::UnsupportedIgnitionVersion(_)
            | Error::InvalidIgnition(_) => "InvalidIgnition",
            Error::InvalidFile { .. } => "InvalidFile",
            Error::KubeadmConfig { .. } => "InvalidKubeadmConfig",
        }
    }

    pub(crate) fn file(path: &str, problem: FileProblem) -> Self {
        Error::InvalidFile {
            path: shorten(path),
            problem,
        }
    }
}

/// Keeps user-supplied identifiers (paths, names) readable in messages: at most 256 characters.
pub(crate) fn shorten(value: &str) -> String {
    const LIMIT: usize = 256;
    match value.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &value[..cut]),
        None => value.to_owned(),
    }
}
