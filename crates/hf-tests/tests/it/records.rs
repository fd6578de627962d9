//! Records over HTTP against the demo CRM: create, read, update, delete and upsert; computed
//! values; validation (every problem at once, nothing written); If-Match; grants, row-level
//! security and the caller's role; concurrency.

use hf_testkit::{TestPrincipal, TestServer};
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::support::assert_envelope;

/// The demo server with an administrator's token.
struct Ctx {
    server: TestServer,
    token: String,
}

impl Ctx {
    async fn start() -> Self {
        let server = TestServer::start_demo().await;
        let token = server.admin_token().await;
        Ctx { server, token }
    }

    /// Sends a request as the administrator.
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Response {
        self.send_as(&self.token, method, path, body).await
    }

    /// Sends a request with a principal's token.
    async fn send_as(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        let mut request = self
            .server
            .http
            .request(method, self.server.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// Sends and expects `status`; returns the JSON body (Null when empty).
    async fn expect(&self, method: Method, path: &str, body: Option<Value>, status: u16) -> Value {
        let response = self.send(method.clone(), path, body).await;
        json_of(response, status, &format!("{method} {path}")).await
    }

    /// Creates a record and returns it.
    async fn create(&self, object: &str, body: Value) -> Value {
        self.expect(
            Method::POST,
            &format!("/data/crm/{object}"),
            Some(body),
            201,
        )
        .await
    }

    /// Runs SQL on the server's database as the superuser (setting up grants and policies,
    /// and counting rows behind the API's back).
    async fn sql(&self, statement: &str) -> Vec<tokio_postgres::Row> {
        let client = self.server.db.client().await;
        client.query(statement, &[]).await.unwrap()
    }

    async fn count(&self, table: &str) -> i64 {
        self.sql(&format!("SELECT count(*) FROM {table}")).await[0].get(0)
    }

    /// Adds a field to an object through the metadata API (applied to the database at once).
    async fn add_field(&self, object: &str, field: &str, definition: Value) {
        let path = format!("/metadata@main/crm/objects/{object}/fields/{field}");
        self.expect(Method::POST, &path, Some(definition), 201)
            .await;
    }
}

async fn json_of(response: Response, status: u16, what: &str) -> Value {
    let actual = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(actual, status, "{what}: {text}");
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

fn id_of(record: &Value) -> String {
    record["id"].as_str().unwrap().to_owned()
}

/// The (code, target) pairs of an error envelope, sorted.
fn problems(body: &Value) -> Vec<(String, Value)> {
    let mut found: Vec<(String, Value)> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["code"].as_str().unwrap().to_owned(), e["target"].clone()))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.to_string().cmp(&b.1.to_string())));
    found
}

fn problem(code: &str, target: &str) -> (String, Value) {
    (code.to_owned(), json!(target))
}

#[tokio::test]
async fn create_read_update_delete_with_computed_values() {
    let ctx = Ctx::start().await;
    let account = ctx
        .create("account", json!({"name": "Acme", "industry": "Tools"}))
        .await;
    let account_id = id_of(&account);
    let keys: Vec<&str> = account
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "email",
            "name",
            "phone",
            "industry",
            "opportunity_count",
            "pipeline_amount",
            "website",
            "won_amount",
            "createdAt",
            "updatedAt",
            "createdBy",
            "updatedBy"
        ]
    );
    assert_eq!(account["email"], Value::Null);
    assert_eq!(account["opportunity_count"], 0);
    assert!(account["createdAt"].as_str().unwrap().ends_with('Z'));

    let opportunity = ctx
        .create(
            "opportunity",
            json!({"name": "Big deal", "account": account_id, "amount": "1200.50",
                   "probability": 40, "stage": "open", "close_date": "2024-02-29"}),
        )
        .await;
    assert_eq!(opportunity["amount"], "1200.50");
    assert_eq!(opportunity["probability"], 40);
    assert_eq!(opportunity["close_date"], "2024-02-29");
    assert_eq!(opportunity["weighted_amount"], "480.2");
    let opportunity_id = id_of(&opportunity);

    let read = ctx
        .expect(
            Method::GET,
            &format!("/data/crm/account/{account_id}"),
            None,
            200,
        )
        .await;
    assert_eq!(read["opportunity_count"], 1);
    assert_eq!(read["pipeline_amount"], "1200.50");
    assert_eq!(read["won_amount"], "0");

    let path = format!("/data/crm/opportunity/{opportunity_id}");
    let updated = ctx
        .expect(Method::PATCH, &path, Some(json!({"stage": "won"})), 200)
        .await;
    assert_eq!(updated["stage"], "won");
    assert_eq!(updated["name"], "Big deal");
    assert!(updated["updatedAt"].as_str() > opportunity["updatedAt"].as_str());
    assert_eq!(updated["createdAt"], opportunity["createdAt"]);
    let read = ctx
        .expect(
            Method::GET,
            &format!("/data/crm/account/{account_id}"),
            None,
            200,
        )
        .await;
    assert_eq!(read["won_amount"], "1200.50");

    ctx.expect(Method::DELETE, &path, None, 204).await;
    let gone = ctx.send(Method::GET, &path, None).await;
    assert_envelope(gone, 404, "RECORD_NOT_FOUND").await;
    ctx.server.stop().await;
}

#[tokio::test]
async fn every_problem_of_a_body_at_once_and_nothing_written() {
    let ctx = Ctx::start().await;
    let body = ctx
        .expect(
            Method::POST,
            "/data/crm/opportunity",
            Some(json!({
                "name": null, "account": "not-a-uuid", "amount": "1e999", "probability": "40",
                "close_date": "2024-02-30", "weighted_amount": "1", "id": "x", "bogus": 1,
            })),
            422,
        )
        .await;
    assert_eq!(
        problems(&body),
        [
            problem("INVALID_VALUE", "account"),
            problem("INVALID_VALUE", "amount"),
            problem("INVALID_VALUE", "close_date"),
            problem("INVALID_VALUE", "probability"),
            problem("READ_ONLY_FIELD", "id"),
            problem("READ_ONLY_FIELD", "weighted_amount"),
            problem("REQUIRED", "name"),
            problem("UNKNOWN_FIELD", "bogus"),
        ]
    );
    for entry in body["errors"].as_array().unwrap() {
        assert_eq!(entry["scope"], "field", "{entry}");
    }

    // Problems only the database can see come together too: a missing reference, rules of
    // the record as it would be stored (field and record rules), a missing required field.
    let missing = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
    let body = ctx
        .expect(
            Method::POST,
            "/data/crm/opportunity",
            Some(json!({"account": missing, "amount": -5, "probability": 150, "stage": "won"})),
            422,
        )
        .await;
    assert_eq!(
        problems(&body),
        [
            problem("INVALID_REFERENCE", "account"),
            problem("REQUIRED", "name"),
            problem("RULE_FAILED", "amount"),
            problem("RULE_FAILED", "probability"),
            ("RULE_FAILED".to_owned(), Value::Null),
        ]
    );
    let mut rules: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["rule"].as_str())
        .collect();
    rules.sort_unstable();
    assert_eq!(
        rules,
        [
            "amount_non_negative",
            "probability_in_range",
            "won_needs_amount"
        ]
    );
    let record_rule = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["rule"] == "won_needs_amount")
        .unwrap();
    assert_eq!(record_rule["scope"], "record");
    assert_eq!(record_rule["message"], "A won opportunity needs an amount.");
    assert_eq!(ctx.count("crm.opportunity").await, 0);

    // An inherited rule (party.name_not_blank) holds for accounts.
    let body = ctx
        .expect(
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": ""})),
            422,
        )
        .await;
    assert_eq!(problems(&body), [problem("RULE_FAILED", "name")]);
    assert_eq!(body["errors"][0]["rule"], "name_not_blank");
    assert_eq!(ctx.count("crm.account").await, 0);
    ctx.server.stop().await;
}

#[tokio::test]
async fn bodies_and_paths_that_are_not_records() {
    let ctx = Ctx::start().await;
    let url = ctx.server.url("/data/crm/account");
    let raw = |body: &'static str, content_type: &'static str| {
        ctx.server
            .http
            .post(&url)
            .bearer_auth(&ctx.token)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_envelope(
        raw("{\"name\": ", "application/json").await.unwrap(),
        400,
        "MALFORMED_JSON",
    )
    .await;
    assert_envelope(
        raw("[1]", "application/json").await.unwrap(),
        400,
        "INVALID_BODY",
    )
    .await;
    assert_envelope(
        raw("", "application/json").await.unwrap(),
        400,
        "MALFORMED_JSON",
    )
    .await;
    assert_envelope(
        raw("{\"name\": \"a\"}", "text/plain").await.unwrap(),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    .await;
    let twice = assert_envelope(
        raw("{\"name\": \"a\", \"name\": \"b\"}", "application/json")
            .await
            .unwrap(),
        400,
        "INVALID_BODY",
    )
    .await;
    assert_eq!(twice["errors"][0]["target"], "name");
    let unauthenticated = ctx
        .server
        .http
        .post(&url)
        .json(&json!({"name": "a"}))
        .send()
        .await
        .unwrap();
    assert_envelope(unauthenticated, 401, "UNAUTHENTICATED").await;

    // A 1 MiB string does not fit the body limit.
    let huge = "x".repeat(1024 * 1024);
    let response = ctx
        .send(
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": huge})),
        )
        .await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;

    let cases = [
        (
            Method::GET,
            "/data/nope/account/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            404,
            "MODULE_NOT_FOUND",
        ),
        (
            Method::GET,
            "/data/crm/nope/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            404,
            "OBJECT_NOT_FOUND",
        ),
        (
            Method::GET,
            "/data/Crm/account/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            400,
            "INVALID_KEY",
        ),
        (
            Method::GET,
            "/data/crm/account/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            404,
            "RECORD_NOT_FOUND",
        ),
        (
            Method::GET,
            "/data/crm/account/not-a-uuid",
            400,
            "INVALID_PATH",
        ),
        (
            Method::GET,
            "/data/crm/account/6f9619ff",
            400,
            "INVALID_PATH",
        ),
        (
            Method::DELETE,
            "/data/crm/account/not-a-uuid",
            400,
            "INVALID_PATH",
        ),
        (
            Method::DELETE,
            "/data/crm/account/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            404,
            "RECORD_NOT_FOUND",
        ),
    ];
    for (method, path, status, code) in cases {
        let response = ctx.send(method, path, None).await;
        assert_envelope(response, status, code).await;
    }
    let response = ctx
        .send(
            Method::PATCH,
            "/data/crm/account/not-a-uuid",
            Some(json!({"name": "a"})),
        )
        .await;
    assert_envelope(response, 400, "INVALID_PATH").await;
    let response = ctx
        .send(
            Method::PATCH,
            "/data/crm/account/6f9619ff-8b86-d011-b42d-00c04fc964ff",
            Some(json!({"name": "a"})),
        )
        .await;
    assert_envelope(response, 404, "RECORD_NOT_FOUND").await;
    assert_eq!(ctx.count("crm.account").await, 0);
    ctx.server.stop().await;
}

#[tokio::test]
async fn every_field_type_accepts_its_values_and_refuses_others() {
    let ctx = Ctx::start().await;
    let module_object = json!({"label": "Sample"});
    ctx.expect(
        Method::POST,
        "/metadata@main/crm/objects/sample",
        Some(module_object),
        201,
    )
    .await;
    for (key, ty) in [
        ("t", "text"),
        ("i", "integer"),
        ("d", "decimal"),
        ("f", "float"),
        ("b", "boolean"),
        ("dt", "date"),
        ("ts", "datetime"),
        ("u", "uuid"),
        ("j", "json"),
    ] {
        ctx.add_field(
            "sample",
            key,
            json!({"label": key, "fieldKind": "scalar", "fieldType": ty}),
        )
        .await;
    }
    let good = ctx
        .create(
            "sample",
            json!({
                "t": "it's \"quoted\"; -- not SQL", "i": 9223372036854775807_i64,
                "d": "123456789012345678901234567890.123456789", "f": 0.1, "b": true,
                "dt": "2024-02-29", "ts": "2024-01-31T10:00:00.5+02:00",
                "u": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "j": {"a": [1, 2.50, "x", null]},
            }),
        )
        .await;
    assert_eq!(good["t"], "it's \"quoted\"; -- not SQL");
    assert_eq!(good["i"], 9223372036854775807_i64);
    assert_eq!(good["d"], "123456789012345678901234567890.123456789");
    assert_eq!(good["f"], 0.1);
    assert_eq!(good["b"], true);
    assert_eq!(good["dt"], "2024-02-29");
    assert_eq!(good["ts"], "2024-01-31T08:00:00.5Z");
    assert_eq!(good["u"], "6f9619ff-8b86-d011-b42d-00c04fc964ff");
    assert_eq!(good["j"], json!({"a": [1, 2.50, "x", null]}));
    let exact = ctx.create("sample", json!({"d": 12.5, "i": -42})).await;
    assert_eq!(exact["d"], "12.5");
    assert_eq!(exact["t"], Value::Null);

    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let bad_bodies = [
        json!({"i": "42"}),
        json!({"i": 9223372036854775808_u64}),
        json!({"i": 4.5}),
        json!({"d": "NaN"}),
        json!({"d": "1e999"}),
        json!({"f": "NaN"}),
        json!({"f": "1e999"}),
        json!({"dt": "2024-02-30"}),
        json!({"dt": "31/01/2024"}),
        json!({"ts": "2024-01-31T10:00:00"}),
        json!({"u": "not-a-uuid"}),
        json!({"t": 42}),
        json!({"t": "a\u{0}b"}),
        json!({"b": "true"}),
        json!({"j": serde_json::from_str::<Value>(&format!("{}{}", "[".repeat(65), "]".repeat(65))).unwrap()}),
    ];
    for body in bad_bodies {
        let field = body.as_object().unwrap().keys().next().unwrap().clone();
        let response = ctx
            .send(Method::POST, "/data/crm/sample", Some(body.clone()))
            .await;
        let answer = assert_envelope(response, 422, "INVALID_VALUE").await;
        assert_eq!(answer["errors"][0]["target"], field.as_str(), "{body}");
    }
    // A JSON number too large for any double, and nesting too deep for a JSON parser, are
    // refused by their field rather than as a broken body.
    let cases = [
        ("d", "1e999".to_owned()),
        ("d", "0.1000000000000000055511151231257827".to_owned()),
        ("f", "1e999".to_owned()),
        ("j", deep),
    ];
    for (field, raw) in cases {
        let response = ctx
            .server
            .http
            .post(ctx.server.url("/data/crm/sample"))
            .bearer_auth(&ctx.token)
            .header("content-type", "application/json")
            .body(format!("{{\"{field}\": {raw}}}"))
            .send()
            .await
            .unwrap();
        let answer = assert_envelope(response, 422, "INVALID_VALUE").await;
        assert_eq!(answer["errors"][0]["target"], field);
    }
    assert_eq!(ctx.count("crm.sample").await, 2);
    ctx.server.stop().await;
}

#[tokio::test]
async fn lookups_name_visible_records_of_their_target() {
    let ctx = Ctx::start().await;
    let account = id_of(&ctx.create("account", json!({"name": "Acme"})).await);
    let contact = ctx
        .create("contact", json!({"name": "Ann", "account": account}))
        .await;
    assert_eq!(contact["account"], account.as_str());
    let missing = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
    for (value, code) in [
        (json!(missing), "INVALID_REFERENCE"),
        (json!(id_of(&contact)), "INVALID_REFERENCE"),
        (json!("not-a-uuid"), "INVALID_VALUE"),
        (json!(42), "INVALID_VALUE"),
    ] {
        let response = ctx
            .send(
                Method::POST,
                "/data/crm/opportunity",
                Some(json!({"name": "Deal", "account": value})),
            )
            .await;
        let body = assert_envelope(response, 422, code).await;
        assert_eq!(body["errors"][0]["target"], "account");
    }
    assert_eq!(ctx.count("crm.opportunity").await, 0);

    // A record others look up cannot be deleted.
    let path = format!("/data/crm/account/{account}");
    let response = ctx.send(Method::DELETE, &path, None).await;
    let body = assert_envelope(response, 409, "IN_USE").await;
    assert_eq!(body["errors"][0]["scope"], "record");
    ctx.expect(Method::GET, &path, None, 200).await;
    ctx.server.stop().await;
}

#[tokio::test]
async fn abstract_objects_take_no_records_but_read_their_subtypes() {
    let ctx = Ctx::start().await;
    let response = ctx
        .send(Method::POST, "/data/crm/party", Some(json!({"name": "x"})))
        .await;
    assert_envelope(response, 422, "ABSTRACT_OBJECT").await;
    let account = ctx
        .create("account", json!({"name": "Acme", "email": "a@acme.test"}))
        .await;
    let contact = ctx.create("contact", json!({"name": "Ann"})).await;
    for record in [&account, &contact] {
        let path = format!("/data/crm/party/{}", id_of(record));
        let party = ctx.expect(Method::GET, &path, None, 200).await;
        let keys: Vec<&str> = party
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "id",
                "email",
                "name",
                "phone",
                "createdAt",
                "updatedAt",
                "createdBy",
                "updatedBy"
            ]
        );
        assert_eq!(party["name"], record["name"]);
        assert_eq!(party["updatedAt"], record["updatedAt"]);
        let response = ctx
            .send(Method::PATCH, &path, Some(json!({"name": "y"})))
            .await;
        assert_envelope(response, 422, "ABSTRACT_OBJECT").await;
        let response = ctx.send(Method::DELETE, &path, None).await;
        assert_envelope(response, 422, "ABSTRACT_OBJECT").await;
    }
    ctx.server.stop().await;
}

#[tokio::test]
async fn updates_are_partial_versioned_and_harmless_when_unchanged() {
    let ctx = Ctx::start().await;
    let account = id_of(&ctx.create("account", json!({"name": "Acme"})).await);
    let created = ctx
        .create(
            "opportunity",
            json!({"name": "Deal", "account": account, "amount": "100", "probability": 50}),
        )
        .await;
    let path = format!("/data/crm/opportunity/{}", id_of(&created));

    // The ETag is the version; GET with If-None-Match of it is 304.
    let response = ctx.send(Method::GET, &path, None).await;
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(
        etag,
        format!("\"{}\"", created["updatedAt"].as_str().unwrap())
    );
    let not_modified = ctx
        .server
        .http
        .get(ctx.server.url(&path))
        .bearer_auth(&ctx.token)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);

    // Sending the record back as it was read changes nothing, not even updatedAt.
    let same = ctx
        .expect(Method::PATCH, &path, Some(created.clone()), 200)
        .await;
    assert_eq!(same, created);
    let same = ctx.expect(Method::PATCH, &path, Some(json!({})), 200).await;
    assert_eq!(same, created);

    // Writing computed or system fields is refused; so is clearing a required field.
    let body = ctx
        .expect(
            Method::PATCH,
            &path,
            Some(
                json!({"weighted_amount": "1", "createdAt": "2020-01-01T00:00:00Z", "name": null}),
            ),
            422,
        )
        .await;
    assert_eq!(
        problems(&body),
        [
            problem("READ_ONLY_FIELD", "createdAt"),
            problem("READ_ONLY_FIELD", "weighted_amount"),
            problem("REQUIRED", "name"),
        ]
    );

    // A record rule failing on update names the record.
    let body = ctx
        .expect(
            Method::PATCH,
            &path,
            Some(json!({"stage": "won", "amount": "0"})),
            422,
        )
        .await;
    assert_eq!(body["errors"][0]["rule"], "won_needs_amount");
    assert_eq!(body["errors"][0]["scope"], "record");
    assert_eq!(body["errors"][0]["target"], id_of(&created).as_str());

    // If-Match: the current version updates, a stale one is refused.
    let update = |tag: String, body: Value| {
        ctx.server
            .http
            .patch(ctx.server.url(&path))
            .bearer_auth(&ctx.token)
            .header("if-match", tag)
            .json(&body)
            .send()
    };
    let response = update(etag.clone(), json!({"probability": 60}))
        .await
        .unwrap();
    let new_etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let changed = json_of(response, 200, "PATCH with If-Match").await;
    assert_eq!(changed["probability"], 60);
    assert_eq!(changed["weighted_amount"], "60");
    assert_ne!(new_etag, etag);
    assert!(changed["updatedAt"].as_str() > created["updatedAt"].as_str());
    let response = update(etag.clone(), json!({"probability": 70}))
        .await
        .unwrap();
    assert_envelope(response, 412, "PRECONDITION_FAILED").await;
    let response = update("*".to_owned(), json!({"probability": 70}))
        .await
        .unwrap();
    json_of(response, 200, "PATCH with If-Match: *").await;
    let stale_delete = ctx
        .server
        .http
        .delete(ctx.server.url(&path))
        .bearer_auth(&ctx.token)
        .header("if-match", &new_etag)
        .send()
        .await
        .unwrap();
    assert_envelope(stale_delete, 412, "PRECONDITION_FAILED").await;
    let current = ctx.expect(Method::GET, &path, None, 200).await;
    assert_eq!(current["probability"], 70);

    // A record stored behind the API's back that breaks a rule: an update that changes nothing
    // is still harmless, one that changes something must satisfy the rules.
    ctx.sql(&format!(
        "UPDATE crm.opportunity SET amount = -5 WHERE id = '{}'",
        id_of(&created)
    ))
    .await;
    let stored = ctx.expect(Method::GET, &path, None, 200).await;
    let same = ctx
        .expect(Method::PATCH, &path, Some(stored.clone()), 200)
        .await;
    assert_eq!(same, stored);
    let body = ctx
        .expect(Method::PATCH, &path, Some(json!({"name": "Renamed"})), 422)
        .await;
    assert_eq!(problems(&body), [problem("RULE_FAILED", "amount")]);
    ctx.server.stop().await;
}

/// A unique or indexed field's value longer than its index holds is the field's own problem
/// (422 `INVALID_VALUE` naming the field and the limit), on a create, an update and an upsert,
/// not a failure of the write (it answered 500 `INTERNAL` when PostgreSQL refused the index
/// entry).
#[tokio::test]
async fn a_value_too_long_for_its_index_is_the_fields_problem() {
    let ctx = Ctx::start().await;
    ctx.add_field(
        "account",
        "code",
        json!({"label": "Code", "fieldKind": "scalar", "fieldType": "text", "uniqueConstraint": true}),
    )
    .await;
    // Letters in no pattern, so that PostgreSQL cannot compress the index entry below its limit.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut letters = |count: usize| -> String {
        (0..count)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + u8::try_from(seed % 26).unwrap())
            })
            .collect()
    };
    let longest = letters(2_000);
    let too_long = letters(3_000);
    let created = ctx
        .expect(
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": "Longest", "code": longest})),
            201,
        )
        .await;
    let path = format!("/data/crm/account/{}", id_of(&created));
    for (method, path) in [
        (Method::POST, "/data/crm/account"),
        (Method::PATCH, path.as_str()),
        (Method::PUT, "/data/crm/account/code"),
    ] {
        let body = ctx
            .expect(
                method.clone(),
                path,
                Some(json!({"name": "Too long", "code": too_long})),
                422,
            )
            .await;
        assert_eq!(
            problems(&body),
            [problem("INVALID_VALUE", "code")],
            "{method}"
        );
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("2000 bytes"), "{message}");
    }
    // An indexed field's values sit in an index too.
    ctx.add_field(
        "account",
        "reference",
        json!({"label": "Reference", "fieldKind": "scalar", "fieldType": "text", "indexed": true}),
    )
    .await;
    let body = ctx
        .expect(
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": "Too long", "reference": too_long})),
            422,
        )
        .await;
    assert_eq!(problems(&body), [problem("INVALID_VALUE", "reference")]);
    ctx.server.stop().await;
}

#[tokio::test]
async fn upserts_by_a_unique_field_and_records_survive_new_fields() {
    let ctx = Ctx::start().await;
    let before = ctx.create("account", json!({"name": "Old"})).await;
    ctx.add_field(
        "account",
        "code",
        json!({"label": "Code", "fieldKind": "scalar", "fieldType": "text", "uniqueConstraint": true}),
    )
    .await;
    // A record made before the field existed reads with the field empty.
    let path = format!("/data/crm/account/{}", id_of(&before));
    let read = ctx.expect(Method::GET, &path, None, 200).await;
    assert_eq!(read["code"], Value::Null);
    assert_eq!(read["name"], "Old");

    let created = ctx
        .expect(
            Method::PUT,
            "/data/crm/account/code",
            Some(json!({"code": "A-1", "name": "Acme"})),
            201,
        )
        .await;
    let updated = ctx
        .expect(
            Method::PUT,
            "/data/crm/account/code",
            Some(json!({"code": "A-1", "industry": "Tools"})),
            200,
        )
        .await;
    assert_eq!(updated["id"], created["id"]);
    assert_eq!(updated["name"], "Acme");
    assert_eq!(updated["industry"], "Tools");

    let response = ctx
        .send(
            Method::PUT,
            "/data/crm/account/name",
            Some(json!({"name": "Acme"})),
        )
        .await;
    assert_envelope(response, 400, "NOT_UNIQUE_FIELD").await;
    let response = ctx
        .send(
            Method::PUT,
            "/data/crm/account/nope",
            Some(json!({"name": "Acme"})),
        )
        .await;
    assert_envelope(response, 404, "FIELD_NOT_FOUND").await;
    let response = ctx
        .send(
            Method::PUT,
            "/data/crm/account/code",
            Some(json!({"name": "Acme"})),
        )
        .await;
    let body = assert_envelope(response, 422, "REQUIRED").await;
    assert_eq!(body["errors"][0]["target"], "code");
    // Creating through an upsert needs what creating needs.
    let response = ctx
        .send(
            Method::PUT,
            "/data/crm/account/code",
            Some(json!({"code": "A-2"})),
        )
        .await;
    let body = assert_envelope(response, 422, "REQUIRED").await;
    assert_eq!(body["errors"][0]["target"], "name");
    // A unique value taken by another record.
    let response = ctx
        .send(
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": "Copy", "code": "A-1"})),
        )
        .await;
    let body = assert_envelope(response, 409, "UNIQUE_VIOLATION").await;
    assert_eq!(body["errors"][0]["target"], "code");
    let response = ctx
        .send(Method::PATCH, &path, Some(json!({"code": "A-1"})))
        .await;
    assert_envelope(response, 409, "UNIQUE_VIOLATION").await;

    // 20 parallel upserts of one key make exactly one record.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (http, url, token) = (
            ctx.server.http.clone(),
            ctx.server.url("/data/crm/account/code"),
            ctx.token.clone(),
        );
        calls.spawn(async move {
            let response = http
                .put(url)
                .bearer_auth(token)
                .json(&json!({"code": "RACE", "name": format!("Racer {i}")}))
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        });
    }
    let mut created = 0;
    for (status, text) in calls.join_all().await {
        match status {
            201 => created += 1,
            200 => {}
            other => panic!("upsert answered {other}: {text}"),
        }
    }
    assert_eq!(created, 1);
    let rows = ctx
        .sql("SELECT count(*) FROM crm.account WHERE code = 'RACE'")
        .await;
    assert_eq!(rows[0].get::<_, i64>(0), 1);
    ctx.server.stop().await;
}

/// A principal with a unique name (roles belong to the whole cluster).
async fn principal(ctx: &Ctx, prefix: &str) -> TestPrincipal {
    let name = format!("{prefix}_{}", &uuid_suffix());
    ctx.server.create_principal(&name, false).await
}

fn uuid_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}

#[tokio::test]
async fn database_grants_decide_what_a_principal_may_do() {
    let ctx = Ctx::start().await;
    let user = principal(&ctx, "rec_grants").await;
    let create = |name: &'static str| {
        ctx.send_as(
            &user.token,
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": name})),
        )
    };
    let account = json_of(create("Mine").await, 201, "create as a principal").await;
    let path = format!("/data/crm/account/{}", id_of(&account));

    ctx.sql("REVOKE INSERT, UPDATE ON crm.account FROM \"hf:authenticated\"")
        .await;
    assert_envelope(create("Denied").await, 403, "FORBIDDEN").await;
    let response = ctx
        .send_as(
            &user.token,
            Method::PATCH,
            &path,
            Some(json!({"name": "Changed"})),
        )
        .await;
    assert_envelope(response, 403, "FORBIDDEN").await;
    let read = ctx.send_as(&user.token, Method::GET, &path, None).await;
    assert_eq!(
        json_of(read, 200, "read after revoke").await["name"],
        "Mine"
    );
    assert_eq!(ctx.count("crm.account").await, 1);

    // A role outside `hf:authenticated` has no privileges on object tables at all.
    ctx.sql(&format!(
        "REVOKE \"hf:authenticated\" FROM \"{}\"",
        user.name
    ))
    .await;
    let read = ctx.send_as(&user.token, Method::GET, &path, None).await;
    assert_envelope(read, 403, "FORBIDDEN").await;
    ctx.server.stop().await;
}

/// A row-level security policy may let a caller insert a record it may not read: the create is
/// refused with 403 `FORBIDDEN` (the record comes back in the create's own statement, which the
/// read policy covers too), nothing is stored, and never a 500.
#[tokio::test]
async fn a_create_the_caller_may_not_read_back_is_forbidden_and_stores_nothing() {
    let ctx = Ctx::start().await;
    let user = principal(&ctx, "rec_blind").await;
    for statement in [
        "ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY insert_any ON crm.account FOR INSERT TO \"hf:authenticated\" WITH CHECK (true)",
        "CREATE POLICY read_none ON crm.account FOR SELECT TO \"hf:authenticated\" USING (false)",
    ] {
        ctx.sql(statement).await;
    }
    let response = ctx
        .send_as(
            &user.token,
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": "Blind"})),
        )
        .await;
    assert_envelope(response, 403, "FORBIDDEN").await;
    assert_eq!(ctx.count("crm.account").await, 0);
    ctx.server.stop().await;
}

#[tokio::test]
async fn row_level_security_hides_records() {
    let ctx = Ctx::start().await;
    ctx.sql("ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY")
        .await;
    ctx.sql("CREATE POLICY visible ON crm.account USING (name <> 'Hidden')")
        .await;
    let hidden: String = ctx
        .sql("INSERT INTO crm.account (name) VALUES ('Hidden') RETURNING id::text")
        .await[0]
        .get(0);
    let user = principal(&ctx, "rec_rls").await;
    for object in ["account", "party"] {
        let path = format!("/data/crm/{object}/{hidden}");
        let response = ctx.send_as(&user.token, Method::GET, &path, None).await;
        assert_envelope(response, 404, "RECORD_NOT_FOUND").await;
    }
    let path = format!("/data/crm/account/{hidden}");
    let response = ctx
        .send_as(
            &user.token,
            Method::PATCH,
            &path,
            Some(json!({"name": "Found"})),
        )
        .await;
    assert_envelope(response, 404, "RECORD_NOT_FOUND").await;
    let response = ctx.send_as(&user.token, Method::DELETE, &path, None).await;
    assert_envelope(response, 404, "RECORD_NOT_FOUND").await;
    let response = ctx
        .send_as(
            &user.token,
            Method::POST,
            "/data/crm/opportunity",
            Some(json!({"name": "Deal", "account": hidden})),
        )
        .await;
    let body = assert_envelope(response, 422, "INVALID_REFERENCE").await;
    assert_eq!(body["errors"][0]["target"], "account");
    // The policy's check refuses new rows it would hide.
    let response = ctx
        .send_as(
            &user.token,
            Method::POST,
            "/data/crm/account",
            Some(json!({"name": "Hidden"})),
        )
        .await;
    assert_envelope(response, 403, "FORBIDDEN").await;
    let rows = ctx.sql("SELECT name FROM crm.account").await;
    let names: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    assert_eq!(names, ["Hidden"]);
    assert_eq!(ctx.count("crm.opportunity").await, 0);
    ctx.server.stop().await;
}

#[tokio::test]
async fn the_callers_role_never_leaks_into_the_next_request() {
    let ctx = Ctx::start().await;
    // A hand-made column records the role that inserted each row.
    ctx.sql("ALTER TABLE crm.account ADD COLUMN who text DEFAULT current_user")
        .await;
    let failing = principal(&ctx, "rec_fail").await;
    let writer = principal(&ctx, "rec_write").await;
    ctx.sql(&format!(
        "REVOKE \"hf:authenticated\" FROM \"{}\"",
        failing.name
    ))
    .await;
    for round in 0..10 {
        // Requests that fail half-way as one role...
        let response = ctx
            .send_as(
                &failing.token,
                Method::POST,
                "/data/crm/account",
                Some(json!({"name": "x"})),
            )
            .await;
        assert_envelope(response, 403, "FORBIDDEN").await;
        let response = ctx
            .send(Method::POST, "/data/crm/account", Some(json!({"name": ""})))
            .await;
        assert_envelope(response, 422, "RULE_FAILED").await;
        // ...then a write as another.
        let response = ctx
            .send_as(
                &writer.token,
                Method::POST,
                "/data/crm/account",
                Some(json!({"name": format!("Round {round}")})),
            )
            .await;
        json_of(response, 201, "create after a failure").await;
    }
    let rows = ctx.sql("SELECT DISTINCT who FROM crm.account").await;
    let roles: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    assert_eq!(roles, std::slice::from_ref(&writer.name));
    ctx.server.stop().await;
}

#[tokio::test]
async fn concurrent_updates_of_one_record_lose_no_write() {
    let ctx = Ctx::start().await;
    let account = ctx.create("account", json!({"name": "Acme"})).await;
    let path = format!("/data/crm/account/{}", id_of(&account));
    let mut calls = tokio::task::JoinSet::new();
    for (field, value) in [
        ("email", "a@acme.test"),
        ("phone", "+1 555"),
        ("industry", "Tools"),
        ("website", "acme.test"),
    ] {
        let (http, url, token) = (
            ctx.server.http.clone(),
            ctx.server.url(&path),
            ctx.token.clone(),
        );
        calls.spawn(async move {
            let response = http
                .patch(url)
                .bearer_auth(token)
                .json(&json!({field: value}))
                .send()
                .await
                .unwrap();
            response.status().as_u16()
        });
    }
    assert_eq!(calls.join_all().await, [200, 200, 200, 200]);
    let read = ctx.expect(Method::GET, &path, None, 200).await;
    assert_eq!(
        (
            &read["email"],
            &read["phone"],
            &read["industry"],
            &read["website"]
        ),
        (
            &json!("a@acme.test"),
            &json!("+1 555"),
            &json!("Tools"),
            &json!("acme.test")
        )
    );
    ctx.server.stop().await;
}

#[tokio::test]
async fn records_read_as_queries_see_them() {
    let ctx = Ctx::start().await;
    let account = id_of(&ctx.create("account", json!({"name": "Acme"})).await);
    let created = ctx
        .create(
            "opportunity",
            json!({"name": "Deal", "account": account, "amount": 12.5, "probability": 33,
                   "close_date": "2024-12-31"}),
        )
        .await;
    let query = "SELECT id, account, amount, close_date, name, probability, stage, \
                 weighted_amount, createdAt, updatedAt, createdBy, updatedBy FROM crm.opportunity \
                 WHERE id = :id";
    let answer = ctx
        .expect(
            Method::POST,
            "/data/query",
            Some(json!({"query": query, "params": {"id": created["id"]}})),
            200,
        )
        .await;
    assert_eq!(answer["records"][0], created);
    let read = ctx
        .expect(
            Method::GET,
            &format!("/data/crm/account/{account}"),
            None,
            200,
        )
        .await;
    let query = "SELECT id, email, name, phone, industry, opportunity_count, pipeline_amount, \
                 website, won_amount, createdAt, updatedAt, createdBy, updatedBy FROM crm.account \
                 WHERE id = :id";
    let answer = ctx
        .expect(
            Method::POST,
            "/data/query",
            Some(json!({"query": query, "params": {"id": account}})),
            200,
        )
        .await;
    assert_eq!(answer["records"][0], read);
    ctx.server.stop().await;
}

#[tokio::test]
async fn a_value_that_cannot_be_computed_is_the_records_problem() {
    let ctx = Ctx::start().await;
    ctx.add_field(
        "opportunity",
        "huge",
        json!({"label": "Huge", "fieldKind": "formula", "fieldType": "integer",
               "formula": "probability * 9223372036854775807"}),
    )
    .await;
    let account = id_of(&ctx.create("account", json!({"name": "Acme"})).await);
    // The record would be stored, but reading it back overflows: nothing is written.
    let response = ctx
        .send(
            Method::POST,
            "/data/crm/opportunity",
            Some(json!({"name": "Deal", "account": account, "probability": 2})),
        )
        .await;
    let body = assert_envelope(response, 422, "INVALID_VALUE").await;
    assert_eq!(body["errors"][0]["scope"], "record");
    assert_eq!(ctx.count("crm.opportunity").await, 0);
    let fine = ctx
        .create(
            "opportunity",
            json!({"name": "Deal", "account": account, "probability": 1}),
        )
        .await;
    assert_eq!(fine["huge"], 9223372036854775807_i64);
    ctx.sql(&format!(
        "UPDATE crm.opportunity SET probability = 3 WHERE id = '{}'",
        id_of(&fine)
    ))
    .await;
    let response = ctx
        .send(
            Method::GET,
            &format!("/data/crm/opportunity/{}", id_of(&fine)),
            None,
        )
        .await;
    let body = assert_envelope(response, 422, "INVALID_VALUE").await;
    assert_eq!(body["errors"][0]["target"], id_of(&fine).as_str());
    ctx.server.stop().await;
}

/// A create sent with `Idempotency-Key` can be sent again safely: the repeat is answered with
/// the record the first made (201, `Idempotent-Replayed: true`) and makes nothing, however
/// the repeat orders its properties. The key is the principal's own, bound to its object and
/// values; a create that was refused stores no key; a malformed key is refused up front.
#[tokio::test]
async fn a_create_sent_again_with_its_idempotency_key_makes_one_record() {
    let ctx = Ctx::start().await;
    let create_as = |token: &str, object: &str, key: &str, body: Value| {
        ctx.server
            .http
            .post(ctx.server.url(&format!("/data/crm/{object}")))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let create = |key: &'static str, body: Value| create_as(&ctx.token, "account", key, body);

    let first = create("key-1", json!({"name": "Once", "phone": "1"}))
        .await
        .unwrap();
    assert!(!first.headers().contains_key("idempotent-replayed"));
    let etag = first.headers()["etag"].clone();
    let made = json_of(first, 201, "first create").await;
    let again = create("key-1", json!({"phone": "1", "name": "Once"}))
        .await
        .unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["etag"], etag);
    assert_eq!(json_of(again, 201, "repeat").await, made);
    assert_eq!(ctx.count("crm.account").await, 1);

    // The same key with other values, or for another object, is refused and makes nothing.
    let other = create("key-1", json!({"name": "Once", "phone": "2"}))
        .await
        .unwrap();
    assert_envelope(other, 422, "IDEMPOTENCY_KEY_REUSED").await;
    let elsewhere = create_as(
        &ctx.token,
        "contact",
        "key-1",
        json!({"name": "Once", "phone": "1"}),
    )
    .await
    .unwrap();
    assert_envelope(elsewhere, 422, "IDEMPOTENCY_KEY_REUSED").await;
    assert_eq!(ctx.count("crm.account").await, 1);

    // The answer is the record as it is now.
    let path = format!("/data/crm/account/{}", id_of(&made));
    ctx.expect(Method::PATCH, &path, Some(json!({"phone": "9"})), 200)
        .await;
    let again = create("key-1", json!({"name": "Once", "phone": "1"}))
        .await
        .unwrap();
    assert_eq!(
        json_of(again, 201, "repeat after an update").await["phone"],
        "9"
    );

    // Keys are each principal's own.
    let user = principal(&ctx, "rec_idem").await;
    let theirs = create_as(
        &user.token,
        "account",
        "key-1",
        json!({"name": "Once", "phone": "1"}),
    )
    .await
    .unwrap();
    assert!(!theirs.headers().contains_key("idempotent-replayed"));
    let theirs = json_of(theirs, 201, "another principal's key").await;
    assert_ne!(id_of(&theirs), id_of(&made));

    // A refused create stores no key: the corrected request with the same key creates.
    let refused = create("key-2", json!({"phone": "3"})).await.unwrap();
    assert_envelope(refused, 422, "REQUIRED").await;
    let corrected = create("key-2", json!({"name": "Second", "phone": "3"}))
        .await
        .unwrap();
    assert!(!corrected.headers().contains_key("idempotent-replayed"));
    json_of(corrected, 201, "corrected create").await;

    // A key older than a day is forgotten: it names a new create.
    ctx.sql(
        "UPDATE hf_caller.idempotency_keys SET created_at = now() - interval '25 hours' \
         WHERE key = 'key-2'",
    )
    .await;
    let renewed = create("key-2", json!({"name": "Third", "phone": "4"}))
        .await
        .unwrap();
    assert!(!renewed.headers().contains_key("idempotent-replayed"));
    assert_eq!(
        json_of(renewed, 201, "an expired key").await["name"],
        "Third"
    );

    // A deleted record's key answers that the record is gone, and creates nothing.
    ctx.expect(Method::DELETE, &path, None, 204).await;
    let gone = create("key-1", json!({"name": "Once", "phone": "1"}))
        .await
        .unwrap();
    assert_envelope(gone, 404, "RECORD_NOT_FOUND").await;

    let before = ctx.count("crm.account").await;
    let long = "k".repeat(256);
    for key in ["", "with space", long.as_str()] {
        let response = create_as(&ctx.token, "account", key, json!({"name": "Bad key"}))
            .await
            .unwrap();
        assert_envelope(response, 400, "INVALID_IDEMPOTENCY_KEY").await;
    }
    assert_eq!(ctx.count("crm.account").await, before);
    ctx.server.stop().await;
}

/// Copies of one create with one key sent at once make one record: the copies wait for the
/// first to commit and are answered with its record.
#[tokio::test]
async fn concurrent_copies_of_a_create_with_one_key_make_one_record() {
    let ctx = Ctx::start().await;
    let copies = (0..8).map(|_| {
        ctx.server
            .http
            .post(ctx.server.url("/data/crm/account"))
            .bearer_auth(&ctx.token)
            .header("Idempotency-Key", "same-for-all")
            .json(&json!({"name": "Concurrent"}))
            .send()
    });
    let responses = futures_util::future::join_all(copies).await;
    let mut ids = std::collections::BTreeSet::new();
    let mut made = 0;
    for response in responses {
        let response = response.unwrap();
        if !response.headers().contains_key("idempotent-replayed") {
            made += 1;
        }
        ids.insert(id_of(&json_of(response, 201, "a copy").await));
    }
    assert_eq!(made, 1);
    assert_eq!(ids.len(), 1);
    assert_eq!(ctx.count("crm.account").await, 1);
    ctx.server.stop().await;
}
