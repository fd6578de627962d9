//! Round trips against a real database: build `before`, introspect, plan to `after`, apply,
//! introspect again, plan again: nothing left to do.

use hf_ddl::{apply, introspect, plan, ApplyOptions, Plan, Renames, Schema};
use tokio_postgres::Client;

use crate::db::with_db;
use crate::fixtures::{cases, render};

/// The schema names a plan between these two schemas touches.
pub fn schema_names(a: &Schema, b: &Schema) -> Vec<String> {
    let mut names: Vec<String> = a.schemas.keys().chain(b.schemas.keys()).cloned().collect();
    names.sort();
    names.dedup();
    names
}

/// Applies `plan` in one transaction, destructive changes allowed.
pub async fn run(client: &mut Client, plan: &Plan) -> Result<hf_ddl::ApplyStats, hf_ddl::Error> {
    let tx = client.transaction().await.unwrap();
    let options = ApplyOptions {
        allow_destructive: true,
        ..ApplyOptions::default()
    };
    let stats = apply(&tx, plan, &options).await?;
    tx.commit().await.unwrap();
    Ok(stats)
}

/// Creates the managed part of `schema` in an empty database.
pub async fn build(client: &mut Client, schema: &Schema) {
    let creation = plan(
        &Schema::default(),
        &managed_only(schema),
        &Renames::default(),
    );
    assert!(!creation.has_errors(), "{}", render(&creation));
    run(client, &creation).await.unwrap();
}

/// `schema` without the items marked `managed: false`.
pub fn managed_only(schema: &Schema) -> Schema {
    let mut schema = schema.clone();
    schema.schemas.retain(|_, n| n.managed);
    for namespace in schema.schemas.values_mut() {
        namespace.tables.retain(|_, t| t.managed);
        for table in namespace.tables.values_mut() {
            table.columns.retain(|c| c.managed);
            table.primary_key = table.primary_key.take().filter(|k| k.managed);
            table.uniques.retain(|u| u.managed);
            table.indexes.retain(|i| i.managed);
            table.foreign_keys.retain(|f| f.managed);
        }
    }
    schema
}

#[tokio::test]
async fn fixtures_round_trip() {
    for case in cases() {
        if case.after.schemas.is_empty() && case.before.schemas.is_empty() {
            continue;
        }
        let expected = plan(&case.before, &case.after, &case.renames);
        if expected.has_errors() {
            continue;
        }
        with_db(move |mut client| async move {
            build(&mut client, &case.before).await;
            if let Some(hand) = &case.hand_sql {
                client.batch_execute(hand).await.unwrap();
            }
            let names = schema_names(&case.before, &case.after);
            let current = introspect(&client, &names).await.unwrap();
            let planned = plan(&current, &case.after, &case.renames);
            assert_eq!(
                render(&planned),
                render(&expected),
                "case {}: introspected `before` plans differently",
                case.name
            );
            run(&mut client, &planned)
                .await
                .unwrap_or_else(|e| panic!("case {}: {e}", case.name));
            let after = introspect(&client, &names).await.unwrap();
            let again = plan(&after, &case.after, &case.renames);
            assert!(
                again.is_empty(),
                "case {}: plan after apply is not empty:\n{}",
                case.name,
                render(&again)
            );
        })
        .await;
    }
}
