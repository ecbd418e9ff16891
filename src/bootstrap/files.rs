//! Commands that create files, directories and links, and the checks and decoders they need.
//!
//! User values (paths, owners, link targets) never become shell text: they are passed as
//! positional parameters (`"$1"`) of fixed scripts, or as plain argv entries.

use std::io::Read as _;

use base64::Engine as _;

use super::{Command, Error, FileProblem};

/// Retries of file-writing commands, as in CAPD.
pub(crate) const FILE_RETRIES: u32 = 5;

/// The largest decompressed file accepted (a guard against gzip bombs in a 1 MiB Secret).
pub(crate) const MAX_DECODED_BYTES: usize = 64 << 20;

/// The mode cloud-init and Ignition give files when none is set.
pub(crate) const DEFAULT_FILE_MODE: u32 = 0o644;

/// Creates the parent directory, then writes stdin to `$1` (new files start private, `umask 077`,
/// until their final mode is set by the `chmod` that follows).
const WRITE_SCRIPT: &str = r#"mkdir -p -- "$(dirname -- "$1")" && umask 077 && cat > "$1""#;
const APPEND_SCRIPT: &str = r#"mkdir -p -- "$(dirname -- "$1")" && umask 077 && cat >> "$1""#;
const SYMLINK_SCRIPT: &str = r#"mkdir -p -- "$(dirname -- "$1")" && ln -sfn -- "$2" "$1""#;
const HARDLINK_SCRIPT: &str = r#"mkdir -p -- "$(dirname -- "$1")" && ln -f -- "$2" "$1""#;

/// One regular file to write.
#[derive(Debug)]
pub(crate) struct FileWrite<'a> {
    pub path: &'a str,
    pub content: Vec<u8>,
    pub append: bool,
    pub mode: u32,
    /// `user[:group]`, already validated; `None` leaves the owner as is (root).
    pub owner: Option<String>,
}

/// Checks that `path` is usable as the path of a file in the node: absolute, without control
/// characters that would break commands or logs, and not naming a directory.
pub(crate) fn validate_path(path: &str) -> Result<(), Error> {
    let problem = if path.is_empty() {
        Some(FileProblem::MissingPath)
    } else if path.contains(['\0', '\n', '\r']) {
        Some(FileProblem::ControlCharacter)
    } else if !path.starts_with('/') {
        Some(FileProblem::NotAbsolute)
    } else if path.ends_with('/') || path.ends_with("/.") || path.ends_with("/..") {
        Some(FileProblem::NamesDirectory)
    } else {
        None
    };
    match problem {
        Some(problem) => Err(Error::file(path, problem)),
        None => Ok(()),
    }
}

/// Checks an owner in `chown` syntax: `user`, `user:group` or `:group`, no whitespace or control
/// characters, and nothing `chown` could read as an option.
pub(crate) fn validate_owner(path: &str, owner: &str) -> Result<(), Error> {
    let valid = !owner.is_empty()
        && owner != ":"
        && !owner.starts_with('-')
        && owner.matches(':').count() <= 1
        && !owner.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(())
    } else {
        Err(Error::file(path, FileProblem::InvalidOwner))
    }
}

/// Reads base64 the way cloud-init does: whitespace and line breaks ignored, padding optional.
pub(crate) fn decode_base64(path: &str, text: &[u8]) -> Result<Vec<u8>, Error> {
    let compact: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    engine
        .decode(compact)
        .map_err(|_| Error::file(path, FileProblem::BadBase64))
}

/// Decompresses gzip data (several members allowed), at most [`MAX_DECODED_BYTES`].
pub(crate) fn gunzip(path: &str, data: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let limit = u64::try_from(MAX_DECODED_BYTES).unwrap_or(u64::MAX);
    flate2::read::MultiGzDecoder::new(data)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|_| Error::file(path, FileProblem::BadGzip))?;
    if out.len() > MAX_DECODED_BYTES {
        return Err(Error::file(path, FileProblem::TooLarge(MAX_DECODED_BYTES)));
    }
    Ok(out)
}

/// The commands that write one file: content, then mode, then owner.
pub(crate) fn write_file(file: FileWrite<'_>) -> Vec<Command> {
    let path = file.path;
    let mut commands = vec![
        write_content(path, file.content, file.append),
        chmod(path, file.mode),
    ];
    if let Some(owner) = file.owner {
        commands.push(chown(path, &owner));
    }
    commands
}

/// Writes (or appends) stdin to `path`, creating its parent directory first.
pub(crate) fn write_content(path: &str, content: Vec<u8>, append: bool) -> Command {
    let (script, verb) = if append {
        (APPEND_SCRIPT, "append to")
    } else {
        (WRITE_SCRIPT, "write")
    };
    Command::new(
        vec![
            "/bin/sh".into(),
            "-c".into(),
            script.into(),
            "write-file".into(),
            path.into(),
        ],
        format!("{verb} {path}"),
    )
    .with_stdin(content)
    .with_retries(FILE_RETRIES)
}

/// `chmod` with the mode written as four octal digits.
pub(crate) fn chmod(path: &str, mode: u32) -> Command {
    let mode = format!("{mode:04o}");
    Command::new(
        vec!["chmod".into(), mode.clone(), path.into()],
        format!("set mode {mode} on {path}"),
    )
    .with_retries(FILE_RETRIES)
}

/// `chown` to a validated owner.
pub(crate) fn chown(path: &str, owner: &str) -> Command {
    Command::new(
        vec!["chown".into(), owner.into(), path.into()],
        format!("set owner {owner} on {path}"),
    )
    .with_retries(FILE_RETRIES)
}

/// `mkdir -p` of a directory.
pub(crate) fn mkdir(path: &str) -> Command {
    Command::new(
        vec!["mkdir".into(), "-p".into(), "--".into(), path.into()],
        format!("create directory {path}"),
    )
    .with_retries(FILE_RETRIES)
}

/// A symbolic or hard link at `path` pointing to `target` (replacing what is there).
pub(crate) fn link(path: &str, target: &str, hard: bool) -> Command {
    let (script, kind) = if hard {
        (HARDLINK_SCRIPT, "hard link")
    } else {
        (SYMLINK_SCRIPT, "symbolic link")
    };
    Command::new(
        vec![
            "/bin/sh".into(),
            "-c".into(),
            script.into(),
            "link".into(),
            path.into(),
            target.into(),
        ],
        format!("create {kind} {path}"),
    )
    .with_retries(FILE_RETRIES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn path_rules() {
        let cases = [
            ("/etc/kubernetes/pki/ca.crt", None),
            ("/tmp/with space/it's \"quoted\"", None),
            ("", Some(FileProblem::MissingPath)),
            ("etc/passwd", Some(FileProblem::NotAbsolute)),
            ("/etc/a\nb", Some(FileProblem::ControlCharacter)),
            ("/etc/a\0b", Some(FileProblem::ControlCharacter)),
            ("/etc/a\rb", Some(FileProblem::ControlCharacter)),
            ("/etc/", Some(FileProblem::NamesDirectory)),
            ("/", Some(FileProblem::NamesDirectory)),
            ("/etc/..", Some(FileProblem::NamesDirectory)),
        ];
        for (path, expected) in cases {
            let got = validate_path(path).err();
            let expected = expected.map(|problem| Error::file(path, problem));
            assert_eq!(got, expected, "path {path:?}");
        }
    }

    #[test]
    fn owner_rules() {
        for ok in ["root", "root:root", "1000:1000", ":docker", "etcd:etcd"] {
            assert!(validate_owner("/f", ok).is_ok(), "{ok}");
        }
        for bad in ["", ":", "-R", "a b", "a:b:c", "a\nb"] {
            assert_eq!(
                validate_owner("/f", bad),
                Err(Error::file("/f", FileProblem::InvalidOwner)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn base64_is_lenient_about_whitespace_and_padding() {
        assert_eq!(decode_base64("/f", b"aGVs\nbG8=\n").unwrap(), b"hello");
        assert_eq!(decode_base64("/f", b"aGVsbG8").unwrap(), b"hello");
        assert_eq!(
            decode_base64("/f", b"not*base64"),
            Err(Error::file("/f", FileProblem::BadBase64))
        );
    }

    #[test]
    fn gunzip_reads_members_and_rejects_garbage() {
        let mut two = gzip(b"hello ");
        two.extend(gzip(b"world"));
        assert_eq!(gunzip("/f", &two).unwrap(), b"hello world");
        assert_eq!(
            gunzip("/f", b"plain text"),
            Err(Error::file("/f", FileProblem::BadGzip))
        );
    }

    #[test]
    fn gunzip_refuses_bombs() {
        let bomb = gzip(&vec![0u8; MAX_DECODED_BYTES + 1]);
        assert_eq!(
            gunzip("/f", &bomb),
            Err(Error::file("/f", FileProblem::TooLarge(MAX_DECODED_BYTES)))
        );
    }
}
