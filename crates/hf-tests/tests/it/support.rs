//! Assertions shared by the end-to-end tests.

use reqwest::Response;
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
