//! The database schema over HTTP (issue 5): keys that are SQL keywords end to end, lookups between
//! modules, explicit renames (`renamedFrom`) that keep the data on the live branch and on another
//! branch, failed applies that leave the database and every branch exactly as before, a held lock
//! (an apply blocked by another session's lock fails cleanly), and a crash between the ref move and the database commit that a new server
//! reports in `/status` and `/apply` repairs (F8).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hf_testkit::{TestDb, TestServer, TEST_ADMIN_PASSWORD};
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

/// A server of this test, on a database and a metadata repository that outlive it (the test
/// kit's server owns both, and this test needs a second server on the same ones).
struct Service {
    base_url: String,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    async fn start(
        db: &TestDb,
        metadata: &Path,
        admin_name: &str,
    ) -> (Self, Arc<hf_metastore::Store>) {
        let pool = db.pool();
        hf_server::prepare_database(&pool).await.unwrap();
        let mut config = hf_server::ServerConfig::new("127.0.0.1:0", metadata.to_owned());
        config.workers = Some(1);
        config.shutdown_timeout = Duration::from_secs(5);
        config.auth.admin_name = admin_name.to_owned();
        config.auth.admin_password = Some(TEST_ADMIN_PASSWORD.to_owned());
        let (auth, _) = hf_server::auth::prepare(&pool, db.url(), &config.auth)
            .await
            .unwrap();
        let store = Arc::new(hf_metastore::Store::open_or_init(metadata, "main").unwrap());
        let state = hf_server::AppState {
            app: hf_app::App::new(pool, Arc::clone(&store)),
            metadata_path: metadata.display().to_string(),
            auth: Arc::new(auth),
            embedded: None,
        };
        let (sender, receiver) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = hf_server::bind(&config, state).unwrap();
                sender.send((server.addr, server.handle())).unwrap();
                server.run().await.unwrap();
            });
        });
        let (addr, handle) = receiver.recv().unwrap();
        let service = Service {
            base_url: format!("http://{addr}"),
            handle,
            thread: Some(thread),
        };
        (service, store)
    }

    async fn stop(mut self) {
        self.handle.stop(true).await;
        if let Some(thread) = self.thread.take() {
            tokio::task::spawn_blocking(move || thread.join().unwrap())
                .await
                .unwrap();
        }
    }
}

/// A crash after the live branch's ref moved and before the database committed (a failpoint
/// stops the write there): a new server on the same repository and database reports the drift in
/// `/status`, `/plan` shows the missing DDL, and `/apply` brings them together.
#[tokio::test]
async fn a_crash_between_ref_move_and_commit_is_reported_and_repaired() {
    let db = TestDb::new().await;
    let metadata: PathBuf = std::env::temp_dir().join(format!("hf-test-metadata-{}", db.name()));
    let admin_name = format!("admin_{}", &db.name()[8..20]);
    let client = db.client().await;

    let (first, store) = Service::start(&db, &metadata, &admin_name).await;
    let admin = Admin::login(&first.base_url, &admin_name).await;
    admin
        .post("/metadata@main/crm", json!({"label": "CRM"}))
        .await;
    admin
        .post(
            "/metadata@main/crm/objects/account",
            json!({"label": "Account"}),
        )
        .await;
    let applied = git_head(&metadata, "main").unwrap();

    hf_storage::deploy::failpoints::crash_after_ref_move(store.path());
    let crashed = admin
        .send(
            Method::POST,
            "/metadata@main/crm/objects/account/fields/name",
            Some(scalar("Name", "text")),
        )
        .await;
    assert_envelope(crashed, 500, "INTERNAL").await;
    let live = git_head(&metadata, "main").unwrap();
    assert_ne!(live, applied, "the ref moved");
    assert!(git_show(&metadata, "main", "crm/objects/account.json5").contains("name:"));
    let column = "SELECT count(*) FROM information_schema.columns
                   WHERE table_schema = 'crm' AND table_name = 'account' AND column_name = 'name'";
    let count: i64 = client.query_one(column, &[]).await.unwrap().get(0);
    assert_eq!(count, 0, "the DDL did not commit");
    first.stop().await;
    drop(store);

    let (second, _store) = Service::start(&db, &metadata, &admin_name).await;
    let http = reqwest::Client::new();
    let status: Value = http
        .get(format!("{}/status", second.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "ok");
    assert_eq!(
        status["metadata"],
        json!({"inSync": false, "liveCommit": live, "appliedCommit": applied}),
        "{status}"
    );
    let admin = Admin::login(&second.base_url, &admin_name).await;
    let plan = admin.expect(Method::POST, "/plan", None, 200).await;
    assert_eq!(plan["summary"]["columnsAdded"], 1, "{plan}");
    let repaired = admin.expect(Method::POST, "/apply", None, 200).await;
    assert_eq!(repaired["commit"], live.as_str());
    assert_eq!(repaired["apply"]["columnsAdded"], 1);
    let status: Value = http
        .get(format!("{}/status", second.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(status.get("metadata").is_none(), "{status}");
    let count: i64 = client.query_one(column, &[]).await.unwrap().get(0);
    assert_eq!(count, 1);
    second.stop().await;

    // The administrator's role belongs to the whole cluster; drop it with the test.
    let role = hf_sql::quote_ident(&admin_name).unwrap();
    client
        .batch_execute(&format!(
            "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP OWNED BY {role}; DROP ROLE {role};"
        ))
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&metadata);
}
