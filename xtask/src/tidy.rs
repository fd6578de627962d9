//! Architecture rules as a check: the dependency table of docs/ARCHITECTURE.md against the real
//! dependency graph, HTTP staying in the server, embeddable crates staying small, and the
//! house rules for manifests and source files.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Crates allowed to reach HTTP libraries.
const HTTP_CRATES: &[&str] = &["hf-server", "hf-testkit", "hf-tests", "hf"];
/// External packages that mean "knows HTTP".
const HTTP_PACKAGES: &[&str] = &[
    "actix-web",
    "actix-http",
    "actix-server",
    "utoipa",
    "utoipa-actix-web",
];
/// External packages an embeddable crate must not pull in.
const RUNTIME_PACKAGES: &[&str] = &[
    "tokio",
    "deadpool",
    "deadpool-postgres",
    "actix-web",
    "actix-rt",
];

/// Runs every check and reports all failures at once.
pub fn run(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    let allowed = allowed_dependencies(root, &mut problems);
    let members = workspace_members(root);
    for (name, dir) in &members {
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        check_manifest(name, &manifest, &allowed, &members, &mut problems);
        check_sources(dir, &mut problems);
    }
    for name in members.keys() {
        if HTTP_CRATES.contains(&name.as_str()) || name == "xtask" {
            continue;
        }
        let reached = cargo_tree(root, name, &[], &mut problems);
        for package in HTTP_PACKAGES {
            if reached.contains(*package) {
                problems.push(format!(
                    "{name} reaches {package}: only {HTTP_CRATES:?} may know HTTP"
                ));
            }
        }
    }
    for (name, flags) in [
        ("hf-hfx", &[][..]),
        ("hf-ddl", &["--no-default-features"][..]),
    ] {
        if !members.contains_key(name) {
            continue;
        }
        let reached = cargo_tree(root, name, flags, &mut problems);
        for package in RUNTIME_PACKAGES {
            if reached.contains(*package) {
                problems.push(format!(
                    "{name} {} reaches {package}; it must stay embeddable",
                    flags.join(" ")
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "tidy found {} problem(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ))
    }
}

/// Reads the dependency table between the tidy markers of docs/ARCHITECTURE.md.
fn allowed_dependencies(
    root: &Path,
    problems: &mut Vec<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let doc = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap_or_default();
    let table = doc
        .split("<!-- tidy:dependencies -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- /tidy:dependencies -->").next())
        .unwrap_or_else(|| {
            problems.push("docs/ARCHITECTURE.md lacks the tidy:dependencies table".to_owned());
            ""
        });
    let mut allowed = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(name), Some(deps)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        if *name == "crate" || name.starts_with("---") {
            continue;
        }
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        allowed.insert((*name).to_owned(), deps);
    }
    allowed
}

/// Package name → directory, for every workspace member.
fn workspace_members(root: &Path) -> BTreeMap<String, std::path::PathBuf> {
    let mut members = BTreeMap::new();
    for group in ["crates", "bins"] {
        let Ok(entries) = fs::read_dir(root.join(group)) else {
            continue;
        };
        for entry in entries.flatten() {
            let manifest = fs::read_to_string(entry.path().join("Cargo.toml")).unwrap_or_default();
            if let Some(name) = package_name(&manifest) {
                members.insert(name, entry.path());
            }
        }
    }
    members.insert("xtask".to_owned(), root.join("xtask"));
    members
}

fn package_name(manifest: &str) -> Option<String> {
    manifest
        .lines()
        .find(|line| line.trim_start().starts_with("name ="))
        .and_then(|line| line.split('"').nth(1))
        .map(str::to_owned)
}

fn check_manifest(
    name: &str,
    manifest: &str,
    allowed: &BTreeMap<String, BTreeSet<String>>,
    members: &BTreeMap<String, std::path::PathBuf>,
    problems: &mut Vec<String>,
) {
    let Some(allowed_here) = allowed.get(name) else {
        problems.push(format!(
            "{name} is not in the dependency table of docs/ARCHITECTURE.md"
        ));
        return;
    };
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        let Some(dep) = line.split(['.', ' ', '=']).next() else {
            continue;
        };
        if !members.contains_key(dep) || dep == name {
            continue;
        }
        let via_workspace = line == format!("{dep}.workspace = true")
            || line.starts_with(&format!("{dep} = {{ workspace = true"));
        if !via_workspace {
            problems.push(format!(
                "{name}: write the internal dependency as `{dep}.workspace = true`"
            ));
        }
        if section == "[dependencies]" && !allowed_here.contains(dep) {
            problems.push(format!(
                "{name} depends on {dep}, which docs/ARCHITECTURE.md does not allow"
            ));
        }
    }
}

fn check_sources(dir: &Path, problems: &mut Vec<String>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let file_name = entry.file_name();
            if path.is_dir() {
                if file_name != "target" && file_name != "node_modules" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).unwrap_or_default();
                if !text.trim_start().starts_with("//!") {
                    problems.push(format!(
                        "{} does not start with a `//!` comment",
                        path.display()
                    ));
                }
            }
        }
    }
}

/// The set of package names a crate reaches through normal dependencies.
fn cargo_tree(
    root: &Path,
    package: &str,
    flags: &[&str],
    problems: &mut Vec<String>,
) -> BTreeSet<String> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            package,
        ])
        .args(flags)
        .current_dir(root)
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            problems.push(format!(
                "cargo tree -p {package} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
            return BTreeSet::new();
        }
        Err(error) => {
            problems.push(format!("cannot run cargo tree: {error}"));
            return BTreeSet::new();
        }
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}
