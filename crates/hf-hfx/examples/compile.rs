//! Embedding the HFX compiler: `cargo run -p hf-hfx --example compile -- FILE.hfx [SIDECAR.ts]`
//! prints the compiled module, or the diagnostics with a caret under the column.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: compile FILE.hfx [SIDECAR.ts]");
        return ExitCode::from(2);
    };
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map_err(|e| eprintln!("{p}: {e}"))
            .ok()
    };
    let Some(source) = read(path) else {
        return ExitCode::from(2);
    };
    let sidecar = match args.get(1) {
        Some(p) => match read(p) {
            Some(s) => Some(s),
            None => return ExitCode::from(2),
        },
        None => None,
    };

    let out = hf_hfx::compile(&source, sidecar.as_deref());
    if let Some(js) = &out.js {
        println!("// contentHash {}", out.content_hash);
        print!("{js}");
        if let Some(sidecar) = &out.sidecar_js {
            println!("// ---- sidecar\n{sidecar}");
        }
        return ExitCode::SUCCESS;
    }
    for diagnostic in &out.diagnostics {
        eprintln!("{}", diagnostic.render());
    }
    ExitCode::FAILURE
}
