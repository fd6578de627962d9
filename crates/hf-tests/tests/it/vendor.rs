//! Vendored JavaScript modules over real HTTP: `PUT|GET|DELETE /{branchRoot}/{moduleKey}/vendor/…`
//! (storage in the branch, one commit per write, the input they refuse), screen writes that check
//! their bare imports, and the commit-addressed, immutable `/hfx/vendor/{tree}/…` URLs compiled
//! screens load them from.

use std::process::Command;

use hf_testkit::TestServer;
use reqwest::Response;
use serde_json::{json, Value};

use crate::support::{assert_envelope, raw_request};

const TINY: &str = "export const answer = 42;\n";

async fn put_js(server: &TestServer, token: &str, path: &str, body: &str) -> Response {
    server
        .http
        .put(server.url(path))
        .bearer_auth(token)
        .header("content-type", "text/javascript")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

async fn send(
    server: &TestServer,
    method: reqwest::Method,
    token: Option<&str>,
    path: &str,
) -> Response {
    let request = server.http.request(method, server.url(path));
    match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
    .send()
    .await
    .unwrap()
}

async fn write_screen(server: &TestServer, token: &str, key: &str, source: &str) -> Response {
    let body = json!({"label": key, "hfxSource": source});
    let path = server.url(&format!("/metadata@main/crm/screens/{key}"));
    let response = server
        .http
        .post(&path)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    if response.status() != 409 {
        return response;
    }
    server
        .http
        .put(&path)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn git(server: &TestServer, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn importing(spec: &str) -> String {
    format!("<script>\n  import {{ answer }} from \"{spec}\";\n</script>\n<p>{{answer}}</p>\n")
}

#[tokio::test]
async fn vendored_files_are_stored_checked_and_served_immutably() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    let commits_before = git(&server, &["rev-list", "--count", "main"]);

    let response = put_js(
        &server,
        &admin,
        "/metadata@main/crm/vendor/lib/tiny.js",
        TINY,
    )
    .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"status": "created", "branch": "main", "file": "crm/vendor/lib/tiny.js", "apply": null})
    );
    let response = put_js(
        &server,
        &admin,
        "/metadata@main/crm/vendor/lib/tiny.js",
        TINY,
    )
    .await;
    assert_eq!(response.status(), 200);
    // One commit per write, the file in the branch where the contract puts it.
    let commits_after: u32 = git(&server, &["rev-list", "--count", "main"])
        .parse()
        .unwrap();
    assert_eq!(commits_after, commits_before.parse::<u32>().unwrap() + 2);
    assert_eq!(
        git(&server, &["show", "main:crm/vendor/lib/tiny.js"]),
        TINY.trim()
    );

    let response = send(
        &server,
        reqwest::Method::GET,
        Some(&admin),
        "/metadata/crm/vendor/lib/tiny.js",
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/javascript");
    assert_eq!(response.text().await.unwrap(), TINY);

    // A screen imports it by its path; a path the module does not have is refused at the import.
    let response = write_screen(&server, &admin, "uses_tiny", &importing("lib/tiny.js")).await;
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap()
    );
    let source = importing("nope.js");
    let response = write_screen(&server, &admin, "uses_nope", &source).await;
    let body = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let location = &body["errors"][0]["location"];
    assert_eq!(location["line"], 2, "{body}");
    assert_eq!(
        location["column"],
        source.lines().nth(1).unwrap().find('"').unwrap() + 1,
        "{body}"
    );
    // POST /hfx/compile knows no module: bare imports are rewritten unchecked.
    let response = server
        .http
        .post(server.url("/hfx/compile"))
        .bearer_auth(&admin)
        .json(&json!({"source": source}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // The compiled screen imports the file at its tree's address, served publicly and immutably.
    let tree = git(&server, &["rev-parse", "main^{tree}"]);
    let module = send(
        &server,
        reqwest::Method::GET,
        Some(&admin),
        "/hfx/resolve/crm/uses_tiny",
    )
    .await;
    let url = module.json::<Value>().await.unwrap()["moduleUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let js = send(&server, reqwest::Method::GET, Some(&admin), &url)
        .await
        .text()
        .await
        .unwrap();
    let vendored = format!("/hfx/vendor/{tree}/crm/lib/tiny.js");
    assert!(js.contains(&format!("\"{vendored}\"")), "{js}");
    let response = send(&server, reqwest::Method::GET, None, &vendored).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/javascript");
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(response.text().await.unwrap(), TINY);
    for missing in [
        format!("/hfx/vendor/{tree}/crm/lib/other.js"),
        format!("/hfx/vendor/{tree}/crm/objects/account.json5"),
        format!("/hfx/vendor/{}/crm/lib/tiny.js", "0".repeat(40)),
    ] {
        let response = send(&server, reqwest::Method::GET, None, &missing).await;
        assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    }

    // In use: not deleted. Once no screen imports it, deleted; importing it is then refused,
    // and the old address keeps serving the old tree's file.
    let response = send(
        &server,
        reqwest::Method::DELETE,
        Some(&admin),
        "/metadata@main/crm/vendor/lib/tiny.js",
    )
    .await;
    let body = assert_envelope(response, 409, "IN_USE").await;
    assert!(body.to_string().contains("uses_tiny"), "{body}");
    let response = send(
        &server,
        reqwest::Method::DELETE,
        Some(&admin),
        "/metadata@main/crm/screens/uses_tiny",
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = send(
        &server,
        reqwest::Method::DELETE,
        Some(&admin),
        "/metadata@main/crm/vendor/lib/tiny.js",
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "deleted");
    let response = send(
        &server,
        reqwest::Method::GET,
        Some(&admin),
        "/metadata/crm/vendor/lib/tiny.js",
    )
    .await;
    assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    let response = write_screen(&server, &admin, "uses_tiny", &importing("lib/tiny.js")).await;
    assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let response = send(&server, reqwest::Method::GET, None, &vendored).await;
    assert_eq!(response.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn vendor_writes_refuse_bad_input() {
    let server = TestServer::start_demo().await;
    let admin = server.admin_token().await;
    for path in ["Chart.js", "a//b.js", "a/", "x.json5", "a b.js"] {
        let response = put_js(
            &server,
            &admin,
            &format!("/metadata@main/crm/vendor/{path}"),
            TINY,
        )
        .await;
        assert_envelope(response, 400, "INVALID_PATH").await;
    }
    // Dot segments as sent (HTTP clients would resolve them first).
    for path in [
        "/metadata/crm/vendor/a/../b.js",
        "/metadata/crm/vendor/%2e%2e/b.js",
        "/metadata/crm/vendor/..",
    ] {
        let (status, body) = raw_request(&server.base_url, "GET", path, None, Some(&admin)).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["errors"][0]["code"], "INVALID_PATH", "{body}");
    }
    let response = put_js(&server, &admin, "/metadata@main/nomodule/vendor/a.js", TINY).await;
    assert_envelope(response, 404, "MODULE_NOT_FOUND").await;

    let user = server
        .create_principal(&format!("u{}_vendor", &server.db.name()[8..20]), false)
        .await;
    let response = put_js(&server, &user.token, "/metadata@main/crm/vendor/a.js", TINY).await;
    assert_envelope(response, 403, "FORBIDDEN").await;
    let response = send(
        &server,
        reqwest::Method::DELETE,
        Some(&user.token),
        "/metadata@main/crm/vendor/a.js",
    )
    .await;
    assert_envelope(response, 403, "FORBIDDEN").await;

    let big = "x".repeat(2 * 1024 * 1024 + 1);
    let response = put_js(&server, &admin, "/metadata@main/crm/vendor/big.js", &big).await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    let exactly = format!("//{}", "x".repeat(2 * 1024 * 1024 - 2));
    let response = put_js(
        &server,
        &admin,
        "/metadata@main/crm/vendor/exact.js",
        &exactly,
    )
    .await;
    assert_eq!(response.status(), 201);

    let response = server
        .http
        .put(server.url("/metadata@main/crm/vendor/a.js"))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_envelope(response, 415, "UNSUPPORTED_MEDIA_TYPE").await;

    let response = send(
        &server,
        reqwest::Method::GET,
        Some(&admin),
        "/metadata/crm/vendor/missing.js",
    )
    .await;
    assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    let response = send(
        &server,
        reqwest::Method::DELETE,
        Some(&admin),
        "/metadata@main/crm/vendor/missing.js",
    )
    .await;
    assert_envelope(response, 404, "FILE_NOT_FOUND").await;
    server.stop().await;
}
