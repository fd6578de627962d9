//! The use cases against a real PostgreSQL and a real metadata repository, without HTTP: the
//! rules hold whoever calls them.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::sync::Arc;

use hf_app::{App, Edit, Error, ErrorKind, WriteOptions};
use hf_model::{Field, FieldKind, Module, Object, QualifiedName, ScalarType, Screen};
use hf_testkit::TestDb;

/// An application over a fresh database (migrated) and a fresh metadata repository.
async fn app(db: &TestDb) -> (App, tempfile::TempDir) {
    let pool = db.pool();
    let mut client = pool.get().await.unwrap();
    hf_storage::migrate(&mut client).await.unwrap();
    drop(client);
    let dir = tempfile::tempdir().unwrap();
    let options = hf_storage::metadata::SharedOptions {
        listen: false,
        poll_interval: None,
    };
    let store =
        hf_storage::metadata::open_store(db.url(), &dir.path().join("metadata"), "main", &options)
            .await
            .unwrap();
    (App::new(pool, store), dir)
}

fn text_field(key: &str) -> Field {
    let kind = FieldKind::Scalar {
        field_type: ScalarType::Text,
        required: false,
        unique: false,
        indexed: false,
        values: Vec::new(),
        default_value: None,
    };
    Field::new(key, "Label", kind)
}

fn account() -> QualifiedName {
    QualifiedName::new("crm", "account")
}

const WRITE: WriteOptions = WriteOptions {
    allow_destructive: false,
    dry_run: false,
};
const DRY: WriteOptions = WriteOptions {
    allow_destructive: false,
    dry_run: true,
};

/// Writes `crm.account` with a `name` field and a screen whose query reads it, on `branch`.
async fn seed(app: &App, branch: &str) {
    for edit in [
        Edit::CreateModule(Module::new("crm", "CRM")),
        Edit::CreateObject {
            module: "crm".into(),
            object: Object::new("account", "Account"),
        },
        Edit::CreateField {
            object: account(),
            field: text_field("name"),
        },
        Edit::CreateScreen {
            module: "crm".into(),
            screen: Screen::new(
                "accounts",
                "{#query \"SELECT id, name FROM crm.account\" as q}{q.records.length}{/query}",
            ),
        },
    ] {
        app.write_metadata(branch, "tester", edit, WRITE)
            .await
            .unwrap();
    }
}

async fn columns(db: &TestDb) -> Vec<String> {
    db.client()
        .await
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = 'crm' AND table_name = 'account' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn a_live_write_runs_its_ddl_and_a_dry_run_only_plans_it() {
    let db = TestDb::new().await;
    let (app, _dir) = app(&db).await;
    seed(&app, "main").await;
    assert!(columns(&db).await.contains(&"name".to_owned()));

    let head = app.snapshot("main").await.unwrap().commit.clone();
    let before = columns(&db).await;
    let dry = app
        .write_metadata(
            "main",
            "tester",
            Edit::CreateField {
                object: account(),
                field: text_field("city"),
            },
            DRY,
        )
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.apply.unwrap().columns_added, 1);
    assert!(dry
        .plan
        .unwrap()
        .changes
        .iter()
        .any(|change| change.sql.contains("ADD COLUMN")));
    assert_eq!(app.snapshot("main").await.unwrap().commit, head);
    assert_eq!(columns(&db).await, before);

    let written = app
        .write_metadata(
            "main",
            "tester",
            Edit::CreateField {
                object: account(),
                field: text_field("city"),
            },
            WRITE,
        )
        .await
        .unwrap();
    assert!(!written.dry_run);
    assert_eq!(written.apply.unwrap().columns_added, 1);
    assert!(columns(&db).await.contains(&"city".to_owned()));
}

#[tokio::test]
async fn breaking_a_screen_query_is_in_use_with_or_without_a_dry_run() {
    let db = TestDb::new().await;
    let (app, _dir) = app(&db).await;
    seed(&app, "feature").await;
    let head = app.snapshot("feature").await.unwrap().commit.clone();
    for options in [DRY, WRITE] {
        let error = app
            .write_metadata(
                "feature",
                "tester",
                Edit::DeleteField {
                    object: account(),
                    field: "name".into(),
                },
                options,
            )
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
        assert!(error.to_string().contains("accounts"), "{error}");
    }
    assert_eq!(app.snapshot("feature").await.unwrap().commit, head);

    // A screen whose query names a missing field is not written, located in its source.
    let error = app
        .write_metadata(
            "feature",
            "tester",
            Edit::CreateScreen {
                module: "crm".into(),
                screen: Screen::new(
                    "broken",
                    "{#query \"SELECT id, nmae FROM crm.account\" as q}{q.records.length}{/query}",
                ),
            },
            DRY,
        )
        .await
        .unwrap_err();
    let Error::Hfx { diagnostics } = error else {
        panic!("expected the screen's diagnostics, got {error}");
    };
    assert_eq!((diagnostics[0].line, diagnostics[0].column), (1, 21));
}

/// The screen rules read compiled screens: the service compiles them as it compiles any screen
/// (bounded, timed, in a worker process where it isolates compiles, and through the module
/// cache), never on the lock-holding thread. A stand-in worker counts its runs and answers the
/// compile of the seeded screen; one marked `SLOW` it never answers.
#[tokio::test]
async fn the_screen_rules_compile_each_screen_once_through_the_compiler() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let worker = dir.path().join("worker");
    let screen = "{#query \"SELECT id, name FROM crm.account\" as q}{q.records.length}{/query}";
    let answer = hf_app::compile::compile_screen(screen, None).unwrap();
    std::fs::write(
        worker.with_extension("answer"),
        serde_json::to_vec(&answer).unwrap(),
    )
    .unwrap();
    let script = r#"cat > "$0.in"; echo run >> "$0.runs"; if grep -q SLOW "$0.in"; then sleep 30; fi; cat "$0.answer""#;
    let compiler = hf_app::Compiler::new(
        hf_app::compile::Isolation::Process {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into(), worker.display().to_string()],
        },
        std::time::Duration::from_secs(2),
    );
    let (plain, _metadata) = app(&db).await;
    let app = App::with_compiler(plain.pool().clone(), Arc::clone(plain.store()), compiler);
    let runs = || {
        std::fs::read_to_string(worker.with_extension("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    seed(&app, "main").await;
    for key in ["a", "b"] {
        let edit = Edit::CreateField {
            object: account(),
            field: text_field(key),
        };
        app.write_metadata("main", "tester", edit, WRITE)
            .await
            .unwrap();
    }
    assert_eq!(
        runs(),
        1,
        "the screen compiled once, however many writes read it"
    );
    // What the rule knows of the screen came from the worker: its query reads `name`.
    let delete_name = Edit::DeleteField {
        object: account(),
        field: "name".into(),
    };
    let error = app
        .write_metadata("main", "tester", delete_name.clone(), WRITE)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
    assert_eq!(runs(), 1);

    // A stored screen that does not compile within the time limit (committed around the use
    // cases) refuses the branch's writes rather than go unchecked, without hanging them; the
    // screen itself can still be deleted, and then the writes go through.
    Arc::clone(app.store())
        .write("feature", "someone", |model: &mut hf_model::Model| {
            let slow = Screen::new(
                "slow",
                "{#query \"SELECT id FROM crm.account\" as q}SLOW{/query}",
            );
            model
                .create_screen("crm", slow)
                .map_err(hf_metastore::Error::from)
        })
        .unwrap();
    let started = std::time::Instant::now();
    let add_c = Edit::CreateField {
        object: account(),
        field: text_field("c"),
    };
    for edit in [delete_name, add_c.clone()] {
        let error = app
            .write_metadata("feature", "tester", edit, WRITE)
            .await
            .expect_err("the slow screen is not checked");
        assert!(matches!(error, Error::Timeout { .. }), "{error}");
    }
    let delete_slow = Edit::DeleteScreen {
        module: "crm".into(),
        screen: "slow".into(),
    };
    app.write_metadata("feature", "tester", delete_slow, WRITE)
        .await
        .unwrap();
    app.write_metadata("feature", "tester", add_c, WRITE)
        .await
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(
        runs(),
        4,
        "the slow screen was tried once per write until deleted"
    );
}

#[tokio::test]
async fn applying_a_branch_that_breaks_a_screen_is_refused() {
    let db = TestDb::new().await;
    let (app, _dir) = app(&db).await;
    seed(&app, "main").await;
    // A commit made around the use cases (as `git` itself could): the field goes, the screen
    // that reads it stays.
    let store = Arc::clone(app.store());
    store
        .write("broken", "someone", |model: &mut hf_model::Model| {
            model
                .delete_field(&account(), "name")
                .map_err(hf_metastore::Error::from)
        })
        .unwrap();
    let error = app.apply(Some("broken"), true).await.unwrap_err();
    assert!(
        matches!(&error, Error::BreaksScreens { screens, .. } if screens == &["crm/accounts"]),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert!(
        columns(&db).await.contains(&"name".to_owned()),
        "nothing ran"
    );
    let live = app.snapshot("main").await.unwrap();
    assert!(live
        .model
        .object(&account())
        .unwrap()
        .fields
        .contains_key("name"));
}

#[tokio::test]
async fn logging_in_issues_a_token_that_authenticates_and_refuses_wrong_secrets() {
    let db = TestDb::new().await;
    let (app, _dir) = app(&db).await;
    let config = hf_app::auth::AuthConfig {
        admin_name: format!("admin_{}", &db.name()[8..20]),
        admin_password: Some("correct horse battery staple".to_owned()),
        ..Default::default()
    };
    let (auth, _) = hf_app::auth::prepare(app.pool(), db.url(), &config)
        .await
        .unwrap();
    let pool = app.pool();
    let issued = auth
        .log_in_with_password(
            pool,
            &config.admin_name,
            "correct horse battery staple".to_owned(),
            "127.0.0.1",
        )
        .await
        .unwrap();
    assert_eq!(issued.expires_in, config.token_ttl.as_secs());
    let principal = auth.authenticate(pool, &issued.token).await.unwrap();
    assert_eq!(principal.name, config.admin_name);
    assert!(principal.is_admin);

    let wrong = auth
        .log_in_with_password(pool, &config.admin_name, "wrong".to_owned(), "127.0.0.1")
        .await
        .unwrap_err();
    assert!(matches!(wrong, Error::InvalidCredentials), "{wrong}");
    assert_eq!(wrong.kind(), ErrorKind::Unauthenticated);
    let unknown = auth
        .log_in_with_password(pool, "nobody_here", "x".to_owned(), "127.0.0.1")
        .await
        .unwrap_err();
    assert!(matches!(unknown, Error::InvalidCredentials), "{unknown}");
    let code = auth.log_in_with_code(pool, "not-a-code").await.unwrap_err();
    assert!(matches!(code, Error::InvalidCode), "{code}");

    // The admin's role is cluster-wide: drop it the way deleting a principal would.
    let role = format!("\"{}\"", config.admin_name);
    db.client()
        .await
        .batch_execute(&format!(
            "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP OWNED BY {role}; DROP ROLE {role};"
        ))
        .await
        .unwrap();
}
