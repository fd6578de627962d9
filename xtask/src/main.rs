//! Developer commands: `cargo xtask ci | tidy | bench`.
//!
//! Avoid adding dependencies: this crate is built by every CI run before anything else.

mod tidy;

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("tidy") => tidy::run(&workspace_root()),
        Some("bench") => bench(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <ci | tidy | bench [http | instances | hoqs | name] | bench faults [options]>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What CI runs: formatting, lints, then every test (tidy included).
fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    tidy::run(&workspace_root())?;
    cargo(&["test", "--workspace", "--no-fail-fast"])
}

/// Runs the benchmarks: `bench http` runs the load benchmarks of the service on loopback
/// (bench/http.sh, wrk), then the data path against pgbench with its profile (bench/data.sh);
/// `bench instances` runs several instances on one database (bench/instances.sh); `bench
/// faults [options]` runs the load tests of the hardening (slow clients, floods, overload, a
/// killed database: bench/faults.py, options passed on; it builds the release binary first);
/// `bench hoqs`
/// runs `POST /data/query` against pgbench running the same SQL (a semi-join and a five-path
/// query) and keyset paging's first page against its last (crates/hf-hoqs/benches/*.sh);
/// anything else is passed to `cargo bench` (criterion benches).
fn bench(names: &[String]) -> Result<(), String> {
    let scripts: &[&str] = match names.first().map(String::as_str) {
        Some("http") => &["bench/http.sh", "bench/data.sh"],
        Some("instances") => &["bench/instances.sh"],
        Some("faults") => return faults(&names[1..]),
        Some("hoqs") => &[
            "crates/hf-hoqs/benches/semi_join_vs_pgbench.sh",
            "crates/hf-hoqs/benches/http_vs_pgbench.sh",
            "crates/hf-hoqs/benches/paging_first_vs_last.sh",
        ],
        _ => &[],
    };
    if !scripts.is_empty() {
        for script in scripts {
            let status = Command::new("bash")
                .arg(workspace_root().join(script))
                .status()
                .map_err(|e| format!("cannot run {script}: {e}"))?;
            if !status.success() {
                return Err(format!("{script} failed ({status})"));
            }
        }
        return Ok(());
    }
    let mut args = vec!["bench", "--workspace"];
    args.extend(names.iter().map(String::as_str));
    cargo(&args)
}

/// `bench faults`: builds the release binaries (hf and the load generator hf-load), then runs
/// bench/faults.py against them.
fn faults(options: &[String]) -> Result<(), String> {
    cargo(&["build", "--release", "-p", "hf", "-p", "hf-load"])?;
    let target = std::env::var("CARGO_TARGET_DIR").map_or_else(
        |_| workspace_root().join("target"),
        std::path::PathBuf::from,
    );
    let status = Command::new("python3")
        .arg(workspace_root().join("bench/faults.py"))
        .arg("--hf")
        .arg(target.join("release/hf"))
        .arg("--load")
        .arg(target.join("release/hf-load"))
        .args(options)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run bench/faults.py: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("bench/faults.py failed ({status})"))
    }
}

fn cargo(args: &[&str]) -> Result<(), String> {
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn workspace_root() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

#[cfg(test)]
mod tests {
    #[test]
    fn tidy() {
        if let Err(message) = super::tidy::run(&super::workspace_root()) {
            panic!("{message}");
        }
    }
}
