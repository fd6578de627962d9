//! Assertions shared by the end-to-end tests.

use hf_testkit::TestServer;
use reqwest::{Method, Response};
use serde_json::Value;

/// Asserts that a response is an error envelope with this status and first code; returns the body.
pub async fn assert_envelope(response: Response, status: u16, code: &str) -> Value {
    let actual = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        response.headers().contains_key("x-request-id"),
        "no X-Request-Id"
    );
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "status of {text}");
    assert!(
        content_type.starts_with("application/json"),
        "content type {content_type} for {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    let errors = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors array: {text}"));
    assert!(!errors.is_empty(), "empty errors");
    for entry in errors {
        for key in ["code", "message", "scope", "target"] {
            assert!(entry.get(key).is_some(), "entry lacks {key}: {text}");
        }
    }
    assert_eq!(errors[0]["code"], code, "{text}");
    body
}

/// Sends one HTTP/1.1 request with the path exactly as given (HTTP clients normalise `..` and
/// percent-encoded dots before sending); returns the status and the body.
pub async fn raw_request(
    base_url: &str,
    method: &str,
    path: &str,
    json_body: Option<&str>,
    bearer: Option<&str>,
) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let body = json_body.unwrap_or("");
    let auth = bearer.map_or_else(String::new, |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "not JSON: {text}"
    );
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload
            .lines()
            .filter(|line| line.starts_with('{'))
            .collect::<String>()
    } else {
        payload.to_owned()
    };
    (
        status,
        serde_json::from_str(&payload).unwrap_or_else(|_| panic!("not JSON: {text}")),
    )
}

/// Sends `body` as JSON with `token` as the Bearer token.
pub async fn send_as(
    server: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    body: Value,
) -> Response {
    server
        .http
        .request(method, server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Asserts the response's status and returns its JSON body (`null` when it has none).
pub async fn json_with_status(response: Response, status: u16) -> Value {
    let actual = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "{text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The branch names of a `GET /branches` answer, in its order.
pub fn branch_names(branches: &Value) -> Vec<&str> {
    branches
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["branch"].as_str().unwrap())
        .collect()
}
