//! Syntax of Docker image references (`[registry[:port]/]path[:tag][@digest]`), following the
//! grammar of the distribution project that Docker itself parses with. Checked at admission so
//! that a typo in `customImage` or `preLoadImages` is refused with a message instead of surfacing
//! minutes later as a failed container start.

use std::net::Ipv6Addr;

/// Longest repository name (registry and path together).
const NAME_MAX: usize = 255;
/// Longest tag.
const TAG_MAX: usize = 128;
/// Fewest hex digits of a digest.
const DIGEST_HEX_MIN: usize = 32;

/// The shape a reference must have, for messages.
pub const REFERENCE_FORMAT: &str =
    "[registry[:port]/]repository[:tag][@digest], e.g. \"kindest/node:v1.31.0\"";

/// Why `value` is not an image reference (a repository with an optional tag and digest).
pub fn reference_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("must not be empty".into());
    }
    let (rest, digest) = match value.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (value, None),
    };
    if let Some(digest) = digest
        && let Some(problem) = digest_problem(digest)
    {
        return Some(problem);
    }
    // A ':' after the last '/' starts the tag; before it, it belongs to the registry's port.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag
        && let Some(problem) = tag_problem(tag)
    {
        return Some(problem);
    }
    repository_problem(name)
}

/// Why `value` is not a repository name (`[registry[:port]/]path`, no tag or digest).
pub fn repository_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("the repository name must not be empty".into());
    }
    if value.len() > NAME_MAX {
        return Some(format!(
            "the repository name must not be more than {NAME_MAX} characters"
        ));
    }
    let components: Vec<&str> = value.split('/').collect();
    let path = match components.as_slice() {
        [first, rest @ ..]
            if !rest.is_empty() && !first.is_empty() && !is_path_component(first) =>
        {
            if let Some(problem) = registry_problem(first) {
                return Some(problem);
            }
            rest
        }
        all => all,
    };
    for component in path {
        if component.is_empty() {
            return Some(
                "the repository name has an empty path component (\"//\" or a \
                         leading or trailing \"/\")"
                    .into(),
            );
        }
        if component.bytes().any(|b| b.is_ascii_uppercase()) {
            return Some(format!(
                "the repository name must be lowercase (\"{component}\")"
            ));
        }
        if !is_path_component(component) {
            return Some(format!(
                "the repository path component \"{component}\" may only contain lowercase \
                 letters, digits and the separators '.', '_', '__' or '-' between them"
            ));
        }
    }
    None
}

/// Why `value` is not a tag (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`).
pub fn tag_problem(value: &str) -> Option<String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = value.as_bytes();
    let valid = match bytes.split_first() {
        Some((first, rest)) => {
            word(*first)
                && rest.iter().all(|b| word(*b) || matches!(b, b'.' | b'-'))
                && bytes.len() <= TAG_MAX
        }
        None => false,
    };
    (!valid).then(|| {
        format!(
            "the tag \"{value}\" must be 1 to {TAG_MAX} letters, digits, '_', '.' or '-', not \
             starting with '.' or '-'"
        )
    })
}

/// Why `value` is not a digest (`algorithm:hex`, e.g. `sha256:` and 64 hex digits).
fn digest_problem(value: &str) -> Option<String> {
    let valid = value.split_once(':').is_some_and(|(algorithm, hex)| {
        let component_ok = |c: &str| {
            let bytes = c.as_bytes();
            bytes.first().is_some_and(u8::is_ascii_alphabetic)
                && bytes.iter().all(u8::is_ascii_alphanumeric)
        };
        algorithm.split(['+', '.', '_', '-']).all(component_ok)
            && hex.len() >= DIGEST_HEX_MIN
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    (!valid).then(|| {
        format!(
            "the digest \"{value}\" must be an algorithm and at least {DIGEST_HEX_MIN} hex \
             digits, e.g. \"sha256:\" followed by 64 hex digits"
        )
    })
}

/// Why `value` is not a registry (`host[:port]`, host a DNS name or a bracketed IPv6 address).
fn registry_problem(value: &str) -> Option<String> {
    let (host, port) = if let Some(inner) = value.strip_prefix('[') {
        match inner.split_once(']') {
            Some((address, after)) => {
                if address.parse::<Ipv6Addr>().is_err() {
                    return Some(format!(
                        "the registry \"{value}\" has an invalid IPv6 address"
                    ));
                }
                match after {
                    "" => return None,
                    _ => match after.strip_prefix(':') {
                        Some(port) => ("", Some(port)),
                        None => return Some(format!("the registry \"{value}\" is malformed")),
                    },
                }
            }
            None => return Some(format!("the registry \"{value}\" lacks a closing ']'")),
        }
    } else {
        match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some(format!(
            "the registry \"{value}\" has an invalid port (digits expected after ':')"
        ));
    }
    if value.starts_with('[') {
        return None;
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                first.is_ascii_alphanumeric()
                    && last.is_ascii_alphanumeric()
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            }
            _ => false,
        }
    };
    (!host.split('.').all(label_ok)).then(|| {
        format!(
            "the registry host \"{host}\" must be a DNS name (letters, digits and '-' in \
             dot-separated parts) or a bracketed IPv6 address"
        )
    })
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    // Between alphanumeric runs: one '.', one or two '_', or any number of '-'.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(&bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(&bytes[i]) {
            i += 1;
        }
        let separator = &value[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}
