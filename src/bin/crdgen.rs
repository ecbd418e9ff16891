//! Writes the provider's CRDs to `config/crd/bases/`, or with `--check` verifies that the
//! committed files match what would be written (CI's drift check).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use capd::api::crd;
use capd::runtime::error_chain;

/// Folder of the generated CRDs, relative to the crate root.
const BASES: &str = "config/crd/bases";

fn usage() -> ExitCode {
    eprintln!("usage: crdgen [--check] [--out DIR]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut check = false;
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR")).join(BASES);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--out" => match args.next() {
                Some(dir) => out = PathBuf::from(dir),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    let files = match crd::all().and_then(|crds| {
        crds.iter()
            .map(|c| Ok((crd::file_name(c), crd::to_yaml(c)?)))
            .collect::<Result<Vec<_>, crd::CrdError>>()
    }) {
        Ok(files) => files,
        Err(error) => {
            eprintln!("crdgen: {}", error_chain(&error));
            return ExitCode::FAILURE;
        }
    };
    if check {
        let mut stale: Vec<String> = files
            .iter()
            .filter(|(name, yaml)| {
                std::fs::read_to_string(out.join(name)).ok().as_ref() != Some(yaml)
            })
            .map(|(name, _)| out.join(name).display().to_string())
            .collect();
        stale.extend(leftovers(&out, &files));
        if stale.is_empty() {
            println!(
                "crdgen: {} CRDs in {} are up to date",
                files.len(),
                out.display()
            );
            return ExitCode::SUCCESS;
        }
        for path in &stale {
            eprintln!("crdgen: stale or missing {path}");
        }
        eprintln!("crdgen: run `cargo run --bin crdgen` and commit the result");
        return ExitCode::FAILURE;
    }
    if let Err(error) = std::fs::create_dir_all(&out) {
        eprintln!("crdgen: failed to create {}: {error}", out.display());
        return ExitCode::FAILURE;
    }
    for (name, yaml) in &files {
        let path = out.join(name);
        if let Err(error) = std::fs::write(&path, yaml) {
            eprintln!("crdgen: failed to write {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        println!("crdgen: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

/// Files in `dir` that look like our CRDs but are no longer generated.
fn leftovers(dir: &Path, files: &[(String, String)]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut extra: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(capd::api::GROUP) && name.ends_with(".yaml"))
        .filter(|name| !files.iter().any(|(generated, _)| generated == name))
        .map(|name| {
            format!(
                "{} (no longer generated: delete it)",
                dir.join(name).display()
            )
        })
        .collect();
    extra.sort();
    extra
}
