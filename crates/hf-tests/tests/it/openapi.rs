//! The OpenAPI document: version, and agreement with the routes that really exist and with the
//! errors they really answer.

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
        for (method, operation) in item.as_object().unwrap() {
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
            // Unauthenticated and bodiless, most requests fail: with a status and a code the
            // document lists for the operation.
            if status >= 400 {
                let response = &operation["responses"][status.to_string()];
                let codes = &response["content"]["application/json"]["schema"]["properties"]
                    ["errors"]["items"]["properties"]["code"]["enum"];
                let listed = codes
                    .as_array()
                    .is_some_and(|codes| codes.iter().any(|c| c == code));
                assert!(
                    listed,
                    "{method} {path} answered {status} {code}, which the document does not list"
                );
            }
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn literal_metadata_paths_are_served() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    for path in [
        "/metadata",
        "/metadata/objects",
        "/metadata/fields",
        "/metadata@main",
        "/metadata@main/objects",
    ] {
        let response = server
            .http
            .get(server.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let list: Value = response.json().await.unwrap();
        assert!(list.is_array(), "{path}: {list}");
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
    for path in [
        "/health",
        "/status",
        "/openapi.json",
        "/metadata/{moduleKey}",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} missing from the document"
        );
    }
}

/// Fills path parameters with plausible values.
fn concrete_path(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "metadata@{branch}" => "metadata@main",
            s if s.starts_with('{') => "x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}
