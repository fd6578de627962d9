//! Picklist and multi-select picklist fields end to end over real HTTP: the metadata refuses
//! bad choices, records refuse values outside the list and get the default (created or upserted
//! into being, and from plain SQL too), the database restricts plain-SQL writes too, HOQS answers
//! `INCLUDES`/`EXCLUDES` and `TOLABEL`, and removing a choice that rows hold is a destructive
//! change.

use hf_testkit::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{assert_envelope, json_with_status as ok, send_as as send};

fn stage(values: &[(&str, &str)]) -> Value {
    let values: Vec<Value> = values
        .iter()
        .map(|(key, label)| json!({"key": key, "label": label}))
        .collect();
    json!({
        "fieldKind": "scalar",
        "label": "Stage",
        "fieldType": "picklist",
        "values": values,
        "defaultValue": "open",
    })
}

fn tags(keys: &[&str]) -> Value {
    let values: Vec<Value> = keys
        .iter()
        .map(|key| json!({"key": key, "label": key.to_uppercase()}))
        .collect();
    json!({
        "fieldKind": "scalar",
        "label": "Tags",
        "fieldType": "multipicklist",
        "values": values,
    })
}

const STAGES: [(&str, &str); 3] = [("open", "Open"), ("won", "Closed – won"), ("lost", "Lost")];

/// The demo CRM plus `crm.deal` with `name`, `stage` (picklist, default `open`) and `tags`
/// (multi-select: hot, q4, vip).
async fn start() -> (TestServer, String) {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let object = "/metadata@main/crm/objects/deal";
    ok(
        send(
            &server,
            &token,
            Method::POST,
            object,
            json!({"label": "Deal"}),
        )
        .await,
        201,
    )
    .await;
    let name = json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text"});
    for (key, body) in [
        ("name", name),
        ("stage", stage(&STAGES)),
        ("tags", tags(&["hot", "q4", "vip"])),
    ] {
        let path = format!("{object}/fields/{key}");
        ok(send(&server, &token, Method::POST, &path, body).await, 201).await;
    }
    (server, token)
}

async fn create(server: &TestServer, token: &str, body: Value) -> Value {
    ok(
        send(server, token, Method::POST, "/data/crm/deal", body).await,
        201,
    )
    .await
}

async fn query(server: &TestServer, token: &str, text: &str) -> Vec<Value> {
    let body = json!({"query": text});
    let answer = ok(
        send(server, token, Method::POST, "/data/query", body).await,
        200,
    )
    .await;
    answer["records"].as_array().unwrap().clone()
}

#[tokio::test]
async fn picklist_metadata_is_checked_and_read_back() {
    let (server, token) = start().await;
    let path = "/metadata@main/crm/objects/deal/fields/bad";
    let repeated = stage(&[("open", "Open"), ("open", "Again")]);
    let body = assert_envelope(
        send(&server, &token, Method::POST, path, repeated).await,
        422,
        "INVALID_PICKLIST",
    )
    .await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("already a choice"),
        "{body}"
    );
    for bad in [
        stage(&[("Open", "Open")]),
        stage(&[("won", "Won")]),
        json!({"fieldKind": "scalar", "label": "Empty", "fieldType": "picklist", "values": []}),
        json!({"fieldKind": "scalar", "label": "Text", "fieldType": "text",
               "values": [{"key": "a", "label": "A"}]}),
    ] {
        assert_envelope(
            send(&server, &token, Method::POST, path, bad.clone()).await,
            422,
            "INVALID_PICKLIST",
        )
        .await;
    }
    let field = ok(
        send(
            &server,
            &token,
            Method::GET,
            "/metadata/crm/objects/deal/fields/stage",
            Value::Null,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(field["fieldType"], "picklist");
    assert_eq!(field["defaultValue"], "open");
    assert_eq!(
        field["values"][1],
        json!({"key": "won", "label": "Closed – won"})
    );
    server.stop().await;
}

#[tokio::test]
async fn records_hold_only_choices_and_get_the_default() {
    let (server, token) = start().await;
    let record = create(
        &server,
        &token,
        json!({"name": "Roof", "tags": ["vip", "hot"]}),
    )
    .await;
    assert_eq!(record["stage"], "open", "{record}");
    // Stored in the order the choices are declared.
    assert_eq!(record["tags"], json!(["hot", "vip"]));
    let record = create(&server, &token, json!({"name": "Door", "stage": null})).await;
    assert_eq!(record["stage"], Value::Null, "an explicit null is kept");

    for (body, target) in [
        (json!({"stage": "maybe"}), "stage"),
        (json!({"stage": "Won"}), "stage"),
        (json!({"stage": ["won"]}), "stage"),
        (json!({"tags": ["hot", "hot"]}), "tags"),
        (json!({"tags": ["cold"]}), "tags"),
        (json!({"tags": "hot"}), "tags"),
        (json!({"tags": [1]}), "tags"),
    ] {
        let answer = assert_envelope(
            send(
                &server,
                &token,
                Method::POST,
                "/data/crm/deal",
                body.clone(),
            )
            .await,
            422,
            "INVALID_VALUE",
        )
        .await;
        let entry = &answer["errors"][0];
        assert_eq!(entry["scope"], "field", "{body}: {answer}");
        assert_eq!(entry["target"], target, "{body}: {answer}");
    }

    // The database restricts rows written with plain SQL as well, and gives them the default.
    let client = server.db.client().await;
    let row = client
        .query_one(
            "INSERT INTO crm.deal (name) VALUES ('Plain') RETURNING stage, tags",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("open"));
    assert_eq!(row.get::<_, Option<Vec<String>>>(1), None);
    let refused = client
        .execute("INSERT INTO crm.deal (stage) VALUES ('maybe')", &[])
        .await;
    assert!(refused.is_err(), "the CHECK refuses an unknown key");
    let refused = client
        .execute("INSERT INTO crm.deal (tags) VALUES ('{hot,cold}')", &[])
        .await;
    assert!(
        refused.is_err(),
        "the CHECK refuses an unknown key in an array"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_upsert_that_creates_gets_the_default_and_one_that_updates_keeps_the_value() {
    let (server, token) = start().await;
    let code = json!({"fieldKind": "scalar", "label": "Code", "fieldType": "text",
                      "uniqueConstraint": true});
    let path = "/metadata@main/crm/objects/deal/fields/code";
    ok(send(&server, &token, Method::POST, path, code).await, 201).await;
    let upsert = |body: Value| send(&server, &token, Method::PUT, "/data/crm/deal/code", body);

    let created = ok(upsert(json!({"code": "D-1", "name": "Roof"})).await, 201).await;
    assert_eq!(created["stage"], "open", "{created}");
    assert_eq!(created["tags"], Value::Null, "no default, no value");
    let created = ok(upsert(json!({"code": "D-2", "stage": "won"})).await, 201).await;
    assert_eq!(
        created["stage"], "won",
        "a given value wins over the default"
    );
    let created = ok(upsert(json!({"code": "D-3", "stage": null})).await, 201).await;
    assert_eq!(created["stage"], Value::Null, "an explicit null is kept");

    // Finding the record, the upsert leaves a field the body does not give as it is.
    let updated = ok(upsert(json!({"code": "D-2", "name": "Door"})).await, 200).await;
    assert_eq!(updated["stage"], "won", "{updated}");
    assert_eq!(updated["name"], "Door");
    let updated = ok(upsert(json!({"code": "D-3", "name": "Gate"})).await, 200).await;
    assert_eq!(updated["stage"], Value::Null, "{updated}");

    // The default does not stand for the key the upsert looks records up by.
    let answer = assert_envelope(upsert(json!({"name": "No code"})).await, 422, "REQUIRED").await;
    assert_eq!(answer["errors"][0]["target"], "code", "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn queries_test_keys_and_show_labels() {
    let (server, token) = start().await;
    create(
        &server,
        &token,
        json!({"name": "Roof", "stage": "won", "tags": ["hot", "vip"]}),
    )
    .await;
    create(&server, &token, json!({"name": "Door", "tags": ["q4"]})).await;
    create(&server, &token, json!({"name": "Gate", "tags": []})).await;

    let names = |rows: &[Value]| -> Vec<String> {
        rows.iter()
            .map(|row| row["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let rows = query(
        &server,
        &token,
        "SELECT name FROM crm.deal WHERE tags INCLUDES ('q4', 'hot;vip') ORDER BY name",
    )
    .await;
    assert_eq!(names(&rows), ["Door", "Roof"]);
    let rows = query(
        &server,
        &token,
        "SELECT name FROM crm.deal WHERE tags EXCLUDES ('vip') ORDER BY name",
    )
    .await;
    assert_eq!(names(&rows), ["Door", "Gate"]);
    let rows = query(
        &server,
        &token,
        "SELECT name, TOLABEL(stage) AS stage, TOLABEL(tags) AS tags FROM crm.deal \
         WHERE stage IN ('won', 'lost') OR tags = 'q4'",
    )
    .await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let roof = rows.iter().find(|row| row["name"] == "Roof").unwrap();
    assert_eq!(roof["stage"], "Closed – won");
    assert_eq!(roof["tags"], json!(["HOT", "VIP"]));

    // Parameters may stand for INCLUDES items, as a `;`-joined text.
    let body = json!({
        "query": "SELECT name FROM crm.deal WHERE tags INCLUDES (:wanted)",
        "params": {"wanted": "vip;hot"},
    });
    let answer = ok(
        send(&server, &token, Method::POST, "/data/query", body).await,
        200,
    )
    .await;
    assert_eq!(answer["records"], json!([{"name": "Roof"}]));

    // A literal key that is not a choice is a type error, located at the literal.
    let body = json!({"query": "SELECT name FROM crm.deal WHERE tags INCLUDES ('vipp')"});
    let answer = assert_envelope(
        send(&server, &token, Method::POST, "/data/query", body).await,
        400,
        "HOQS_TYPE_ERROR",
    )
    .await;
    assert_eq!(answer["errors"][0]["location"]["column"], 48, "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn formulas_and_rules_read_picklists() {
    let (server, token) = start().await;
    let path = "/metadata@main/crm/objects/deal";
    let formula = json!({
        "fieldKind": "formula",
        "label": "Stage label",
        "fieldType": "text",
        "formula": "TOLABEL(stage) || ' (' || TEXT(ISPICKVAL(stage, 'won')) || ')'",
    });
    ok(
        send(
            &server,
            &token,
            Method::POST,
            &format!("{path}/fields/stage_label"),
            formula,
        )
        .await,
        201,
    )
    .await;
    let object = json!({
        "label": "Deal",
        "rules": {"won_is_hot": {
            "assert": "NOT ISPICKVAL(stage, 'won') OR tags INCLUDES ('hot', 'vip')",
            "message": "A won deal is hot or VIP.",
            "field": "tags",
        }},
    });
    ok(send(&server, &token, Method::PUT, path, object).await, 200).await;
    let record = create(&server, &token, json!({"stage": "won", "tags": ["vip"]})).await;
    assert_eq!(record["stage_label"], "Closed – won (true)", "{record}");
    let answer = assert_envelope(
        send(
            &server,
            &token,
            Method::POST,
            "/data/crm/deal",
            json!({"stage": "won", "tags": ["q4"]}),
        )
        .await,
        422,
        "RULE_FAILED",
    )
    .await;
    assert_eq!(answer["errors"][0]["target"], "tags", "{answer}");
    // A rule naming a key that is not a choice is refused when it is written.
    let object = json!({
        "label": "Deal",
        "rules": {"bad": {"assert": "NOT ISPICKVAL(stage, 'wonn')", "message": "x"}},
    });
    let response = send(&server, &token, Method::PUT, path, object).await;
    assert!(
        response.status().is_client_error(),
        "{}",
        response.text().await.unwrap()
    );
    server.stop().await;
}

#[tokio::test]
async fn removing_a_choice_that_rows_hold_is_destructive() {
    let (server, token) = start().await;
    let lost = create(
        &server,
        &token,
        json!({"name": "Shed", "stage": "lost", "tags": ["vip", "q4"]}),
    )
    .await;
    let path = "/metadata@main/crm/objects/deal/fields";

    // Adding a choice is safe.
    let mut more = STAGES.to_vec();
    more.push(("paused", "Paused"));
    ok(
        send(
            &server,
            &token,
            Method::PUT,
            &format!("{path}/stage"),
            stage(&more),
        )
        .await,
        200,
    )
    .await;
    // Removing one no row holds is safe too.
    ok(
        send(
            &server,
            &token,
            Method::PUT,
            &format!("{path}/stage"),
            stage(&STAGES),
        )
        .await,
        200,
    )
    .await;

    // Removing `lost`, which a row holds, needs allowDestructive; nothing changes without it.
    let fewer = stage(&STAGES[..2]);
    let answer = assert_envelope(
        send(
            &server,
            &token,
            Method::PUT,
            &format!("{path}/stage"),
            fewer.clone(),
        )
        .await,
        409,
        "DESTRUCTIVE_CHANGE",
    )
    .await;
    assert!(answer.to_string().contains("crm.deal.stage"), "{answer}");
    let id = lost["id"].as_str().unwrap();
    let record = ok(
        send(
            &server,
            &token,
            Method::GET,
            &format!("/data/crm/deal/{id}"),
            Value::Null,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(record["stage"], "lost");
    let field = ok(
        send(
            &server,
            &token,
            Method::GET,
            "/metadata/crm/objects/deal/fields/stage",
            Value::Null,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(field["values"].as_array().unwrap().len(), 3);

    let allowed = format!("{path}/stage?allowDestructive=true");
    ok(
        send(&server, &token, Method::PUT, &allowed, fewer).await,
        200,
    )
    .await;
    let allowed = format!("{path}/tags?allowDestructive=true");
    ok(
        send(&server, &token, Method::PUT, &allowed, tags(&["hot", "q4"])).await,
        200,
    )
    .await;
    let record = ok(
        send(
            &server,
            &token,
            Method::GET,
            &format!("/data/crm/deal/{id}"),
            Value::Null,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(record["stage"], Value::Null, "{record}");
    assert_eq!(record["tags"], json!(["q4"]), "{record}");
    assert_envelope(
        send(
            &server,
            &token,
            Method::POST,
            "/data/crm/deal",
            json!({"stage": "lost"}),
        )
        .await,
        422,
        "INVALID_VALUE",
    )
    .await;
    server.stop().await;
}
