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
