//! The OpenAPI document: version, and agreement with the routes that really exist.

use hf_testkit::TestServer;
use serde_json::Value;

#[tokio::test]
async fn document_is_openapi_3_1_and_every_operation_exists() {
    let server = TestServer::start().await;
    let response = server
        .http
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(!paths.is_empty());
    for (path, item) in paths {
        for (method, _) in item.as_object().unwrap() {
            let concrete = concrete_path(path);
            let request = server
                .http
                .request(
                    method.to_uppercase().parse().unwrap(),
                    server.url(&concrete),
                )
                .send()
                .await
                .unwrap();
            let status = request.status().as_u16();
            let body: Value = request.json().await.unwrap_or(Value::Null);
            let code = body["errors"][0]["code"].as_str().unwrap_or("");
            assert!(
                code != "ROUTE_NOT_FOUND" && code != "METHOD_NOT_ALLOWED",
                "{method} {path} is documented but not served ({status} {code})"
            );
        }
    }
    server.stop().await;
}

#[test]
fn every_served_route_is_documented() {
    // The served routes and the document come from one registration list (`app::register`);
    // this guards the list against routes added with `route()` (which utoipa cannot see).
    let source = include_str!("../../../hf-server/src/app.rs");
    assert!(
        !source.contains(".route("),
        "register routes with .service(handler) so they are documented"
    );
    let doc = hf_server::app::openapi();
    for path in ["/health", "/status", "/openapi.json"] {
        assert!(
            doc.paths.paths.contains_key(path),
            "{path} missing from the document"
        );
    }
}

/// Fills path parameters with plausible values.
fn concrete_path(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "{branchRoot}" => "metadata@main",
            s if s.starts_with('{') => "x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}
