//! Runs every ok fixture's SQL on a real PostgreSQL: a fresh database with the demo CRM's and
//! the shop and sales models' tables (planned by hf-ddl) and a few records. The snapshots show the SQL;
//! this proves PostgreSQL accepts and runs it, with every parameter bound as text.

use std::path::Path;

use hf_hoqs::{ExprCompiler, ExprUse, Params, PriorRow, RequestParams};
use hf_model::{Model, QualifiedName, ScalarType};
use serde_json::Value;
use tokio_postgres::types::Type as PgType;
use tokio_postgres::{Client, NoTls};

use crate::support::{
    compile_doc, compile_fixture, demo, doc_queries, fixtures_dir, model, sales, shop,
};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database that exists for one test; dropped (from another thread) when this is dropped.
struct Database {
    name: String,
    server: String,
}

impl Database {
    async fn create() -> (Database, Client) {
        let server = std::env::var("HF_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.into());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("hf_hoqs_test_{}_{nanos}", std::process::id());
        let admin = connect(&server).await;
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {}",
                hf_sql::quote_ident(&name).unwrap()
            ))
            .await
            .unwrap();
        let mut config: tokio_postgres::Config = server.parse().unwrap();
        config.dbname(&name);
        let (client, connection) = config.connect(NoTls).await.unwrap();
        tokio::spawn(connection);
        (Database { name, server }, client)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let (name, server) = (self.name.clone(), self.server.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let client = connect(&server).await;
                let statement = format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    hf_sql::quote_ident(&name).unwrap()
                );
                client.batch_execute(&statement).await.unwrap();
            });
        })
        .join();
    }
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn create_tables(client: &Client, model: &Model) {
    let desired = hf_ddl::desired_schema(model);
    let plan = hf_ddl::plan(&Default::default(), &desired, &Default::default());
    client.batch_execute(&plan.to_sql_script()).await.unwrap();
}

const RECORDS: &str = "
INSERT INTO crm.account (id, name, industry, email) VALUES
  ('00000000-0000-0000-0000-0000000000a1', 'Acme', 'Energy', 'hello@acme.test'),
  ('00000000-0000-0000-0000-0000000000a2', 'Globex', 'Retail', NULL),
  ('00000000-0000-0000-0000-0000000000a3', 'Initech', NULL, NULL);
INSERT INTO crm.contact (name, title, account) VALUES
  ('Ada', 'CTO', '00000000-0000-0000-0000-0000000000a1'),
  ('Bob', NULL, NULL);
INSERT INTO crm.opportunity (name, account, amount, probability, stage, close_date) VALUES
  ('Big turbine', '00000000-0000-0000-0000-0000000000a1', 50000.50, 60, 'open', '2024-05-01'),
  ('Small pump', '00000000-0000-0000-0000-0000000000a1', 1200, 100, 'won', '2024-02-01'),
  ('Shelf deal', '00000000-0000-0000-0000-0000000000a2', 0, 0, 'lost', NULL),
  ('Mystery', '00000000-0000-0000-0000-0000000000a3', NULL, NULL, NULL, NULL);
INSERT INTO shop.customer (id, name, since, credit) VALUES
  ('00000000-0000-0000-0000-0000000000c1', 'Carol', '2020-01-01', 10.5);
INSERT INTO shop.vip (id, name, since, tier, referrer) VALUES
  ('00000000-0000-0000-0000-0000000000c2', 'Dave', '2021-06-01', 2, '00000000-0000-0000-0000-0000000000c1');
INSERT INTO shop.\"order\" (id, customer, code, placed_on, paid_at, total, discount, quantity, weight, express, notes) VALUES
  ('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-0000000000c1', gen_random_uuid(),
   '2024-03-01', '2024-03-02T10:00:00Z', 250, 10, 4, 2.5, false, '{\"gift\": true}'),
  ('00000000-0000-0000-0000-0000000000d2', '00000000-0000-0000-0000-0000000000c1', NULL,
   '2024-04-01', NULL, 80, NULL, 0, NULL, true, NULL);
INSERT INTO shop.line (\"order\", product, amount) VALUES
  ('00000000-0000-0000-0000-0000000000d1', 'Tea', 100),
  ('00000000-0000-0000-0000-0000000000d1', 'Cups', 150);
INSERT INTO sales.account (id, name, tier) VALUES
  ('00000000-0000-0000-0000-0000000000e1', 'Umbrella', 'gold');
INSERT INTO sales.deal (name, account, stage, tags) VALUES
  ('Roof', '00000000-0000-0000-0000-0000000000e1', 'won', '{hot,vip}'),
  ('Door', '00000000-0000-0000-0000-0000000000e1', 'open', '{q4}'),
  ('Gate', NULL, NULL, NULL);
";

/// Runs a statement with every parameter bound as text, as the service does; returns the
/// first column of each row parsed as JSON.
async fn run(client: &Client, sql: &str, params: &[Option<String>]) -> Result<Vec<Value>, String> {
    let types = vec![PgType::TEXT; params.len()];
    let statement = client
        .prepare_typed(sql, &types)
        .await
        .map_err(|error| format!("{error:?}"))?;
    let values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
        .iter()
        .map(|param| param as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect();
    let rows = client
        .query(&statement, &values)
        .await
        .map_err(|error| format!("{error:?}"))?;
    Ok(rows
        .iter()
        .map(|row| match row.try_get::<_, String>(0) {
            Ok(text) => serde_json::from_str(&text).unwrap(),
            Err(_) => Value::Null,
        })
        .collect())
}

fn directive<'a>(source: &'a str, key: &str) -> Option<&'a str> {
    source
        .lines()
        .take_while(|line| line.starts_with("--"))
        .find_map(|line| {
            line.strip_prefix("--")?
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .map(str::trim)
}

/// Compiles a fixture and runs it; an expression is selected from its object's records.
async fn run_fixture(client: &Client, path: &Path) -> Result<Vec<Value>, String> {
    let source = std::fs::read_to_string(path).unwrap();
    let model = model(directive(&source, "model").unwrap_or("demo"));
    if path.extension().is_some_and(|ext| ext == "hoqs") {
        let params: RequestParams = directive(&source, "params")
            .map(|json| serde_json::from_str(json).unwrap())
            .unwrap_or_default();
        let compiled = compile_fixture(
            model,
            &source,
            &params,
            directive(&source, "page"),
            directive(&source, "time_zone"),
            directive(&source, "caller"),
        )
        .query
        .unwrap();
        return run(client, &compiled.sql, &compiled.params).await;
    }
    let object = QualifiedName::parse(directive(&source, "object").unwrap()).unwrap();
    let usage = match directive(&source, "use").unwrap() {
        "assert" => ExprUse::Assert,
        "filter" => ExprUse::RollupFilter,
        other => ExprUse::Formula(
            other
                .strip_prefix("formula ")
                .unwrap()
                .parse::<ScalarType>()
                .unwrap(),
        ),
    };
    let mut compiler = ExprCompiler::new(model, &object, "new", Params::new()).unwrap();
    let prior = directive(&source, "prior") == Some("old");
    if prior {
        compiler = compiler.for_rules(PriorRow::Row("\"old\"".to_owned()));
    }
    let expr = compiler.compile(&source, usage).unwrap().expr.unwrap();
    let (joins, params) = compiler.finish();
    let table = hf_sql::quote_qualified(&object.module, &object.object).unwrap();
    let old = if prior {
        format!(" LEFT JOIN {table} AS \"old\" ON \"old\".\"id\" = \"new\".\"id\"")
    } else {
        String::new()
    };
    let sql = format!(
        "SELECT to_json({})::text FROM {table} AS \"new\"{old}{joins}",
        expr.sql
    );
    run(client, &sql, params.values()).await
}

#[tokio::test]
async fn every_ok_fixture_runs_on_postgresql() {
    let (_database, client) = Database::create().await;
    client
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE \"hf:authenticated\" NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
        )
        .await
        .unwrap();
    create_tables(&client, demo()).await;
    create_tables(&client, shop()).await;
    create_tables(&client, sales()).await;
    client.batch_execute(RECORDS).await.unwrap();

    let mut paths: Vec<_> = std::fs::read_dir(fixtures_dir().join("hoqs/ok"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let mut failures = Vec::new();
    let mut results = std::collections::BTreeMap::new();
    for path in &paths {
        match run_fixture(&client, path).await {
            Ok(rows) => {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                results.insert(name, rows);
            }
            Err(error) => failures.push(format!("{}: {error}", path.display())),
        }
    }
    let (queries, params) = doc_queries();
    for query in &queries {
        let compiled = compile_doc(query, &params).query.unwrap();
        if let Err(error) = run(&client, &compiled.sql, &compiled.params).await {
            failures.push(format!("docs example {query}: {error}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // A few results that pin down the semantics the docs state.
    let rows = &results["core_select.hoqs"];
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "Small pump");
    assert_eq!(rows[0]["amount"], "1200");
    assert_eq!(rows[0]["account.name"], "Acme");
    let rows = &results["rollup_fields.hoqs"];
    assert_eq!(rows[0]["name"], "Acme");
    assert_eq!(rows[0]["opportunity_count"], 2);
    assert_eq!(rows[0]["pipeline_amount"], "51200.50");
    assert_eq!(rows[0]["won_amount"], "1200");
    let rows = &results["shop_formulas_of_formulas.hoqs"];
    assert_eq!(rows[0]["net"], "240");
    assert_eq!(rows[0]["net_per_item"], "60");
    assert_eq!(rows[0]["customer_label"], "CAROL (direct)");
    let rows = &results["shop_every_type.hoqs"];
    assert_eq!(rows[0]["paid_at"], "2024-03-02T10:00:00Z");
    assert_eq!(rows[0]["notes"], serde_json::json!({"gift": true}));
    assert_eq!(rows[0]["quantity"], 4);
    assert_eq!(rows[0]["weight"], 2.5);
    let rows = &results["picklist_includes.hoqs"];
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["tags"], serde_json::json!(["hot", "vip"]));
    let rows = &results["picklist_excludes.hoqs"];
    let names: Vec<&Value> = rows.iter().map(|row| &row["name"]).collect();
    assert_eq!(names, ["Door", "Gate"]);
    let rows = &results["picklist_tolabel.hoqs"];
    assert_eq!(rows[0]["tolabel(stage)"], "Open");
    assert_eq!(rows[1]["tolabel(stage)"], "Closed – won");
    assert_eq!(rows[1]["tag_labels"], serde_json::json!(["Hot", "VIP"]));
    assert_eq!(rows[1]["tier"], "Gold");
    assert_eq!(rows[1]["stage_text"], "Closed – won");
    let rows = &results["parent_object.hoqs"];
    assert_eq!(
        rows.len(),
        2,
        "Acme and Ada: accounts and contacts: {rows:?}"
    );
}
