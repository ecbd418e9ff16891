//! Which `kindest/node` image runs a Kubernetes version, and how (the kind "mode").
//!
//! kind releases build node images that must be started in a matching way: images built by
//! kind ≥ 0.20 need a private cgroup namespace and two kubelet flags. The table in [`table`] lists
//! the pre-built images with their mode; [`mapping`] picks one as CAPD does, falling back to a
//! best guess (`kindest/node:v<version>`, newest mode) for versions the table does not know.

mod table;

use std::fmt;

/// Repository of the kind node images.
pub const NODE_IMAGE_REPOSITORY: &str = "kindest/node";

/// How an image must be run, grouping kind releases that run images the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KindMode {
    /// Not a node image (the load balancer).
    None,
    /// Images built by kind 0.19 and older.
    Kind0_19,
    /// Images built by kind 0.20 and newer: private cgroup namespace.
    Kind0_20,
}

impl KindMode {
    /// The newest mode, used for best guesses.
    pub const LATEST: KindMode = KindMode::Kind0_20;

    /// Whether containers of this mode get a private cgroup namespace.
    pub fn private_cgroupns(self) -> bool {
        self == KindMode::Kind0_20
    }

    /// Kubelet flags (name, value) the bootstrap must add for this mode.
    pub fn kubelet_extra_args(self) -> &'static [(&'static str, &'static str)] {
        match self {
            KindMode::Kind0_20 => &[
                ("cgroup-root", "/kubelet"),
                ("runtime-cgroups", "/system.slice/containerd.service"),
            ],
            KindMode::Kind0_19 | KindMode::None => &[],
        }
    }
}

impl fmt::Display for KindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KindMode::None => "None",
            KindMode::Kind0_19 => "kind 0.19",
            KindMode::Kind0_20 => "kind 0.20",
        })
    }
}

/// One pre-built image of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prebuilt {
    /// kind release that built the image.
    pub kind: &'static str,
    /// Kubernetes version of the image.
    pub version: &'static str,
    /// How to run it.
    pub mode: KindMode,
    /// sha256 digest of the image.
    pub digest: &'static str,
}

impl Prebuilt {
    /// The pinned image reference `kindest/node:v<version>@sha256:<digest>`.
    pub fn image(&self) -> String {
        format!(
            "{NODE_IMAGE_REPOSITORY}:v{}@sha256:{}",
            self.version, self.digest
        )
    }
}

/// The image to run for a Kubernetes version and how to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Kubernetes version the mapping is for.
    pub kubernetes_version: String,
    /// How to run the image.
    pub mode: KindMode,
    /// Image reference.
    pub image: String,
}

/// Errors of the kind mapping.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// The Kubernetes version is not `[v]MAJOR.MINOR.PATCH[-pre][+build]`.
    #[error("parse kubernetes version {version:?}")]
    InvalidVersion {
        /// The text given.
        version: String,
    },
}

impl KindError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidVersion { .. } => "invalid_version",
        }
    }
}

/// A parsed semantic version (only what the mapping needs).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
}

fn parse_version(text: &str) -> Option<Version> {
    let core = text.trim().strip_prefix('v').unwrap_or(text.trim());
    let (core, _build) = core.split_once('+').unwrap_or((core, ""));
    let (core, pre) = core.split_once('-').unwrap_or((core, ""));
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some(Version {
        major,
        minor,
        patch,
        pre: pre.to_string(),
    })
}

/// The pre-built images known to this provider, newest kind release first.
pub fn prebuilt_images() -> impl Iterator<Item = Prebuilt> {
    table::RELEASES.iter().flat_map(|(kind, mode, images)| {
        images.iter().map(move |(version, digest)| Prebuilt {
            kind,
            version,
            mode: *mode,
            digest,
        })
    })
}

/// The fallback image for a version: `kindest/node:v<version>` with `+` replaced by `_`
/// (OCI tags cannot hold `+`).
pub fn fallback_image(version: &str) -> String {
    let version = version.trim();
    let version = version.strip_prefix('v').unwrap_or(version);
    format!("{NODE_IMAGE_REPOSITORY}:v{}", version.replace('+', "_"))
}

/// Picks the node image and mode for `version`, honouring a custom image.
///
/// In order: a custom image found in the table gets that entry; else the first entry with the
/// same major.minor and the same patch (when the version has no pre-release) gets its mode (its
/// image unless a custom image is set); a version newer than any known patch of its minor gets
/// the best guess with the newest mode; otherwise the best guess takes the mode of the oldest
/// matching entry seen. Best guess = custom image or [`fallback_image`].
///
/// # Errors
/// [`KindError::InvalidVersion`] when `version` is not a semantic version.
pub fn mapping(version: &str, custom_image: Option<&str>) -> Result<Mapping, KindError> {
    let wanted = parse_version(version).ok_or_else(|| KindError::InvalidVersion {
        version: version.to_string(),
    })?;
    let custom_image = custom_image.map(str::trim).filter(|i| !i.is_empty());
    if let Some(custom) = custom_image
        && let Some(entry) = prebuilt_images().find(|e| e.image() == custom)
    {
        return Ok(Mapping {
            kubernetes_version: entry.version.to_string(),
            mode: entry.mode,
            image: entry.image(),
        });
    }
    let display_version = version.trim().strip_prefix('v').unwrap_or(version.trim());
    let mut best_guess = Mapping {
        kubernetes_version: display_version.to_string(),
        mode: KindMode::LATEST,
        image: custom_image.map_or_else(|| fallback_image(version), str::to_string),
    };
    for entry in prebuilt_images() {
        let Some(known) = parse_version(entry.version) else {
            continue;
        };
        if (known.major, known.minor) != (wanted.major, wanted.minor) {
            continue;
        }
        if known.patch == wanted.patch && wanted.pre.is_empty() {
            return Ok(Mapping {
                kubernetes_version: entry.version.to_string(),
                mode: entry.mode,
                image: custom_image.map_or_else(|| entry.image(), str::to_string),
            });
        }
        if wanted.patch > known.patch {
            return Ok(best_guess);
        }
        best_guess.mode = entry.mode;
    }
    Ok(best_guess)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_version_gets_the_newest_prebuilt_image() {
        let m = mapping("v1.31.0", None).unwrap();
        assert_eq!(
            m.image,
            "kindest/node:v1.31.0@sha256:53df588e04085fd41ae12de0c3fe4c72f7013bba32a20e7325357a1ac94ba865"
        );
        assert_eq!(m.mode, KindMode::Kind0_20);
        // 1.32.0 was built by kind 0.25 and rebuilt by 0.26: the newer build wins.
        assert!(
            mapping("1.32.0", None)
                .unwrap()
                .image
                .contains("c48c62eac5da")
        );
    }

    #[test]
    fn old_images_run_in_kind_0_19_mode() {
        let m = mapping("v1.27.1", None).unwrap();
        assert_eq!(m.mode, KindMode::Kind0_19);
        assert!(!m.mode.private_cgroupns());
        let m = mapping("v1.19.16", None).unwrap();
        assert_eq!(m.mode, KindMode::Kind0_19);
    }

    #[test]
    fn custom_image_in_table_takes_its_entry() {
        let old = "kindest/node:v1.27.1@sha256:b7d12ed662b873bd8510879c1846e87c7e676a79fefc93e17b2a52989d3ff42b";
        let m = mapping("v1.30.0", Some(old)).unwrap();
        assert_eq!(m.image, old);
        assert_eq!(m.mode, KindMode::Kind0_19);
        assert_eq!(m.kubernetes_version, "1.27.1");
    }

    #[test]
    fn custom_image_wins_for_a_known_version() {
        let m = mapping("v1.31.0", Some("registry.local/node:v1.31.0")).unwrap();
        assert_eq!(m.image, "registry.local/node:v1.31.0");
        assert_eq!(m.mode, KindMode::Kind0_20);
    }

    #[test]
    fn unknown_newer_patch_is_a_best_guess() {
        let m = mapping("v1.31.99", None).unwrap();
        assert_eq!(m.image, "kindest/node:v1.31.99");
        assert_eq!(m.mode, KindMode::Kind0_20);
    }

    #[test]
    fn unknown_older_patch_takes_the_oldest_matching_mode() {
        // Older than every 1.26 image but 1.26.0; the oldest newer ones (kind 0.19/0.18) run in 0.19 mode.
        let m = mapping("v1.26.1", None).unwrap();
        assert_eq!(m.image, "kindest/node:v1.26.1");
        assert_eq!(m.mode, KindMode::Kind0_19);
    }

    #[test]
    fn pre_releases_and_build_metadata_use_fallback_tags() {
        let m = mapping("v1.40.0-alpha.1+abc", None).unwrap();
        assert_eq!(m.image, "kindest/node:v1.40.0-alpha.1_abc");
        assert_eq!(m.mode, KindMode::LATEST);
        // A pre-release of a known patch is not the released image.
        let m = mapping("v1.31.0-rc.1", None).unwrap();
        assert_eq!(m.image, "kindest/node:v1.31.0-rc.1");
    }

    #[test]
    fn bad_versions_are_errors() {
        for bad in ["", "1.31", "v1.x.0", "1.31.0.1", "latest"] {
            let err = mapping(bad, None).unwrap_err();
            assert_eq!(err.category(), "invalid_version", "{bad}");
        }
    }

    #[test]
    fn mode_flags() {
        assert_eq!(KindMode::Kind0_20.kubelet_extra_args().len(), 2);
        assert!(KindMode::Kind0_19.kubelet_extra_args().is_empty());
        assert_eq!(KindMode::Kind0_20.to_string(), "kind 0.20");
    }

    #[test]
    fn table_digests_are_well_formed() {
        for entry in prebuilt_images() {
            assert_eq!(entry.digest.len(), 64, "{}", entry.version);
            assert!(entry.digest.chars().all(|c| c.is_ascii_hexdigit()));
            assert!(parse_version(entry.version).is_some());
        }
    }
}
