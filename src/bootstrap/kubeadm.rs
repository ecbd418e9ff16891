//! Rewrites of `kubeadm init|join` invocations for node containers.
//!
//! Two changes, as in CAPD: the [`SENTINEL_PATH`] is written before kubeadm starts (so bootstrap
//! is never started twice on a node), and preflight checks that cannot pass in a container are
//! ignored. User arguments are never re-quoted by hand: list-form commands keep their arguments as
//! argv entries (`exec "$@"`), and shell text is kept verbatim inside a `{ ... }` group.

use super::SENTINEL_PATH;
use super::shell::shell_quote;

/// Preflight errors ignored for cloud-init bootstrap (kernel config, swap and the bridge sysctl
/// cannot be satisfied inside a container).
pub(crate) const CLOUD_INIT_PREFLIGHT_FLAG: &str = "--ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables";

/// Preflight errors ignored for Ignition bootstrap (CAPD ignores all of them there).
pub(crate) const IGNITION_PREFLIGHT_FLAG: &str = "--ignore-preflight-errors=all";

/// Shell text that records that kubeadm is about to start.
pub(crate) fn sentinel_snippet(sentinel: &str) -> String {
    let dir = match sentinel.rsplit_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir,
        _ => "/",
    };
    format!(
        "mkdir -p {} && echo started > {}",
        shell_quote(dir),
        shell_quote(sentinel)
    )
}

/// Rewrites one command given as argv (cloud-init list form, or a string already turned into
/// `/bin/sh -c <string>`). Returns `None` when it does not run `kubeadm init|join`.
pub(crate) fn rewrite_argv(argv: &[String]) -> Option<Vec<String>> {
    rewrite_argv_with(argv, SENTINEL_PATH)
}

pub(crate) fn rewrite_argv_with(argv: &[String], sentinel: &str) -> Option<Vec<String>> {
    let program = argv.first()?;
    let name = program.rsplit('/').next().unwrap_or(program);
    if name == "kubeadm"
        && argv
            .get(1)
            .is_some_and(|sub| sub == "init" || sub == "join")
    {
        let mut out = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            format!("{} && exec \"$@\"", sentinel_snippet(sentinel)),
            "kubeadm-bootstrap".to_owned(),
        ];
        out.extend(argv[..2].iter().cloned());
        if argv.get(2).is_none_or(|next| next != "phase") {
            out.push(CLOUD_INIT_PREFLIGHT_FLAG.to_owned());
        }
        out.extend(argv[2..].iter().cloned());
        return Some(out);
    }
    let is_shell = matches!(name, "sh" | "bash" | "dash" | "ash");
    if is_shell && argv.get(1).is_some_and(|flag| flag == "-c") {
        let script = argv.get(2)?;
        let rewritten = insert_flag(script, CLOUD_INIT_PREFLIGHT_FLAG)?;
        let mut out = argv.to_vec();
        out[2] = format!("{} && {{ {rewritten}\n}}", sentinel_snippet(sentinel));
        return Some(out);
    }
    None
}

/// Rewrites the kubeadm script of Ignition bootstrap (`/etc/kubeadm.sh`). Lines starting with
/// `kubeadm init|join` are prefixed with the sentinel (as CAPD does); if kubeadm is started in the
/// middle of a line, the sentinel is written at the top of the script instead. Returns `None`
/// when the script never runs `kubeadm init|join`.
pub(crate) fn rewrite_script(script: &str) -> Option<String> {
    rewrite_script_with(script, SENTINEL_PATH)
}

pub(crate) fn rewrite_script_with(script: &str, sentinel: &str) -> Option<String> {
    let snippet = sentinel_snippet(sentinel);
    let mut found = false;
    let mut sentinel_on_top = false;
    let mut lines = Vec::new();
    for line in script.split('\n') {
        match insert_flag(line, IGNITION_PREFLIGHT_FLAG) {
            None => lines.push(line.to_owned()),
            Some(rewritten) => {
                found = true;
                let body = rewritten.trim_start();
                let indent = &rewritten[..rewritten.len() - body.len()];
                if starts_with_kubeadm(body) {
                    lines.push(format!("{indent}{snippet} && {body}"));
                } else {
                    sentinel_on_top = true;
                    lines.push(rewritten);
                }
            }
        }
    }
    if !found {
        return None;
    }
    if sentinel_on_top {
        let at = usize::from(lines.first().is_some_and(|l| l.starts_with("#!")));
        lines.insert(at, snippet);
    }
    Some(lines.join("\n"))
}

fn starts_with_kubeadm(text: &str) -> bool {
    find_invocations(text)
        .first()
        .is_some_and(|inv| inv.start == 0)
}

/// Adds `flag` after every `kubeadm init|join` in shell text (not before a `phase` subcommand).
/// Returns `None` when there is no such invocation.
pub(crate) fn insert_flag(text: &str, flag: &str) -> Option<String> {
    let invocations = find_invocations(text);
    if invocations.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + flag.len() * invocations.len());
    let mut copied = 0;
    for inv in invocations {
        out.push_str(&text[copied..inv.end]);
        copied = inv.end;
        let rest = text[inv.end..].trim_start_matches([' ', '\t']);
        if !starts_with_word(rest, "phase") {
            out.push(' ');
            out.push_str(flag);
        }
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// A `kubeadm init|join` found in shell text: where `kubeadm` (or its path) starts and where the
/// subcommand word ends.
struct Invocation {
    start: usize,
    end: usize,
}

fn find_invocations(text: &str) -> Vec<Invocation> {
    const WORD: &str = "kubeadm";
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find(WORD) {
        let at = from + offset;
        from = at + WORD.len();
        let before_ok = at == 0 || is_boundary(bytes[at - 1]) || bytes[at - 1] == b'/';
        let after = &text[from..];
        let gap = after.len() - after.trim_start_matches([' ', '\t']).len();
        if !before_ok || gap == 0 {
            continue;
        }
        let rest = &after[gap..];
        let Some(sub) = ["init", "join"]
            .into_iter()
            .find(|s| starts_with_word(rest, s))
        else {
            continue;
        };
        // Start of the program word, including a leading path such as /usr/bin/.
        let start = text[..at]
            .rfind(|c: char| c.is_ascii() && is_boundary(c as u8))
            .map_or(0, |i| i + 1);
        found.push(Invocation {
            start,
            end: from + gap + sub.len(),
        });
    }
    found
}

fn starts_with_word(text: &str, word: &str) -> bool {
    text.strip_prefix(word)
        .is_some_and(|rest| rest.bytes().next().is_none_or(is_boundary))
}

/// Characters that end a shell word in the simple cases that matter here.
fn is_boundary(b: u8) -> bool {
    b.is_ascii_whitespace() || b";&|()`{}!\"'".contains(&b)
}

#[cfg(test)]
#[path = "kubeadm_tests.rs"]
mod tests;
