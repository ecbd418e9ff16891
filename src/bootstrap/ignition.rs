//! Ignition (spec 2.x and 3.x JSON) translation.
//!
//! Translated: `storage.directories`, `storage.files`, `storage.links` and `systemd.units`
//! (contents, drop-ins, mask, enabled). Users, disks, file systems, networkd units, kernel
//! arguments and config merging are skipped with a warning. As in CAPD, `/etc/kubeadm.sh` gets the
//! bootstrap sentinel and the preflight flag, and `/etc/kubeadm.yml` the kubeadm config patches.

use serde_json::{Map, Value};

use super::files;
use super::kubeadm_config::{self, IGNITION_CONFIG_PATH};
use super::{Command, Error, FileProblem, Options, Plan, dataurl, kubeadm};

/// The script CABPK's Ignition output runs from `kubeadm.service`.
const KUBEADM_SCRIPT_PATH: &str = "/etc/kubeadm.sh";
const UNIT_DIR: &str = "/etc/systemd/system";
const DEFAULT_DIRECTORY_MODE: u32 = 0o755;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    V2,
    V3,
}

/// Translates an Ignition config.
pub(crate) fn translate(data: &[u8], opts: &Options) -> Result<Plan, Error> {
    let doc: Value = serde_json::from_slice(data).map_err(|e| Error::InvalidJson {
        line: e.line(),
        column: e.column(),
    })?;
    let root = doc
        .as_object()
        .ok_or_else(|| Error::InvalidIgnition("the config is not a JSON object".into()))?;
    let version = root
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .ok_or_else(|| Error::InvalidIgnition("ignition.version is missing".into()))?;
    let spec = match version.split('.').next() {
        Some("2") => Spec::V2,
        Some("3") => Spec::V3,
        _ => {
            return Err(Error::UnsupportedIgnitionVersion(super::error::shorten(
                version,
            )));
        }
    };
    let mut plan = Plan::default();
    warn_skipped(&doc, &mut plan);
    let storage = section(root, "storage")?;
    for entry in list(storage, "storage", "directories")? {
        directory(entry, &mut plan)?;
    }
    for entry in list(storage, "storage", "files")? {
        file(entry, spec, opts, &mut plan)?;
    }
    for entry in list(storage, "storage", "links")? {
        link(entry, &mut plan)?;
    }
    units(
        list(section(root, "systemd")?, "systemd", "units")?,
        &mut plan,
    )?;
    Ok(plan)
}

/// Sections with content this translation does not apply.
fn warn_skipped(doc: &Value, plan: &mut Plan) {
    let present = |pointer: &str| {
        doc.pointer(pointer).is_some_and(|v| match v {
            Value::Null => false,
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        })
    };
    let checks = [
        (
            "/ignition/config",
            "ignition.config (merging or replacing configs)",
        ),
        ("/passwd/users", "passwd.users"),
        ("/passwd/groups", "passwd.groups"),
        ("/storage/disks", "storage.disks"),
        ("/storage/raid", "storage.raid"),
        ("/storage/filesystems", "storage.filesystems"),
        ("/storage/luks", "storage.luks"),
        ("/networkd/units", "networkd.units"),
        ("/kernelArguments", "kernelArguments"),
    ];
    for (pointer, name) in checks {
        if present(pointer) {
            plan.warnings.push(format!(
                "ignition section {name} skipped: not supported in node containers"
            ));
        }
    }
}

fn section<'a>(
    root: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a Map<String, Value>>, Error> {
    match root.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(Error::InvalidIgnition(format!("{name} is not an object"))),
    }
}

fn list<'a>(
    parent: Option<&'a Map<String, Value>>,
    parent_name: &str,
    name: &str,
) -> Result<&'a [Value], Error> {
    match parent.and_then(|p| p.get(name)) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(Error::InvalidIgnition(format!(
            "{parent_name}.{name} is not a list"
        ))),
    }
}

/// The `path` of a storage entry, validated.
fn entry_path<'a>(entry: &'a Value, kind: &str) -> Result<&'a str, Error> {
    if !entry.is_object() {
        return Err(Error::InvalidIgnition(format!(
            "a storage {kind} entry is not an object"
        )));
    }
    let path = match entry.get("path") {
        Some(Value::String(path)) => path.as_str(),
        None | Some(Value::Null) => {
            return Err(Error::InvalidIgnition(format!(
                "a storage {kind} entry has no path"
            )));
        }
        Some(_) => {
            return Err(Error::InvalidIgnition(format!(
                "a storage {kind} entry has a non-string path"
            )));
        }
    };
    files::validate_path(path)?;
    Ok(path)
}

fn mode(path: &str, entry: &Value) -> Result<Option<u32>, Error> {
    match entry.get("mode") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|m| *m <= 0o7777)
            .and_then(|m| u32::try_from(m).ok())
            .map(Some)
            .ok_or_else(|| Error::file(path, FileProblem::InvalidPermissions)),
    }
}

/// `user`/`group` objects (`{id}` or `{name}`) as a chown owner; `None` when both are root or unset.
fn owner(path: &str, entry: &Value) -> Result<Option<String>, Error> {
    let part = |key: &str| -> Result<Option<String>, Error> {
        let Some(obj) = entry.get(key).filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        if let Some(name) = obj
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Ok(Some(name.to_owned()));
        }
        match obj.get("id") {
            None | Some(Value::Null) => Ok(None),
            Some(id) => id
                .as_u64()
                .map(|id| Some(id.to_string()))
                .ok_or_else(|| Error::file(path, FileProblem::InvalidOwner)),
        }
    };
    let is_root = |p: &Option<String>| p.as_deref().is_none_or(|p| p == "root" || p == "0");
    let (user, group) = (part("user")?, part("group")?);
    if is_root(&user) && is_root(&group) {
        return Ok(None);
    }
    let owner = match (user, group) {
        (Some(user), Some(group)) => format!("{user}:{group}"),
        (Some(user), None) => user,
        (None, Some(group)) => format!(":{group}"),
        (None, None) => return Ok(None),
    };
    files::validate_owner(path, &owner)?;
    Ok(Some(owner))
}

fn directory(entry: &Value, plan: &mut Plan) -> Result<(), Error> {
    let path = entry_path(entry, "directory")?;
    let mode = mode(path, entry)?.unwrap_or(DEFAULT_DIRECTORY_MODE);
    let owner = owner(path, entry)?;
    plan.commands.push(files::mkdir(path));
    plan.commands.push(files::chmod(path, mode));
    if let Some(owner) = owner {
        plan.commands.push(files::chown(path, &owner));
    }
    Ok(())
}

/// The bytes of a `contents` or `append` resource: `source` data URL, optional gzip `compression`.
fn resource(path: &str, resource: &Value) -> Result<Option<Vec<u8>>, Error> {
    if resource.is_null() {
        return Ok(None);
    }
    if !resource.is_object() {
        return Err(Error::file(path, FileProblem::WrongType("contents")));
    }
    let source = match resource.get("source") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(source)) => source,
        Some(_) => return Err(Error::file(path, FileProblem::WrongType("source"))),
    };
    let data = dataurl::decode(path, source)?;
    match resource.get("compression") {
        None | Some(Value::Null) => Ok(Some(data)),
        Some(Value::String(c)) if c.is_empty() => Ok(Some(data)),
        Some(Value::String(c)) if c == "gzip" => files::gunzip(path, &data).map(Some),
        Some(Value::String(c)) => Err(Error::file(
            path,
            FileProblem::UnsupportedCompression(super::error::shorten(c)),
        )),
        Some(_) => Err(Error::file(path, FileProblem::WrongType("compression"))),
    }
}

fn file(entry: &Value, spec: Spec, opts: &Options, plan: &mut Plan) -> Result<(), Error> {
    let path = entry_path(entry, "file")?;
    let mode = mode(path, entry)?.unwrap_or(files::DEFAULT_FILE_MODE);
    let owner = owner(path, entry)?;
    let contents = resource(path, entry.get("contents").unwrap_or(&Value::Null))?;
    // Spec 2 appends `contents` when `append` is true; spec 3 lists resources to append.
    let (append_contents, appended) = match (spec, entry.get("append")) {
        (_, None | Some(Value::Null)) => (false, Vec::new()),
        (Spec::V2, Some(Value::Bool(append))) => (*append, Vec::new()),
        (Spec::V3, Some(Value::Array(items))) => {
            let mut appended = Vec::new();
            for item in items {
                appended.extend(resource(path, item)?);
            }
            (false, appended)
        }
        _ => return Err(Error::file(path, FileProblem::WrongType("append"))),
    };
    match contents {
        Some(mut content) => {
            if !append_contents {
                content = patch_special_file(path, content, opts, &mut plan.warnings)?;
            }
            plan.commands
                .push(files::write_content(path, content, append_contents));
        }
        // No contents: create the file if missing, keep it otherwise (appending nothing).
        None if appended.is_empty() => {
            plan.commands
                .push(files::write_content(path, Vec::new(), true))
        }
        None => {}
    }
    for content in appended {
        plan.commands
            .push(files::write_content(path, content, true));
    }
    plan.commands.push(files::chmod(path, mode));
    if let Some(owner) = owner {
        plan.commands.push(files::chown(path, &owner));
    }
    Ok(())
}

/// The kubeadm script and config of CABPK's Ignition output get the node-container changes.
fn patch_special_file(
    path: &str,
    content: Vec<u8>,
    opts: &Options,
    warnings: &mut Vec<String>,
) -> Result<Vec<u8>, Error> {
    if path == IGNITION_CONFIG_PATH {
        return kubeadm_config::patch(path, &content, opts, warnings);
    }
    if path == KUBEADM_SCRIPT_PATH
        && let Ok(script) = std::str::from_utf8(&content)
        && let Some(rewritten) = kubeadm::rewrite_script(script)
    {
        return Ok(rewritten.into_bytes());
    }
    Ok(content)
}

fn link(entry: &Value, plan: &mut Plan) -> Result<(), Error> {
    let path = entry_path(entry, "link")?;
    let target = entry
        .get("target")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && !t.contains(['\0', '\n', '\r']))
        .ok_or_else(|| Error::file(path, FileProblem::InvalidLinkTarget))?;
    let hard = match entry.get("hard") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(hard)) => *hard,
        Some(_) => return Err(Error::file(path, FileProblem::WrongType("hard"))),
    };
    plan.commands.push(files::link(path, target, hard));
    if let Some(owner) = owner(path, entry)? {
        let mut chown = files::chown(path, &owner);
        chown.argv.insert(1, "-h".into());
        plan.commands.push(chown);
    }
    Ok(())
}

fn unit_name<'a>(value: Option<&'a Value>, context: &str) -> Result<&'a str, Error> {
    let name = value.and_then(Value::as_str).unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 256
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":_.@\\-".contains(&b));
    if valid {
        Ok(name)
    } else {
        Err(Error::file(
            &format!("{UNIT_DIR}/{context}"),
            FileProblem::InvalidUnitName,
        ))
    }
}

fn text_field<'a>(
    path: &str,
    entry: &'a Value,
    key: &'static str,
) -> Result<Option<&'a str>, Error> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::file(path, FileProblem::WrongType(key))),
    }
}

fn flag(path: &str, entry: &Value, key: &'static str) -> Result<Option<bool>, Error> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Error::file(path, FileProblem::WrongType(key))),
    }
}

/// systemd units: write unit files and drop-ins, one `daemon-reload`, then mask/enable/disable.
fn units(entries: &[Value], plan: &mut Plan) -> Result<(), Error> {
    let mut wrote = false;
    let mut actions = Vec::new();
    for entry in entries {
        if !entry.is_object() {
            return Err(Error::InvalidIgnition(
                "a systemd unit entry is not an object".into(),
            ));
        }
        let name = unit_name(entry.get("name"), "<unit>")?;
        let path = format!("{UNIT_DIR}/{name}");
        if let Some(contents) = text_field(&path, entry, "contents")? {
            plan.commands.push(files::write_content(
                &path,
                contents.as_bytes().to_vec(),
                false,
            ));
            plan.commands
                .push(files::chmod(&path, files::DEFAULT_FILE_MODE));
            wrote = true;
        }
        let dropins = match entry.get("dropins") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(items)) => items.as_slice(),
            Some(_) => return Err(Error::file(&path, FileProblem::WrongType("dropins"))),
        };
        for dropin in dropins {
            let dropin_name = unit_name(dropin.get("name"), &format!("{name}.d/<drop-in>"))?;
            let dropin_path = format!("{path}.d/{dropin_name}");
            let contents = text_field(&dropin_path, dropin, "contents")?.unwrap_or_default();
            plan.commands.push(files::write_content(
                &dropin_path,
                contents.as_bytes().to_vec(),
                false,
            ));
            plan.commands
                .push(files::chmod(&dropin_path, files::DEFAULT_FILE_MODE));
            wrote = true;
        }
        // Spec 2 also had the deprecated `enable`.
        let enabled =
            flag(&path, entry, "enabled")?.or(flag(&path, entry, "enable")?.filter(|e| *e));
        if flag(&path, entry, "mask")? == Some(true) {
            actions.push(systemctl(
                &["mask", name],
                format!("mask unit {name}"),
                files::FILE_RETRIES,
            ));
        } else if enabled == Some(true) {
            // Starting may run kubeadm (CABPK's kubeadm.service): never retried.
            actions.push(systemctl(
                &["enable", "--now", name],
                format!("enable and start unit {name}"),
                0,
            ));
        } else if enabled == Some(false) {
            actions.push(systemctl(
                &["disable", name],
                format!("disable unit {name}"),
                files::FILE_RETRIES,
            ));
        }
    }
    if wrote {
        plan.commands.push(systemctl(
            &["daemon-reload"],
            "reload systemd unit files".into(),
            files::FILE_RETRIES,
        ));
    }
    plan.commands.extend(actions);
    Ok(())
}

fn systemctl(args: &[&str], description: String, retries: u32) -> Command {
    let mut argv = vec!["systemctl".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    Command::new(argv, description).with_retries(retries)
}

#[cfg(test)]
#[path = "ignition_tests.rs"]
mod tests;
