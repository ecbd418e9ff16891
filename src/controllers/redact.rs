//! Removing secrets from command output before it reaches a condition, an Event or a log line.
//!
//! kubeadm prints bootstrap tokens (`abcdef.0123456789abcdef`), certificate keys (64 hex digits
//! after `--certificate-key`) and, with some flags, PEM blocks. Bootstrap commands may also echo
//! passwords or bearer tokens given on their command line.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

struct Rule {
    pattern: Regex,
    replacement: &'static str,
}

fn rule(pattern: &str, replacement: &'static str) -> Option<Rule> {
    match Regex::new(pattern) {
        Ok(pattern) => Some(Rule {
            pattern,
            replacement,
        }),
        Err(error) => {
            // The patterns are constants covered by tests; this cannot happen at run time.
            tracing::error!(%error, "Invalid redaction pattern");
            None
        }
    }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        // PEM blocks (private keys, certificates), possibly cut by the output tail.
        rule(
            r"(?s)-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|\z)",
            "[REDACTED PEM BLOCK]",
        ),
        // kubeadm bootstrap tokens.
        rule(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b", REDACTED),
        // Certificate keys and other long hex secrets (sha256 discovery hashes are public but
        // look the same; hiding them costs nothing).
        rule(r"\b[0-9a-fA-F]{64}\b", REDACTED),
        // `--token x`, `--password=x`, `token: x`, `Authorization: Bearer x`.
        rule(
            r"(?i)((?:--)?(?:token|password|passwd|secret|certificate-key|client-key)(?:\s*[=:]\s*|\s+))\S+",
            "${1}[REDACTED]",
        ),
        rule(r"(?i)(bearer\s+)\S+", "${1}[REDACTED]"),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// `text` with every secret it may contain replaced by [`REDACTED`].
pub fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for rule in RULES.iter() {
        out = rule
            .pattern
            .replace_all(&out, rule.replacement)
            .into_owned();
    }
    out
}

/// The last `max_lines` lines of `text`, redacted, each cut to 300 characters.
pub fn redacted_tail(text: &str, max_lines: usize) -> String {
    let redacted = redact(text);
    let lines: Vec<&str> = redacted.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(max_lines);
    lines[start..]
        .iter()
        .map(|l| super::conditions::truncate(l, 300))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBEADM_INIT_OUTPUT: &str = "\
Your Kubernetes control-plane has initialized successfully!
You can now join any number of control-plane nodes by running the following command on each as root:

  kubeadm join 172.18.0.3:6443 --token abcdef.0123456789abcdef \\
\t--discovery-token-ca-cert-hash sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \\
\t--control-plane --certificate-key 5d817a5e8c3c5e64ecb4a0a8b1c7f5e8e4d2a1b0c9f8e7d6c5b4a3928170f6e5
";

    #[test]
    fn kubeadm_join_secrets_are_hidden() {
        let out = redact(KUBEADM_INIT_OUTPUT);
        assert!(!out.contains("abcdef.0123456789abcdef"), "{out}");
        assert!(
            !out.contains("5d817a5e8c3c5e64ecb4a0a8b1c7f5e8e4d2a1b0c9f8e7d6c5b4a3928170f6e5"),
            "{out}"
        );
        assert!(out.contains("kubeadm join 172.18.0.3:6443"));
        assert!(out.contains("--control-plane"));
    }

    #[test]
    fn pem_blocks_are_hidden_even_when_cut() {
        let text = "error: bad key\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\ndone\n-----BEGIN CERTIFICATE-----\nMIIB";
        let out = redact(text);
        assert!(!out.contains("MIIEow"));
        assert!(!out.contains("MIIB"));
        assert!(out.contains("error: bad key"));
        assert!(out.contains("done"));
    }

    #[test]
    fn flag_and_header_secrets_are_hidden() {
        let out =
            redact("curl -H 'Authorization: Bearer eyJhbGciOi' --password=hunter2 token: s3cr3t");
        assert!(!out.contains("eyJhbGciOi"));
        assert!(!out.contains("hunter2"));
        assert!(!out.contains("s3cr3t"));
    }

    #[test]
    fn ordinary_output_is_kept() {
        let text = "[preflight] Running pre-flight checks\nerror execution phase preflight: port 6443 is in use";
        assert_eq!(redact(text), text);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let text = "a\nb\n\nc\nd\n";
        assert_eq!(redacted_tail(text, 2), "c\nd");
    }
}
