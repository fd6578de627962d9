//! Introspection names constraint and index columns from attribute numbers: multi-column keys
//! keep their order across a dropped column's gap, an expression index keeps its definition,
//! and a foreign key to a table outside the read schemas still names its target columns.

use hf_ddl::{introspect, FkAction, TableRef};

use crate::db::with_db;

#[tokio::test]
async fn constraint_and_index_columns_are_named_in_order() {
    with_db(|client| async move {
        client
            .batch_execute(
                r#"CREATE SCHEMA other;
                   CREATE TABLE other.target (a int, b int, UNIQUE (b, a));
                   CREATE SCHEMA "select";
                   CREATE TABLE "select"."order" (
                       gone int, "user" text, "table" int, x int, y int,
                       PRIMARY KEY ("table", "user"),
                       CONSTRAINT order_y_x_key UNIQUE (y, x),
                       CONSTRAINT order_xy_fkey FOREIGN KEY (x, y) REFERENCES other.target (b, a)
                           ON DELETE CASCADE);
                   ALTER TABLE "select"."order" DROP COLUMN gone;
                   CREATE TABLE "select".line (
                       id int PRIMARY KEY, o_table int, o_user text,
                       FOREIGN KEY (o_user, o_table) REFERENCES "select"."order" ("user", "table"));
                   CREATE INDEX order_lower_idx ON "select"."order" (x, lower("user"));
                   CREATE INDEX order_y_table_idx ON "select"."order" (y, "table");"#,
            )
            .await
            .unwrap();
        let schema = introspect(&client, &["select".to_owned()]).await.unwrap();
        let order = &schema.schemas["select"].tables["order"];
        let names: Vec<&str> = order.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["user", "table", "x", "y"]);
        assert_eq!(
            order.primary_key.as_ref().unwrap().columns,
            ["table", "user"]
        );
        assert_eq!(order.uniques[0].columns, ["y", "x"]);
        let fk = &order.foreign_keys[0];
        assert_eq!(fk.columns, ["x", "y"]);
        assert_eq!(
            fk.references,
            TableRef {
                schema: "other".into(),
                table: "target".into()
            }
        );
        assert_eq!(
            fk.referenced_columns,
            ["b", "a"],
            "named outside the read schemas"
        );
        assert_eq!(fk.on_delete, FkAction::Cascade);
        let indexes: Vec<(&str, Vec<&str>, bool)> = order
            .indexes
            .iter()
            .map(|i| {
                let columns = i.columns.iter().map(String::as_str).collect();
                (i.name.as_str(), columns, i.definition.is_some())
            })
            .collect();
        assert_eq!(
            indexes,
            [
                ("order_lower_idx", vec!["x"], true),
                ("order_y_table_idx", vec!["y", "table"], false),
            ]
        );
        let line = &schema.schemas["select"].tables["line"].foreign_keys[0];
        assert_eq!(line.columns, ["o_user", "o_table"]);
        assert_eq!(line.referenced_columns, ["user", "table"]);
    })
    .await;
}
