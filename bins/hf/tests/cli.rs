//! The `hf` binary's principal tools against a real database, as an operator runs them: with
//! no service running and no password at hand.

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
