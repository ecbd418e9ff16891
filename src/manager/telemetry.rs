//! Logging set-up: klog-style verbosity mapped to tracing levels, text or JSON lines on stderr.

use std::error::Error;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use super::args::LogFormat;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` holds directives that do not parse.
    #[error("invalid RUST_LOG filter")]
    Filter(#[source] tracing_subscriber::filter::ParseError),
    /// Another global subscriber was installed first.
    #[error("install the log subscriber")]
    Install(#[source] Box<dyn Error + Send + Sync>),
}

/// The tracing filter for a klog verbosity level.
///
/// Our own crates (`capd` and the `manager` binary) log at info up to `-v=2` (the default),
/// debug at 3-4 and trace from 5; libraries stay at warn, then info from 5 and debug from 6.
///
/// kube's HTTP trace layer logs every failed request at error level; the caller logs the same
/// failure with more context, so that layer stays quiet below 6.
pub fn filter_directives(verbosity: u8) -> String {
    let (ours, libraries) = match verbosity {
        0..=2 => ("info", "warn"),
        3..=4 => ("debug", "warn"),
        5 => ("trace", "info"),
        _ => return "debug,capd=trace,manager=trace".to_owned(),
    };
    format!("{libraries},capd={ours},manager={ours},{KUBE_HTTP_TRACE}=off")
}

/// Target of kube's per-request trace layer.
const KUBE_HTTP_TRACE: &str = "kube_client::client::builder";

/// Installs the global subscriber. `RUST_LOG`, when set and not empty, replaces the
/// verbosity-derived filter.
pub fn init(verbosity: u8, format: LogFormat) -> Result<(), TelemetryError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => {
            EnvFilter::try_new(directives).map_err(TelemetryError::Filter)?
        }
        _ => EnvFilter::try_new(filter_directives(verbosity)).map_err(TelemetryError::Filter)?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(TelemetryError::Install)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_verbosity_shows_our_info_logs_and_library_warnings() {
        assert_eq!(
            filter_directives(2),
            "warn,capd=info,manager=info,kube_client::client::builder=off"
        );
        assert_eq!(filter_directives(0), filter_directives(2));
    }

    #[test]
    fn higher_verbosity_turns_on_debug_then_trace() {
        assert!(filter_directives(4).starts_with("warn,capd=debug,manager=debug,"));
        assert!(filter_directives(5).starts_with("info,capd=trace,manager=trace,"));
        assert_eq!(filter_directives(10), "debug,capd=trace,manager=trace");
    }

    #[test]
    fn every_level_is_a_valid_filter() {
        for v in 0..=12 {
            assert!(EnvFilter::try_new(filter_directives(v)).is_ok(), "v={v}");
        }
    }
}
