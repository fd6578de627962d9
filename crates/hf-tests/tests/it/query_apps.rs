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

#[tokio::test]
async fn semi_and_anti_joins_select_by_related_records() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    // Accounts with a won deal; accounts with no deal at all.
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT name FROM crm.account WHERE id IN (SELECT account FROM crm.opportunity WHERE stage = 'won') ORDER BY name"}),
    )
    .await;
    assert_eq!(column(&found, "name"), [json!("Acme")]);
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT name FROM crm.account WHERE id NOT IN (SELECT account FROM crm.opportunity) ORDER BY name"}),
    )
    .await;
    assert_eq!(column(&found, "name"), [json!("Initech")]);
    // A lookup against a subquery over a hierarchy (parties include accounts), with a path.
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT name FROM crm.opportunity WHERE account IN (SELECT id FROM crm.party WHERE email LIKE :mail) ORDER BY name",
               "params": {"mail": "%@acme.test"}}),
    )
    .await;
    assert_eq!(
        column(&found, "name"),
        [json!("Big turbine"), json!("Small pump")]
    );
    // Selecting a text is a located type error.
    let response = post_text(
        &server,
        &token,
        &json!({"query": "SELECT name FROM crm.account WHERE id IN (SELECT name FROM crm.opportunity)"}).to_string(),
    )
    .await;
    let answer = assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    assert_eq!(answer["errors"][0]["location"]["column"], 50, "{answer}");
}

#[tokio::test]
async fn case_conversions_and_literal_text_search() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT name, CASE WHEN stage = 'won' THEN 'yes' WHEN stage = 'lost' THEN 'no' ELSE 'maybe' END AS verdict, \
                         TEXT(amount) AS amount_text, VALUE('0012.50') AS value, DATEVALUE('2024-02-30') AS bad_day, \
                         LPAD(TEXT(probability), 4, '0') AS padded, FIND('p', name) AS p_at, TRUNC(amount, 0) AS whole, \
                         LOG(100) AS two, ISBLANK(industry_of) AS blank, BLANKVALUE(stage, 'none') AS stage \
                         FROM crm.opportunity ORDER BY name"
                .replace("industry_of", "account.industry")}),
    )
    .await;
    assert_eq!(
        column(&found, "verdict"),
        [json!("maybe"), json!("no"), json!("yes")]
    );
    assert_eq!(
        column(&found, "amount_text"),
        [json!("50000.50"), json!("0"), json!("1200")]
    );
    assert_eq!(column(&found, "value")[0], json!("12.50"));
    assert_eq!(column(&found, "bad_day")[0], Value::Null);
    assert_eq!(
        column(&found, "padded"),
        [json!("0060"), json!("0000"), json!("0100")]
    );
    assert_eq!(column(&found, "p_at"), [json!(0), json!(0), json!(7)]);
    assert_eq!(column(&found, "whole")[0], json!("50000"));
    assert_eq!(found[0]["two"].as_f64(), Some(2.0));
    assert_eq!(
        column(&found, "blank"),
        [json!(false), json!(false), json!(false)]
    );
    // `%` and `_` typed by a user are found literally by CONTAINS and by LIKE ... ESCAPE.
    let client = server.db.client().await;
    client
        .batch_execute(
            "INSERT INTO crm.opportunity (name, account) VALUES \
             ('Save 50% now', '00000000-0000-0000-0000-0000000000a2'), \
             ('Save 500 now', '00000000-0000-0000-0000-0000000000a2')",
        )
        .await
        .unwrap();
    for query in [
        "SELECT name FROM crm.opportunity WHERE CONTAINS(name, :typed)",
        "SELECT name FROM crm.opportunity WHERE name LIKE '%50!%%' ESCAPE '!'",
    ] {
        let found = records(
            &server,
            &token,
            json!({"query": query, "params": {"typed": "50%"}}),
        )
        .await;
        assert_eq!(column(&found, "name"), [json!("Save 50% now")], "{query}");
    }
    // REGEX matches the whole text, with PostgreSQL's regular expressions.
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT name FROM crm.account WHERE REGEX(email, '[a-z]+@[a-z]+\\.test')"}),
    )
    .await;
    assert_eq!(column(&found, "name"), [json!("Acme")]);
    // A bad pattern literal is located; a bad pattern in a parameter is an evaluation error.
    let response = post_text(
        &server,
        &token,
        &json!({"query": "SELECT name FROM crm.account WHERE REGEX(name, '(a')"}).to_string(),
    )
    .await;
    let answer = assert_envelope(response, 400, "HOQS_TYPE_ERROR").await;
    assert_eq!(answer["errors"][0]["location"]["column"], 48, "{answer}");
    let response = post_text(
        &server,
        &token,
        &json!({"query": "SELECT name FROM crm.account WHERE REGEX(name, :p)", "params": {"p": "(a"}})
            .to_string(),
    )
    .await;
    assert_envelope(response, 400, "HOQS_EVALUATION_ERROR").await;
}

#[tokio::test]
async fn the_caller_is_user() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let found = records(
        &server,
        &token,
        json!({"query": "SELECT $User.name AS me, $User.id AS my_id FROM crm.account WHERE name = 'Acme'"}),
    )
    .await;
    let me: Value = server
        .http
        .get(server.url("/auth/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(found[0]["my_id"], me["id"], "{me}");
    assert_eq!(found[0]["me"], me["pgRole"], "{me}");
}

/// The first day of the unit (`day`, `week` from Monday, `month`, `quarter`, `year`) holding
/// `day`, moved by `k` units.
fn unit_start(day: chrono::NaiveDate, unit: &str, k: i32) -> chrono::NaiveDate {
    use chrono::{Datelike, Days, Months, NaiveDate};
    let months = |first: NaiveDate, count: i32| {
        let shift = Months::new(count.unsigned_abs());
        if count >= 0 {
            first.checked_add_months(shift).unwrap()
        } else {
            first.checked_sub_months(shift).unwrap()
        }
    };
    let days = |from: NaiveDate, count: i64| {
        if count >= 0 {
            from.checked_add_days(Days::new(count.unsigned_abs()))
                .unwrap()
        } else {
            from.checked_sub_days(Days::new(count.unsigned_abs()))
                .unwrap()
        }
    };
    let first_of_month = day.with_day(1).unwrap();
    match unit {
        "day" => days(day, i64::from(k)),
        "week" => {
            let monday = days(day, -i64::from(day.weekday().num_days_from_monday()));
            days(monday, 7 * i64::from(k))
        }
        "month" => months(first_of_month, k),
        "quarter" => {
            let first = first_of_month
                .with_month((day.month0() / 3) * 3 + 1)
                .unwrap();
            months(first, 3 * k)
        }
        _ => months(first_of_month.with_month(1).unwrap(), 12 * k),
    }
}

#[tokio::test]
async fn date_literals_hold_at_the_edges_of_their_ranges_in_the_request_time_zone() {
    use chrono::{TimeZone, Utc};
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let client = server.db.client().await;
    // (literal, unit, first unit, last unit), counted from the current one, as documented.
    let literals: &[(&str, &str, i32, i32)] = &[
        ("YESTERDAY", "day", -1, -1),
        ("TODAY", "day", 0, 0),
        ("TOMORROW", "day", 1, 1),
        ("LAST_WEEK", "week", -1, -1),
        ("THIS_WEEK", "week", 0, 0),
        ("NEXT_WEEK", "week", 1, 1),
        ("LAST_MONTH", "month", -1, -1),
        ("THIS_MONTH", "month", 0, 0),
        ("NEXT_MONTH", "month", 1, 1),
        ("LAST_QUARTER", "quarter", -1, -1),
        ("THIS_QUARTER", "quarter", 0, 0),
        ("NEXT_QUARTER", "quarter", 1, 1),
        ("LAST_YEAR", "year", -1, -1),
        ("THIS_YEAR", "year", 0, 0),
        ("NEXT_YEAR", "year", 1, 1),
        ("LAST_N_DAYS:3", "day", -3, 0),
        ("NEXT_N_DAYS:3", "day", 1, 3),
        ("N_DAYS_AGO:3", "day", -3, -3),
        ("LAST_N_WEEKS:2", "week", -2, -1),
        ("NEXT_N_WEEKS:2", "week", 1, 2),
        ("LAST_N_MONTHS:2", "month", -2, -1),
        ("NEXT_N_MONTHS:2", "month", 1, 2),
        ("LAST_N_QUARTERS:2", "quarter", -2, -1),
        ("LAST_N_YEARS:2", "year", -2, -1),
    ];
    for zone_name in ["Pacific/Auckland", "America/Los_Angeles"] {
        let zone: chrono_tz::Tz = zone_name.parse().unwrap();
        let today = Utc::now().with_timezone(&zone).date_naive();
        let midnight = |day: chrono::NaiveDate| {
            let local = day.and_hms_opt(0, 0, 0).unwrap();
            zone.from_local_datetime(&local)
                .earliest()
                .unwrap()
                .with_timezone(&Utc)
        };
        let mut inserts = Vec::new();
        for (literal, unit, first, last) in literals {
            let (start, end) = (
                unit_start(today, unit, *first),
                unit_start(today, unit, last + 1),
            );
            let second = chrono::Duration::seconds(1);
            let day = chrono::Days::new(1);
            // Rows just outside and just inside each end of the range, as instants and days.
            let rows = [
                ("before", midnight(start) - second, start - day),
                ("first", midnight(start), start),
                ("last", midnight(end) - second, end - day),
                ("after", midnight(end), end),
            ];
            for (edge, instant, date) in rows {
                inserts.push(format!(
                    "('{zone_name} {literal} {edge}', '00000000-0000-0000-0000-0000000000a3', '{}', '{date}')",
                    instant.to_rfc3339()
                ));
            }
        }
        client
            .batch_execute(&format!(
                "INSERT INTO crm.opportunity (name, account, created_at, close_date) VALUES {}",
                inserts.join(", ")
            ))
            .await
            .unwrap();
        for (literal, ..) in literals {
            let query = format!(
                "SELECT name, createdAt = {literal} AS inside, close_date = {literal} AS day_inside, \
                 createdAt < {literal} AS before, close_date > {literal} AS day_after, \
                 createdAt >= {literal} AS from_start, close_date <= {literal} AS day_to_end \
                 FROM crm.opportunity WHERE STARTS_WITH(name, :prefix) ORDER BY createdAt"
            );
            let found = records(
                &server,
                &token,
                json!({"query": query, "params": {"prefix": format!("{zone_name} {literal} ")}, "timeZone": zone_name}),
            )
            .await;
            let flags = |key: &str| -> Vec<bool> {
                found
                    .iter()
                    .map(|record| record[key] == json!(true))
                    .collect()
            };
            let context = format!("{literal} in {zone_name}: {found:?}");
            assert_eq!(found.len(), 4, "{context}");
            assert_eq!(flags("inside"), [false, true, true, false], "{context}");
            assert_eq!(flags("day_inside"), [false, true, true, false], "{context}");
            assert_eq!(flags("before"), [true, false, false, false], "{context}");
            assert_eq!(flags("day_after"), [false, false, false, true], "{context}");
            assert_eq!(flags("from_start"), [false, true, true, true], "{context}");
            assert_eq!(flags("day_to_end"), [true, true, true, false], "{context}");
        }
    }
    // An unknown zone is refused at `timeZone`.
    let response = post_text(
        &server,
        &token,
        r#"{"query": "SELECT name FROM crm.account", "timeZone": "Mars/Olympus"}"#,
    )
    .await;
    let answer = assert_envelope(response, 400, "INVALID_BODY").await;
    assert_eq!(answer["errors"][0]["target"], "timeZone", "{answer}");
}

#[tokio::test]
async fn keyset_pages_lose_and_repeat_nothing_while_others_write() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let client = server.db.client().await;
    client
        .batch_execute(
            "INSERT INTO crm.opportunity (name, account, amount) \
             SELECT 'Deal ' || lpad(n::text, 3, '0'), '00000000-0000-0000-0000-0000000000a3', \
                    CASE WHEN n % 7 = 0 THEN NULL ELSE (n % 13) END \
             FROM generate_series(0, 249) AS n",
        )
        .await
        .unwrap();
    // Sorted by a nullable amount descending (NULLs first) and then by name; `id` breaks ties.
    let query = "SELECT name FROM crm.opportunity WHERE STARTS_WITH(name, 'Deal ') \
                 ORDER BY amount DESC, name LIMIT 40";
    let mut cursor = Value::Null;
    let mut seen: Vec<String> = Vec::new();
    let mut pages = 0;
    loop {
        let body = json!({"query": query, "cursor": cursor});
        let response = post_text(&server, &token, &body.to_string()).await;
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        let names: Vec<String> = answer["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect();
        pages += 1;
        // Another client inserts a record that sorts first and deletes one already read.
        client
            .batch_execute(&format!(
                "INSERT INTO crm.opportunity (name, account, amount) VALUES \
                 ('Deal early {pages}', '00000000-0000-0000-0000-0000000000a3', NULL); \
                 DELETE FROM crm.opportunity WHERE name = '{}'",
                names.first().cloned().unwrap_or_default()
            ))
            .await
            .unwrap();
        seen.extend(names);
        match &answer["nextCursor"] {
            Value::Null => break,
            next => cursor = next.clone(),
        }
        assert!(pages < 20, "paging does not end");
    }
    let mut expected: Vec<String> = (0..250).map(|n| format!("Deal {n:03}")).collect();
    let mut sorted = seen.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "lost or repeated records");
    assert_eq!(pages, 7);

    // Without ORDER BY a query pages by id.
    let body = json!({"query": "SELECT name FROM crm.account LIMIT 2", "cursor": null});
    let answer: Value = post_text(&server, &token, &body.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["records"].as_array().unwrap().len(), 2);
    let next = answer["nextCursor"].as_str().unwrap().to_owned();
    let body = json!({"query": "SELECT name FROM crm.account LIMIT 2", "cursor": next});
    let answer: Value = post_text(&server, &token, &body.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["records"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(answer["nextCursor"], Value::Null);

    // Cursors of another query, truncated or forged are refused.
    let query = "SELECT name FROM crm.account LIMIT 2";
    for (query, cursor) in [
        ("SELECT name FROM crm.account LIMIT 3", next.clone()),
        (query, next[..next.len() - 3].to_owned()),
        (query, format!("WyJ4Il0.{}", &next[next.len() - 22..])),
        (query, "not a cursor".to_owned()),
    ] {
        assert_invalid_cursor(&server, &token, query, &cursor).await;
    }
    // Paging is for records: not for groups, nor with OFFSET.
    let body = json!({"query": "SELECT stage, COUNT(*) FROM crm.opportunity GROUP BY stage", "cursor": null});
    assert_envelope(
        post_text(&server, &token, &body.to_string()).await,
        400,
        "HOQS_SYNTAX_ERROR",
    )
    .await;
}

#[tokio::test]
async fn explain_is_for_administrators_and_runs_nothing() {
    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let body = json!({"query": "SELECT name FROM crm.account WHERE id IN (SELECT account FROM crm.opportunity) AND name = :n",
                      "params": {"n": "Acme"}, "explain": true});
    let response = post_text(&server, &token, &body.to_string()).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["sql"].as_str().unwrap().contains("EXISTS"),
        "{answer}"
    );
    assert!(
        answer["plan"][0]["Plan"]["Node Type"].is_string(),
        "{answer}"
    );
    assert!(answer.get("records").is_none());
    let name = crate::auth::unique_name(&server, "explainer");
    let reader = server.create_principal(&name, false).await;
    let response = post_text(&server, &reader.token, &body.to_string()).await;
    assert_envelope(response, 403, "FORBIDDEN").await;
}

/// Posts `query` with `cursor` and expects the cursor refused.
async fn assert_invalid_cursor(server: &TestServer, token: &str, query: &str, cursor: &str) {
    let body = json!({"query": query, "cursor": cursor});
    let answer = assert_envelope(
        post_text(server, token, &body.to_string()).await,
        400,
        "INVALID_CURSOR",
    )
    .await;
    assert_eq!(
        answer["errors"][0]["target"], "cursor",
        "{cursor}: {answer}"
    );
}

#[tokio::test]
async fn cursors_are_signed_with_a_key_every_instance_shares() {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use hf_hoqs::paging::Binding;

    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let query = "SELECT name FROM crm.account ORDER BY name LIMIT 1";
    let body = json!({"query": query, "cursor": null});
    let answer: Value = post_text(&server, &token, &body.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["records"], json!([{"name": "Acme"}]), "{answer}");
    let cursor = answer["nextCursor"].as_str().unwrap().to_owned();
    let (payload, tag) = cursor.split_once('.').unwrap();
    let values = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();

    // The key is one row in the database, made once, 32 bytes.
    let client = server.db.client().await;
    let row = client
        .query_one(
            "SELECT octet_length(secret), count(*) OVER () FROM hf.server_secrets \
             WHERE name = 'cursor'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 32);
    assert_eq!(row.get::<_, i64>(1), 1);

    // A tag computed without the key, or with a guessed one, over the genuine values; the tag
    // with one byte changed; the tag cut short; the values edited under the genuine tag.
    let params = Default::default();
    let unsigned = Binding::new(query, &params, "UTC").encode(&values);
    let guessed = Binding::new(query, &params, "UTC")
        .signed(b"guessed")
        .encode(&values);
    let mut tag_bytes = URL_SAFE_NO_PAD.decode(tag).unwrap();
    tag_bytes[0] ^= 0x01;
    let flipped = format!("{payload}.{}", URL_SAFE_NO_PAD.encode(&tag_bytes));
    let short = format!("{payload}.{}", URL_SAFE_NO_PAD.encode(&tag_bytes[..15]));
    let edited_values = values.replacen("Acme", "Acmf", 1);
    assert_ne!(edited_values, values);
    let edited = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(&edited_values));
    for forged in [&unsigned, &guessed, &flipped, &short, &edited] {
        assert_ne!(forged, &cursor);
        assert_invalid_cursor(&server, &token, query, forged).await;
    }
    // Another query's cursor, even one that sorts the same way.
    assert_invalid_cursor(
        &server,
        &token,
        "SELECT name FROM crm.account ORDER BY name LIMIT 2",
        &cursor,
    )
    .await;

    // The genuine cursor works here and on a second instance of the service on the database.
    let other = server.another_instance().await;
    let body = json!({"query": query, "cursor": cursor}).to_string();
    for url in [server.url("/data/query"), other.url("/data/query")] {
        let response = server
            .http
            .post(url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["records"], json!([{"name": "Globex"}]), "{answer}");
        assert!(answer["nextCursor"].is_string(), "{answer}");
    }
    // The second instance signs with the same key: its cursor works on the first.
    let response = server
        .http
        .post(other.url("/data/query"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    let answer: Value = response.json().await.unwrap();
    let from_other = answer["nextCursor"].as_str().unwrap().to_owned();
    let body = json!({"query": query, "cursor": from_other});
    let answer: Value = post_text(&server, &token, &body.to_string())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["records"], json!([{"name": "Initech"}]), "{answer}");
    assert_eq!(answer["nextCursor"], Value::Null, "{answer}");
}

#[tokio::test]
async fn queries_run_with_the_callers_principal_id_as_record_reads_do() {
    let server = demo_with_records().await;
    let reader = server
        .create_principal(&crate::auth::unique_name(&server, "qcaller"), false)
        .await;
    // Rows are visible only to a statement that runs with this principal's id as
    // `hf.caller_id`; without it a query would see nothing.
    let admin = server.db.client().await;
    admin
        .batch_execute(&format!(
            "ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY caller_only ON crm.account FOR SELECT TO \"hf:authenticated\" \
               USING (current_setting('hf.caller_id', true) = '{}');",
            reader.id
        ))
        .await
        .unwrap();
    let query = json!({"query": "SELECT name FROM crm.account ORDER BY name"}).to_string();
    // Queries and record reads alternate on the same connections.
    for _ in 0..3 {
        let response = post_text(&server, &reader.token, &query).await;
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(
            answer["records"],
            json!([{"name": "Acme"}, {"name": "Globex"}, {"name": "Initech"}]),
            "{answer}"
        );
        let response = server
            .http
            .get(server.url("/data/crm/account/00000000-0000-0000-0000-0000000000a2"))
            .bearer_auth(&reader.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // `$User.id` is the same principal.
    let body =
        json!({"query": "SELECT name FROM crm.account WHERE $User.id = :id ORDER BY name LIMIT 1",
                      "params": {"id": reader.id}})
        .to_string();
    let answer: Value = post_text(&server, &reader.token, &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["records"], json!([{"name": "Acme"}]), "{answer}");
}

#[tokio::test]
async fn cursors_survive_one_rotation_of_the_secret_on_every_instance_and_not_two() {
    use std::time::Duration;

    let server = demo_with_records().await;
    let token = server.admin_token().await;
    let other = server.another_instance().await;
    let query = "SELECT name FROM crm.account ORDER BY name LIMIT 1";
    // Asks `url` for the page after `cursor`; the status and the answer.
    let page = |url: String, cursor: Value| {
        let body = json!({"query": query, "cursor": cursor}).to_string();
        let request = server
            .http
            .post(url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap();
            (status, answer)
        }
    };
    let urls = [server.url("/data/query"), other.url("/data/query")];
    let (_, first) = page(urls[0].clone(), Value::Null).await;
    let before = first["nextCursor"].clone();
    assert!(before.is_string(), "{first}");

    let grace = Duration::from_secs(3600);
    let pool = server.db.pool();
    let rotated = hf_app::secrets::rotate_cursor_secret(&pool, grace)
        .await
        .unwrap();
    assert_eq!(rotated.generation, 2);
    // The cursor issued just before the rotation works on both instances.
    for url in &urls {
        let (status, answer) = page(url.clone(), before.clone()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["records"], json!([{"name": "Globex"}]), "{answer}");
    }
    // Both instances sign with the new secret within a second, and each accepts the other's.
    tokio::time::sleep(hf_app::secrets::SECRET_RELOAD_INTERVAL + Duration::from_millis(200)).await;
    let (_, here) = page(urls[0].clone(), Value::Null).await;
    let (_, there) = page(urls[1].clone(), Value::Null).await;
    let between = here["nextCursor"].clone();
    assert_eq!(between, there["nextCursor"], "one secret signs on both");
    assert_ne!(between, before, "the new secret signs");
    for url in &urls {
        let (status, answer) = page(url.clone(), between.clone()).await;
        assert_eq!(status, 200, "{answer}");
    }

    // A second rotation retires the first secret: its cursors are refused everywhere, while
    // those of the second still work.
    hf_app::secrets::rotate_cursor_secret(&pool, grace)
        .await
        .unwrap();
    tokio::time::sleep(hf_app::secrets::SECRET_RELOAD_INTERVAL + Duration::from_millis(200)).await;
    for url in &urls {
        let (status, answer) = page(url.clone(), before.clone()).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["errors"][0]["code"], "INVALID_CURSOR", "{answer}");
        let (status, answer) = page(url.clone(), between.clone()).await;
        assert_eq!(status, 200, "{answer}");
    }

    // A rotation without grace (a secret that leaked) stops the replaced secret's cursors.
    let (_, third) = page(urls[1].clone(), Value::Null).await;
    let third = third["nextCursor"].clone();
    hf_app::secrets::rotate_cursor_secret(&pool, Duration::ZERO)
        .await
        .unwrap();
    tokio::time::sleep(hf_app::secrets::SECRET_RELOAD_INTERVAL + Duration::from_millis(200)).await;
    let (_, fourth) = page(urls[0].clone(), Value::Null).await;
    for url in &urls {
        let (status, answer) = page(url.clone(), third.clone()).await;
        assert_eq!(status, 400, "{answer}");
        let (status, answer) = page(url.clone(), fourth["nextCursor"].clone()).await;
        assert_eq!(status, 200, "{answer}");
    }
    // Only the generations in use are kept.
    let client = server.db.client().await;
    let rows = client
        .query(
            "SELECT generation FROM hf.server_secrets WHERE name = 'cursor' ORDER BY generation",
            &[],
        )
        .await
        .unwrap();
    let generations: Vec<i32> = rows.iter().map(|row| row.get(0)).collect();
    assert_eq!(generations, [3, 4]);
}
