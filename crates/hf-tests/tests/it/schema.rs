//! The database schema over HTTP (issue 5): keys that are SQL keywords end to end, lookups between
//! modules, explicit renames (`renamedFrom`) that keep the data on the live branch and on another
//! branch, failed applies that leave the database and every branch exactly as before, a held lock
//! (an apply blocked by another session's lock fails cleanly), and a live write that fails at
//! `COMMIT`, which moves neither the live branch nor the schema (F8).

use std::path::Path;
use std::time::{Duration, Instant};

use hf_testkit::{TestServer, TEST_ADMIN_PASSWORD};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::assert_envelope;

/// An HTTP client with an administrator's token, on some server.
struct Admin {
    http: reqwest::Client,
    base_url: String,
    token: String,
}

impl Admin {
    async fn login(base_url: &str, name: &str) -> Self {
        let http = reqwest::Client::new();
        let response = http
            .post(format!("{base_url}/auth/login"))
            .json(&json!({"username": name, "password": TEST_ADMIN_PASSWORD}))
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        let token = body["token"].as_str().unwrap_or_else(|| panic!("{body}"));
        Admin {
            http,
            base_url: base_url.to_owned(),
            token: token.to_owned(),
        }
    }

    async fn of(server: &TestServer) -> Self {
        Self::login(&server.base_url, &server.admin_name).await
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// Sends and expects `status`; returns the body.
    async fn expect(&self, method: Method, path: &str, body: Option<Value>, status: u16) -> Value {
        let response = self.send(method.clone(), path, body).await;
        let actual = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(actual, status, "{method} {path}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.expect(Method::POST, path, Some(body), 201).await
    }
}

fn scalar(label: &str, field_type: &str) -> Value {
    json!({"fieldKind": "scalar", "label": label, "fieldType": field_type})
}

/// The head of a branch in a metadata repository.
fn git_head(metadata: &Path, branch: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(metadata)
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

fn git_show(metadata: &Path, branch: &str, file: &str) -> String {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(metadata)
        .args(["show", &format!("{branch}:{file}")])
        .output()
        .unwrap();
    assert!(output.status.success(), "no {file} on {branch}");
    String::from_utf8(output.stdout).unwrap()
}

/// Everything apply could change, as text: the catalog of the non-system schemas (columns,
/// constraints, indexes, comments), the planner's markers and the applied commit.
async fn database_state(client: &tokio_postgres::Client) -> Vec<String> {
    let queries = [
        "SELECT format('%s.%s.%s %s %s %s', table_schema, table_name, column_name, data_type,
                       is_nullable, coalesce(col_description(
                           format('%I.%I', table_schema, table_name)::regclass, ordinal_position), ''))
           FROM information_schema.columns
          WHERE table_schema NOT IN ('pg_catalog', 'information_schema', 'hf')
          ORDER BY 1",
        "SELECT format('%s.%s %s %s', n.nspname, c.relname, con.conname, pg_get_constraintdef(con.oid))
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'hf')
          ORDER BY 1",
        "SELECT indexdef FROM pg_indexes
          WHERE schemaname NOT IN ('pg_catalog', 'information_schema', 'hf') ORDER BY 1",
        "SELECT format('%s %s %s %s', kind, schema_name, table_name, item_name)
           FROM hf_ddl.managed ORDER BY 1",
        "SELECT format('%s %s %s', applied_branch, applied_commit, applied_tree)
           FROM hf.schema_state",
    ];
    let mut state = Vec::new();
    for query in queries {
        for row in client.query(query, &[]).await.unwrap() {
            state.push(row.get::<_, String>(0));
        }
    }
    state
}

/// Keys that are SQL keywords as module, object and field keys, a lookup between two such
/// modules, and renames of a field and of an object on the live branch that keep the rows.
#[tokio::test]
async fn keyword_keys_and_live_renames_keep_the_data() {
    let server = TestServer::start().await;
    let admin = Admin::of(&server).await;
    let db = server.db.client().await;

    let created = admin
        .post("/metadata@main/select", json!({"label": "Select"}))
        .await;
    assert!(created["apply"].is_object(), "{created}");
    let created = admin
        .post(
            "/metadata@main/select/objects/order",
            json!({"label": "Order"}),
        )
        .await;
    assert_eq!(created["apply"]["tablesCreated"], 1, "{created}");
    let mut user = scalar("User", "text");
    user["required"] = json!(true);
    admin
        .post("/metadata@main/select/objects/order/fields/user", user)
        .await;
    let mut table = scalar("Table", "integer");
    table["uniqueConstraint"] = json!(true);
    let created = admin
        .post("/metadata@main/select/objects/order/fields/table", table)
        .await;
    assert_eq!(created["apply"]["columnsAdded"], 1, "{created}");
    admin
        .post("/metadata@main/table", json!({"label": "Table"}))
        .await;
    admin
        .post(
            "/metadata@main/table/objects/user",
            json!({"label": "User"}),
        )
        .await;
    admin
        .post(
            "/metadata@main/table/objects/user/fields/order",
            json!({"fieldKind": "lookup", "label": "Order", "lookupTarget": "select.order",
                   "indexed": true}),
        )
        .await;
    admin
        .post(
            "/metadata@main/table/objects/user/fields/select",
            scalar("Select", "boolean"),
        )
        .await;

    // The tables are real, the keywords quoted, the lookup a foreign key across schemas.
    let id: String = db
        .query_one(
            r#"INSERT INTO "select"."order" ("user", "table") VALUES ('ann', 7) RETURNING id::text"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    db.execute(
        r#"INSERT INTO "table"."user" ("order", "select") VALUES ($1::text::uuid, true)"#,
        &[&id],
    )
    .await
    .unwrap();
    let orphan = db
        .execute(
            r#"INSERT INTO "table"."user" ("order") VALUES (gen_random_uuid())"#,
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(
        orphan.code(),
        Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION)
    );
    let plan = admin.expect(Method::POST, "/plan", None, 200).await;
    assert_eq!(plan["changes"], json!([]), "{plan}");

    // Rename a field: the column is renamed, its value kept, the hint kept in the file but not
    // shown by reads.
    let mut renamed = scalar("Where", "text");
    renamed["required"] = json!(true);
    renamed["renamedFrom"] = json!("user");
    let written = admin
        .post("/metadata@main/select/objects/order/fields/where", renamed)
        .await;
    assert_eq!(written["status"], "created");
    assert_eq!(written["apply"]["columnsAdded"], 0, "{written}");
    let value: String = db
        .query_one(r#"SELECT "where" FROM "select"."order""#, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(value, "ann");
    let file = git_show(
        &server.metadata_path(),
        "main",
        "select/objects/order.json5",
    );
    assert!(file.contains("renamedFrom: \"user\""), "{file}");
    assert!(!file.contains("  user:"), "{file}");
    let read = admin
        .expect(
            Method::GET,
            "/metadata/select/objects/order/fields/where",
            None,
            200,
        )
        .await;
    assert!(read.get("renamedFrom").is_none(), "{read}");
    admin
        .expect(
            Method::GET,
            "/metadata/select/objects/order/fields/user",
            None,
            404,
        )
        .await;

    // Rename the object: the table follows, and so does the lookup of the other module.
    let written = admin
        .post(
            "/metadata@main/select/objects/from",
            json!({"label": "From", "renamedFrom": "order"}),
        )
        .await;
    assert_eq!(written["apply"]["tablesCreated"], 0, "{written}");
    let rows: i64 = db
        .query_one(
            r#"SELECT count(*) FROM "select"."from" f JOIN "table"."user" u ON u."order" = f.id
                WHERE f."where" = 'ann' AND f."table" = 7"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
    let lookup = admin
        .expect(
            Method::GET,
            "/metadata/table/objects/user/fields/order",
            None,
            200,
        )
        .await;
    assert_eq!(lookup["lookupTarget"], "select.from");
    let plan = admin.expect(Method::POST, "/plan", None, 200).await;
    assert_eq!(plan["changes"], json!([]), "{plan}");

    // A key change without a hint is a delete: refused without allowDestructive, nothing
    // committed.
    let head = git_head(&server.metadata_path(), "main");
    let before = database_state(&db).await;
    let refused = admin
        .send(
            Method::DELETE,
            "/metadata@main/select/objects/from/fields/table",
            None,
        )
        .await;
    let body = assert_envelope(refused, 409, "DESTRUCTIVE_CHANGE").await;
    assert_eq!(body["errors"][0]["target"], Value::Null);
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("select.from.table"), "{message}");
    assert_eq!(git_head(&server.metadata_path(), "main"), head);
    assert_eq!(database_state(&db).await, before);
    server.stop().await;
}

/// A rename written on another branch commits only; `/plan` of that branch shows a rename (no
/// data loss) and `/apply` runs it, keeps the rows and moves the live branch.
#[tokio::test]
async fn a_branch_rename_plans_and_applies_as_a_rename() {
    let server = TestServer::start().await;
    let admin = Admin::of(&server).await;
    let db = server.db.client().await;
    admin
        .post("/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account/fields/name",
            scalar("Name", "text"),
        )
        .await;
    db.execute("INSERT INTO crm.account (name) VALUES ('Acme')", &[])
        .await
        .unwrap();

    let mut renamed = scalar("Title", "text");
    renamed["renamedFrom"] = json!("name");
    let written = admin
        .post(
            "/metadata@feature/crm/objects/account/fields/title",
            renamed,
        )
        .await;
    assert_eq!(written["apply"], Value::Null);
    let plan = admin
        .expect(
            Method::POST,
            "/plan",
            Some(json!({"branch": "feature"})),
            200,
        )
        .await;
    assert_eq!(plan["summary"]["destructive"], 0, "{plan}");
    let actions: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["rename_column", "comment"], "{plan}");
    assert_eq!(
        plan["changes"][0]["sql"],
        r#"ALTER TABLE "crm"."account" RENAME COLUMN "name" TO "title""#
    );

    let applied = admin
        .expect(
            Method::POST,
            "/apply",
            Some(json!({"branch": "feature"})),
            200,
        )
        .await;
    assert_eq!(applied["branch"], "feature");
    let feature = git_head(&server.metadata_path(), "feature");
    assert_eq!(applied["commit"].as_str(), feature.as_deref());
    assert_eq!(git_head(&server.metadata_path(), "main"), feature);
    let title: String = db
        .query_one("SELECT title FROM crm.account", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(title, "Acme");
    // The hint stays in the file; once applied it no longer applies.
    let plan = admin.expect(Method::POST, "/plan", None, 200).await;
    assert_eq!(plan["changes"], json!([]), "{plan}");

    // A module rename on the live branch renames the schema, rows and all.
    let written = admin
        .post(
            "/metadata@main/sales",
            json!({"label": "Sales", "renamedFrom": "crm"}),
        )
        .await;
    assert_eq!(written["file"], "sales/module.json5");
    let title: String = db
        .query_one("SELECT title FROM sales.account", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(title, "Acme");
    admin
        .expect(Method::GET, "/metadata/sales/objects/account", None, 200)
        .await;
    admin.expect(Method::GET, "/metadata/crm", None, 404).await;
    server.stop().await;
}

/// A live write and an `/apply` whose DDL fails (a unique constraint over duplicates) answer
/// 422 `APPLY_FAILED` naming the statement and leave the database, the live branch and the
/// applied branch exactly as before.
#[tokio::test]
async fn failed_applies_leave_database_and_branches_unchanged() {
    let server = TestServer::start().await;
    let admin = Admin::of(&server).await;
    let db = server.db.client().await;
    let metadata = server.metadata_path();
    admin
        .post("/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account/fields/code",
            scalar("Code", "text"),
        )
        .await;
    db.execute(
        "INSERT INTO crm.account (code) VALUES ('A'), ('A'), ('B')",
        &[],
    )
    .await
    .unwrap();
    let rows = "SELECT string_agg(code, ',' ORDER BY code) FROM crm.account";
    let before = database_state(&db).await;
    let main = git_head(&metadata, "main");

    let mut unique = scalar("Code", "text");
    unique["uniqueConstraint"] = json!(true);
    let failed = admin
        .send(
            Method::PUT,
            "/metadata@main/crm/objects/account/fields/code",
            Some(unique.clone()),
        )
        .await;
    let body = assert_envelope(failed, 422, "APPLY_FAILED").await;
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("ADD CONSTRAINT"), "{message}");
    assert!(message.contains("duplicate"), "{message}");
    assert_eq!(git_head(&metadata, "main"), main);
    assert_eq!(database_state(&db).await, before);

    // The same change on a branch commits; applying that branch fails the same way.
    admin
        .expect(
            Method::PUT,
            "/metadata@feature/crm/objects/account/fields/code",
            Some(unique),
            200,
        )
        .await;
    let feature = git_head(&metadata, "feature");
    let failed = admin
        .send(Method::POST, "/apply", Some(json!({"branch": "feature"})))
        .await;
    assert_envelope(failed, 422, "APPLY_FAILED").await;
    assert_eq!(git_head(&metadata, "main"), main);
    assert_eq!(git_head(&metadata, "feature"), feature);
    assert_eq!(database_state(&db).await, before);
    let kept: String = db.query_one(rows, &[]).await.unwrap().get(0);
    assert_eq!(kept, "A,A,B");
    server.stop().await;
}

/// Another session holding `ACCESS SHARE` on a table: a live write that alters it fails within
/// the lock timeout with a clear error and `Retry-After`, commits nothing, and succeeds once the
/// lock is gone.
#[tokio::test]
async fn a_held_lock_fails_a_live_write_within_the_lock_timeout() {
    let server = TestServer::start().await;
    let admin = Admin::of(&server).await;
    let db = server.db.client().await;
    let metadata = server.metadata_path();
    admin
        .post("/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    let before = database_state(&db).await;
    let main = git_head(&metadata, "main");

    let holder = server.db.client().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE crm.account IN ACCESS SHARE MODE")
        .await
        .unwrap();
    let started = Instant::now();
    let failed = admin
        .send(
            Method::POST,
            "/metadata@main/crm/objects/account/fields/name",
            Some(scalar("Name", "text")),
        )
        .await;
    let waited = started.elapsed();
    assert_eq!(
        failed
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );
    let body = assert_envelope(failed, 422, "APPLY_FAILED").await;
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("lock timeout"), "{message}");
    assert!(message.contains("crm.account.name"), "{message}");
    assert_eq!(body["errors"][0]["target"], Value::Null);
    // lock_timeout is 2 s: the write waited for it, and not much longer.
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
    assert_eq!(git_head(&metadata, "main"), main);
    assert_eq!(database_state(&db).await, before);

    holder.batch_execute("COMMIT").await.unwrap();
    let written = admin
        .post(
            "/metadata@main/crm/objects/account/fields/name",
            scalar("Name", "text"),
        )
        .await;
    assert_eq!(written["apply"]["columnsAdded"], 1);
    server.stop().await;
}

/// A live write is one transaction: when it fails at `COMMIT` (after its DDL, the applied state
/// and the branch move all ran inside it), neither the live branch nor the schema moved, on this
/// instance or any other. A deferred trigger that refuses the applied state makes `COMMIT` fail
/// for real. A database whose recorded state disagrees with the live head (changed outside hf)
/// is still reported by `/status`, and `/apply` brings them together.
#[tokio::test]
async fn a_live_write_failing_at_commit_moves_neither_branch_nor_schema() {
    let server = TestServer::start().await;
    let admin = Admin::of(&server).await;
    let db = server.db.client().await;
    admin
        .post("/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    let head_of_main = "SELECT encode(head, 'hex') FROM hf.metadata_refs WHERE branch = 'main'";
    let applied: String = db.query_one(head_of_main, &[]).await.unwrap().get(0);
    let before = database_state(&db).await;
    db.batch_execute(
        "CREATE FUNCTION public.refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
         CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT OR UPDATE ON hf.schema_state
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.refuse_at_commit();",
    )
    .await
    .unwrap();
    let failed = admin
        .send(
            Method::POST,
            "/metadata@main/crm/objects/account/fields/name",
            Some(scalar("Name", "text")),
        )
        .await;
    assert!(failed.status().is_server_error(), "{}", failed.status());
    let head: String = db.query_one(head_of_main, &[]).await.unwrap().get(0);
    assert_eq!(head, applied, "the branch did not move");
    assert_eq!(database_state(&db).await, before, "the schema did not move");
    admin
        .expect(
            Method::GET,
            "/metadata/crm/objects/account/fields/name",
            None,
            404,
        )
        .await;
    let other = server.another_instance().await;
    let response = admin
        .http
        .get(other.url("/metadata/crm/objects/account/fields/name"))
        .bearer_auth(&admin.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    other.stop().await;

    db.batch_execute("DROP TRIGGER refuse_at_commit ON hf.schema_state")
        .await
        .unwrap();
    let written = admin
        .post(
            "/metadata@main/crm/objects/account/fields/name",
            scalar("Name", "text"),
        )
        .await;
    assert_eq!(written["apply"]["columnsAdded"], 1, "{written}");
    let live: String = db.query_one(head_of_main, &[]).await.unwrap().get(0);

    // Changed outside hf: reported, and repaired by /apply.
    db.execute(
        "UPDATE hf.schema_state SET applied_commit = $1, applied_tree = $1",
        &[&applied],
    )
    .await
    .unwrap();
    let status: Value = admin
        .http
        .get(server.url("/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        status["metadata"],
        json!({"inSync": false, "liveCommit": live, "appliedCommit": applied}),
        "{status}"
    );
    let repaired = admin.expect(Method::POST, "/apply", None, 200).await;
    assert_eq!(repaired["commit"], live.as_str());
    let status: Value = admin
        .http
        .get(server.url("/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(status.get("metadata").is_none(), "{status}");
    server.stop().await;
}
