//! Behind a TLS-terminating proxy: `HF_PUBLIC_URL` and `HF_TRUSTED_PROXIES` decide whether the
//! `hf_runtime` cookie carries `Secure`, and forwarded headers count only from listed proxies.

use hf_server::public_access::PublicAccess;
use hf_testkit::TestServer;
use serde_json::Value;

async fn start(public_url: Option<&str>, proxies: &[&str]) -> TestServer {
    let proxies: Vec<String> = proxies.iter().map(|p| (*p).to_owned()).collect();
    let access = PublicAccess::new(public_url, &proxies).unwrap();
    TestServer::start_with(move |config| config.public_access = access).await
}

/// Exchanges a fresh session code, sending `headers`; returns the `Set-Cookie` header.
async fn session_cookie(server: &TestServer, headers: &[(&str, &str)]) -> String {
    let token = server.admin_token().await;
    let code: Value = server
        .http
        .post(server.url("/auth/session"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut request = server.http.get(server.url(&format!(
        "/auth/session/exchange?code={}",
        code["code"].as_str().unwrap()
    )));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned()
}

const FORWARDED_HTTPS: [(&str, &str); 1] = [("x-forwarded-proto", "https")];

#[tokio::test]
async fn cookie_is_secure_behind_a_declared_proxy_that_says_https() {
    let server = start(None, &["127.0.0.1"]).await;
    let cookie = session_cookie(&server, &FORWARDED_HTTPS).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    // The same proxy forwarding plain HTTP.
    let cookie = session_cookie(&server, &[("x-forwarded-proto", "http")]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
    server.stop().await;
}

#[tokio::test]
async fn forwarded_proto_from_an_undeclared_peer_is_ignored() {
    for proxies in [&[][..], &["10.0.0.0/8"][..]] {
        let server = start(None, proxies).await;
        let cookie = session_cookie(&server, &FORWARDED_HTTPS).await;
        assert!(!cookie.contains("Secure"), "{proxies:?}: {cookie}");
        server.stop().await;
    }
}

#[tokio::test]
async fn cookie_is_secure_when_the_public_url_is_https() {
    let server = start(Some("https://hf.example.com"), &[]).await;
    let cookie = session_cookie(&server, &[]).await;
    assert!(cookie.contains("; Secure"), "{cookie}");
    server.stop().await;
    let server = start(Some("http://hf.internal:8080"), &[]).await;
    let cookie = session_cookie(&server, &[]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
    server.stop().await;
}
