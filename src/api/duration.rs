//! Go `time.Duration` strings (`15s`, `10m`, `1h30m`, `1.5h`, `300ms`): `metav1.Duration` on the
//! wire (`spec.bootstrapTimeout`) and the manager's duration flags.
//!
//! The grammar is Go's `time.ParseDuration`: one or more `<number><unit>` pairs, units `ns`, `us`
//! (`µs`, `μs`), `ms`, `s`, `m`, `h`, numbers with an optional fraction, and the bare `0`.
//! Negative durations are rejected: neither a timeout nor a flag of the manager has a meaning for
//! them.

use std::time::Duration;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The value was empty.
    #[error("empty duration: expected a value such as 15s, 10m or 1h30m")]
    Empty,
    /// The value started with a minus sign.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
    /// A number was not followed by a unit.
    #[error("invalid duration {0:?}: missing unit (use ns, us, ms, s, m or h)")]
    MissingUnit(String),
    /// A unit was not one of Go's.
    #[error("invalid duration {input:?}: unknown unit {unit:?} (use ns, us, ms, s, m or h)")]
    UnknownUnit {
        /// The whole text.
        input: String,
        /// The unit that was not recognised.
        unit: String,
    },
    /// Something other than a number stood where a number was expected.
    #[error("invalid duration {0:?}: expected a number such as 15s, 10m or 1h30m")]
    Malformed(String),
    /// The value does not fit in 64-bit nanoseconds (about 292 years), like Go.
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
}

/// Parses a Go duration string into a [`Duration`].
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let unsigned = match input.as_bytes().first() {
        None => return Err(DurationError::Empty),
        Some(b'-') => return Err(DurationError::Negative(input.to_owned())),
        Some(b'+') => &input[1..],
        Some(_) => input,
    };
    if unsigned == "0" {
        return Ok(Duration::ZERO);
    }
    if unsigned.is_empty() {
        return Err(DurationError::Malformed(input.to_owned()));
    }

    let mut rest = unsigned;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after_number) = rest.split_at(number_len);
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let unit_nanos = unit_in_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            input: input.to_owned(),
            unit: unit.to_owned(),
        })?;
        let nanos = number_in_nanos(number, unit_nanos)
            .ok_or_else(|| DurationError::Malformed(input.to_owned()))?;
        total_nanos = total_nanos.saturating_add(nanos);
        if total_nanos > u128::from(u64::MAX >> 1) {
            return Err(DurationError::Overflow(input.to_owned()));
        }
        rest = after_unit;
    }
    let nanos =
        u64::try_from(total_nanos).map_err(|_| DurationError::Overflow(input.to_owned()))?;
    Ok(Duration::from_nanos(nanos))
}

/// Formats a duration the way Go prints one (`15s`, `10m0s`, `1h30m0s`, `1.5s`, `300ms`).
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 1_000_000));
    }
    let secs = duration.as_secs();
    let sub_nanos = u128::from(duration.subsec_nanos());
    let hours = secs / 3600;
    let minutes = (secs % 3600) / 60;
    let seconds = decimal(
        u128::from(secs % 60) * 1_000_000_000 + sub_nanos,
        1_000_000_000,
    );
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / scale` with the fraction's trailing zeros trimmed.
fn decimal(value: u128, scale: u128) -> String {
    let whole = value / scale;
    let fraction = value % scale;
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn unit_in_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

/// `number` (digits with an optional fraction) times `unit_nanos`, truncated to whole nanoseconds.
fn number_in_nanos(number: &str, unit_nanos: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if fraction.contains('.') {
        return None;
    }
    let whole_value: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut nanos = whole_value.checked_mul(unit_nanos)?;
    let mut scale = unit_nanos;
    for digit in fraction.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        nanos = nanos.checked_add(u128::from(digit - b'0') * scale)?;
    }
    Some(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn parses_the_values_capd_uses_as_defaults() {
        assert_eq!(parse_go_duration("15s"), Ok(secs(15)));
        assert_eq!(parse_go_duration("10s"), Ok(secs(10)));
        assert_eq!(parse_go_duration("2s"), Ok(secs(2)));
        assert_eq!(parse_go_duration("10m"), Ok(secs(600)));
    }

    #[test]
    fn parses_compound_fractional_and_small_units() {
        assert_eq!(parse_go_duration("1h30m"), Ok(secs(5400)));
        assert_eq!(parse_go_duration("1h30m15s"), Ok(secs(5415)));
        assert_eq!(parse_go_duration("1.5h"), Ok(secs(5400)));
        assert_eq!(parse_go_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_go_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_go_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_go_duration("+5s"), Ok(secs(5)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_values_go_rejects_or_that_make_no_sense_for_a_flag() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_go_duration("15"),
            Err(DurationError::MissingUnit("15".into()))
        );
        assert_eq!(
            parse_go_duration("5x"),
            Err(DurationError::UnknownUnit {
                input: "5x".into(),
                unit: "x".into()
            })
        );
        assert_eq!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative("-5s".into()))
        );
        assert_eq!(
            parse_go_duration("s"),
            Err(DurationError::Malformed("s".into()))
        );
        assert_eq!(
            parse_go_duration("1..5s"),
            Err(DurationError::Malformed("1..5s".into()))
        );
        assert_eq!(
            parse_go_duration("+"),
            Err(DurationError::Malformed("+".into()))
        );
        assert_eq!(
            parse_go_duration("9999999999h"),
            Err(DurationError::Overflow("9999999999h".into()))
        );
    }

    #[test]
    fn parses_the_forms_go_prints_and_accepts() {
        assert_eq!(parse_go_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("2m0s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_go_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("+90s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn rejects_what_go_rejects_or_a_timeout_cannot_be() {
        for bad in [
            "5", "m", "5 m", "5d", "-5m", "1..5s", "abc", ".", " 5m", "5m ",
        ] {
            let message = parse_go_duration(bad).unwrap_err().to_string();
            assert!(message.contains(&format!("{bad:?}")), "{message}");
        }
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
    }

    #[test]
    fn error_messages_say_what_to_type() {
        let message = parse_go_duration("15").unwrap_err().to_string();
        assert_eq!(
            message,
            "invalid duration \"15\": missing unit (use ns, us, ms, s, m or h)"
        );
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(secs(15)), "15s");
        assert_eq!(format_go_duration(secs(600)), "10m0s");
        assert_eq!(format_go_duration(secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_go_duration(Duration::from_micros(5)), "5µs");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn formatting_then_parsing_round_trips() {
        for d in [
            secs(1),
            secs(61),
            secs(3601),
            Duration::from_millis(2250),
            Duration::from_nanos(3),
        ] {
            assert_eq!(parse_go_duration(&format_go_duration(d)), Ok(d));
        }
    }
}
