//! The console at `GET /`: its page and files over HTTP, and the application itself in headless
//! Chromium through the real server (`crates/hf-tests/browser/console.mjs`).

use std::process::Command;

use hf_testkit::TestServer;
use serde_json::json;

/// Where the browser run writes a screenshot of every view: `console-screenshots` in the cargo
/// target directory.
fn screenshot_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        std::path::PathBuf::from,
    );
    target.join("console-screenshots")
}

/// Runs `crates/hf-tests/browser/console.mjs` with `env` (every scenario, or those of
/// `scenarios`); `None` when node or Chromium is missing (the caller skips with a message).
fn run_console_browser(base_url: &str, env: &[(&str, &str)], scenarios: &[&str]) -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) || !std::path::Path::new(&chromium).exists() {
        println!("SKIPPED browser test: needs `node` on PATH and Chromium at {chromium} (see crates/hf-tests/browser/README.md)");
        return None;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    if !dir.join("node_modules/playwright-core").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "npm ci failed in {}", dir.display());
    }
    let mut command = Command::new("node");
    command
        .arg("console.mjs")
        .arg(base_url)
        .args(scenarios)
        .env("CHROMIUM", &chromium)
        .env("HF_SCREENSHOTS", screenshot_dir())
        .current_dir(&dir);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "console checks failed:\n{stdout}\n{stderr}"
    );
    Some(stdout)
}

#[tokio::test]
async fn the_console_page_is_served_with_a_strict_policy() {
    let server = TestServer::start().await;
    let response = server.http.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self';"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(headers["cache-control"], "no-cache");
    let html = response.text().await.unwrap();
    let start = html.find("src=\"/console/").unwrap() + "src=\"".len();
    let main = &html[start..start + "/console/0123456789abcdef/main.js".len()];
    assert!(main.ends_with("/main.js"), "{html}");
    let response = server.http.get(server.url(main)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let response = server
        .http
        .get(server.url(&main.replace("main.js", "nope.js")))
        .send()
        .await
        .unwrap();
    crate::support::assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    // The page is a GET route like any other: another method gets the envelope.
    let response = server.http.delete(server.url("/")).send().await.unwrap();
    crate::support::assert_envelope(response, 405, "METHOD_NOT_ALLOWED").await;
    // Compressed for a browser that accepts it, like every large answer.
    let response = server
        .http
        .get(server.url(&main.replace("main.js", "c-console-schema.js")))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    server.stop().await;
}

#[tokio::test]
async fn the_console_works_in_chromium() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let names = ["Initech", "Acme", "Globex"]
        .map(str::to_owned)
        .into_iter()
        .chain((0..30).map(|i| format!("Zeta {i:02}")));
    for name in names {
        let response = server
            .http
            .post(server.url("/data/crm/account"))
            .bearer_auth(&admin)
            .json(&json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
    }
    // 100,000 contacts written with plain SQL, for the paging figures.
    server
        .db
        .client()
        .await
        .execute(
            "INSERT INTO crm.contact (name, email, title) \
             SELECT 'Contact ' || lpad(g::text, 6, '0'), 'c' || g || '@example.com', 'Buyer' \
             FROM generate_series(1, 100000) AS g",
            &[],
        )
        .await
        .unwrap();
    let user = server
        .create_principal(&format!("u{}_con", &server.db.name()[8..20]), false)
        .await;
    let admin_password = server.admin_password.clone().unwrap();
    let env = [
        ("HF_ADMIN_NAME", server.admin_name.clone()),
        ("HF_ADMIN_PASSWORD", admin_password),
        ("HF_USER_NAME", user.name.clone()),
        ("HF_USER_PASSWORD", user.password.clone()),
    ];
    let Some(stdout) = tokio::task::spawn_blocking({
        let base = server.base_url.clone();
        move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            run_console_browser(&base, &env, &[])
        }
    })
    .await
    .unwrap() else {
        return;
    };
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    server.stop().await;
}

/// A deployment may name its live branch other than `main` (`HF_LIVE_BRANCH`): the console's
/// screen editor saves to the branch the service reports as live, and creates no other.
#[tokio::test]
async fn the_console_saves_screens_to_a_live_branch_not_named_main() {
    let server = TestServer::start_demo_on_live_branch("prod").await;
    let admin = server.admin_token().await;
    let env = [
        ("HF_ADMIN_NAME", server.admin_name.clone()),
        ("HF_ADMIN_PASSWORD", server.admin_password.clone().unwrap()),
    ];
    let Some(stdout) = tokio::task::spawn_blocking({
        let base = server.base_url.clone();
        move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            run_console_browser(&base, &env, &["screens"])
        }
    })
    .await
    .unwrap() else {
        return;
    };
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    let get = |path: &'static str| {
        let request = server.http.get(server.url(path)).bearer_auth(&admin).send();
        async move { crate::support::json_with_status(request.await.unwrap(), 200).await }
    };
    let branches = get("/branches").await;
    let names = crate::support::branch_names(&branches);
    assert_eq!(names, ["prod"], "{branches}");
    let saved = get("/metadata/crm/screens/counter").await;
    let source = saved["hfxSource"].as_str().unwrap();
    assert!(source.contains("Pressed {count}"), "{saved}");
    server.stop().await;
}
