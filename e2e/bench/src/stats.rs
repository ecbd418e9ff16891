//! Statistics of repeated measurements (median, min, max), ratios, and the report: a text table
//! for people and JSON for tools.

use serde::Serialize;

/// Median, minimum and maximum of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Middle value (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of measurements.
    pub n: usize,
}

impl Summary {
    /// The summary of `values`; `None` when there are none (or one is not a number).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        Some(Summary {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            n: sorted.len(),
        })
    }

    /// `median [min–max]` with `decimals` decimals.
    pub fn display(&self, decimals: usize) -> String {
        if self.n == 1 || self.min == self.max {
            format!("{:.decimals$}", self.median)
        } else {
            format!(
                "{:.decimals$} [{:.decimals$}–{:.decimals$}]",
                self.median, self.min, self.max
            )
        }
    }
}

/// Ratios of paired measurements (same repetition), summarised: `numerators[i] / denominators[i]`.
/// Pairs whose denominator is zero are left out.
pub fn ratio(numerators: &[f64], denominators: &[f64]) -> Option<Summary> {
    let ratios: Vec<f64> = numerators
        .iter()
        .zip(denominators)
        .filter(|(_, d)| **d != 0.0)
        .map(|(n, d)| n / d)
        .collect();
    Summary::of(&ratios)
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// What was measured, e.g. `provision N=10`.
    pub measure: String,
    /// Unit of the figures (`s`, `MiB`, `writes`, `calls`, `x`).
    pub unit: String,
    /// The floor (raw Docker API), when the measure has one.
    pub floor: Option<Summary>,
    /// The provider (whole stack).
    pub provider: Option<Summary>,
    /// provider / floor, per repetition.
    pub ratio: Option<Summary>,
    /// A remark (what was left out, a mode).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Row {
    /// A row comparing the provider to the floor, with the paired ratio.
    pub fn versus(measure: impl Into<String>, unit: &str, floor: &[f64], provider: &[f64]) -> Row {
        Row {
            measure: measure.into(),
            unit: unit.to_string(),
            floor: Summary::of(floor),
            provider: Summary::of(provider),
            ratio: ratio(provider, floor),
            note: String::new(),
        }
    }

    /// A row with provider figures only.
    pub fn single(measure: impl Into<String>, unit: &str, provider: &[f64]) -> Row {
        Row {
            measure: measure.into(),
            unit: unit.to_string(),
            floor: None,
            provider: Summary::of(provider),
            ratio: None,
            note: String::new(),
        }
    }

    /// The same row with a note.
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

/// The scale curve: seconds per machine against N, for the floor and the provider, from the
/// medians of the provisioning times (`(n, floor, provider)` in seconds for all N machines).
pub fn scale_curve(points: &[(usize, Option<Summary>, Option<Summary>)]) -> Row {
    let per_machine = |n: usize, s: &Option<Summary>| {
        s.map_or("–".to_string(), |s| format!("{:.2}", s.median / n as f64))
    };
    let curve: Vec<String> = points
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, floor, provider)| {
            format!(
                "N={n}: {} / {}",
                per_machine(*n, floor),
                per_machine(*n, provider)
            )
        })
        .collect();
    Row::single("provision per machine", "s", &[]).note(format!(
        "scale curve, floor / provider (medians ÷ N): {}",
        curve.join("; ")
    ))
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The machine and software the figures come from.
    pub machine: String,
    /// Repetitions per figure.
    pub repetitions: usize,
    /// Whether `--quick` shortened the run.
    pub quick: bool,
    /// The figures.
    pub rows: Vec<Row>,
}

fn decimals(unit: &str) -> usize {
    match unit {
        "s" | "x" | "MiB" | "cpu-s" | "load" => 2,
        "cpu-s/s" => 4,
        _ => 1,
    }
}

fn cell(summary: Option<&Summary>, unit: &str) -> String {
    summary.map_or_else(|| "–".to_string(), |s| s.display(decimals(unit)))
}

impl Report {
    /// The report as a Markdown table (median [min–max] per cell).
    pub fn table(&self) -> String {
        let mut lines = vec![
            "| measure | unit | floor | provider | provider / floor | note |".to_string(),
            "|---|---|---|---|---|---|".to_string(),
        ];
        for row in &self.rows {
            lines.push(format!(
                "| {} | {} | {} | {} | {} | {} |",
                row.measure,
                row.unit,
                cell(row.floor.as_ref(), &row.unit),
                cell(row.provider.as_ref(), &row.unit),
                cell(row.ratio.as_ref(), "x"),
                row.note
            ));
        }
        lines.join("\n")
    }

    /// The report as pretty JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_of_odd_and_even_counts() {
        let odd = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max, odd.n), (2.0, 1.0, 3.0, 3));
        let even = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((even.median, even.min, even.max), (2.5, 1.0, 4.0));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn ratios_pair_repetitions_and_skip_zero_floors() {
        let r = ratio(&[2.0, 9.0, 4.0], &[1.0, 3.0, 0.0]).unwrap();
        assert_eq!((r.median, r.min, r.max, r.n), (2.5, 2.0, 3.0, 2));
        assert_eq!(ratio(&[1.0], &[0.0]), None);
    }

    #[test]
    fn the_table_shows_median_and_range_and_dashes_for_missing_figures() {
        let report = Report {
            machine: "test".into(),
            repetitions: 3,
            quick: false,
            rows: vec![
                Row::versus("provision N=10", "s", &[1.0, 1.5, 2.0], &[3.0, 3.0, 5.0]),
                Row::single("writes at rest", "writes", &[0.0]).note("60 s"),
            ],
        };
        let table = report.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| provision N=10 | s | 1.50 [1.00–2.00] | 3.00 [3.00–5.00] | 2.50 [2.00–3.00] |  |"
        );
        assert_eq!(lines[3], "| writes at rest | writes | – | 0.0 | – | 60 s |");
    }

    #[test]
    fn the_scale_curve_divides_the_medians_by_n() {
        let row = scale_curve(&[
            (1, Summary::of(&[0.8, 0.9, 0.7]), Summary::of(&[1.5])),
            (10, Summary::of(&[4.0]), None),
        ]);
        assert_eq!(
            row.note,
            "scale curve, floor / provider (medians ÷ N): N=1: 0.80 / 1.50; N=10: 0.40 / –"
        );
        assert_eq!((row.floor, row.provider, row.ratio), (None, None, None));
    }

    #[test]
    fn the_json_carries_every_figure() {
        let report = Report {
            machine: "m".into(),
            repetitions: 2,
            quick: true,
            rows: vec![Row::versus("lb", "s", &[1.0, 3.0], &[2.0, 3.0])],
        };
        let value: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(value["quick"], true);
        assert_eq!(value["rows"][0]["floor"]["median"], 2.0);
        assert_eq!(value["rows"][0]["provider"]["max"], 3.0);
        assert_eq!(value["rows"][0]["ratio"]["min"], 1.0);
        assert_eq!(value["rows"][0]["ratio"]["max"], 2.0);
        assert!(value["rows"][0].get("note").is_none());
    }
}
