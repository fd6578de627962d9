//! Generic request failures over HTTP, on `POST /auth/login` and a protected route: every one is
//! the JSON error envelope with its contract code — never a 500, never HTML or plain text.

use hf_testkit::TestServer;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::json;

use crate::support::assert_envelope;

async fn login_raw(
    server: &TestServer,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut request = server.http.post(server.url("/auth/login")).body(body);
    if let Some(content_type) = content_type {
        request = request.header(CONTENT_TYPE, content_type);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn malformed_json_is_malformed_json() {
    let server = TestServer::start().await;
    for body in [
        "{",
        "{\"username\": \"a\", \"password\": }",
        "{'username': 'a'}",
        "username=a&password=b",
        "\u{feff}{}",
        "{\"username\": \"a\"} trailing",
    ] {
        let response = login_raw(&server, Some("application/json"), body).await;
        assert_envelope(response, 400, "MALFORMED_JSON").await;
    }
    let response = login_raw(&server, Some("application/json"), vec![0xff, 0xfe, 0x00]).await;
    assert_envelope(response, 400, "MALFORMED_JSON").await;
    server.stop().await;
}

#[tokio::test]
async fn a_property_named_twice_is_malformed_json() {
    let server = TestServer::start().await;
    for body in [
        r#"{"username":"nobody","username":"admin","password":"x"}"#,
        r#"{"username":"a","password":"x","password":"y"}"#,
    ] {
        let response = login_raw(&server, Some("application/json"), body).await;
        let envelope = assert_envelope(response, 400, "MALFORMED_JSON").await;
        let message = envelope["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("more than once"), "{message}");
        assert_eq!(envelope["errors"][0]["location"]["line"], 1, "{envelope}");
    }
    server.stop().await;
}

#[tokio::test]
async fn other_content_types_are_unsupported() {
    let server = TestServer::start().await;
    let body = json!({"username": "a", "password": "b"}).to_string();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonp"),
        Some("text/json"),
        None,
    ] {
        let response = login_raw(&server, content_type, body.clone()).await;
        assert_envelope(response, 415, "UNSUPPORTED_MEDIA_TYPE").await;
    }
    // Parameters and letter case of the JSON type are fine (and then the login itself fails).
    let response = login_raw(&server, Some("Application/JSON; charset=utf-8"), body).await;
    assert_envelope(response, 401, "INVALID_CREDENTIALS").await;
    server.stop().await;
}

#[tokio::test]
async fn wrong_shapes_name_the_property() {
    let server = TestServer::start().await;
    for (body, target) in [
        (json!({"username": 1, "password": "b"}), "username"),
        (json!({"username": "a", "password": null}), "password"),
        (json!({"username": "a"}), "password"),
        (json!({"password": "b"}), "username"),
        (
            json!({"username": "a", "password": "b", "remember": true}),
            "remember",
        ),
        (json!({"username": ["a"], "password": "b"}), "username"),
    ] {
        let response = login_raw(&server, Some("application/json"), body.to_string()).await;
        let envelope = assert_envelope(response, 400, "INVALID_BODY").await;
        assert_eq!(envelope["errors"][0]["scope"], "field", "{body}");
        assert_eq!(envelope["errors"][0]["target"], target, "{body}");
    }
    for body in [json!([]), json!("text"), json!(42), json!(null)] {
        let response = login_raw(&server, Some("application/json"), body.to_string()).await;
        assert_envelope(response, 400, "INVALID_BODY").await;
    }
    let response = login_raw(&server, Some("application/json"), "").await;
    assert_envelope(response, 400, "MALFORMED_JSON").await;
    server.stop().await;
}

/// An array is never read as an object, its items taken as the properties in order (serde's
/// habit): a login with `[name, password]`, a principal's `[true]`, a module's identity as
/// `[colour, icon]` are each refused 400 `INVALID_BODY`, and nothing happens.
#[tokio::test]
async fn an_array_is_never_an_object() {
    let server = TestServer::start_demo().await;
    let password = server.admin_password.clone().unwrap();
    let positional = json!([server.admin_name, password]).to_string();
    let response = login_raw(&server, Some("application/json"), positional).await;
    let envelope = assert_envelope(response, 400, "INVALID_BODY").await;
    assert_eq!(envelope["errors"][0]["scope"], "request", "{envelope}");
    assert_eq!(envelope["errors"][0]["target"], serde_json::Value::Null);

    let name = format!("body_array_{}", std::process::id());
    let user = server.create_principal(&name, false).await;
    let token = server.admin_token().await;
    let response = server
        .http
        .patch(server.url(&format!("/iam/principals/{}", user.id)))
        .bearer_auth(&token)
        .json(&json!([true]))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 400, "INVALID_BODY").await;
    let principal: serde_json::Value = server
        .http
        .get(server.url(&format!("/iam/principals/{}", user.id)))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(principal["isAdmin"], false, "{principal}");

    let response = server
        .http
        .put(server.url("/metadata@main/crm?dryRun=true"))
        .bearer_auth(&token)
        .json(&json!({"label": "CRM", "identity": ["teal", "user"]}))
        .send()
        .await
        .unwrap();
    let envelope = assert_envelope(response, 400, "INVALID_BODY").await;
    assert_eq!(envelope["errors"][0]["target"], "identity", "{envelope}");
    server.stop().await;
}

#[tokio::test]
async fn a_two_mebibyte_body_is_too_large() {
    let server = TestServer::start().await;
    let password = "x".repeat(2 * 1024 * 1024);
    let body = json!({"username": "a", "password": password}).to_string();
    let response = login_raw(&server, Some("application/json"), body.clone()).await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    // Without a declared length (chunked), the limit holds while reading.
    let (status, head, payload) = chunked_login(&server.base_url, body.as_bytes()).await;
    assert_eq!(status, 413, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert!(payload.contains("PAYLOAD_TOO_LARGE"), "{payload}");
    server.stop().await;
}

/// Sends `POST /auth/login` with `Transfer-Encoding: chunked` (no Content-Length) over a raw
/// connection; returns the status, the response head and the response body as text.
async fn chunked_login(base_url: &str, body: &[u8]) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /auth/login HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        // The server may answer and stop reading before the body ends.
        if stream.write_all(&frame).await.is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_owned(), payload.to_owned())
}

#[tokio::test]
async fn garbage_authorization_headers_are_unauthenticated() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let values: Vec<HeaderValue> = vec![
        HeaderValue::from_static("Bearer"),
        HeaderValue::from_static("Bearer "),
        HeaderValue::from_static("Bearer    "),
        HeaderValue::from_static("Basic YWRtaW46YWRtaW4="),
        HeaderValue::from_static("Token abc"),
        HeaderValue::from_static("Bearer a.b.c"),
        HeaderValue::from_static("Bearer ..."),
        HeaderValue::from_static("Bearer eyJhbGciOiJub25lIn0.e30."),
        HeaderValue::from_str(&format!("Bearer {token} extra")).unwrap(),
        HeaderValue::from_str(&format!("Basic {token}")).unwrap(),
        HeaderValue::from_str(&format!("Bearer {}", "A".repeat(16 * 1024))).unwrap(),
        HeaderValue::from_bytes(b"Bearer \xff\xfe\xfd").unwrap(),
        HeaderValue::from_bytes(b"\xc3\x28 \xa0\xa1").unwrap(),
        HeaderValue::from_static("Bearer' OR '1'='1"),
    ];
    for value in values {
        let response = server
            .http
            .get(server.url("/auth/me"))
            .header(AUTHORIZATION, value.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "{value:?}"
        );
        assert_envelope(response, 401, "UNAUTHENTICATED").await;
    }
    // The scheme is case-insensitive; the same token is fine.
    let response = server
        .http
        .get(server.url("/auth/me"))
        .header(AUTHORIZATION, format!("bEaReR {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.stop().await;
}
