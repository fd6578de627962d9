//! Changes made by hand in the database show up in the next plan: a dropped index or NOT NULL
//! comes back, an extra column or table is reported and left alone, a revoked grant is
//! reported and not restored.

use hf_ddl::{introspect, plan, Action, DiagnosticCode, Renames, Schema};

use crate::db::with_db;
use crate::fixtures::render;
use crate::roundtrip::{build, run};

const MODEL: &str = r#"{ schemas: { crm: {
    grants: { "hf:authenticated": ["USAGE"] },
    tables: { account: {
        grants: { "hf:authenticated": ["SELECT", "INSERT", "UPDATE", "DELETE"] },
        comment: "Account",
        columns: [
            { name: "id", type: "uuid", notNull: true, default: "gen_random_uuid()" },
            { name: "name", type: "text", notNull: true },
        ],
        primaryKey: { name: "account_pkey", columns: ["id"] },
        indexes: [{ name: "account_name_idx", columns: ["name"] }],
    } },
} } }"#;

#[tokio::test]
async fn hand_changes_show_up_in_the_plan() {
    with_db(|mut client| async move {
        let model: Schema = json5::from_str(MODEL).unwrap();
        build(&mut client, &model).await;
        client
            .batch_execute(
                "ALTER TABLE crm.account ADD COLUMN extra integer;
                 DROP INDEX crm.account_name_idx;
                 ALTER TABLE crm.account ALTER COLUMN name DROP NOT NULL;
                 COMMENT ON TABLE crm.account IS 'changed by hand';
                 REVOKE DELETE ON crm.account FROM \"hf:authenticated\";
                 CREATE TABLE crm.scratch (x integer);
                 CREATE INDEX account_lower_idx ON crm.account (lower(name));
                 CREATE TABLE public.elsewhere (x integer);",
            )
            .await
            .unwrap();
        let names = vec!["crm".to_owned()];
        let current = introspect(&client, &names).await.unwrap();
        let account = &current.schemas["crm"].tables["account"];
        assert!(!account.column("extra").unwrap().managed);
        assert!(account.column("name").unwrap().managed);
        assert!(!current.schemas["crm"].tables["scratch"].managed);
        let expression = account
            .indexes
            .iter()
            .find(|i| i.name == "account_lower_idx")
            .unwrap();
        assert!(!expression.managed);
        assert!(
            expression
                .definition
                .as_deref()
                .unwrap()
                .contains("lower(name)"),
            "{expression:?}"
        );
        assert!(!current.schemas.contains_key("public"));

        let planned = plan(&current, &model, &Renames::default());
        let actions: Vec<(Action, &str)> = planned
            .changes
            .iter()
            .map(|c| (c.action, c.target.as_str()))
            .collect();
        assert_eq!(
            actions,
            vec![
                (Action::SetNotNull, "crm.account.name"),
                (Action::CreateIndex, "crm.account.account_name_idx"),
                (Action::Comment, "crm.account"),
            ],
            "{}",
            render(&planned)
        );
        let codes: Vec<(DiagnosticCode, &str)> = planned
            .diagnostics
            .iter()
            .map(|d| (d.code, d.target.as_str()))
            .collect();
        assert!(
            codes.contains(&(DiagnosticCode::Unmanaged, "crm.account.extra")),
            "{codes:?}"
        );
        assert!(
            codes.contains(&(DiagnosticCode::Unmanaged, "crm.scratch")),
            "{codes:?}"
        );
        assert!(
            codes.contains(&(DiagnosticCode::GrantNarrowed, "crm.account")),
            "{codes:?}"
        );

        run(&mut client, &planned).await.unwrap();
        let again = plan(
            &introspect(&client, &names).await.unwrap(),
            &model,
            &Renames::default(),
        );
        assert!(again.is_empty(), "{}", render(&again));
        let extra = client.query("SELECT extra FROM crm.account", &[]).await;
        assert!(extra.is_ok(), "the hand-made column is still there");
    })
    .await;
}
