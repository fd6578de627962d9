//! `?dryRun=true` on metadata writes: the whole write is checked (the model's validation, the
//! screen checks, on the live branch the DDL plan) and nothing is written, neither in the
//! metadata repository nor in the database; the answer is what the real write would answer.

use hf_testkit::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

/// Sends `body` (JSON) with the administrator's token; returns the status and the JSON body.
async fn send(
    server: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .http
        .request(method, server.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The head of `branch` in the server's metadata repository, if the branch exists.
fn head(server: &TestServer, branch: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
}

/// The columns of `schema.table` in the database, sorted.
async fn columns(server: &TestServer, schema: &str, table: &str) -> Vec<String> {
    let client = server.db.client().await;
    client
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = $2 ORDER BY 1",
            &[&schema, &table],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

async fn schema_exists(server: &TestServer, schema: &str) -> bool {
    let client = server.db.client().await;
    client
        .query_one(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
            &[&schema],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 1
}

#[tokio::test]
async fn a_dry_run_on_the_live_branch_answers_the_write_and_its_plan_and_changes_nothing() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let before = head(&server, "main");

    let module = json!({"label": "CRM"});
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@main/crm?dryRun=true",
        Some(module.clone()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "created", "{body}");
    assert_eq!(body["branch"], "main");
    assert_eq!(body["file"], "crm/module.json5", "{body}");
    assert_eq!(body["dryRun"], true);
    assert!(body["apply"].is_object(), "{body}");
    assert!(
        body["plan"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|change| change["sql"].as_str().unwrap().contains("CREATE SCHEMA")),
        "{body}"
    );
    assert_eq!(head(&server, "main"), before, "the branch did not move");
    assert!(
        !schema_exists(&server, "crm").await,
        "no schema was created"
    );
    let (status, _) = send(&server, &token, Method::GET, "/metadata@main/crm", None).await;
    assert_eq!(status, 404);

    // The real write answers the same, without the dry-run parts.
    let (status, real) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@main/crm",
        Some(module),
    )
    .await;
    assert_eq!(status, 201, "{real}");
    assert_eq!(real["status"], body["status"]);
    assert_eq!(real["file"], body["file"]);
    assert_eq!(
        real["apply"], body["apply"],
        "the dry run predicted the DDL"
    );
    assert_eq!(real.get("dryRun"), None);
    assert_eq!(real.get("plan"), None);
    assert!(schema_exists(&server, "crm").await);

    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@main/crm/objects/account",
        Some(json!({"label": "Account"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let head_before_field = head(&server, "main");
    let columns_before = columns(&server, "crm", "account").await;
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@main/crm/objects/account/fields/name?dryRun=true",
        Some(json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["apply"]["columnsAdded"], 1, "{body}");
    assert!(
        body["plan"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|change| change["sql"].as_str().unwrap().contains("ADD COLUMN")),
        "{body}"
    );
    assert_eq!(head(&server, "main"), head_before_field);
    assert_eq!(columns(&server, "crm", "account").await, columns_before);
    server.stop().await;
}

#[tokio::test]
async fn an_invalid_formula_answers_the_same_errors_with_or_without_a_dry_run() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    for (path, body) in [
        ("/metadata@main/crm", json!({"label": "CRM"})),
        ("/metadata@main/crm/objects/deal", json!({"label": "Deal"})),
        (
            "/metadata@main/crm/objects/deal/fields/amount",
            json!({"fieldKind": "scalar", "label": "Amount", "fieldType": "integer"}),
        ),
    ] {
        let (status, answer) = send(&server, &token, Method::POST, path, Some(body)).await;
        assert_eq!(status, 201, "{answer}");
    }
    let before = head(&server, "main");
    let columns_before = columns(&server, "crm", "deal").await;
    let field = json!({"fieldKind": "formula", "label": "Double", "fieldType": "integer",
                       "formula": "amount * "});
    let path = "/metadata@main/crm/objects/deal/fields/double";
    let (dry_status, dry) = send(
        &server,
        &token,
        Method::POST,
        &format!("{path}?dryRun=true"),
        Some(field.clone()),
    )
    .await;
    let (real_status, real) = send(&server, &token, Method::POST, path, Some(field)).await;
    assert_eq!(real_status, 422, "{real}");
    assert_eq!((dry_status, &dry), (real_status, &real), "the same answer");
    assert!(
        real["errors"][0]["target"].as_str().is_some(),
        "located: {real}"
    );
    assert_eq!(head(&server, "main"), before);
    assert_eq!(columns(&server, "crm", "deal").await, columns_before);

    // A valid formula passes the dry run and is still not written.
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        &format!("{path}?dryRun=true"),
        Some(
            json!({"fieldKind": "formula", "label": "Double", "fieldType": "integer",
                    "formula": "amount * 2"}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["dryRun"], true);
    assert_eq!(head(&server, "main"), before);
    let (status, _) = send(
        &server,
        &token,
        Method::GET,
        path.replace("@main", "").as_str(),
        None,
    )
    .await;
    assert_eq!(status, 404);
    server.stop().await;
}

#[tokio::test]
async fn a_dry_run_on_another_branch_or_of_a_screen_or_file_writes_nothing() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@feature/crm?dryRun=true",
        Some(json!({"label": "CRM"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["apply"], Value::Null, "no DDL off the live branch");
    assert_eq!(body.get("plan"), None);
    assert_eq!(head(&server, "feature"), None, "the branch was not forked");

    let (status, _) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@feature/crm",
        Some(json!({"label": "CRM"})),
    )
    .await;
    assert_eq!(status, 201);
    let before = head(&server, "feature");

    // A screen that does not compile: the same 422 with its location.
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@feature/crm/screens/home?dryRun=true",
        Some(json!({"hfxSource": "<div>{</div>"})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"][0]["code"], "HFX_COMPILE_ERROR");
    assert!(body["errors"][0]["location"]["line"].is_u64(), "{body}");
    let (status, body) = send(
        &server,
        &token,
        Method::POST,
        "/metadata@feature/crm/screens/home?dryRun=true",
        Some(json!({"hfxSource": "<div>Hello</div>"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["file"], "crm/screens/home.json5", "{body}");

    let response = server
        .http
        .put(server.url("/metadata@feature/crm/vendor/chart.js?dryRun=true"))
        .bearer_auth(&token)
        .header("content-type", "text/javascript")
        .body("export default 1;")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["dryRun"], true, "{body}");
    let response = server
        .http
        .delete(server.url("/metadata@feature/crm/vendor/chart.js?dryRun=true"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404, "there is no such file to delete");
    assert_eq!(head(&server, "feature"), before, "nothing was committed");
    server.stop().await;
}

#[tokio::test]
async fn every_metadata_write_documents_dry_run() {
    let server = TestServer::start().await;
    let doc: Value = server
        .http
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut writes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/metadata@{branch}") {
            continue;
        }
        for method in ["post", "put", "delete"] {
            let Some(operation) = item.get(method) else {
                continue;
            };
            writes += 1;
            let documented = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == "dryRun" && p["in"] == "query");
            assert!(documented, "{method} {path} lacks dryRun");
        }
    }
    assert!(writes >= 14, "{writes} metadata writes found");
    server.stop().await;
}
