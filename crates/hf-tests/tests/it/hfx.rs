//! The `hfx` group over real HTTP: compiling, resolving, compiled modules (Bearer or the session
//! cookie, old URLs after later applies), the vendored runtime, the rendering frame's headers, and
//! screens running in headless Chromium through the real cookie flow (`hfx_browser`).

use std::process::Command;

use hf_testkit::TestServer;
use reqwest::Response;
use serde_json::{json, Value};

use crate::support::{assert_envelope, raw_request};

/// A screen that reads state, assigns it, and uses a sidecar.
const WITH_SIDECAR: &str = "<script lang=\"ts\">\n  import { double } from './sidecar';\n  let n: number = 2;\n</script>\n<button on:click={() => n++}>{double(n)}</button>\n";
const SIDECAR: &str = "export function double(x: number): number { return x * 2; }\n";

async fn post_as(server: &TestServer, token: &str, path: &str, body: Value) -> Response {
    server
        .http
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn get_as(server: &TestServer, token: Option<&str>, path: &str) -> Response {
    let request = server.http.get(server.url(path));
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
    .send()
    .await
    .unwrap()
}

/// Creates (or, when it exists, replaces) a screen on the live branch as the administrator.
pub async fn put_screen(
    server: &TestServer,
    admin: &str,
    key: &str,
    source: &str,
    sidecar: Option<&str>,
) {
    let mut body = json!({"label": key, "hfxSource": source});
    if let Some(sidecar) = sidecar {
        body["sidecar"] = json!(sidecar);
    }
    let path = server.url(&format!("/metadata@main/crm/screens/{key}"));
    let response = server
        .http
        .post(&path)
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await
        .unwrap();
    let response = if response.status() == 409 {
        server
            .http
            .put(&path)
            .bearer_auth(admin)
            .json(&body)
            .send()
            .await
            .unwrap()
    } else {
        response
    };
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "writing screen {key}: {status} {text}");
}

async fn module_url(server: &TestServer, token: &str, screen: &str) -> String {
    let response = get_as(server, Some(token), &format!("/hfx/resolve/crm/{screen}")).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["moduleUrl"].as_str().unwrap().to_owned()
}

fn live_tree(server: &TestServer) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args(["rev-parse", "refs/heads/main^{tree}"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A session cookie from the real exchange.
async fn session_cookie(server: &TestServer, token: &str) -> String {
    let response = post_as(server, token, "/auth/session", json!({})).await;
    let code = response.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let response = get_as(
        server,
        None,
        &format!("/auth/session/exchange?code={code}&screen=crm/counter"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn compile_answers_the_contract_result() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let body = json!({"source": WITH_SIDECAR, "sidecar": SIDECAR});
    let response = post_as(&server, &token, "/hfx/compile", body.clone()).await;
    assert_eq!(response.status(), 200);
    let first: Value = response.json().await.unwrap();
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["compiledJs", "compiledSidecar", "contentHash", "warnings"]
    );
    assert_eq!(first["contentHash"], hf_hfx::content_hash(WITH_SIDECAR));
    assert_eq!(first["warnings"], json!([]));
    let js = first["compiledJs"].as_str().unwrap();
    assert!(js.contains("export default"), "{js}");
    assert!(js.contains("\"/hfx/vendor/hfx-runtime.js\""), "{js}");
    assert!(js.contains("\"./sidecar\""), "{js}");
    assert!(!js.contains(": number"), "types are stripped: {js}");
    let sidecar = first["compiledSidecar"].as_str().unwrap();
    assert!(sidecar.contains("export function double(x)"), "{sidecar}");
    // Deterministic.
    let again: Value = post_as(&server, &token, "/hfx/compile", body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again, first);
    // No sidecar: null.
    let response = post_as(
        &server,
        &token,
        "/hfx/compile",
        json!({"source": "<p>hi</p>"}),
    )
    .await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["compiledSidecar"], Value::Null);
    // Any authenticated principal; nobody else.
    let user = server
        .create_principal(&format!("u{}_hfx", &server.db.name()[8..20]), false)
        .await;
    let response = post_as(
        &server,
        &user.token,
        "/hfx/compile",
        json!({"source": "<p>hi</p>"}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = server
        .http
        .post(server.url("/hfx/compile"))
        .json(&json!({"source": "<p>hi</p>"}))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    server.stop().await;
}

#[tokio::test]
async fn compile_errors_carry_locations_in_the_screen_and_the_sidecar() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let cases = [
        // An emoji (two UTF-16 units) before an error inside an {expression}.
        (
            json!({"source": "<p>😀 {count +* 2}</p>"}),
            (1, 15, "<p>😀 {count +* 2}</p>"),
        ),
        (
            json!({"source": "<div>\n  <span>\n</div>"}),
            (2, 3, "  <span>"),
        ),
        (
            json!({"source": "<p>ok</p>", "sidecar": "export const x = ;\n"}),
            (1, 18, "export const x = ;"),
        ),
    ];
    for (body, (line, column, frame)) in cases {
        let response = post_as(&server, &token, "/hfx/compile", body.clone()).await;
        let envelope = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
        let entry = &envelope["errors"][0];
        assert_eq!(entry["scope"], "request", "{envelope}");
        assert_eq!(entry["target"], Value::Null, "{envelope}");
        assert_eq!(
            entry["location"],
            json!({"line": line, "column": column, "frame": frame}),
            "{body}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn compile_refuses_bad_bodies_and_survives_hostile_sources() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    // Over 2 MiB: 413.
    let big = "a".repeat(2 * 1024 * 1024 + 1);
    let response = post_as(&server, &token, "/hfx/compile", json!({"source": big})).await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    let response = post_as(
        &server,
        &token,
        "/hfx/compile",
        json!({"source": "<p/>", "sidecar": big}),
    )
    .await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    // Shape and syntax errors of the body.
    let response = post_as(&server, &token, "/hfx/compile", json!({"src": "x"})).await;
    assert_envelope(response, 400, "INVALID_BODY").await;
    let response = server
        .http
        .post(server.url("/hfx/compile"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"source\": ")
        .send()
        .await
        .unwrap();
    assert_envelope(response, 400, "MALFORMED_JSON").await;
    // Bytes that are not UTF-8 are not JSON text.
    let response = server
        .http
        .post(server.url("/hfx/compile"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(b"{\"source\": \"<p>\xff\xfe</p>\"}".to_vec())
        .send()
        .await
        .unwrap();
    assert_envelope(response, 400, "MALFORMED_JSON").await;
    // Hostile sources just under the limit: a clean 422, never a 500.
    let deep = "<div>".repeat(10_000);
    let brackets = format!("<p>{{{}}}</p>", "[".repeat(100_000));
    let unterminated = "<script>let s = '".to_owned() + &"x".repeat(1024 * 1024);
    for source in [deep, brackets, unterminated, "{#if a}{#each".to_owned()] {
        let response = post_as(&server, &token, "/hfx/compile", json!({"source": source})).await;
        assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    }
    server.stop().await;
}

#[tokio::test]
async fn resolve_names_the_live_tree() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let url = module_url(&server, &token, "counter").await;
    assert_eq!(
        url,
        format!("/hfx/modules/{}-crm-counter.js", live_tree(&server))
    );
    for (path, status, code) in [
        ("/hfx/resolve/crm/nope", 404, "SCREEN_NOT_FOUND"),
        ("/hfx/resolve/nope/counter", 404, "MODULE_NOT_FOUND"),
        ("/hfx/resolve/crm/Bad-Key", 400, "INVALID_KEY"),
    ] {
        let response = get_as(&server, Some(&token), path).await;
        assert_envelope(response, status, code).await;
    }
    let response = get_as(&server, None, "/hfx/resolve/crm/counter").await;
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    server.stop().await;
}

#[tokio::test]
async fn modules_are_served_by_tree_with_the_cookie_or_a_bearer_token() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let old_url = module_url(&server, &admin, "counter").await;

    // Bearer: the compile result of that screen, with the contract's headers.
    let response = get_as(&server, Some(&admin), &old_url).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/javascript");
    assert_eq!(
        headers["cache-control"],
        "private, max-age=31536000, immutable"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let old_js = response.text().await.unwrap();
    let screen: Value = get_as(&server, Some(&admin), "/metadata/crm/screens/counter")
        .await
        .json()
        .await
        .unwrap();
    let compiled: Value = post_as(
        &server,
        &admin,
        "/hfx/compile",
        json!({"source": screen["hfxSource"]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(old_js, compiled["compiledJs"].as_str().unwrap());

    // The session cookie works here, and neither cookie nor token is 401.
    let cookie = session_cookie(&server, &admin).await;
    let response = server
        .http
        .get(server.url(&old_url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = get_as(&server, None, &old_url).await;
    assert_envelope(response, 401, "UNAUTHENTICATED").await;

    // A later apply changes the URL; the old one keeps serving the old screen.
    put_screen(&server, &admin, "counter", "<p>changed</p>", None).await;
    let new_url = module_url(&server, &admin, "counter").await;
    assert_ne!(new_url, old_url);
    let new_js = get_as(&server, Some(&admin), &new_url)
        .await
        .text()
        .await
        .unwrap();
    assert!(new_js.contains("changed"), "{new_js}");
    let again = get_as(&server, Some(&admin), &old_url)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(again, old_js);

    // A screen with a sidecar imports its own sidecar file, served next to it.
    put_screen(&server, &admin, "doubler", WITH_SIDECAR, Some(SIDECAR)).await;
    let url = module_url(&server, &admin, "doubler").await;
    let js = get_as(&server, Some(&admin), &url)
        .await
        .text()
        .await
        .unwrap();
    let sidecar_url = url.replace(".js", ".sidecar.js");
    let file = sidecar_url.rsplit('/').next().unwrap();
    assert!(js.contains(&format!("\"./{file}\"")), "{js}");
    let response = get_as(&server, Some(&admin), &sidecar_url).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/javascript");
    assert!(response.text().await.unwrap().contains("x * 2"));

    // Names that are not files of a screen at a tree: 404.
    let tree = live_tree(&server);
    for (path, code) in [
        (
            format!("/hfx/modules/{tree}-crm-counter.sidecar.js"),
            "FILE_NOT_FOUND",
        ),
        (
            format!("/hfx/modules/{tree}-crm-counter.mjs"),
            "FILE_NOT_FOUND",
        ),
        (format!("/hfx/modules/{tree}-crm.js"), "FILE_NOT_FOUND"),
        ("/hfx/modules/x.js".to_owned(), "FILE_NOT_FOUND"),
        (
            "/hfx/modules/0123456789abcdef0123456789abcdef01234567-crm-counter.js".to_owned(),
            "FILE_NOT_FOUND",
        ),
        (
            format!("/hfx/modules/{tree}-crm-nope.js"),
            "SCREEN_NOT_FOUND",
        ),
        (
            format!("/hfx/modules/{tree}-nope-counter.js"),
            "MODULE_NOT_FOUND",
        ),
    ] {
        let response = get_as(&server, Some(&admin), &path).await;
        assert_envelope(response, 404, code).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn vendor_serves_the_runtime_publicly_and_nothing_else() {
    let server = TestServer::start().await;
    let response = get_as(&server, None, "/hfx/vendor/hfx-runtime.js").await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/javascript");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let text = response.text().await.unwrap();
    assert!(text.contains("export function mount"));
    let response = server
        .http
        .get(server.url("/hfx/vendor/hfx-runtime.js"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 304);
    for path in [
        "/hfx/vendor/nope.js",
        "/hfx/vendor/",
        "/hfx/vendor/sub/hfx-runtime.js",
    ] {
        let response = get_as(&server, None, path).await;
        assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    }
    // Dot segments as sent (HTTP clients would resolve them first).
    for path in [
        "/hfx/vendor/../../Cargo.toml",
        "/hfx/vendor/%2e%2e/%2e%2e/Cargo.toml",
    ] {
        let (status, body) = raw_request(&server.base_url, "GET", path, None, None).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["errors"][0]["code"], "FILE_NOT_FOUND", "{body}");
    }
    server.stop().await;
}

#[tokio::test]
async fn the_frame_has_a_strict_policy_that_names_its_script() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let response = post_as(&server, &token, "/auth/session", json!({})).await;
    let code = response.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let response = get_as(
        &server,
        None,
        &format!("/auth/session/exchange?code={code}&screen=crm/counter"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let page = response.text().await.unwrap();
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap();
    assert!(page.contains(&format!("<script type=\"module\" nonce=\"{nonce}\">")));
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    for directive in [
        "default-src 'none'",
        "'strict-dynamic'",
        "base-uri 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe-"), "{csp}");
    server.stop().await;
}

// ---- in Chromium -------------------------------------------------------------------------------

/// `{expression}`s, attributes and bindings holding markup.
const ESCAPING: &str = r#"<script>
  let payload = '<img src=x onerror="window.__pwned = true">';
</script>
<p id="text">{payload}</p>
<p id="attr" title={payload}>attribute</p>
<input id="input" bind:value={payload} />
<button id="more" on:click={() => (payload = payload + '<b>bold</b>')}>more</button>
"#;

/// Scoped style and a style attribute (both under the frame's CSP), a sidecar, and another screen
/// imported as a component.
const STYLED: &str = r#"<script lang="ts">
  import Badge from 'screen:crm/badge';
  import { double } from './sidecar';
  let n: number = 2;
</script>
<div class="card" style="margin-left: 7px">
  <span id="doubled">{double(n)}</span>
  <button id="inc" on:click={() => n++}>+</button>
  <Badge label={`n=${n}`} />
</div>
<style>
  .card { color: rgb(1, 2, 3); }
</style>
"#;

const STYLED_SIDECAR: &str = "enum Factor { Two = 2 }\nexport function double(x: number): number { return x * Factor.Two; }\n";

const BADGE: &str = r#"<script>
  export let label = '';
</script>
<span class="badge">{label}</span>
<style>
  .badge { font-weight: 700; }
</style>
"#;

/// A list from a HOQS query over demo accounts that re-runs when the filter input changes.
const ACCOUNT_SEARCH: &str = r#"<script>
  let filter = '';
</script>
<input id="filter" bind:value={filter} />
{#query "SELECT id, name FROM crm.account WHERE name ILIKE :pattern ORDER BY name", { pattern: `%${filter}%` } as accounts}
  {#if accounts.error}
    <p id="error">{accounts.error.code}: {accounts.error.message}</p>
  {:else}
    <ul>
      {#each accounts.records as account (account.id)}
        <li>{account.name}</li>
      {:else}
        <li id="empty">No accounts</li>
      {/each}
    </ul>
    <p id="count">{accounts.loading ? 'loading' : accounts.records.length}</p>
  {/if}
{/query}
"#;

/// A form that creates an account; the demo's `name_not_blank` rule anchors to `name`.
const ACCOUNT_FORM: &str = r#"<script>
  let saved = '';
</script>
<div on:saved={(event) => (saved = event.detail.name)}>
  {#form crm.account as f}
    <label>Name <input id="name" bind:value={f.values.name} /></label>
    <label>Email <input id="email" bind:value={f.values.email} /></label>
    <button type="submit" disabled={f.saving}>Create</button>
  {/form}
</div>
<p id="saved">{saved}</p>
"#;

/// A screen that opens another screen of the branch with a parameter.
const NAV_LIST: &str = r#"<script>
  import { navigate } from 'hfx';
</script>
<button id="open" on:click={() => navigate('crm/nav_detail', { id: 42 })}>Open record 42</button>
"#;

/// The screen it opens: its prop comes from the frame's address.
const NAV_DETAIL: &str = r#"<script>
  export let id = '';
</script>
<p id="record">record {id} (from the address)</p>
"#;

/// Runs `crates/hf-tests/browser/run.mjs` against a server; `None` when node or Chromium is
/// missing (the caller skips with a message).
fn run_browser(base_url: &str, token: &str, scenarios: &[&str]) -> Option<String> {
    let (dir, chromium) = browser_packages()?;
    let out = Command::new("node")
        .arg("run.mjs")
        .arg(base_url)
        .args(scenarios)
        .env("HF_TOKEN", token)
        .env("CHROMIUM", &chromium)
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    Some(stdout)
}

/// The browser package directory with its packages installed (`npm ci` when missing) and the
/// Chromium path; `None` when node or Chromium is missing (the caller skips with a message).
fn browser_packages() -> Option<(std::path::PathBuf, String)> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) || !std::path::Path::new(&chromium).exists() {
        println!("SKIPPED browser test: needs `node` on PATH and Chromium at {chromium} (see crates/hf-tests/browser/README.md)");
        return None;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    if !dir.join("node_modules/playwright-core").exists() || !dir.join(UPLOT).exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "npm ci failed in {}", dir.display());
    }
    Some((dir, chromium))
}

/// uPlot's ES module build (pinned in the browser package): one self-contained file.
const UPLOT: &str = "node_modules/uplot/dist/uPlot.esm.js";

/// A screen drawing a uPlot chart, the library vendored into module `crm`.
const VENDOR_CHART: &str = r#"<script>
  import { onMount } from "hfx";
  import uPlot from "uplot.esm.js";
  let chart: HTMLElement | undefined;
  let drawn = $state("");
  onMount(() => {
    const options = {
      width: 320,
      height: 160,
      series: [{}, { stroke: "red", width: 2 }],
      hooks: { draw: [() => { drawn = "drawn"; }] },
    };
    const plot = new uPlot(options, [[1, 2, 3, 4], [3, 1, 4, 2]], chart);
    return () => plot.destroy();
  });
</script>
<div id="chart" bind:this={chart}></div>
<p id="drawn">{drawn}</p>
"#;

/// A real library from npm, uploaded with `PUT …/vendor/…`, imported by a screen with a bare
/// specifier and run in Chromium through the real cookie flow: it draws into its canvas, loads
/// from its tree's address, and the strict policy reports nothing. The same works in the
/// console's preview of a screen not saved yet (`POST /hfx/compile` with the `moduleKey`).
#[tokio::test]
async fn a_vendored_npm_library_runs_in_chromium() {
    let Some((dir, _)) = browser_packages() else {
        return;
    };
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let library = std::fs::read_to_string(dir.join(UPLOT)).unwrap();
    let response = server
        .http
        .put(server.url("/metadata@main/crm/vendor/uplot.esm.js"))
        .bearer_auth(&admin)
        .header("content-type", "text/javascript")
        .body(library)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    put_screen(&server, &admin, "vendor_chart", VENDOR_CHART, None).await;
    let user = server
        .create_principal(&format!("u{}_lib", &server.db.name()[8..20]), false)
        .await;
    let Some(stdout) = tokio::task::spawn_blocking({
        let base = server.base_url.clone();
        move || run_browser(&base, &user.token, &["vendor", "vendorPreview"])
    })
    .await
    .unwrap() else {
        return;
    };
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    server.stop().await;
}

#[tokio::test]
async fn screens_run_in_chromium_through_the_real_server() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    put_screen(&server, &admin, "escaping", ESCAPING, None).await;
    put_screen(&server, &admin, "badge", BADGE, None).await;
    put_screen(&server, &admin, "styled", STYLED, Some(STYLED_SIDECAR)).await;
    put_screen(&server, &admin, "account_search", ACCOUNT_SEARCH, None).await;
    put_screen(&server, &admin, "account_form", ACCOUNT_FORM, None).await;
    put_screen(&server, &admin, "nav_list", NAV_LIST, None).await;
    put_screen(&server, &admin, "nav_detail", NAV_DETAIL, None).await;
    let mut accounts = std::collections::HashMap::new();
    for name in ["Initech", "Acme", "Globex"] {
        let response = post_as(&server, &admin, "/data/crm/account", json!({"name": name})).await;
        assert_eq!(response.status(), 201);
        let record: Value = response.json().await.unwrap();
        accounts.insert(name, record["id"].as_str().unwrap().to_owned());
    }
    // The three CRM screens of the fixtures, and opportunities for them.
    for key in [
        "stat_card",
        "crm_accounts",
        "crm_dashboard",
        "crm_opportunity_edit",
    ] {
        let path = format!(
            "{}/../../fixtures/hfx/ok/{key}.hfx",
            env!("CARGO_MANIFEST_DIR")
        );
        let source = std::fs::read_to_string(path).unwrap();
        put_screen(&server, &admin, key, &source, None).await;
    }
    for (name, account, amount, stage) in [
        ("Acme renewal", "Acme", 5000, "proposal"),
        ("Globex expansion", "Globex", 12000, "prospecting"),
        ("Initech deal", "Initech", 3000, "won"),
        ("Acme upsell", "Acme", 800, "prospecting"),
    ] {
        let body = json!({"name": name, "account": accounts[account], "amount": amount, "probability": 50, "stage": stage});
        let response = post_as(&server, &admin, "/data/crm/opportunity", body).await;
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    }
    // An ordinary principal: the frame works for anyone authenticated.
    let user = server
        .create_principal(&format!("u{}_web", &server.db.name()[8..20]), false)
        .await;
    let scenarios = [
        "counter", "escaping", "styled", "missing", "crm", "query", "form", "navigate",
    ];
    let Some(stdout) = tokio::task::spawn_blocking({
        let base = server.base_url.clone();
        move || run_browser(&base, &user.token, &scenarios)
    })
    .await
    .unwrap() else {
        return;
    };
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    server.stop().await;
}

/// `{#query}` with `paged: true` reads a seeded table page by page through the keyset cursor, in
/// Chromium through the real server, while rows are inserted: none is lost or repeated.
#[tokio::test]
async fn query_pages_run_in_chromium_through_the_real_server() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let path = format!(
        "{}/../../fixtures/hfx/ok/crm_account_pages.hfx",
        env!("CARGO_MANIFEST_DIR")
    );
    let source = std::fs::read_to_string(path).unwrap();
    put_screen(&server, &admin, "crm_account_pages", &source, None).await;
    for i in 0..45 {
        let body = json!({"name": format!("Paged {i:03}")});
        let response = post_as(&server, &admin, "/data/crm/account", body).await;
        assert_eq!(response.status(), 201);
    }
    let Some(stdout) = tokio::task::spawn_blocking({
        let base = server.base_url.clone();
        move || run_browser(&base, &admin, &["paging"])
    })
    .await
    .unwrap() else {
        return;
    };
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    server.stop().await;
}

/// A sidecar's bare imports are the module's vendored files, like the screen's own: a missing one
/// refuses the write at the import (in the sidecar), the stored sidecar loads the file from its
/// tree's address, and the file cannot be deleted while the sidecar imports it.
#[tokio::test]
async fn sidecar_imports_resolve_to_the_modules_vendored_files() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let source = "<script>import { shout } from './sidecar';</script><p id=\"out\">{shout()}</p>\n";
    let sidecar = "// uses a vendored helper\nimport { answer } from \"lib/answer.js\";\nexport const shout = () => `answer: ${answer}`;\n";
    let body = json!({"label": "side", "hfxSource": source, "sidecar": sidecar});
    let response = post_as(
        &server,
        &admin,
        "/metadata@main/crm/screens/side",
        body.clone(),
    )
    .await;
    let envelope = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let entry = &envelope["errors"][0];
    assert_eq!(
        entry["location"],
        json!({"line": 2, "column": 24, "frame": "import { answer } from \"lib/answer.js\";"}),
        "{envelope}"
    );
    assert!(
        entry["message"].as_str().unwrap().contains("lib/answer.js"),
        "{envelope}"
    );

    let response = server
        .http
        .put(server.url("/metadata@main/crm/vendor/lib/answer.js"))
        .bearer_auth(&admin)
        .header("content-type", "text/javascript")
        .body("export const answer = 42;\n")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let response = post_as(&server, &admin, "/metadata@main/crm/screens/side", body).await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());

    let url = module_url(&server, &admin, "side").await;
    let response = get_as(&server, Some(&admin), &url.replace(".js", ".sidecar.js")).await;
    assert_eq!(response.status(), 200);
    let js = response.text().await.unwrap();
    let tree = live_tree(&server);
    assert!(
        js.contains(&format!("from \"/hfx/vendor/{tree}/crm/lib/answer.js\"")),
        "{js}"
    );
    let response = server
        .http
        .delete(server.url("/metadata@main/crm/vendor/lib/answer.js"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_envelope(response, 409, "IN_USE").await;
    server.stop().await;
}
