//! cloud-init `#cloud-config` translation.
//!
//! Top-level modules are translated in document order (as CAPD does), except `bootcmd`, which
//! cloud-init runs before every other module and so comes first. `write_files` and `runcmd` are
//! translated; modules that have no meaning in a node container (users, NTP, disks, mounts...)
//! are skipped with a warning naming the module.

use super::files::{self, FileWrite};
use super::kubeadm_config::{self, INIT_CONFIG_PATH, JOIN_CONFIG_PATH};
use super::yaml::{self, Node};
use super::{Command, Error, FileProblem, Options, Plan, kubeadm};

/// Modules skipped on purpose, with the reason given in the warning.
const SKIPPED_MODULES: &[(&str, &str)] = &[
    ("users", "user accounts are not managed in node containers"),
    ("groups", "user accounts are not managed in node containers"),
    (
        "ssh_authorized_keys",
        "user accounts are not managed in node containers",
    ),
    ("ntp", "node containers use the host clock"),
    ("timezone", "node containers use the host clock"),
    ("disk_setup", "disks are managed by the container runtime"),
    (
        "fs_setup",
        "file systems are managed by the container runtime",
    ),
    ("mounts", "mounts are managed by the container runtime"),
    ("swap", "mounts are managed by the container runtime"),
    ("growpart", "disks are managed by the container runtime"),
    (
        "resize_rootfs",
        "disks are managed by the container runtime",
    ),
    ("output", "command output is captured by the provider"),
    (
        "final_message",
        "there is no cloud-init log in node containers",
    ),
    ("hostname", "the container name is the host name"),
    ("fqdn", "the container name is the host name"),
    (
        "manage_etc_hosts",
        "the container runtime manages /etc/hosts",
    ),
    (
        "power_state",
        "node containers are not rebooted by bootstrap",
    ),
];

/// Translates cloud-config YAML.
pub(crate) fn translate(data: &[u8], opts: &Options) -> Result<Plan, Error> {
    if let Some(found) = other_user_data_kind(data) {
        return Err(Error::NotCloudConfig { found });
    }
    let mut plan = Plan::default();
    let entries = match yaml::parse(data)? {
        Node::Null => {
            plan.warnings.push("the cloud-config is empty".into());
            return Ok(plan);
        }
        Node::Map(entries) => entries,
        Node::Seq(_) => return Err(Error::NotCloudConfig { found: "a list" }),
        _ => return Err(Error::NotCloudConfig { found: "a scalar" }),
    };
    if data.starts_with(b"## template: jinja") && contains(data, b"{{") {
        plan.warnings.push(
            "the cloud-config is a jinja template: its {{ }} expressions were not rendered".into(),
        );
    }
    if let Some((_, bootcmd)) = entries
        .iter()
        .rev()
        .find(|(k, _)| matches!(k, Node::Str(s) if s == "bootcmd"))
    {
        commands(Module::BootCmd, bootcmd, &mut plan)?;
    }
    for (key, value) in &entries {
        let Node::Str(name) = key else {
            plan.warnings
                .push("a top-level key that is not a module name was skipped".into());
            continue;
        };
        match name.as_str() {
            "write_files" => write_files(value, opts, &mut plan)?,
            "runcmd" => commands(Module::RunCmd, value, &mut plan)?,
            "bootcmd" => {}
            _ if is_empty(value) => {}
            other => plan.warnings.push(skipped_module_warning(other)),
        }
    }
    Ok(plan)
}

/// User data that cloud-init accepts but that is not cloud-config.
fn other_user_data_kind(data: &[u8]) -> Option<&'static str> {
    let start = data.trim_ascii_start();
    if start.starts_with(b"#!") {
        Some("a shell script")
    } else if start.starts_with(b"#include") {
        Some("an include list")
    } else if start.starts_with(b"Content-Type:") || start.starts_with(b"MIME-Version:") {
        Some("a MIME multi-part message")
    } else {
        None
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn is_empty(node: &Node) -> bool {
    match node {
        Node::Null => true,
        Node::Seq(items) => items.is_empty(),
        Node::Map(entries) => entries.is_empty(),
        _ => false,
    }
}

fn skipped_module_warning(name: &str) -> String {
    let printable = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !printable {
        return "a top-level key that is not a known module name was skipped".into();
    }
    match SKIPPED_MODULES.iter().find(|(module, _)| *module == name) {
        Some((_, reason)) => format!("cloud-init module {name} skipped: {reason}"),
        None => format!("cloud-init module {name} skipped: not supported in node containers"),
    }
}

#[derive(Clone, Copy)]
enum Module {
    BootCmd,
    RunCmd,
}

impl Module {
    fn name(self) -> &'static str {
        match self {
            Module::BootCmd => "bootcmd",
            Module::RunCmd => "runcmd",
        }
    }
}

/// `runcmd` / `bootcmd`: a list whose items are shell text (`/bin/sh -c`) or argv lists.
fn commands(module: Module, value: &Node, plan: &mut Plan) -> Result<(), Error> {
    let name = module.name();
    let items: Vec<&Node> = match value {
        Node::Null => Vec::new(),
        Node::Seq(items) => items.iter().collect(),
        Node::Str(_) => vec![value],
        other => {
            return Err(Error::InvalidModule {
                module: name,
                problem: format!("expected a list of commands, found {}", other.kind_name()),
            });
        }
    };
    for (index, item) in items.into_iter().enumerate() {
        let (argv, program) = match item {
            Node::Null => continue,
            Node::Seq(words) => {
                let mut argv = Vec::with_capacity(words.len());
                for word in words {
                    argv.push(word.scalar_text().ok_or_else(|| Error::InvalidModule {
                        module: name,
                        problem: format!(
                            "item {index} has {} among its arguments",
                            word.kind_name()
                        ),
                    })?);
                }
                let Some(first) = argv.first() else {
                    plan.warnings.push(format!(
                        "{name} item {index} is an empty list and was skipped"
                    ));
                    continue;
                };
                let program = safe_program_name(first.rsplit('/').next().unwrap_or(first));
                (argv, program)
            }
            scalar => {
                let text = scalar.scalar_text().ok_or_else(|| Error::InvalidModule {
                    module: name,
                    problem: format!(
                        "item {index} is {}, not a command string or list",
                        scalar.kind_name()
                    ),
                })?;
                let program = text
                    .split_whitespace()
                    .next()
                    .and_then(safe_program_name)
                    .map(|p| format!("shell: {p}"));
                (vec!["/bin/sh".into(), "-c".into(), text], program)
            }
        };
        let command = match kubeadm::rewrite_argv(&argv) {
            Some(rewritten) => Command::new(
                rewritten,
                format!("{name}[{index}]: kubeadm, after writing the bootstrap sentinel"),
            ),
            None => Command::new(
                argv,
                match program {
                    Some(program) => format!("{name}[{index}] ({program})"),
                    None => format!("{name}[{index}]"),
                },
            ),
        };
        plan.commands.push(command);
    }
    Ok(())
}

/// A program name shown in descriptions: only a plain word, never anything that could carry a
/// value (assignments, options, quoted text).
fn safe_program_name(word: &str) -> Option<String> {
    let plain = !word.is_empty()
        && word.len() <= 40
        && !word.starts_with('-')
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    plain.then(|| word.to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Text,
    Base64,
    Gzip,
    GzipBase64,
}

fn encoding(path: &str, value: Option<&Node>) -> Result<Encoding, Error> {
    let text = match value {
        None | Some(Node::Null) => return Ok(Encoding::Text),
        Some(Node::Str(s)) => s.trim().to_ascii_lowercase(),
        Some(_) => return Err(Error::file(path, FileProblem::WrongType("encoding"))),
    };
    match text.as_str() {
        "" | "text/plain" | "text" => Ok(Encoding::Text),
        "b64" | "base64" => Ok(Encoding::Base64),
        "gz" | "gzip" => Ok(Encoding::Gzip),
        "gz+b64" | "gzip+base64" | "gz+base64" | "gzip+b64" => Ok(Encoding::GzipBase64),
        _ => Err(Error::file(
            path,
            FileProblem::UnknownEncoding(super::error::shorten(&text)),
        )),
    }
}

/// cloud-init's permissions: a string is octal (`'0640'`, `'640'`, `'0o640'`), an integer is the
/// mode itself (YAML 1.1 reads an unquoted `0640` as octal; here it stays the text `0640`).
fn permissions(path: &str, value: Option<&Node>) -> Result<u32, Error> {
    let invalid = || Error::file(path, FileProblem::InvalidPermissions);
    let mode = match value {
        None | Some(Node::Null) => return Ok(files::DEFAULT_FILE_MODE),
        Some(Node::Str(s)) => {
            let s = s.trim();
            let digits = s
                .strip_prefix("0o")
                .or_else(|| s.strip_prefix("0O"))
                .unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(invalid());
            }
            u32::from_str_radix(digits, 8).map_err(|_| invalid())?
        }
        Some(Node::Int(i)) => u32::try_from(*i).map_err(|_| invalid())?,
        Some(_) => return Err(invalid()),
    };
    if mode > 0o7777 {
        return Err(invalid());
    }
    Ok(mode)
}

/// `write_files`: each entry becomes a write, a chmod and (when not root) a chown.
fn write_files(value: &Node, opts: &Options, plan: &mut Plan) -> Result<(), Error> {
    let entries = match value {
        Node::Null => return Ok(()),
        Node::Seq(entries) => entries,
        other => {
            return Err(Error::InvalidModule {
                module: "write_files",
                problem: format!("expected a list of files, found {}", other.kind_name()),
            });
        }
    };
    for (index, entry) in entries.iter().enumerate() {
        if !matches!(entry, Node::Map(_)) {
            return Err(Error::InvalidModule {
                module: "write_files",
                problem: format!("entry {index} is {}, not a mapping", entry.kind_name()),
            });
        }
        let path = match entry.get("path") {
            Some(Node::Str(path)) => path.as_str(),
            Some(Node::Null) | None => {
                return Err(Error::InvalidModule {
                    module: "write_files",
                    problem: format!("entry {index} has no path"),
                });
            }
            Some(other) => {
                return Err(Error::InvalidModule {
                    module: "write_files",
                    problem: format!("entry {index} has {} as its path", other.kind_name()),
                });
            }
        };
        files::validate_path(path)?;
        let encoding = encoding(path, entry.get("encoding"))?;
        let mode = permissions(path, entry.get("permissions"))?;
        let append = match entry.get("append") {
            None | Some(Node::Null) => false,
            Some(node) => node
                .as_bool()
                .ok_or_else(|| Error::file(path, FileProblem::WrongType("append")))?,
        };
        let owner = match entry.get("owner") {
            None | Some(Node::Null) => None,
            Some(Node::Str(owner)) => {
                let owner = owner.trim();
                files::validate_owner(path, owner)?;
                (owner != "root:root").then(|| owner.to_owned())
            }
            Some(_) => return Err(Error::file(path, FileProblem::WrongType("owner"))),
        };
        let raw = match entry.get("content") {
            None | Some(Node::Null) => {
                if entry
                    .get("source")
                    .is_some_and(|s| !matches!(s, Node::Null))
                {
                    return Err(Error::file(
                        path,
                        FileProblem::RemoteSource("source.uri".into()),
                    ));
                }
                Vec::new()
            }
            Some(Node::Bytes(bytes)) => bytes.clone(),
            Some(node) => node
                .scalar_text()
                .ok_or_else(|| Error::file(path, FileProblem::WrongType("content")))?
                .into_bytes(),
        };
        if entry
            .get("source")
            .is_some_and(|s| !matches!(s, Node::Null))
            && !raw.is_empty()
        {
            plan.warnings.push(format!(
                "write_files entry {index}: the source URI was ignored, the inline content was written"
            ));
        }
        let mut content = match encoding {
            Encoding::Text => raw,
            Encoding::Base64 => files::decode_base64(path, &raw)?,
            Encoding::Gzip => files::gunzip(path, &raw)?,
            Encoding::GzipBase64 => files::gunzip(path, &files::decode_base64(path, &raw)?)?,
        };
        if !append && (path == INIT_CONFIG_PATH || path == JOIN_CONFIG_PATH) {
            content = kubeadm_config::patch(path, &content, opts, &mut plan.warnings)?;
        }
        plan.commands.extend(files::write_file(FileWrite {
            path,
            content,
            append,
            mode,
            owner,
        }));
    }
    Ok(())
}

#[cfg(test)]
#[path = "cloudinit_tests.rs"]
mod tests;
