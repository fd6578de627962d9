//! `hf compile FILE.hfx [--sidecar FILE.ts]`: compiles a screen on the command line exactly as
//! `POST /hfx/compile` does, for editors, CI checks and benchmarks; no service or database needed.
//!
//! It prints the module to stdout, or every error to stderr as `file:line:column: CODE message`
//! with the source line and a caret under the column, and exits with 1. Files it cannot read (or
//! that are not UTF-8) exit with 2. The compile is `hf_app::compile::compile_screen`, the one the
//! service's route makes too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

/// Flags of `hf compile`.
#[derive(Debug, Clone, Args)]
pub struct CompileArgs {
    /// The HFX screen to compile.
    pub file: PathBuf,
    /// The screen's TypeScript sidecar, which the screen imports as `./sidecar`.
    #[arg(long)]
    pub sidecar: Option<PathBuf>,
    /// Also write the compiled sidecar to this file.
    #[arg(long, requires = "sidecar")]
    pub sidecar_out: Option<PathBuf>,
}

/// Runs `hf compile`; the exit code is the outcome (0 compiled, 1 compile errors, 2 unreadable
/// input or output).
pub fn run(args: &CompileArgs) -> ExitCode {
    let source = match read(&args.file) {
        Ok(text) => text,
        Err(message) => return fail(&message),
    };
    let sidecar = match args.sidecar.as_deref().map(read).transpose() {
        Ok(text) => text,
        Err(message) => return fail(&message),
    };
    let out = match hf_app::compile::compile_screen(&source, sidecar.as_deref()) {
        Ok(out) => out,
        Err(error) => return fail(&error.to_string()),
    };
    let Some(js) = out.js.filter(|_| out.diagnostics.is_empty()) else {
        let mut report = String::new();
        for diagnostic in &out.diagnostics {
            let file = match diagnostic.file {
                hf_hfx::SourceFile::Sidecar => args.sidecar.as_deref().unwrap_or(&args.file),
                _ => &args.file,
            };
            report.push_str(&diagnostic.render_as(&file.display().to_string()));
            report.push('\n');
        }
        let count = out.diagnostics.len();
        let plural = if count == 1 { "" } else { "s" };
        report.push_str(&format!("hf compile: {count} error{plural}\n"));
        // Nothing useful remains to do if stderr is closed.
        let _ = std::io::stderr().write_all(report.as_bytes());
        return ExitCode::from(1);
    };
    if let (Some(path), Some(sidecar_js)) = (&args.sidecar_out, &out.sidecar_js) {
        if let Err(error) = std::fs::write(path, sidecar_js) {
            return fail(&format!("cannot write {}: {error}", path.display()));
        }
    }
    match std::io::stdout().write_all(js.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&format!("cannot write the module: {error}")),
    }
}

/// Runs `hf compile-worker`, the process `hf serve` compiles one screen in (see
/// `hf_app::compile`): the screen as JSON on stdin, the result as JSON on stdout. Exits with 1,
/// saying why on stderr, when it could not answer.
pub fn run_worker() -> ExitCode {
    match hf_app::compile::run_worker(std::io::stdin().lock(), std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Nothing useful remains to do if stderr is closed.
            let _ = writeln!(std::io::stderr(), "hf compile-worker: {error}");
            ExitCode::from(1)
        }
    }
}

/// Reads a source file, refusing bytes that are not UTF-8 with the offset of the first bad one.
fn read(path: &Path) -> Result<String, String> {
    let bytes =
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "{} is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            error.utf8_error().valid_up_to()
        )
    })
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "hf compile: {message}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path, screen: &str, sidecar: Option<&str>) -> CompileArgs {
        let file = dir.join("screen.hfx");
        std::fs::write(&file, screen).unwrap();
        let sidecar = sidecar.map(|text| {
            let path = dir.join("sidecar.ts");
            std::fs::write(&path, text).unwrap();
            path
        });
        CompileArgs {
            file,
            sidecar_out: sidecar.as_ref().map(|_| dir.join("sidecar.js")),
            sidecar,
        }
    }

    #[test]
    fn exit_codes_tell_success_compile_errors_and_unreadable_input_apart() {
        let dir = std::env::temp_dir().join(format!("hf-compile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = args(
            &dir,
            "<script>import { f } from './sidecar';</script><p>{f()}</p>",
            Some("export const f = (): number => 1;"),
        );
        assert_eq!(run(&ok), ExitCode::SUCCESS);
        let written = std::fs::read_to_string(dir.join("sidecar.js")).unwrap();
        assert!(written.contains("export const f = () => 1"), "{written}");
        assert_eq!(run(&args(&dir, "<p>{1 +* 2}</p>", None)), ExitCode::from(1));
        assert_eq!(
            run(&args(&dir, "<p/>", Some("export const x = ;"))),
            ExitCode::from(1)
        );
        let mut bad = args(&dir, "", None);
        std::fs::write(&bad.file, b"<p>\xff</p>").unwrap();
        assert_eq!(run(&bad), ExitCode::from(2));
        bad.file = dir.join("missing.hfx");
        assert_eq!(run(&bad), ExitCode::from(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
