//! Error entries carry a `target` only in the `field` (a field key or property path) and
//! `record` (a record id) scopes; every other entry has `target: null` and names the item in its
//! message. Each request-scope error the metadata, iam, hfx and schema routes answer is checked
//! here over HTTP, together with the statuses the one error table gives them.

use hf_testkit::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::assert_envelope;

struct Admin {
    server: TestServer,
    token: String,
}

impl Admin {
    async fn start() -> Self {
        let server = TestServer::start().await;
        let token = server.admin_token().await;
        Admin { server, token }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> reqwest::Response {
        let request = self
            .server
            .http
            .request(method, self.server.url(path))
            .bearer_auth(&self.token);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        request.send().await.unwrap()
    }

    async fn ok(&self, method: Method, path: &str, body: Value) {
        let response = self.send(method, path, Some(body)).await;
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {text}");
    }
}

/// Asserts the envelope, then that every entry is request-scoped with a null target and that the
/// first message names `item`.
async fn assert_request_scope(response: reqwest::Response, status: u16, code: &str, item: &str) {
    let body = assert_envelope(response, status, code).await;
    for entry in body["errors"].as_array().unwrap() {
        assert_eq!(entry["scope"], "request", "{body}");
        assert_eq!(entry["target"], Value::Null, "{body}");
    }
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains(item), "`{item}` not named: {message}");
}

#[tokio::test]
async fn request_scope_errors_have_a_null_target_and_name_the_item() {
    let admin = Admin::start().await;
    let scalar = |label: &str| json!({"fieldKind": "scalar", "label": label, "fieldType": "text"});
    admin
        .ok(Method::POST, "/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .ok(
            Method::POST,
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    admin
        .ok(
            Method::POST,
            "/metadata@main/crm/objects/account/fields/name",
            scalar("Name"),
        )
        .await;

    // ALREADY_EXISTS for every kind of item.
    for (path, body, item) in [
        ("/metadata@main/crm", json!({"label": "CRM"}), "crm"),
        (
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
            "crm.account",
        ),
        (
            "/metadata@main/crm/objects/account/fields/name",
            scalar("Name"),
            "name",
        ),
    ] {
        let response = admin.send(Method::POST, path, Some(body)).await;
        assert_request_scope(response, 409, "ALREADY_EXISTS", item).await;
    }
    let response = admin
        .send(
            Method::POST,
            "/iam/principals",
            Some(json!({"name": admin.server.admin_name})),
        )
        .await;
    assert_request_scope(response, 409, "ALREADY_EXISTS", &admin.server.admin_name).await;

    // Not-found codes of the request as a whole (FIELD_NOT_FOUND is field-scoped).
    for (method, path, body, code, item) in [
        (
            Method::GET,
            "/metadata/nope",
            None,
            "MODULE_NOT_FOUND",
            "nope",
        ),
        (
            Method::POST,
            "/metadata@main/nope/objects/thing",
            Some(json!({"label": "Thing"})),
            "MODULE_NOT_FOUND",
            "nope",
        ),
        (
            Method::GET,
            "/metadata/crm/objects/nothing",
            None,
            "OBJECT_NOT_FOUND",
            "nothing",
        ),
        (
            Method::PUT,
            "/metadata@main/crm/objects/nothing",
            Some(json!({"label": "x"})),
            "OBJECT_NOT_FOUND",
            "nothing",
        ),
        (
            Method::GET,
            "/metadata/crm/screens/nothing",
            None,
            "SCREEN_NOT_FOUND",
            "nothing",
        ),
        (
            Method::GET,
            "/hfx/resolve/nope/counter",
            None,
            "MODULE_NOT_FOUND",
            "nope",
        ),
        (
            Method::GET,
            "/metadata@elsewhere/crm",
            None,
            "BRANCH_NOT_FOUND",
            "elsewhere",
        ),
    ] {
        let response = admin.send(method, path, body).await;
        assert_request_scope(response, 404, code, item).await;
    }
    let response = admin
        .send(
            Method::GET,
            "/metadata/crm/objects/account/fields/nope",
            None,
        )
        .await;
    let body = assert_envelope(response, 404, "FIELD_NOT_FOUND").await;
    assert_eq!(body["errors"][0]["scope"], "field");
    assert_eq!(body["errors"][0]["target"], "nope");

    // A key that breaks the grammar, in a path.
    let response = admin
        .send(
            Method::POST,
            "/metadata@main/Bad-Key",
            Some(json!({"label": "x"})),
        )
        .await;
    assert_request_scope(response, 400, "INVALID_KEY", "Bad-Key").await;

    // IN_USE: a module that still has objects.
    let response = admin.send(Method::DELETE, "/metadata@main/crm", None).await;
    assert_request_scope(response, 409, "IN_USE", "crm").await;

    // DESTRUCTIVE_CHANGE: dropping a live column without consent.
    let response = admin
        .send(
            Method::DELETE,
            "/metadata@main/crm/objects/account/fields/name",
            None,
        )
        .await;
    assert_request_scope(response, 409, "DESTRUCTIVE_CHANGE", "crm.account.name").await;

    // APPLY_FAILED: a unique constraint over duplicate values.
    let client = admin.server.db.client().await;
    client
        .batch_execute("INSERT INTO crm.account (name) VALUES ('a'), ('a')")
        .await
        .unwrap();
    let response = admin
        .send(
            Method::PUT,
            "/metadata@main/crm/objects/account/fields/name",
            Some(json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text", "uniqueConstraint": true})),
        )
        .await;
    assert_request_scope(response, 422, "APPLY_FAILED", "account").await;

    // BRANCH_DIVERGED: a branch forked before the live head moved on.
    admin
        .ok(
            Method::POST,
            "/metadata@feature/crm/objects/lead",
            json!({"label": "Lead"}),
        )
        .await;
    admin
        .ok(
            Method::POST,
            "/metadata@main/crm/objects/contact",
            json!({"label": "Contact"}),
        )
        .await;
    let response = admin
        .send(Method::POST, "/apply", Some(json!({"branch": "feature"})))
        .await;
    assert_request_scope(response, 409, "BRANCH_DIVERGED", "feature").await;

    admin.server.stop().await;
}

#[tokio::test]
async fn model_diagnostics_take_their_status_from_the_error_table() {
    let admin = Admin::start().await;
    admin
        .ok(Method::POST, "/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    // A rule key that breaks the key grammar is found by the model's validation; it is the same
    // INVALID_KEY, with the same 400, as a bad key in a path.
    let response = admin
        .send(
            Method::POST,
            "/metadata@main/crm/objects/account",
            Some(json!({"label": "Account", "rules": {"Bad Rule": {"assert": "true", "message": "m"}}})),
        )
        .await;
    let body = assert_envelope(response, 400, "INVALID_KEY").await;
    assert_eq!(body["errors"][0]["scope"], "field", "{body}");
    // A diagnostic of its own (a label that is too long) keeps its code, with the table's 422.
    let response = admin
        .send(
            Method::POST,
            "/metadata@main/crm/objects/account",
            Some(json!({"label": "x".repeat(300)})),
        )
        .await;
    let body = assert_envelope(response, 422, "LABEL_TOO_LONG").await;
    assert_eq!(body["errors"][0]["target"], "label", "{body}");
    admin.server.stop().await;
}

#[tokio::test]
async fn a_missing_required_query_parameter_is_400() {
    let server = TestServer::start().await;
    let response = server
        .http
        .get(server.url("/auth/session/exchange"))
        .send()
        .await
        .unwrap();
    let body = assert_envelope(response, 400, "INVALID_QUERY").await;
    assert_eq!(body["errors"][0]["target"], "code", "{body}");
    // A code that is there but wrong stays 401 INVALID_CODE.
    let response = server
        .http
        .get(server.url("/auth/session/exchange?code=nope"))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "INVALID_CODE").await;
    server.stop().await;
}
