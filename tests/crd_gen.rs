//! The `crdgen` binary: writes the CRDs, and `--check` fails (naming the file) when a committed
//! CRD is stale, missing or left over.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn crdgen(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_crdgen"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn check_passes_on_fresh_output_and_names_every_stale_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();

    let missing = crdgen(&["--check", "--out", out]);
    assert!(
        !missing.status.success(),
        "check must fail when nothing was generated"
    );

    let write = crdgen(&["--out", out]);
    assert!(
        write.status.success(),
        "{}",
        String::from_utf8_lossy(&write.stderr)
    );
    let machines = dir
        .path()
        .join("infrastructure.cluster.x-k8s.io_dockermachines.yaml");
    assert!(machines.is_file());
    let first = std::fs::read_to_string(&machines).unwrap();

    let ok = crdgen(&["--check", "--out", out]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    // Deterministic: writing again gives byte-identical files.
    assert!(crdgen(&["--out", out]).status.success());
    assert_eq!(std::fs::read_to_string(&machines).unwrap(), first);

    std::fs::write(&machines, first.replace("maxLength: 512", "maxLength: 511")).unwrap();
    let leftover = dir
        .path()
        .join("infrastructure.cluster.x-k8s.io_oldkinds.yaml");
    std::fs::write(&leftover, "---\n").unwrap();
    let stale = crdgen(&["--check", "--out", out]);
    assert!(!stale.status.success());
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(
        stderr.contains("infrastructure.cluster.x-k8s.io_dockermachines.yaml"),
        "{stderr}"
    );
    assert!(
        stderr.contains("infrastructure.cluster.x-k8s.io_oldkinds.yaml"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("dockerclusters.yaml"),
        "fresh files must not be reported: {stderr}"
    );
}

#[test]
fn unknown_arguments_are_rejected() {
    let output = crdgen(&["--frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage"));
}
