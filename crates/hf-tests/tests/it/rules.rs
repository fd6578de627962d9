//! Validation rules that see the record before the write (`ISNEW`, `ISCHANGED`, `PRIORVALUE`),
//! the caller (`$User`) and regular expressions, and the system fields `createdBy` and
//! `updatedBy`, over real HTTP against the demo CRM.

use hf_testkit::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{assert_envelope, json_with_status as ok, send_as as send};

/// Adds rules to an object of the live branch (its other properties kept).
async fn add_rules(server: &TestServer, token: &str, object: &str, rules: Value) {
    let path = format!("/metadata@main/crm/objects/{object}");
    let mut definition = ok(
        send(server, token, Method::GET, &path, Value::Null).await,
        200,
    )
    .await;
    let existing = definition["rules"].as_object().cloned().unwrap_or_default();
    let mut merged = existing;
    merged.extend(rules.as_object().unwrap().clone());
    let body = json!({
        "label": definition["label"].take(),
        "rules": merged,
    });
    ok(send(server, token, Method::PUT, &path, body).await, 200).await;
}

/// The rule keys of a `RULE_FAILED` answer.
fn failed_rules(body: &Value) -> Vec<String> {
    body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["code"] == "RULE_FAILED")
        .map(|e| e["rule"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn rules_see_the_stored_record_the_caller_and_patterns() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    add_rules(
        &server,
        &token,
        "opportunity",
        json!({
            "won_stays_won": {
                "assert": "NOT (ISCHANGED(stage) AND PRIORVALUE(stage) = 'won')",
                "message": "A won deal cannot be reopened.",
                "field": "stage",
            },
            "new_deals_start_open": {
                "assert": "NOT ISNEW() OR stage = 'open' OR stage IS NULL OR $User.id IS NOT NULL",
                "message": "New deals start open.",
            },
        }),
    )
    .await;
    add_rules(
        &server,
        &token,
        "party",
        json!({
            "email_shape": {
                "assert": "email IS NULL OR REGEX(email, '[^@ ]+@[^@ ]+\\.[a-z]+')",
                "message": "Not an email address.",
                "field": "email",
            },
            "no_catastrophe": {
                "assert": "phone IS NULL OR REGEX(phone, '(a+)+$')",
                "message": "Test phones are made of a's.",
                "field": "phone",
            },
        }),
    )
    .await;

    // REGEX refuses a bad email, and accepts a good one.
    let response = send(
        &server,
        &token,
        Method::POST,
        "/data/crm/account",
        json!({"name": "Acme", "email": "not an email"}),
    )
    .await;
    let body = assert_envelope(response, 422, "RULE_FAILED").await;
    assert_eq!(failed_rules(&body), ["email_shape"], "{body}");
    let account = ok(
        send(
            &server,
            &token,
            Method::POST,
            "/data/crm/account",
            json!({"name": "Acme", "email": "hello@acme.test"}),
        )
        .await,
        201,
    )
    .await;
    let account_id = account["id"].as_str().unwrap().to_owned();

    // A catastrophic pattern against a long text ends at once with a clean refusal.
    let long = format!("{}b", "a".repeat(30_000));
    let started = std::time::Instant::now();
    let response = send(
        &server,
        &token,
        Method::POST,
        "/data/crm/account",
        json!({"name": "Slow", "phone": long}),
    )
    .await;
    assert_envelope(response, 422, "RULE_FAILED").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(15));

    // createdBy and updatedBy are the principal's id; read-only.
    let me = ok(
        send(&server, &token, Method::GET, "/auth/me", Value::Null).await,
        200,
    )
    .await;
    assert_eq!(account["createdBy"], me["id"], "{account}");
    assert_eq!(account["updatedBy"], me["id"], "{account}");
    let response = send(
        &server,
        &token,
        Method::POST,
        "/data/crm/account",
        json!({"name": "X", "createdBy": me["id"]}),
    )
    .await;
    assert_envelope(response, 422, "READ_ONLY_FIELD").await;

    // A won deal cannot be reopened; other changes of it and of open deals go through.
    let deal = ok(
        send(
            &server,
            &token,
            Method::POST,
            "/data/crm/opportunity",
            json!({"name": "Pump", "account": account_id, "stage": "open", "amount": "100"}),
        )
        .await,
        201,
    )
    .await;
    let path = format!("/data/crm/opportunity/{}", deal["id"].as_str().unwrap());
    ok(
        send(
            &server,
            &token,
            Method::PATCH,
            &path,
            json!({"stage": "won"}),
        )
        .await,
        200,
    )
    .await;
    ok(
        send(
            &server,
            &token,
            Method::PATCH,
            &path,
            json!({"amount": "120"}),
        )
        .await,
        200,
    )
    .await;
    let response = send(
        &server,
        &token,
        Method::PATCH,
        &path,
        json!({"stage": "open"}),
    )
    .await;
    let body = assert_envelope(response, 422, "RULE_FAILED").await;
    assert_eq!(failed_rules(&body), ["won_stays_won"], "{body}");
    assert_eq!(body["errors"][0]["target"], "stage", "{body}");

    // A row written with plain SQL has no createdBy; hf's update fills updatedBy.
    let client = server.db.client().await;
    client
        .batch_execute("INSERT INTO crm.account (id, name) VALUES ('00000000-0000-0000-0000-0000000000b1', 'Plain')")
        .await
        .unwrap();
    let plain = ok(
        send(
            &server,
            &token,
            Method::PATCH,
            "/data/crm/account/00000000-0000-0000-0000-0000000000b1",
            json!({"website": "plain.test"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(plain["createdBy"], Value::Null, "{plain}");
    assert_eq!(plain["updatedBy"], me["id"], "{plain}");

    // Queries read them; ISNEW and friends are refused outside rules, located.
    let response = send(
        &server,
        &token,
        Method::POST,
        "/data/query",
        json!({"query": "SELECT name FROM crm.account WHERE createdBy = $User.id ORDER BY name"}),
    )
    .await;
    let found = ok(response, 200).await;
    assert_eq!(found["records"], json!([{"name": "Acme"}]));
    let response = send(
        &server,
        &token,
        Method::POST,
        "/data/query",
        json!({"query": "SELECT name FROM crm.account WHERE ISCHANGED(name)"}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    assert_eq!(body["errors"][0]["location"]["column"], 36, "{body}");
}
