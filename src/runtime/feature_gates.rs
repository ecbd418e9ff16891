//! `--feature-gates`: the Cluster API feature gates CAPD's binary knows, with its defaults.
//!
//! The flag value is a comma-separated list of `Name=bool` (Go's `strconv.ParseBool` spellings).
//! An unknown gate is an error, as in Kubernetes' component-base: a typo must not be silently
//! ignored. Gates that only matter to Cluster API core are accepted so that manifests passing
//! them keep working; this provider does not act on them.

use std::fmt;
use std::str::FromStr;

/// A feature gate known to the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// `MachinePool` (beta, on by default): machine pools.
    MachinePool,
    /// `ClusterTopology` (alpha, off by default): ClusterClass and managed topologies.
    ClusterTopology,
    /// `PriorityQueue`: reconcile fresh events before periodic resyncs.
    PriorityQueue,
    /// `ReconcilerRateLimiting`: rate-limit reconciles per object.
    ReconcilerRateLimiting,
    /// `KubeadmBootstrapFormatIgnition` (alpha, off by default): Ignition bootstrap data.
    KubeadmBootstrapFormatIgnition,
    /// `RuntimeSDK` (alpha, off by default): accepted for manifests shared with Cluster API core.
    RuntimeSdk,
    /// `InPlaceUpdates` (alpha, off by default): accepted for manifests shared with Cluster API core.
    InPlaceUpdates,
    /// `MachineTaintPropagation` (alpha, off by default): accepted for shared manifests.
    MachineTaintPropagation,
    /// `MachineSetPreflightChecks` (beta, on by default): accepted for shared manifests.
    MachineSetPreflightChecks,
}

impl Feature {
    /// Every known gate, in the order `--help` and logs list them.
    pub const ALL: [Feature; 9] = [
        Feature::MachinePool,
        Feature::ClusterTopology,
        Feature::PriorityQueue,
        Feature::ReconcilerRateLimiting,
        Feature::KubeadmBootstrapFormatIgnition,
        Feature::RuntimeSdk,
        Feature::InPlaceUpdates,
        Feature::MachineTaintPropagation,
        Feature::MachineSetPreflightChecks,
    ];

    /// The gate's name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Feature::MachinePool => "MachinePool",
            Feature::ClusterTopology => "ClusterTopology",
            Feature::PriorityQueue => "PriorityQueue",
            Feature::ReconcilerRateLimiting => "ReconcilerRateLimiting",
            Feature::KubeadmBootstrapFormatIgnition => "KubeadmBootstrapFormatIgnition",
            Feature::RuntimeSdk => "RuntimeSDK",
            Feature::InPlaceUpdates => "InPlaceUpdates",
            Feature::MachineTaintPropagation => "MachineTaintPropagation",
            Feature::MachineSetPreflightChecks => "MachineSetPreflightChecks",
        }
    }

    /// Whether the gate is on when the flag does not mention it.
    pub fn enabled_by_default(self) -> bool {
        match self {
            Feature::MachinePool
            | Feature::PriorityQueue
            | Feature::ReconcilerRateLimiting
            | Feature::MachineSetPreflightChecks => true,
            Feature::ClusterTopology
            | Feature::KubeadmBootstrapFormatIgnition
            | Feature::RuntimeSdk
            | Feature::InPlaceUpdates
            | Feature::MachineTaintPropagation => false,
        }
    }

    /// Position in [`Feature::ALL`] (declaration order).
    fn index(self) -> usize {
        self as usize
    }

    fn from_name(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Why a `--feature-gates` value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// The gate name is not one the manager knows.
    #[error("unrecognized feature gate {name:?} (known gates: {known})")]
    Unknown {
        /// The name as given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// An entry had no `=bool` part.
    #[error("missing bool value for feature gate {0:?} (write {0}=true or {0}=false)")]
    MissingValue(String),
    /// The value after `=` is not a boolean.
    #[error("invalid value {value:?} for feature gate {name}: expected true or false")]
    InvalidValue {
        /// The gate name.
        name: String,
        /// The value that did not parse.
        value: String,
    },
}

/// The effective state of every known feature gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    enabled: [bool; Feature::ALL.len()],
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            enabled: Feature::ALL.map(Feature::enabled_by_default),
        }
    }
}

impl FeatureGates {
    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.enabled[feature.index()]
    }

    /// Turns `feature` on or off.
    pub fn set(&mut self, feature: Feature, on: bool) {
        self.enabled[feature.index()] = on;
    }
}

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, raw)) = entry.split_once('=') else {
                return Err(FeatureGateError::MissingValue(entry.to_owned()));
            };
            let name = name.trim();
            let feature = Feature::from_name(name).ok_or_else(|| FeatureGateError::Unknown {
                name: name.to_owned(),
                known: Feature::ALL.map(Feature::name).join(", "),
            })?;
            let on = parse_go_bool(raw.trim()).ok_or_else(|| FeatureGateError::InvalidValue {
                name: name.to_owned(),
                value: raw.trim().to_owned(),
            })?;
            gates.set(feature, on);
        }
        Ok(gates)
    }
}

impl fmt::Display for FeatureGates {
    /// `Name=bool` for every gate, comma-separated: the form the flag accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, feature) in Feature::ALL.into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}={}", feature.name(), self.enabled(feature))?;
        }
        Ok(())
    }
}

/// A boolean as Go's `strconv.ParseBool` reads it: `1`, `t`, `T`, `TRUE`, `true`, `True` and
/// their `0`/`f`/`false` counterparts, nothing else (no spaces, no `yes`). The one parser of the
/// manager's boolean flags and feature gate values.
pub(crate) fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_capd() {
        let gates = FeatureGates::default();
        assert!(gates.enabled(Feature::MachinePool));
        assert!(!gates.enabled(Feature::ClusterTopology));
        assert!(gates.enabled(Feature::PriorityQueue));
        assert!(gates.enabled(Feature::ReconcilerRateLimiting));
        assert!(!gates.enabled(Feature::KubeadmBootstrapFormatIgnition));
    }

    #[test]
    fn the_capd_manifest_value_parses() {
        let gates: FeatureGates = "MachinePool=false,ClusterTopology=true".parse().unwrap();
        assert!(!gates.enabled(Feature::MachinePool));
        assert!(gates.enabled(Feature::ClusterTopology));
        assert!(
            gates.enabled(Feature::PriorityQueue),
            "unmentioned gates keep their default"
        );
    }

    #[test]
    fn accepts_go_bool_spellings_spaces_and_an_empty_value() {
        let gates: FeatureGates = " PriorityQueue = 0 , KubeadmBootstrapFormatIgnition=T,"
            .parse()
            .unwrap();
        assert!(!gates.enabled(Feature::PriorityQueue));
        assert!(gates.enabled(Feature::KubeadmBootstrapFormatIgnition));
        assert_eq!("".parse::<FeatureGates>().unwrap(), FeatureGates::default());
    }

    #[test]
    fn go_bool_spellings_are_the_only_booleans() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(yes), Some(true), "{yes:?}");
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(no), Some(false), "{no:?}");
        }
        // strconv.ParseBool refuses these too.
        for refused in [
            "", "tRUE", "fAlse", "yes", "no", "on", "2", "-1", " true", "true\n",
        ] {
            assert_eq!(parse_go_bool(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn unknown_gate_is_a_clear_error_listing_the_known_ones() {
        let err = "MachinePools=true".parse::<FeatureGates>().unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("unrecognized feature gate \"MachinePools\""),
            "{message}"
        );
        assert!(
            message.contains("MachinePool, ClusterTopology"),
            "{message}"
        );
    }

    #[test]
    fn malformed_entries_are_rejected() {
        assert_eq!(
            "MachinePool".parse::<FeatureGates>(),
            Err(FeatureGateError::MissingValue("MachinePool".into()))
        );
        assert_eq!(
            "MachinePool=yes".parse::<FeatureGates>(),
            Err(FeatureGateError::InvalidValue {
                name: "MachinePool".into(),
                value: "yes".into()
            })
        );
    }

    #[test]
    fn display_round_trips() {
        let gates: FeatureGates = "ClusterTopology=true".parse().unwrap();
        let shown = gates.to_string();
        assert!(
            shown.starts_with("MachinePool=true,ClusterTopology=true,"),
            "{shown}"
        );
        assert_eq!(shown.parse::<FeatureGates>().unwrap(), gates);
    }
}
