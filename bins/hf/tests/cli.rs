//! The `hf` binary's principal and metadata tools against a real database, as an operator runs
//! them: with no service running and no password at hand.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::process::Output;

use hf_testkit::TestDb;

/// Runs `hf ARGS` on the test database; returns (success, stdout, stderr).
fn hf(db: &TestDb, args: &[&str]) -> (bool, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = std::process::Command::new(env!("CARGO_BIN_EXE_hf"))
        .args(args)
        .env("HF_DATABASE_URL", db.url())
        .env("HF_LOG", "warn")
        .output()
        .expect("run hf");
    (
        status.success(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// The text after `label` on the line that has it.
fn value_after<'a>(text: &'a str, label: &str) -> &'a str {
    let start = text
        .find(label)
        .unwrap_or_else(|| panic!("{label} in {text}"))
        + label.len();
    text[start..].lines().next().unwrap().trim()
}

#[tokio::test]
async fn principals_are_managed_from_the_command_line() {
    let db = TestDb::new().await;
    let admin = format!("u{}_cli_admin", &db.name()[8..20]);
    let user = format!("u{}_cli_user", &db.name()[8..20]);

    let (ok, out, err) = hf(&db, &["principal", "create", &admin, "--admin"]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("created administrator `{admin}`")),
        "{out}"
    );
    assert_eq!(
        value_after(&out, "hours): ").len(),
        43,
        "a 256-bit token: {out}"
    );
    let (ok, _, err) = hf(&db, &["principal", "create", &user]);
    assert!(ok, "{err}");
    let (ok, _, err) = hf(&db, &["principal", "create", &user]);
    assert!(!ok && err.contains("already named"), "{err}");
    let (ok, _, err) = hf(&db, &["principal", "create", "hf:admin"]);
    assert!(!ok && err.contains("not allowed"), "{err}");

    let (ok, out, _) = hf(&db, &["principal", "list"]);
    assert!(ok && out.contains(&admin) && out.contains(&user), "{out}");

    // The last administrator can be neither demoted nor deleted.
    for command in ["demote", "delete"] {
        let (ok, _, err) = hf(&db, &["principal", command, &admin]);
        assert!(
            !ok && err.contains("last administrator"),
            "{command}: {err}"
        );
    }
    let (ok, out, err) = hf(&db, &["principal", "promote", &user]);
    assert!(ok && out.contains("is an administrator"), "{out}{err}");
    let (ok, out, err) = hf(&db, &["principal", "demote", &admin]);
    assert!(ok && out.contains("is not an administrator"), "{out}{err}");

    // A reset token is a fresh single-use setup token, stored only as its hash.
    let (ok, out, err) = hf(&db, &["principal", "reset", &user]);
    assert!(ok, "{err}");
    let token = value_after(&out, "hours): ");
    assert_eq!(token.len(), 43, "{out}");
    let client = db.client().await;
    let stored: i64 = client
        .query_one(
            "SELECT count(*) FROM hf.setup_tokens t JOIN hf.principals p ON p.id = t.principal_id
              WHERE p.name = $1",
            &[&user],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);

    // Deleting drops the role too.
    let (ok, out, err) = hf(&db, &["principal", "delete", &admin]);
    assert!(ok && out.contains("deleted"), "{out}{err}");
    let roles: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_roles WHERE rolname = $1",
            &[&admin],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(roles, 0);
    for command in ["reset", "promote", "demote", "delete"] {
        let (ok, _, err) = hf(&db, &["principal", command, &admin]);
        assert!(
            !ok && err.contains("no principal named"),
            "{command}: {err}"
        );
    }

    // Roles are cluster-wide: drop the one left, as deleting it would.
    let role = hf_sql::quote_ident(&user).unwrap();
    client
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .unwrap();
}

/// `hf apply` and `hf metadata import` keep the rule every metadata write keeps: they refuse a
/// live branch that breaks a screen. Such a branch can only come from a commit made around the use cases; before `hf apply`
/// ran through them, it applied it and left the screen's query naming a dropped column.
#[tokio::test]
async fn hf_apply_and_import_refuse_a_branch_that_breaks_a_screen() {
    use hf_model::{Field, FieldKind, Model, Module, Object, QualifiedName, ScalarType, Screen};

    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    let store = hf_metastore::Store::open_or_init(&path, "main").unwrap();
    let account = QualifiedName::new("crm", "account");
    let name = Field::new(
        "name",
        "Name",
        FieldKind::Scalar {
            field_type: ScalarType::Text,
            required: false,
            unique: false,
            indexed: false,
            values: Vec::new(),
            default_value: None,
        },
    );
    let write =
        |branch: &str, edit: &dyn Fn(&mut Model) -> Result<hf_model::Change, hf_model::Error>| {
            store
                .write(branch, "git", |model: &mut Model| {
                    edit(model).map_err(hf_metastore::Error::from)
                })
                .unwrap();
        };
    write("main", &|m| m.create_module(Module::new("crm", "CRM")));
    write("main", &|m| {
        m.create_object("crm", Object::new("account", "Account"))
    });
    write("main", &|m| m.create_field(&account, name.clone()));
    write("main", &|m| {
        m.create_screen(
            "crm",
            Screen::new(
                "accounts",
                "{#query \"SELECT id, name FROM crm.account\" as q}{q.records.length}{/query}",
            ),
        )
    });
    let metadata = path.to_str().unwrap();
    let (ok, out, err) = hf(&db, &["apply", "--metadata-path", metadata]);
    assert!(ok, "{out}{err}");

    // `hf query` runs through the same use case as `POST /data/query`: `$User` is the principal.
    let admin = format!("u{}_cli_query", &db.name()[8..20]);
    let (ok, _, err) = hf(&db, &["principal", "create", &admin, "--admin"]);
    assert!(ok, "{err}");
    let (ok, out, err) = hf(
        &db,
        &[
            "query",
            "SELECT id, name FROM crm.account WHERE createdBy = $User.id",
            "--as",
            &admin,
            "--metadata-path",
            metadata,
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("(0 records)"), "{out}");
    // Roles are cluster-wide: drop it (the last administrator cannot be deleted).
    let role = hf_sql::quote_ident(&admin).unwrap();
    db.client()
        .await
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .unwrap();

    // The broken branch is committed with git tools, then loaded as any repository is.
    write("broken", &|m| m.delete_field(&account, "name"));
    let (ok, out, err) = hf(&db, &["metadata", "import", metadata]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = hf(
        &db,
        &[
            "apply",
            "--metadata-path",
            metadata,
            "--branch",
            "broken",
            "--allow-destructive",
        ],
    );
    assert!(!ok, "{out}");
    assert!(err.contains("crm/accounts"), "{err}");
    let has_name_column = || async {
        let client = db.client().await;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
                 WHERE table_schema = 'crm' AND table_name = 'account' AND column_name = 'name')",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, bool>(0)
    };
    assert!(has_name_column().await, "nothing was applied");

    // `hf metadata import` moving the live branch keeps the same rule: the same deletion
    // committed on `main` with git tools is refused, and nothing is imported.
    write("main", &|m| m.delete_field(&account, "name"));
    let (ok, out, err) = hf(&db, &["metadata", "import", metadata]);
    assert!(!ok, "{out}");
    assert!(err.contains("crm/accounts"), "{err}");
    assert!(has_name_column().await, "nothing was imported");
}

/// A repository with `main` at `base` plus one commit writing `file`, cloned from `base`.
fn grown_from(base: &std::path::Path, into: &std::path::Path, branch: &str, file: &str) -> String {
    let status = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(base)
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success());
    let store = hf_metastore::Store::open_or_init(into, "main").unwrap();
    store
        .write_file(branch, "elsewhere", file, Some(b"x"))
        .unwrap()
        .snapshot
        .commit
        .clone()
}

/// `hf metadata export` writes a repository `git log` reads; `hf metadata import` creates and
/// fast-forwards branches, and refuses everything when a branch diverged, naming it and both
/// commits.
#[tokio::test]
async fn metadata_is_exported_and_imported_fast_forward_only() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    {
        let store = hf_metastore::Store::open_or_init(&base, "main").unwrap();
        for n in 0..3 {
            store
                .write_file("main", "old", &format!("f{n}.txt"), Some(b"1"))
                .unwrap();
        }
    }
    let base_arg = base.to_str().unwrap();
    let (ok, out, err) = hf(&db, &["metadata", "import", base_arg]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("created main at"), "{out}");

    let ahead = dir.path().join("ahead");
    let ahead_head = grown_from(&base, &ahead, "main", "ahead.txt");
    let (ok, out, err) = hf(&db, &["metadata", "import", ahead.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("to {ahead_head}")), "{out}");

    let other = dir.path().join("other");
    let other_head = grown_from(&base, &other, "main", "other.txt");
    grown_from_existing(&other, "extra", "extra.txt");
    let (ok, out, err) = hf(&db, &["metadata", "import", other.to_str().unwrap()]);
    assert!(!ok, "{out}{err}");
    assert!(err.contains("branch `main` has diverged"), "{err}");
    assert!(
        err.contains(&ahead_head) && err.contains(&other_head),
        "{err}"
    );

    let exported = dir.path().join("exported");
    let (ok, out, err) = hf(&db, &["metadata", "export", exported.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(
        !out.contains("extra"),
        "nothing of the refused import: {out}"
    );
    let log = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&exported)
        .args(["log", "--format=%H"])
        .output()
        .unwrap();
    let log = String::from_utf8(log.stdout).unwrap();
    assert_eq!(log.lines().next(), Some(ahead_head.as_str()));
    assert_eq!(
        log.lines().count(),
        5,
        "the first commit, 3 writes and one more"
    );
}

/// Adds a commit on `branch` of an existing local repository.
fn grown_from_existing(repo: &std::path::Path, branch: &str, file: &str) {
    let store = hf_metastore::Store::open_or_init(repo, "main").unwrap();
    store
        .write_file(branch, "elsewhere", file, Some(b"x"))
        .unwrap();
}

#[tokio::test]
async fn the_cursor_secret_is_rotated_from_the_command_line() {
    let db = TestDb::new().await;
    let (ok, out, err) = hf(&db, &["secrets", "rotate"]);
    assert!(ok, "{err}");
    assert!(out.contains("generation 2 signs"), "{out}");
    assert!(out.contains("for 86400 s"), "{out}");
    let (ok, out, err) = hf(&db, &["secrets", "rotate", "--grace", "0"]);
    assert!(ok, "{err}");
    assert!(out.contains("generation 3 signs"), "{out}");
    // The first generation is gone; the second verifies no more.
    let rows = db
        .client()
        .await
        .query(
            "SELECT generation, verify_until <= now() FROM hf.server_secrets \
             WHERE name = 'cursor' ORDER BY generation",
            &[],
        )
        .await
        .unwrap();
    let rows: Vec<(i32, Option<bool>)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(rows, [(2, Some(true)), (3, None)]);
    let (ok, _, err) = hf(&db, &["secrets", "rotate", "--grace", "-1"]);
    assert!(!ok, "a negative grace is refused: {err}");
}
