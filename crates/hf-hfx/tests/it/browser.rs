//! Compiled screens in a real browser: compiles fixture screens, serves them, the runtime and a
//! small fake `/data` API from a local HTTP server on a free port, and runs
//! `browser-tests/run.mjs` (playwright-core driving headless Chromium).
//!
//! Skips, with a message, only when node or Chromium is not installed (see
//! `browser-tests/README.md`); installs the npm dependencies itself when they are missing.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use hf_hfx::{compile_with, CompileOptions};

const SCREENS: &[&str] = &[
    "counter",
    "each_keyed",
    "if_else",
    "bind_value",
    "escaping",
    "with_sidecar",
    "query_list",
    "form_record",
    "class_directive_scoped",
    "card",
    "list_view",
    "rating",
    "composition",
    "ticker",
    "stepper",
    "lifecycle",
    "await_key",
    "big_list",
    "typed_binds",
    "form_conflict",
    "query_options",
    "effect_loop",
    "text_field",
    "instance_api",
];
const COMMIT: &str = "0000000000000000000000000000000000000000";
const TOKEN: &str = "test-token";

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>hfx test</title></head>
<body><div id="app"></div>
<script type="module">
import { mount, configure } from "/hfx/vendor/hfx-runtime.js";
configure({ token: "test-token" });
const name = new URLSearchParams(location.search).get("screen");
const mod = await import(`/hfx/modules/0000000000000000000000000000000000000000-demo-${name}.js`);
window.hfxApp = mount(mod.default, document.getElementById("app"), {});
window.hfxReady = true;
</script></body></html>
"#;

type Files = HashMap<String, (&'static str, String)>;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn compiled_files() -> Files {
    let mut files = Files::new();
    files.insert(
        "/page.html".into(),
        ("text/html; charset=utf-8", PAGE.into()),
    );
    files.insert(
        "/hfx/vendor/hfx-runtime.js".into(),
        (
            "text/javascript",
            hf_hfx::vendor_file("hfx-runtime.js").unwrap().into(),
        ),
    );
    let fixtures = crate_dir().join("../../fixtures/hfx/ok");
    for name in SCREENS {
        let source = std::fs::read_to_string(fixtures.join(format!("{name}.hfx"))).unwrap();
        let sidecar = std::fs::read_to_string(fixtures.join(format!("{name}.ts"))).ok();
        let stem = format!("{COMMIT}-demo-{name}");
        let options = CompileOptions {
            sidecar_url: Some(format!("./{stem}.sidecar.js")),
            ..Default::default()
        };
        let out = compile_with(&source, sidecar.as_deref(), &options);
        assert!(out.diagnostics.is_empty(), "{name}: {:?}", out.diagnostics);
        files.insert(
            format!("/hfx/modules/{stem}.js"),
            ("text/javascript", out.js.unwrap()),
        );
        if let Some(js) = out.sidecar_js {
            files.insert(
                format!("/hfx/modules/{stem}.sidecar.js"),
                ("text/javascript", js),
            );
        }
    }
    files
}

/// Record 1 of the fake API: its version (the `ETag`) and name.
static RECORD_ONE: std::sync::Mutex<(u64, String)> = std::sync::Mutex::new((1, String::new()));

/// One response of the fake API: status, JSON and an `ETag`.
type Answer = (u16, String, Option<String>);

/// Record 1 (`GET`, `PATCH`, `DELETE /data/crm/account/1`) with versions: a write whose
/// `If-Match` names another version is 412 `PRECONDITION_FAILED`.
fn record_one(method: &str, if_match: Option<&str>, body: &str) -> Answer {
    let mut record = RECORD_ONE.lock().unwrap();
    if record.1.is_empty() {
        record.1 = "Acme".into();
    }
    let stale = if_match.is_some_and(|tag| tag != format!("\"{}\"", record.0));
    if method != "GET" && stale {
        return (412, r#"{"errors":[{"code":"PRECONDITION_FAILED","message":"The record was changed by someone else","scope":"record","target":null}]}"#.into(), None);
    }
    if method == "PATCH" {
        if let Some(name) = body
            .split("\"name\":\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
        {
            record.1 = name.to_string();
        }
        record.0 += 1;
    }
    if method == "DELETE" {
        return (204, String::new(), None);
    }
    let json = format!(
        r#"{{"id":"1","name":"{}","createdAt":"2024-01-01T00:00:00Z","updatedAt":"2024-01-01T00:00:00Z"}}"#,
        record.1
    );
    (200, json, Some(format!("\"{}\"", record.0)))
}

/// The fake data API: enough of `/data/query` and `/data/crm/account` to exercise the
/// runtime's query and form helpers, with the contract's envelope.
fn data_api(method: &str, path: &str, headers: &Headers, body: &str) -> Answer {
    if headers.auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return (401, r#"{"errors":[{"code":"UNAUTHENTICATED","message":"missing token","scope":"request","target":null}]}"#.into(), None);
    }
    if path == "/data/crm/account/1" {
        return record_one(method, headers.if_match.as_deref(), body);
    }
    let (status, json) = match (method, path) {
        ("POST", "/data/query") => {
            let pattern = body
                .split("\"pattern\":\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("%%")
                .trim_matches('%')
                .to_lowercase();
            let records: Vec<String> = [("1", "Acme", 100), ("2", "Globex", 200), ("3", "Initech", 300)]
                .iter()
                .filter(|(_, name, _)| name.to_lowercase().contains(&pattern))
                .map(|(id, name, arr)| format!(r#"{{"id":"{id}","name":"{name}","arr":{arr}}}"#))
                .collect();
            if body.contains("COUNT(") {
                return (200, format!(r#"{{"records":[{{"n":{}}}]}}"#, records.len()), None);
            }
            (200, format!(r#"{{"records":[{}]}}"#, records.join(",")))
        }
        ("POST", "/data/crm/account") => {
            let named = body.split("\"name\":\"").nth(1).is_some_and(|rest| !rest.starts_with('"'));
            if named {
                (201, r#"{"id":"9","name":"Initech","arr":null,"stage":null,"createdAt":"2024-01-01T00:00:00Z","updatedAt":"2024-01-01T00:00:00Z"}"#.into())
            } else {
                (
                    422,
                    r#"{"errors":[{"code":"REQUIRED","message":"Name is required","scope":"field","target":"name"},{"code":"RULE_FAILED","message":"Accounts need an owner","scope":"record","target":null,"rule":"has_owner"}]}"#.into(),
                )
            }
        }
        _ => (404, r#"{"errors":[{"code":"ROUTE_NOT_FOUND","message":"no route","scope":"request","target":null}]}"#.into()),
    };
    (status, json, None)
}

/// The request headers the fake API reads.
#[derive(Default)]
struct Headers {
    auth: Option<String>,
    if_match: Option<String>,
}

fn handle(stream: TcpStream, files: &Files) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    let path = target.split('?').next().unwrap_or("/").to_string();
    let mut length = 0usize;
    let mut headers = Headers::default();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => headers.auth = Some(value.trim().to_string()),
                "if-match" => headers.if_match = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body);
    let mut etag = None;
    let (status, content_type, payload) = if path.starts_with("/data/") {
        let (status, json, tag) = data_api(method, &path, &headers, &body);
        etag = tag;
        (status, "application/json", json)
    } else if path == "/favicon.ico" {
        (204, "image/x-icon", String::new())
    } else if let Some((content_type, text)) = files.get(&path) {
        (200, *content_type, text.clone())
    } else {
        (404, "text/plain", "not found".into())
    };
    let etag = etag.map_or(String::new(), |tag| format!("ETag: {tag}\r\n"));
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{etag}Cache-Control: no-store\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )?;
    stream.flush()
}

fn serve(files: Files) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let files = Arc::new(files);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let files = Arc::clone(&files);
            std::thread::spawn(move || {
                let _ = handle(stream, &files);
            });
        }
    });
    format!("http://{addr}")
}

fn found(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn ensure_node_modules(dir: &Path) {
    if dir.join("node_modules/playwright-core").exists() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "npm ci failed in {}", dir.display());
}

#[test]
fn screens_work_in_headless_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !found("node") || !Path::new(&chromium).exists() {
        println!("SKIPPED browser test: needs `node` on PATH and Chromium at {chromium} (see crates/hf-hfx/browser-tests/README.md)");
        return;
    }
    let dir = crate_dir().join("browser-tests");
    ensure_node_modules(&dir);
    let base = serve(compiled_files());
    let out = Command::new("node")
        .arg("run.mjs")
        .arg(&base)
        .env("CHROMIUM", &chromium)
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
