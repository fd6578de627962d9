//! Every failure the framework could answer on its own gets the envelope instead.

use hf_testkit::TestServer;

use crate::support::assert_envelope;

#[tokio::test]
async fn unknown_route_is_route_not_found() {
    let server = TestServer::start().await;
    for path in [
        "/nope",
        "/health/extra",
        "/metadata-x/y",
        "/%2e%2e/etc/passwd",
    ] {
        let response = server.http.get(server.url(path)).send().await.unwrap();
        assert_envelope(response, 404, "ROUTE_NOT_FOUND").await;
    }
    server.stop().await;
}

/// The live branch's metadata path takes reads only, and the cross-module lists
/// (`/metadata@<branch>/objects`, `…/fields`) are lists, not modules: a write to either is 405
/// with the methods the document gives the path, before its body or query is read, and the live
/// path's answer says where writes go.
#[tokio::test]
async fn writes_where_the_document_has_only_reads_are_method_not_allowed() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let cases = [
        ("POST", "/metadata/crm2", Some(r#"{"label":"x"}"#)),
        ("PUT", "/metadata/crm", None),
        ("DELETE", "/metadata/crm", None),
        ("PUT", "/metadata/fields?moduleKey=crm", None),
        ("PUT", "/metadata/crm/objects/account", Some("[")),
        ("PUT", "/metadata/crm/vendor/chart.js", Some("export {}")),
        (
            "PUT",
            "/metadata/crm/vendor/dist/chart.js",
            Some("export {}"),
        ),
        ("PATCH", "/metadata/crm", Some(r#"{"label":"x"}"#)),
        ("PUT", "/metadata@main/fields", Some(r#"{"label":"x"}"#)),
        ("POST", "/metadata@main/objects", Some(r#"{"label":"x"}"#)),
        ("DELETE", "/metadata@main/objects", None),
        ("OPTIONS", "/metadata@main/fields", None),
    ];
    for (method, path, body) in cases {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = server
            .http
            .request(method.clone(), server.url(path))
            .bearer_auth(&token)
            .header("content-type", "application/json");
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.unwrap();
        let allow = response.headers().get("allow").cloned();
        let envelope = assert_envelope(response, 405, "METHOD_NOT_ALLOWED").await;
        assert_eq!(
            allow.as_ref().map(|v| v.to_str().unwrap()),
            Some("GET"),
            "{method} {path}"
        );
        let message = envelope["errors"][0]["message"].as_str().unwrap();
        let live_write = path.starts_with("/metadata/") && method != reqwest::Method::OPTIONS;
        assert_eq!(
            message.contains("/metadata@<branchId>/"),
            live_write,
            "{path}: {message}"
        );
    }
    // A module's own path still takes writes.
    let response = server
        .http
        .request(reqwest::Method::OPTIONS, server.url("/metadata@main/crm"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["allow"], "DELETE, GET, POST, PUT");
    server.stop().await;
}

#[tokio::test]
async fn wrong_method_is_method_not_allowed() {
    let server = TestServer::start().await;
    for path in ["/health", "/status", "/openapi.json"] {
        let response = server.http.delete(server.url(path)).send().await.unwrap();
        assert_envelope(response, 405, "METHOD_NOT_ALLOWED").await;
    }
    server.stop().await;
}

#[tokio::test]
async fn bad_branch_roots_are_invalid_branch() {
    let server = TestServer::start().await;
    for path in [
        "/meta@x/crm",
        "/metadata@/crm",
        "/METADATA@main/crm",
        "/metadata@-x/crm",
        "/metadata@a..b/crm",
    ] {
        let response = server.http.get(server.url(path)).send().await.unwrap();
        assert_envelope(response, 400, "INVALID_BRANCH").await;
    }
    server.stop().await;
}

#[tokio::test]
async fn non_utf8_path_bytes_get_the_envelope() {
    let server = TestServer::start().await;
    for path in ["/%FF%FE", "/health%C0", "/%00"] {
        let response = server.http.get(server.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        assert!(status == 404 || status == 400, "{path}: {status}");
        let code = if status == 404 {
            "ROUTE_NOT_FOUND"
        } else {
            "BAD_REQUEST"
        };
        assert_envelope(response, status, code).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn garbage_authorization_header_does_not_break_public_routes() {
    let server = TestServer::start().await;
    let response = server
        .http
        .get(server.url("/health"))
        .header("authorization", "Bearer \u{1}garbage")
        .send()
        .await;
    // reqwest refuses control characters in headers; send raw bytes instead.
    assert!(response.is_err() || response.unwrap().status() == 200);
    let response = server
        .http
        .get(server.url("/health"))
        .header("authorization", "NotBearer ~~~~")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.stop().await;
}
