//! Go `time.Duration` strings (`metav1.Duration` on the wire), as in `spec.bootstrapTimeout`.

use std::time::Duration;

/// Failure to parse a Go duration string.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "failed to parse duration {input:?}: expected numbers with units ns, us, ms, s, m or h, like \"5m\" or \"1h30m\""
)]
pub struct DurationError {
    /// The text that did not parse.
    pub input: String,
}

/// Parses a Go duration such as `300ms`, `1.5h` or `2h45m`. Negative durations are rejected
/// (a timeout cannot be negative); `0` needs no unit.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let error = || DurationError {
        input: input.to_string(),
    };
    let text = input.strip_prefix('+').unwrap_or(input);
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() || text.starts_with('-') {
        return Err(error());
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(error());
        }
        let value: f64 = number.parse().map_err(|_| error())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(error()),
        };
        total += value * nanos_per_unit;
        rest = tail;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(error());
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in ["", "5", "m", "5 m", "5d", "-5m", "1..5s", "abc", "."] {
            let error = parse_go_duration(bad).unwrap_err();
            assert_eq!(error.input, bad);
        }
    }
}
