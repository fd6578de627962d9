//! `POST /data/query` over real HTTP against the demo CRM with records inserted by plain SQL:
//! every construct of HOQS, the contract's result shape, located errors, privileges and
//! row-level security, injection attempts, size and nesting limits, timeouts, and the caller's
//! role never leaking to the next request.

use std::path::Path;

use hf_testkit::TestServer;
use reqwest::Response;
use serde_json::{json, Map, Value};

use crate::auth::unique_name;
use crate::support::assert_envelope;

/// Accounts, contacts and opportunities with fixed ids, so results can be compared exactly.
const RECORDS: &str = "
INSERT INTO crm.account (id, name, industry, email, website) VALUES
  ('00000000-0000-0000-0000-0000000000a1', 'Acme', 'Energy', 'hello@acme.test', NULL),
  ('00000000-0000-0000-0000-0000000000a2', 'Globex', 'Retail', NULL, 'globex.test'),
  ('00000000-0000-0000-0000-0000000000a3', 'Initech', NULL, NULL, NULL);
INSERT INTO crm.contact (name, title, account, created_at) VALUES
  ('Ada', 'CTO', '00000000-0000-0000-0000-0000000000a1', '2024-01-31T10:00:00.25Z'),
  ('Bob', NULL, NULL, '2024-02-01T00:00:00Z');
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date) VALUES
  ('Big turbine', '00000000-0000-0000-0000-0000000000a1', 50000.50, 60, 'open', '2024-05-01'),
  ('Small pump', '00000000-0000-0000-0000-0000000000a1', 1200, 100, 'won', '2024-02-01'),
  ('Shelf deal', '00000000-0000-0000-0000-0000000000a2', 0, 0, 'lost', NULL),
  ('Mystery', '00000000-0000-0000-0000-0000000000a3', NULL, NULL, NULL, NULL);
";

async fn demo_with_records() -> TestServer {
    let server = TestServer::start_demo().await;
    server
        .db
        .client()
        .await
        .batch_execute(RECORDS)
        .await
        .unwrap();
    server
}

async fn post_query(server: &TestServer, token: &str, query: &str, params: Value) -> Response {
    server
        .http
        .post(server.url("/data/query"))
        .bearer_auth(token)
        .json(&json!({"query": query, "params": params}))
        .send()
        .await
        .unwrap()
}

/// Runs a query that must succeed and returns its records.
async fn records(server: &TestServer, token: &str, query: &str, params: Value) -> Vec<Value> {
    let response = post_query(server, token, query, params).await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{query}: {body}");
    body["records"].as_array().unwrap().clone()
}

/// The values of one key over the records.
fn column(records: &[Value], key: &str) -> Vec<Value> {
    records.iter().map(|record| record[key].clone()).collect()
}

#[tokio::test]
async fn every_construct_works_over_http() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;

    // Paths through lookups, parameters, decimals as strings and integers as numbers.
    let found = records(
        &server,
        &token,
        "SELECT name, amount, probability, account.name, close_date FROM crm.opportunity \
         WHERE stage = 'won' AND amount >= :min ORDER BY amount DESC LIMIT 20",
        json!({"min": "1000"}),
    )
    .await;
    assert_eq!(
        found,
        vec![
            json!({"name": "Small pump", "amount": "1200", "probability": 100,
                    "account.name": "Acme", "close_date": "2024-02-01"})
        ]
    );

    // Formula and rollup fields, usable like stored fields; NULLS LAST; the formula is exact.
    let found = records(
        &server,
        &token,
        "SELECT name, weighted_amount FROM crm.opportunity ORDER BY weighted_amount DESC NULLS LAST",
        json!({}),
    )
    .await;
    assert_eq!(
        column(&found, "weighted_amount"),
        vec![json!("30000.3"), json!("1200"), json!("0"), Value::Null]
    );
    let found = records(
        &server,
        &token,
        "SELECT name, opportunity_count, pipeline_amount, won_amount FROM crm.account \
         WHERE opportunity_count > 0 ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(
        found[0],
        json!({"name": "Acme", "opportunity_count": 2, "pipeline_amount": "51200.50", "won_amount": "1200"})
    );
    assert_eq!(
        column(&found, "won_amount"),
        vec![json!("1200"), json!("0"), json!("0")]
    );

    // Child-relationship subqueries: a JSON array per record, ordered and limited.
    let found = records(
        &server,
        &token,
        "SELECT name, (SELECT name, amount FROM crm.opportunity.account WHERE stage != 'lost' \
         ORDER BY amount DESC LIMIT 5) AS deals, (SELECT COUNT(*) FROM crm.contact) AS contacts \
         FROM crm.account ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(
        found[0],
        json!({"name": "Acme",
               "deals": [{"name": "Big turbine", "amount": "50000.50"},
                         {"name": "Small pump", "amount": "1200"}],
               "contacts": [{"count(*)": 1}]})
    );
    assert_eq!(found[1]["deals"], json!([]));

    // COUNT(*), GROUP BY, HAVING, aggregate keys in lower case without spaces, alias sorting.
    let found = records(
        &server,
        &token,
        "SELECT account.name, COUNT(*), SUM(amount) AS total, MAX(close_date) FROM crm.opportunity \
         GROUP BY account.name HAVING COUNT(*) >= 1 ORDER BY total DESC NULLS LAST",
        json!({}),
    )
    .await;
    assert_eq!(
        found[0],
        json!({"account.name": "Acme", "count(*)": 2, "total": "51200.50", "max(close_date)": "2024-05-01"})
    );
    assert_eq!(found.len(), 3);
    let found = records(
        &server,
        &token,
        "SELECT COUNT(*) FROM crm.opportunity",
        json!({}),
    )
    .await;
    assert_eq!(found, vec![json!({"count(*)": 4})]);

    // DISTINCT, NULLS FIRST, OFFSET.
    let found = records(
        &server,
        &token,
        "SELECT DISTINCT account.industry AS industry FROM crm.opportunity ORDER BY industry NULLS FIRST",
        json!({}),
    )
    .await;
    assert_eq!(
        column(&found, "industry"),
        vec![Value::Null, json!("Energy"), json!("Retail")]
    );
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity ORDER BY name LIMIT 2 OFFSET 1",
        json!({}),
    )
    .await;
    assert_eq!(
        column(&found, "name"),
        vec![json!("Mystery"), json!("Shelf deal")]
    );

    // A query on the abstract parent returns its subtypes' records; datetimes are RFC 3339 UTC.
    let found = records(
        &server,
        &token,
        "SELECT name, createdAt FROM crm.party WHERE createdAt < 2024-06-01T00:00:00Z ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(
        found,
        vec![
            json!({"name": "Ada", "createdAt": "2024-01-31T10:00:00.25Z"}),
            json!({"name": "Bob", "createdAt": "2024-02-01T00:00:00Z"}),
        ]
    );
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.party ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(found.len(), 5, "3 accounts and 2 contacts: {found:?}");

    // Conditions: IN, NOT IN, LIKE is case-sensitive, ILIKE is not, IS NULL, NOT, date literals.
    let names = |found: Vec<Value>| column(&found, "name");
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE stage IN ('open', 'won') AND name NOT IN ('x') \
         AND name LIKE '%p%' AND NOT (close_date > 2024-04-30) ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(names(found), vec![json!("Small pump")]);
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE name ILIKE 'big%' OR stage IS NULL ORDER BY name",
        json!({}),
    )
    .await;
    assert_eq!(names(found), vec![json!("Big turbine"), json!("Mystery")]);

    // NULL semantics: a comparison with NULL is unknown, so no record matches it.
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE amount = NULL",
        json!({}),
    )
    .await;
    assert!(found.is_empty());

    // Functions and expressions as items; their keys are their text.
    let found = records(
        &server,
        &token,
        "SELECT UPPER(name), COALESCE(stage, 'none') AS stage, IF(amount > 1000, 'big', 'small') AS size, \
         ADD_DAYS(close_date, 30) AS later, probability / 3 AS third, amount / 0 AS by_zero \
         FROM crm.opportunity WHERE name = 'Small pump'",
        json!({}),
    )
    .await;
    assert_eq!(
        found,
        vec![
            json!({"upper(name)": "SMALL PUMP", "stage": "won", "size": "big",
                    "later": "2024-03-02", "third": "33.3333333333333333", "by_zero": null})
        ]
    );

    // The default LIMIT is 100.
    server
        .db
        .client()
        .await
        .batch_execute(
            "INSERT INTO crm.opportunity (name, account) \
             SELECT 'bulk ' || n, '00000000-0000-0000-0000-0000000000a2' FROM generate_series(1, 150) n",
        )
        .await
        .unwrap();
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity",
        json!({}),
    )
    .await;
    assert_eq!(found.len(), 100);
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity LIMIT :n",
        json!({"n": 120}),
    )
    .await;
    assert_eq!(found.len(), 120);
}

#[tokio::test]
async fn problems_are_located_errors() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;

    let response = post_query(&server, &token, "SELECT nmae FROM crm.account", json!({})).await;
    let body = assert_envelope(response, 400, "HOQS_UNKNOWN_NAME").await;
    let entry = &body["errors"][0];
    assert_eq!(
        entry["message"],
        "unknown field `nmae` on crm.account — did you mean `name`?"
    );
    assert_eq!(entry["scope"], "request");
    assert_eq!(entry["target"], Value::Null);
    assert_eq!(
        entry["location"],
        json!({"line": 1, "column": 8, "frame": "SELECT nmae FROM crm.account"})
    );

    let response = post_query(
        &server,
        &token,
        "SELECT name\nFROM crm.account\nWHERE",
        json!({}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_SYNTAX_ERROR").await;
    assert_eq!(body["errors"][0]["location"]["line"], 3);

    // The column counts UTF-16 code units: the emoji before the mistake counts twice.
    let response = post_query(
        &server,
        &token,
        "SELECT '😀', amout FROM crm.opportunity",
        json!({}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_UNKNOWN_NAME").await;
    assert_eq!(body["errors"][0]["location"]["column"], 14);

    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE amount = 'ten'",
        json!({}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE amount > :min",
        json!({"min": "ten"}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE amount > :min",
        json!({}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_UNKNOWN_NAME").await;
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.account LIMIT 10001",
        json!({}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_LIMIT_TOO_LARGE").await;
    assert_eq!(body["errors"][0]["location"]["column"], 36);
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.account LIMIT :n",
        json!({"n": 10001}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_LIMIT_TOO_LARGE").await;

    // Several problems are reported together.
    let response = post_query(
        &server,
        &token,
        "SELECT nmae, amout FROM crm.opportunity",
        json!({}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_UNKNOWN_NAME").await;
    assert_eq!(body["errors"].as_array().unwrap().len(), 2);

    // A value PostgreSQL cannot compute is the query's fault, not the service's.
    let response = post_query(
        &server,
        &token,
        "SELECT ADD_DAYS(close_date, 999999999) FROM crm.opportunity WHERE close_date IS NOT NULL",
        json!({}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_EVALUATION_ERROR").await;

    // Body problems and authentication.
    let response = server
        .http
        .post(server.url("/data/query"))
        .json(&json!({"query": "SELECT name FROM crm.account"}))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    let response = server
        .http
        .post(server.url("/data/query"))
        .bearer_auth(&token)
        .json(&json!({"query": "SELECT name FROM crm.account", "limit": 5}))
        .send()
        .await
        .unwrap();
    let body = assert_envelope(response, 400, "INVALID_BODY").await;
    assert_eq!(body["errors"][0]["target"], "limit");
}

#[tokio::test]
async fn privileges_and_row_level_security_are_obeyed() {
    let server = demo_with_records().await;
    let reader = server
        .create_principal(&unique_name(&server, "reader"), false)
        .await;
    let admin = server.db.client().await;

    // Row-level security: the principal's role does not own the table, so the policy applies,
    // to the query's own rows and to the rows of its rollups and subqueries.
    admin
        .batch_execute(
            "ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY energy_only ON crm.account FOR SELECT TO \"hf:authenticated\" \
               USING (industry = 'Energy'); \
             ALTER TABLE crm.opportunity ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY open_only ON crm.opportunity FOR SELECT TO \"hf:authenticated\" \
               USING (stage = 'open');",
        )
        .await
        .unwrap();
    let found = records(
        &server,
        &reader.token,
        "SELECT name, opportunity_count, (SELECT name FROM crm.opportunity.account) AS deals FROM crm.account",
        json!({}),
    )
    .await;
    assert_eq!(
        found,
        vec![json!({"name": "Acme", "opportunity_count": 1, "deals": [{"name": "Big turbine"}]})]
    );

    // No privilege on a table of the query: 403, whichever clause names it.
    let quoted = format!("\"{}\"", reader.name);
    admin
        .batch_execute(&format!(
            "REVOKE SELECT ON crm.opportunity FROM \"hf:authenticated\"; \
             REVOKE SELECT ON crm.opportunity FROM {quoted};"
        ))
        .await
        .unwrap();
    for query in [
        "SELECT name FROM crm.opportunity",
        "SELECT name, won_amount FROM crm.account",
        "SELECT name, (SELECT name FROM crm.opportunity) AS deals FROM crm.account",
    ] {
        let response = post_query(&server, &reader.token, query, json!({})).await;
        assert_envelope(response, 403, "FORBIDDEN").await;
    }
    // Tables the role may still read keep working after the failures.
    let found = records(
        &server,
        &reader.token,
        "SELECT name FROM crm.account",
        json!({}),
    )
    .await;
    assert_eq!(column(&found, "name"), vec![json!("Acme")]);
}

#[tokio::test]
async fn the_callers_role_never_leaks_to_the_next_request() {
    let server = demo_with_records().await;
    let first = server
        .create_principal(&unique_name(&server, "first"), false)
        .await;
    let second = server
        .create_principal(&unique_name(&server, "second"), false)
        .await;
    let admin = server.db.client().await;
    // Each principal sees only the account named after its role, so every answer shows which
    // role ran the query; a slow policy on contacts lets a request time out.
    admin
        .batch_execute(&format!(
            "INSERT INTO crm.account (name) VALUES ('{first}'), ('{second}'); \
             ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY own ON crm.account FOR SELECT USING (name = current_user); \
             ALTER TABLE crm.contact ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY slow ON crm.contact FOR SELECT USING (pg_sleep(10) IS NOT NULL);",
            first = first.name,
            second = second.name
        ))
        .await
        .unwrap();
    let mine = "SELECT name FROM crm.account";
    for _ in 0..3 {
        let found = records(&server, &first.token, mine, json!({})).await;
        assert_eq!(column(&found, "name"), vec![json!(first.name)]);
        // A failing request (here a value error mid-statement) as the first principal...
        let response = post_query(
            &server,
            &first.token,
            "SELECT ADD_DAYS(close_date, 999999999) FROM crm.opportunity WHERE close_date IS NOT NULL",
            json!({}),
        )
        .await;
        assert_envelope(response, 400, "HOQS_EVALUATION_ERROR").await;
        // ...never makes the next request run as that principal.
        let found = records(&server, &second.token, mine, json!({})).await;
        assert_eq!(column(&found, "name"), vec![json!(second.name)]);
    }
    // A query over the statement timeout answers 504, and the service keeps answering.
    let started = std::time::Instant::now();
    let response = post_query(
        &server,
        &second.token,
        "SELECT name FROM crm.contact",
        json!({}),
    )
    .await;
    assert_envelope(response, 504, "TIMEOUT").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(9));
    let found = records(&server, &first.token, mine, json!({})).await;
    assert_eq!(column(&found, "name"), vec![json!(first.name)]);
}

#[tokio::test]
async fn hostile_text_never_changes_the_statement() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let hostile = [
        "it's; DROP TABLE crm.account; --",
        "x' OR '1'='1",
        "/* */ SELECT 1; --",
        "back\\slash\\' \\\\",
        "U&\"\\0041\" $$ $1 :n E'\\x41'",
        "line\nbreak\ttab",
        "😀 \u{202e} ünïcödé",
    ];
    let client = server.db.client().await;
    for (index, name) in hostile.iter().enumerate() {
        client
            .execute(
                "INSERT INTO crm.account (name, industry) VALUES ($1, 'Hostile')",
                &[&format!("{name}{index}")],
            )
            .await
            .unwrap();
    }
    for (index, name) in hostile.iter().enumerate() {
        let value = format!("{name}{index}");
        // As a parameter...
        let found = records(
            &server,
            &token,
            "SELECT name FROM crm.account WHERE name = :v",
            json!({"v": value}),
        )
        .await;
        assert_eq!(found, vec![json!({"name": value})], "{value:?}");
        // ...and as a literal with its quotes doubled, and as a result key.
        let literal = value.replace('\'', "''");
        let alias = value.replace('"', "\"\"");
        let query = format!("SELECT name AS \"{alias}\" FROM crm.account WHERE name = '{literal}'");
        let found = records(&server, &token, &query, json!({})).await;
        let mut expected = Map::new();
        expected.insert(value.clone(), json!(value));
        assert_eq!(found, vec![Value::Object(expected)], "{query}");
    }
    // Comments and a trailing `;` are text of the query, never a second statement.
    let found = records(
        &server,
        &token,
        "SELECT name -- ; DROP TABLE crm.account\nFROM crm.account /* ; DROP TABLE crm.account */ WHERE industry = 'Hostile'",
        json!({}),
    )
    .await;
    assert_eq!(found.len(), hostile.len());
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.account; DROP TABLE crm.account",
        json!({}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_SYNTAX_ERROR").await;
    // Huge numbers in literals and parameters are exact decimals, never overflows or text.
    let params: Value = serde_json::from_str(
        r#"{"p": 123456789012345678901234567890, "q": "123456789012345678901234567890.5"}"#,
    )
    .unwrap();
    let found = records(
        &server,
        &token,
        "SELECT COUNT(*) FROM crm.opportunity WHERE amount < 99999999999999999999999999999999999999.5 \
         AND probability < 99999999999999999999999 AND amount < :p AND amount < :q",
        params,
    )
    .await;
    assert_eq!(found, vec![json!({"count(*)": 3})]);
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.account LIMIT :n",
        json!({"n": "1; DROP TABLE x"}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    // Everything is still there.
    let count: i64 = client
        .query_one("SELECT count(*) FROM crm.account", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 3 + hostile.len() as i64);
}

#[tokio::test]
async fn oversized_and_deep_queries_get_clean_errors() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    // 10 000 levels of nesting: over the 8 KiB query limit.
    let deep = format!(
        "SELECT name FROM crm.account WHERE {}name = 'x'{}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let response = post_query(&server, &token, &deep, json!({})).await;
    let body = assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(body["errors"][0]["target"], "query");
    // Deep nesting that fits in 8 KiB: a located syntax error, never a crash.
    let deep = format!(
        "SELECT name FROM crm.account WHERE {}name = 'x'{}",
        "(".repeat(3_000),
        ")".repeat(3_000)
    );
    let response = post_query(&server, &token, &deep, json!({})).await;
    assert_envelope(response, 400, "HOQS_SYNTAX_ERROR").await;
    let deep = format!(
        "SELECT name FROM crm.account WHERE {}TRUE",
        "NOT ".repeat(1_500)
    );
    let response = post_query(&server, &token, &deep, json!({})).await;
    assert_envelope(response, 400, "HOQS_SYNTAX_ERROR").await;
    // Functions that repeat their argument's SQL, nested: 143 bytes that would build gigabytes
    // of SQL (and end the service on an allocation failure) are refused, located.
    for (open, close) in [("LN(", ")"), ("DATEVALUE(TEXT(", "))")] {
        let nested = format!(
            "SELECT {}amount{} AS x FROM crm.opportunity",
            open.repeat(26),
            close.repeat(26)
        );
        let response = post_query(&server, &token, &nested, json!({})).await;
        let body = assert_envelope(response, 400, "HOQS_SYNTAX_ERROR").await;
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("too much SQL"), "{message}");
    }
    // A 1 MiB query: over the body limit.
    let huge = format!(
        "SELECT name FROM crm.account WHERE name = '{}'",
        "x".repeat(1024 * 1024)
    );
    let response = post_query(&server, &token, &huge, json!({})).await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    // Deeply nested parameters: a clean 400.
    let params = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let response = server
        .http
        .post(server.url("/data/query"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(format!(
            "{{\"query\": \"SELECT name FROM crm.account\", \"params\": {{\"p\": {params}}}}}"
        ))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 400, "MALFORMED_JSON").await;
    // The service still answers.
    let found = records(&server, &token, "SELECT name FROM crm.account", json!({})).await;
    assert!(found.is_empty());
}

/// The `-- key: value` lines at the top of a fixture.
fn directive<'a>(source: &'a str, key: &str) -> Option<&'a str> {
    source
        .lines()
        .take_while(|line| line.starts_with("--"))
        .find_map(|line| {
            line.strip_prefix("--")?
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .map(str::trim)
}

#[tokio::test]
async fn every_demo_fixture_runs_over_http() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hoqs/ok");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "hoqs"))
        .collect();
    paths.sort();
    let mut ran = 0;
    for path in paths {
        let source = std::fs::read_to_string(&path).unwrap();
        if directive(&source, "model").is_some() {
            continue;
        }
        let params: Map<String, Value> = directive(&source, "params")
            .map(|json| serde_json::from_str(json).unwrap())
            .unwrap_or_default();
        let response = post_query(&server, &token, &source, Value::Object(params)).await;
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{}: {body}", path.display());
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} demo fixtures");
}

/// A principal deleted between authentication and its statements (here: its role dropped
/// behind the service's back, the window a concurrent delete leaves) gets 401, not a 500.
#[tokio::test]
async fn a_role_dropped_mid_request_is_unauthenticated() {
    let server = demo_with_records().await;
    let name = unique_name(&server, "vanishing");
    let principal = server.create_principal(&name, false).await;
    let query = "SELECT name FROM crm.account";
    assert_eq!(
        post_query(&server, &principal.token, query, json!({}))
            .await
            .status(),
        200
    );
    let role = hf_sql::quote_ident(&name).unwrap();
    server
        .db
        .client()
        .await
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .unwrap();
    let response = post_query(&server, &principal.token, query, json!({})).await;
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    let response = server
        .http
        .post(server.url("/data/crm/account"))
        .bearer_auth(&principal.token)
        .json(&json!({"name": "Never written"}))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    server.stop().await;
}

/// `IN :param` takes its candidates from a JSON array: converted to the left side's type,
/// empty allowed, NULL semantics as `IN (...)`, and a bad element is a located type error.
#[tokio::test]
async fn in_takes_an_array_parameter() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let names = |stages: Value, negated: bool| {
        let query = format!(
            "SELECT name FROM crm.opportunity WHERE stage {}IN :stages ORDER BY name",
            if negated { "NOT " } else { "" }
        );
        let (server, token) = (&server, &token);
        async move {
            column(
                &records(server, token, &query, json!({"stages": stages})).await,
                "name",
            )
        }
    };
    assert_eq!(
        names(json!(["open", "won", "it's \"odd\" \\"]), false).await,
        [json!("Big turbine"), json!("Small pump")]
    );
    assert_eq!(names(json!([]), false).await, Vec::<Value>::new());
    // NOT IN nothing holds for every record, even one whose stage is NULL.
    assert_eq!(
        names(json!([]), true).await,
        [
            json!("Big turbine"),
            json!("Mystery"),
            json!("Shelf deal"),
            json!("Small pump")
        ]
    );
    // Otherwise a NULL stage is never "not in" a list, as with a written list.
    assert_eq!(
        names(json!(["won"]), true).await,
        [json!("Big turbine"), json!("Shelf deal")]
    );
    assert_eq!(
        names(json!(["won", null]), true).await,
        Vec::<Value>::new(),
        "NOT IN a list holding NULL is never true"
    );
    let found = records(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE account IN :accounts AND amount IN :amounts ORDER BY name",
        json!({
            "accounts": ["00000000-0000-0000-0000-0000000000a1"],
            "amounts": ["50000.50", 1200],
        }),
    )
    .await;
    assert_eq!(
        column(&found, "name"),
        [json!("Big turbine"), json!("Small pump")]
    );

    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE amount IN :amounts",
        json!({"amounts": [1, "lots"]}),
    )
    .await;
    let body = assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    assert_eq!(body["errors"][0]["location"]["column"], 50, "{body}");
    let response = post_query(
        &server,
        &token,
        "SELECT name FROM crm.opportunity WHERE stage IN :stage",
        json!({"stage": "open"}),
    )
    .await;
    assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    server.stop().await;
}
