//! `POST /data/query` with the constructs real applications need (semi-joins, CASE and the
//! conversion functions, date literals in the request's time zone, ...), over real HTTP against
//! the demo CRM with rows inserted by plain SQL.

use hf_testkit::TestServer;
use serde_json::{json, Value};

use crate::support::assert_envelope;

/// Accounts and opportunities with fixed ids, so results can be compared exactly.
const RECORDS: &str = "
INSERT INTO crm.account (id, name, industry, email) VALUES
  ('00000000-0000-0000-0000-0000000000a1', 'Acme', 'Energy', 'hello@acme.test'),
  ('00000000-0000-0000-0000-0000000000a2', 'Globex', 'Retail', NULL),
  ('00000000-0000-0000-0000-0000000000a3', 'Initech', NULL, NULL);
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date) VALUES
  ('Big turbine', '00000000-0000-0000-0000-0000000000a1', 50000.50, 60, 'open', '2024-05-01'),
  ('Small pump', '00000000-0000-0000-0000-0000000000a1', 1200, 100, 'won', '2024-02-01'),
  ('Shelf deal', '00000000-0000-0000-0000-0000000000a2', 0, 0, 'lost', NULL);
";

async fn demo_with_records() -> TestServer {
    let server = TestServer::start_demo().await;
    let client = server.db.client().await;
    client.batch_execute(RECORDS).await.unwrap();
    server
}

/// Sends a body given as JSON text, so numbers reach the server exactly as written.
async fn post_text(server: &TestServer, token: &str, body: &str) -> reqwest::Response {
    server
        .http
        .post(server.url("/data/query"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// Runs a query that must succeed and returns its records.
async fn records(server: &TestServer, token: &str, body: Value) -> Vec<Value> {
    let response = post_text(server, token, &body.to_string()).await;
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body}: {answer}");
    answer["records"].as_array().unwrap().clone()
}

/// The values of one key over the records.
fn column(records: &[Value], key: &str) -> Vec<Value> {
    records.iter().map(|record| record[key].clone()).collect()
}

#[tokio::test]
async fn parameters_follow_the_record_value_grammar() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    // A decimal parameter is exact: a number a double cannot hold is refused, not rounded
    // (as a record field of type decimal refuses it), and the same value as a string works.
    let query = "SELECT name FROM crm.opportunity WHERE amount < :max ORDER BY name";
    let body = format!(r#"{{"query": "{query}", "params": {{"max": 12345678901234567.5}}}}"#);
    let answer = assert_envelope(
        post_text(&server, &token, &body).await,
        400,
        "HOQS_TYPE_ERROR",
    )
    .await;
    let message = answer["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot be represented exactly"),
        "{message}"
    );
    let found = records(
        &server,
        &token,
        json!({"query": query, "params": {"max": "12345678901234567.5"}}),
    )
    .await;
    assert_eq!(
        column(&found, "name"),
        [
            json!("Big turbine"),
            json!("Shelf deal"),
            json!("Small pump")
        ]
    );
    // Year 0 is no date for a record, so it is none for a parameter either.
    let answer = assert_envelope(
        post_text(
            &server,
            &token,
            r#"{"query": "SELECT name FROM crm.opportunity WHERE close_date = :d", "params": {"d": "0000-01-01"}}"#,
        )
        .await,
        400,
        "HOQS_TYPE_ERROR",
    )
    .await;
    assert!(answer["errors"][0]["location"].is_object(), "{answer}");
}
