//! POSIX shell quoting.
//!
//! Most generated commands pass user values as separate argv entries (`"$1"` inside a fixed
//! script) and need no quoting at all; [`shell_quote`] is for the few places where a value must be
//! spliced into shell text.

/// Quotes `value` so that a POSIX shell reads it back as exactly one word equal to `value`.
///
/// This is `shlex`'s quoter: values made only of characters that are never special to the shell
/// are returned unchanged, everything else is quoted (single quotes, or double quotes around a
/// part holding a single quote). NUL bytes cannot be passed through a shell word at all; callers
/// reject them before quoting.
pub fn shell_quote(value: &str) -> String {
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(value)
        .map(std::borrow::Cow::into_owned)
        // Only a NUL byte is refused, and it is allowed above.
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::shell_quote;
    use proptest::prelude::*;

    /// Asks a real `/bin/sh` to print its arguments one per NUL-terminated record.
    fn words_seen_by_sh(script_words: &str) -> Vec<String> {
        let output = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {script_words}"))
            .output()
            .expect("run /bin/sh");
        assert!(output.status.success(), "sh failed: {output:?}");
        let mut words: Vec<String> = output
            .stdout
            .split(|b| *b == 0)
            .map(|w| String::from_utf8(w.to_vec()).expect("utf-8"))
            .collect();
        words.pop(); // after the last terminator
        words
    }

    #[test]
    fn quotes_only_when_needed() {
        let cases = [
            ("kubeadm", "kubeadm"),
            ("/run/kubeadm/kubeadm.yaml", "/run/kubeadm/kubeadm.yaml"),
            (
                "--config=/run/kubeadm/kubeadm.yaml",
                "'--config=/run/kubeadm/kubeadm.yaml'",
            ),
            ("", "''"),
            ("a b", "'a b'"),
            ("it's", "\"it's\""),
            ("$HOME", "'$HOME'"),
            ("`id`", "'`id`'"),
            ("a\nb", "'a\nb'"),
            ("*", "'*'"),
            ("~", "'~'"),
        ];
        for (input, expected) in cases {
            assert_eq!(shell_quote(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn shell_reads_back_tricky_words() {
        let words = [
            "it's", "a b", "$(id)", "\"x\"", "", "\\", "\n", "-n", "*", "'", "''",
        ];
        let script: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
        assert_eq!(words_seen_by_sh(&script.join(" ")), words);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_word_round_trips_through_sh(word in "[^\\x00]{0,40}") {
            prop_assert_eq!(words_seen_by_sh(&shell_quote(&word)), vec![word]);
        }
    }
}
