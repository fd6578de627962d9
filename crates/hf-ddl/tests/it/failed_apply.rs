//! A failed apply leaves the database exactly as it was: the caller rolls back, and the
//! catalog, the markers and the rows are unchanged. Failures name the statement.

use hf_ddl::{apply, introspect, plan, ApplyOptions, ErrorKind, Renames, Schema};
use tokio_postgres::Client;

use crate::db::with_db;
use crate::roundtrip::build;

fn schema(text: &str) -> Schema {
    json5::from_str(text).unwrap()
}

const BEFORE: &str = r#"{ schemas: { crm: { tables: { account: {
    columns: [
        { name: "id", type: "uuid", notNull: true, default: "gen_random_uuid()" },
        { name: "email", type: "text" },
        { name: "code", type: "text" },
    ],
    primaryKey: { name: "account_pkey", columns: ["id"] },
} } } } }"#;

/// Builds BEFORE with one row whose email is NULL and whose code is not a number.
async fn setup(client: &mut Client) -> Schema {
    build(client, &schema(BEFORE)).await;
    client
        .batch_execute("INSERT INTO crm.account (email, code) VALUES (NULL, 'abc')")
        .await
        .unwrap();
    introspect(client, &["crm".to_owned()]).await.unwrap()
}

/// Applies `desired` over the current state in a transaction that is rolled back on error,
/// as every caller does, and returns the error.
async fn failing_apply(
    client: &mut Client,
    current: &Schema,
    desired: &Schema,
    options: ApplyOptions,
) -> hf_ddl::Error {
    let planned = plan(current, desired, &Renames::default());
    assert!(!planned.has_errors());
    let tx = client.transaction().await.unwrap();
    let error = apply(&tx, &planned, &options)
        .await
        .expect_err("apply must fail");
    tx.rollback().await.unwrap();
    error
}

async fn assert_unchanged(client: &Client, before: &Schema) {
    let now = introspect(client, &["crm".to_owned(), "sales".to_owned()])
        .await
        .unwrap();
    assert_eq!(&now, before, "the catalog and the markers are unchanged");
    let rows = client
        .query("SELECT email, code FROM crm.account", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, Option<String>>(0), None);
    assert_eq!(rows[0].get::<_, String>(1), "abc");
}

/// The desired schema: a new module first (so something runs before the failure), then `edit`.
fn desired(edit: impl FnOnce(&mut Schema)) -> Schema {
    let mut desired = schema(BEFORE);
    let sales: Schema = schema(
        r#"{ schemas: { sales: { tables: { order: {
        columns: [{ name: "id", type: "uuid", notNull: true, default: "gen_random_uuid()" }],
        primaryKey: { name: "order_pkey", columns: ["id"] },
    } } } } }"#,
    );
    desired.schemas.extend(sales.schemas);
    edit(&mut desired);
    desired
}

fn account(schema: &mut Schema) -> &mut hf_ddl::Table {
    schema
        .schemas
        .get_mut("crm")
        .unwrap()
        .tables
        .get_mut("account")
        .unwrap()
}

#[tokio::test]
async fn not_null_on_a_column_with_nulls_fails_its_precheck() {
    with_db(|mut client| async move {
        let before = setup(&mut client).await;
        let wanted = desired(|s| account(s).columns[1].not_null = true);
        let error = failing_apply(&mut client, &before, &wanted, ApplyOptions::default()).await;
        assert_eq!(error.kind(), ErrorKind::ApplyFailed);
        let hf_ddl::Error::Precheck { target, sql, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(target, "crm.account.email");
        assert_eq!(
            sql,
            r#"ALTER TABLE "crm"."account" ALTER COLUMN "email" SET NOT NULL"#
        );
        assert!(error.to_string().contains("holds NULL values"), "{error}");
        assert_unchanged(&client, &before).await;
    })
    .await;
}

#[tokio::test]
async fn a_failing_statement_is_named_and_rolled_back() {
    with_db(|mut client| async move {
        let before = setup(&mut client).await;
        let wanted = desired(|s| account(s).columns[2].data_type = hf_ddl::SqlType::Bigint);
        let options = ApplyOptions {
            allow_destructive: true,
            ..ApplyOptions::default()
        };
        let error = failing_apply(&mut client, &before, &wanted, options).await;
        assert_eq!(error.kind(), ErrorKind::ApplyFailed);
        let message = error.to_string();
        assert!(
            message.contains(r#"ALTER TABLE "crm"."account" ALTER COLUMN "code" TYPE bigint"#),
            "{message}"
        );
        assert_unchanged(&client, &before).await;
    })
    .await;
}

#[tokio::test]
async fn destructive_changes_need_permission() {
    with_db(|mut client| async move {
        let before = setup(&mut client).await;
        let wanted = desired(|s| {
            account(s).columns.pop();
        });
        let error = failing_apply(&mut client, &before, &wanted, ApplyOptions::default()).await;
        assert_eq!(error.kind(), ErrorKind::Destructive);
        let hf_ddl::Error::Destructive { targets } = &error else {
            panic!("{error}")
        };
        assert_eq!(targets, &["crm.account.code".to_owned()]);
        assert_unchanged(&client, &before).await;
    })
    .await;
}

#[tokio::test]
async fn a_held_lock_makes_apply_time_out() {
    with_db(|mut client| async move {
        let before = setup(&mut client).await;
        let database: String = client
            .query_one("SELECT current_database()", &[])
            .await
            .unwrap()
            .get(0);
        let (mut other, connection) = crate::db::config(&database)
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let holder = other.transaction().await.unwrap();
        holder
            .batch_execute("LOCK TABLE crm.account IN ACCESS SHARE MODE")
            .await
            .unwrap();

        let wanted = desired(|s| {
            let mut phone = account(s).columns[1].clone();
            phone.name = "phone".to_owned();
            account(s).columns.push(phone);
        });
        let options = ApplyOptions {
            lock_timeout: std::time::Duration::from_millis(200),
            ..ApplyOptions::default()
        };
        let error = failing_apply(&mut client, &before, &wanted, options).await;
        assert_eq!(error.kind(), ErrorKind::LockTimeout, "{error}");
        holder.rollback().await.unwrap();
        assert_unchanged(&client, &before).await;
    })
    .await;
}

#[tokio::test]
async fn a_plan_with_errors_is_refused_naming_each_item() {
    with_db(|mut client| async move {
        let before = setup(&mut client).await;
        let wanted = desired(|s| {
            account(s).comment = Some("Acc\0ount".to_owned());
        });
        let planned = plan(&before, &wanted, &Renames::default());
        assert!(planned.has_errors());
        let tx = client.transaction().await.unwrap();
        let error = apply(&tx, &planned, &ApplyOptions::default())
            .await
            .expect_err("a plan with errors is refused");
        tx.rollback().await.unwrap();
        assert_eq!(error.kind(), ErrorKind::InvalidPlan);
        let hf_ddl::Error::InvalidPlan { errors } = &error else {
            panic!("{error}")
        };
        let targets: Vec<&str> = errors.iter().map(|e| e.target.as_str()).collect();
        assert_eq!(targets, ["crm.account"]);
        assert!(error.to_string().contains("`crm.account`"), "{error}");
        assert_unchanged(&client, &before).await;
    })
    .await;
}
