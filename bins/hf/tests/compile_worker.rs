//! `hf compile-worker`, the process `hf serve` compiles each screen in: run as the service runs
//! it (through `hf_app::Compiler` with process isolation), it must answer exactly what a compile
//! on a thread answers, diagnostics and their positions included.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use hf_app::compile::{compile_screen, Isolation};
use hf_app::Compiler;
use hf_hfx::CompileOptions;

#[tokio::test]
async fn a_worker_process_compiles_as_a_thread_does() {
    let compiler = Compiler::new(
        Isolation::Process {
            program: env!("CARGO_BIN_EXE_hf").into(),
            args: vec!["compile-worker".to_owned()],
        },
        Duration::from_secs(60),
    );
    let with_sidecar = "<script>import { f } from './sidecar';</script>\n<p>{f()}</p>\n";
    let cases = [
        ("<script>let n = 1;</script>\n<p>{n} é 😀</p>\n", None),
        ("<p>{</p>", None),
        (with_sidecar, Some("export const f = (): number => 1;\n")),
        (with_sidecar, Some("export const f = (: number => 1;\n")),
    ];
    for (source, sidecar) in cases {
        let answered = compiler
            .compile(
                source.to_owned(),
                sidecar.map(str::to_owned),
                CompileOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            answered,
            compile_screen(source, sidecar).unwrap(),
            "{source}"
        );
    }
    let with_options = CompileOptions {
        sidecar_url: Some("./abc-crm-home.sidecar.js".to_owned()),
        vendor_base: Some("/hfx/vendor/abc/crm/".to_owned()),
    };
    let answered = compiler
        .compile(
            "<script>import c from 'chart.js'; import { f } from './sidecar';</script>\n<p>{c}{f()}</p>\n".to_owned(),
            Some("export const f = () => 1;\n".to_owned()),
            with_options.clone(),
        )
        .await
        .unwrap();
    let js = answered.js.unwrap();
    assert!(js.contains("./abc-crm-home.sidecar.js"), "{js}");
    assert!(js.contains("/hfx/vendor/abc/crm/chart.js"), "{js}");
}

#[test]
fn the_worker_refuses_input_that_is_not_a_screen() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_hf"))
        .arg("compile-worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"source\": 1}")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.starts_with("hf compile-worker: "), "{message}");
}
