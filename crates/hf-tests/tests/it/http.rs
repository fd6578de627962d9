//! What HTTP clients expect of a modern API: compressed large answers when asked, `ETag` and
//! `If-None-Match` on metadata reads, CORS for the origins an administrator lists.

use std::io::Read;

use hf_server::cors::CorsOrigins;
use hf_testkit::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

fn decode(encoding: &str, bytes: &[u8]) -> Value {
    let mut text = Vec::new();
    match encoding {
        "gzip" => {
            flate2::read::GzDecoder::new(bytes)
                .read_to_end(&mut text)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(bytes, 4096)
                .read_to_end(&mut text)
                .unwrap();
        }
        other => panic!("unexpected encoding {other}"),
    }
    serde_json::from_slice(&text).unwrap()
}

#[tokio::test]
async fn large_answers_are_compressed_when_asked_and_small_ones_are_not() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let plain = server
        .http
        .get(server.url("/metadata/fields"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain_bytes = plain.bytes().await.unwrap();
    assert!(plain_bytes.len() > 1024, "the demo's field list is large");
    let expected: Value = serde_json::from_slice(&plain_bytes).unwrap();
    for encoding in ["br", "gzip"] {
        let response = server
            .http
            .get(server.url("/metadata/fields"))
            .bearer_auth(&token)
            .header("accept-encoding", encoding)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-encoding"], encoding);
        assert_eq!(response.headers()["vary"], "accept-encoding");
        let bytes = response.bytes().await.unwrap();
        assert!(
            bytes.len() < plain_bytes.len() / 2,
            "{encoding}: {}",
            bytes.len()
        );
        assert_eq!(decode(encoding, &bytes), expected, "{encoding}");
    }
    // The interface document is large too, and public.
    let response = server
        .http
        .get(server.url("/openapi.json"))
        .header("accept-encoding", "gzip, br;q=0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let doc = decode("gzip", &response.bytes().await.unwrap());
    assert_eq!(doc["openapi"], "3.1.0");
    // A small answer is sent as it is, without a content coding.
    let response = server
        .http
        .get(server.url("/health"))
        .header("accept-encoding", "br, gzip")
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("content-encoding").is_none());
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "ok");
    server.stop().await;
}

#[tokio::test]
async fn metadata_reads_carry_an_etag_and_answer_if_none_match() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let get = |path: &'static str, validator: Option<String>| {
        let mut request = server.http.get(server.url(path)).bearer_auth(&token);
        if let Some(validator) = validator {
            request = request.header("if-none-match", validator);
        }
        request.send()
    };
    let first = get("/metadata/crm", None).await.unwrap();
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with("W/\""), "{etag}");
    let again = get("/metadata/crm", Some(etag.clone())).await.unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"], etag.as_str());
    assert!(again.bytes().await.unwrap().is_empty());
    // A list of validators, one of them current, and the strong form of the same tag.
    let listed = format!("\"other\", {}", etag.trim_start_matches("W/"));
    assert_eq!(
        get("/metadata/crm", Some(listed)).await.unwrap().status(),
        304
    );
    assert_eq!(
        get("/metadata/crm", Some("W/\"other\"".to_owned()))
            .await
            .unwrap()
            .status(),
        200
    );
    // A read that fails fails whatever the validators say.
    assert_eq!(
        get("/metadata/nope", Some("*".to_owned()))
            .await
            .unwrap()
            .status(),
        404
    );
    // A write moves the live branch: the old validator no longer matches.
    let response = server
        .http
        .request(Method::PUT, server.url("/metadata@main/crm"))
        .bearer_auth(&token)
        .json(&json!({"label": "Customers"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let changed = get("/metadata/crm", Some(etag.clone())).await.unwrap();
    assert_eq!(changed.status(), 200);
    assert_ne!(changed.headers()["etag"], etag.as_str());
    assert_eq!(changed.json::<Value>().await.unwrap()["label"], "Customers");
    server.stop().await;
}

async fn preflight(server: &TestServer, origin: &str) -> reqwest::Response {
    server
        .http
        .request(Method::OPTIONS, server.url("/metadata"))
        .header("origin", origin)
        .header("access-control-request-method", "GET")
        .header(
            "access-control-request-headers",
            "authorization,idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn cors_answers_listed_origins_only() {
    let allowed = "https://app.example.com";
    let origins = CorsOrigins::new(&[allowed.to_owned()]).unwrap();
    let server = TestServer::start_with(move |config| config.cors_origins = origins).await;
    let token = server.admin_token().await;

    let response = preflight(&server, allowed).await;
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(response.headers()["access-control-allow-origin"], allowed);
    let headers = response.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(headers.contains("authorization"), "{headers}");
    assert!(headers.contains("idempotency-key"), "{headers}");

    let response = server
        .http
        .get(server.url("/metadata"))
        .header("origin", allowed)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["access-control-allow-origin"], allowed);
    let exposed = response.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(exposed.contains("x-request-id"), "{exposed}");
    assert!(exposed.contains("idempotent-replayed"), "{exposed}");
    assert!(response
        .headers()
        .get("access-control-allow-credentials")
        .is_none());

    // Another origin is served, but without CORS headers, so its page cannot read the answer.
    let response = server
        .http
        .get(server.url("/metadata"))
        .header("origin", "https://evil.example.com")
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    let response = preflight(&server, "https://evil.example.com").await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    server.stop().await;
}

#[tokio::test]
async fn without_listed_origins_no_cors_header_is_sent() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let response = server
        .http
        .get(server.url("/metadata"))
        .header("origin", "https://app.example.com")
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    let response = preflight(&server, "https://app.example.com").await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    server.stop().await;
}
