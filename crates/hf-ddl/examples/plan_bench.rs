//! Measures the planner on a 500-object × 20-field model: mapping, planning against an empty
//! database and against one already in sync (introspection included), and applying the
//! creation, against the PostgreSQL at `HF_DDL_BENCH_PG` (default
//! `host=127.0.0.1 port=5432 user=postgres`) in a throw-away database.
//!
//! Run with `cargo run --release -p hf-ddl --example plan_bench`. With `HF_DDL_BENCH_MIGRA` set
//! to a `migra` command (and `HF_DDL_BENCH_KEEP` keeps the full database for inspection), it also times `migra` diffing the same databases (URL prefix from
//! `HF_DDL_BENCH_MIGRA_URL`, default `postgresql+psycopg2://postgres@127.0.0.1:5432/`).

use std::error::Error;
use std::time::{Duration, Instant};

use hf_ddl::{apply, desired_schema, introspect, plan, ApplyOptions, Renames, Schema};
use hf_model::{Field, FieldKind, Model, Module, Object, QualifiedName, ScalarType};
use tokio_postgres::{Client, NoTls};

const MODULES: usize = 10;
const OBJECTS_PER_MODULE: usize = 50;
const FIELDS: usize = 20;

/// 500 objects of 20 fields: every scalar type, some required, unique or indexed fields, and
/// two lookups per object to objects of other modules.
fn big_model() -> Model {
    let mut model = Model::default();
    for m in 0..MODULES {
        let key = format!("module_{m:02}");
        let mut module = Module::new(&key, format!("Module {m}"));
        for o in 0..OBJECTS_PER_MODULE {
            let mut object = Object::new(format!("object_{o:02}"), format!("Object {o}"));
            for f in 0..FIELDS {
                let field_key = format!("field_{f:02}");
                let kind = if f < 2 && (m > 0 || f == 0) {
                    let target_module = if m == 0 { 1 } else { m - 1 };
                    FieldKind::Lookup {
                        target: QualifiedName::new(
                            format!("module_{target_module:02}"),
                            format!("object_{:02}", (o + f) % OBJECTS_PER_MODULE),
                        ),
                        required: false,
                        indexed: true,
                    }
                } else {
                    FieldKind::Scalar {
                        field_type: ScalarType::ALL[f % ScalarType::ALL.len()],
                        required: f % 5 == 0,
                        unique: f == 3,
                        indexed: f == 4,
                        values: Vec::new(),
                        default_value: None,
                    }
                };
                object.fields.insert(
                    field_key.clone(),
                    Field::new(field_key, format!("Field {f}"), kind),
                );
            }
            module.objects.insert(object.key.clone(), object);
        }
        model.modules.insert(key, module);
    }
    model
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

async fn connect(server: &str, database: &str) -> Result<Client, Box<dyn Error>> {
    let (client, connection) =
        tokio_postgres::connect(&format!("{server} dbname={database}"), NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = std::env::var("HF_DDL_BENCH_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres".to_owned());
    let model = big_model();
    let (desired, map_time) = timed(|| desired_schema(&model));
    let names: Vec<String> = desired.schemas.keys().cloned().collect();
    let (from_nothing, pure_empty) =
        timed(|| plan(&Schema::default(), &desired, &Renames::default()));
    let (_, pure_in_sync) = timed(|| plan(&desired, &desired, &Renames::default()));

    let database = format!("hf_ddl_bench_{}", std::process::id());
    let admin = connect(&server, "postgres").await?;
    admin
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE \"hf:authenticated\" NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
        )
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE \"{database}\""))
        .await?;
    let outcome = run(&server, &database, &names, &desired).await;
    let migra = match (&outcome, std::env::var("HF_DDL_BENCH_MIGRA")) {
        (Ok(_), Ok(command)) => Some(run_migra(&admin, &command, &database).await),
        _ => None,
    };
    if std::env::var("HF_DDL_BENCH_KEEP").is_ok() {
        println!("kept database {database}");
    } else {
        admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"
            ))
            .await?;
    }
    let db = outcome?;

    println!(
        "model: {} objects × {FIELDS} fields, {} statements to create",
        MODULES * OBJECTS_PER_MODULE,
        from_nothing.changes.len()
    );
    println!("map model to schema            {:>9.1} ms", ms(map_time));
    println!("plan (pure) vs empty           {:>9.1} ms", ms(pure_empty));
    println!(
        "plan (pure) vs in sync         {:>9.1} ms",
        ms(pure_in_sync)
    );
    println!("introspect + plan, empty db    {:>9.1} ms", ms(db.empty));
    println!("apply creation (one txn)       {:>9.1} ms", ms(db.apply));
    println!(
        "introspect + plan, in-sync db  {:>9.1} ms  (introspect {:.1} ms, {} changes; first read after the creation)",
        ms(db.in_sync),
        ms(db.introspect),
        db.in_sync_changes
    );
    println!(
        "  the same again               {:>9.1} ms  (introspect {:.1} ms)",
        ms(db.in_sync_again),
        ms(db.introspect_again),
    );
    if let Some(migra) = migra {
        let migra = migra?;
        let ratio = |theirs: Duration, ours: Duration| ms(theirs) / ms(ours);
        println!(
            "migra, two empty dbs (startup) {:>9.1} ms",
            ms(migra.startup)
        );
        println!(
            "migra, empty db vs full        {:>9.1} ms  ({:.1}x ours)",
            ms(migra.empty),
            ratio(migra.empty, db.empty)
        );
        println!(
            "migra, in-sync dbs             {:>9.1} ms  ({:.1}x ours)",
            ms(migra.in_sync),
            ratio(migra.in_sync, db.in_sync)
        );
    }
    Ok(())
}

struct MigraTimes {
    startup: Duration,
    empty: Duration,
    in_sync: Duration,
}

/// Times `migra` on the same comparisons: an empty database against the full one, and the full
/// one against a copy of itself; plus two empty databases, which is its start-up cost.
async fn run_migra(
    admin: &Client,
    command: &str,
    full: &str,
) -> Result<MigraTimes, Box<dyn Error>> {
    let prefix = std::env::var("HF_DDL_BENCH_MIGRA_URL")
        .unwrap_or_else(|_| "postgresql+psycopg2://postgres@127.0.0.1:5432/".to_owned());
    let (copy, empty) = (format!("{full}_copy"), format!("{full}_empty"));
    admin
        .batch_execute(&format!("CREATE DATABASE \"{copy}\" TEMPLATE \"{full}\""))
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE \"{empty}\""))
        .await?;
    let time = |a: &str, b: &str| -> Result<Duration, Box<dyn Error>> {
        let start = Instant::now();
        let output = std::process::Command::new(command)
            .args(["--unsafe", &format!("{prefix}{a}"), &format!("{prefix}{b}")])
            .output()?;
        // migra exits 2 when the databases differ and 0 when they do not.
        if !matches!(output.status.code(), Some(0 | 2)) {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned().into());
        }
        Ok(start.elapsed())
    };
    let times = time(&empty, &empty).and_then(|startup| {
        Ok(MigraTimes {
            startup,
            empty: time(&empty, full)?,
            in_sync: time(full, &copy)?,
        })
    });
    for database in [&copy, &empty] {
        admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"
            ))
            .await?;
    }
    times
}

struct DbTimes {
    empty: Duration,
    apply: Duration,
    in_sync: Duration,
    introspect: Duration,
    in_sync_changes: usize,
    in_sync_again: Duration,
    introspect_again: Duration,
}

async fn run(
    server: &str,
    database: &str,
    names: &[String],
    desired: &Schema,
) -> Result<DbTimes, Box<dyn Error>> {
    let mut client = connect(server, database).await?;
    let start = Instant::now();
    let current = introspect(&client, names).await?;
    let creation = plan(&current, desired, &Renames::default());
    let empty = start.elapsed();

    let start = Instant::now();
    let tx = client.transaction().await?;
    apply(&tx, &creation, &ApplyOptions::default()).await?;
    tx.commit().await?;
    let apply_time = start.elapsed();

    let start = Instant::now();
    let current = introspect(&client, names).await?;
    let introspect_time = start.elapsed();
    let again = plan(&current, desired, &Renames::default());
    let in_sync = start.elapsed();

    // The first read after a large transaction also sets the catalog rows' hint bits; a later
    // plan (the usual case) does not pay for that.
    let start = Instant::now();
    let current = introspect(&client, names).await?;
    let introspect_again = start.elapsed();
    let _ = plan(&current, desired, &Renames::default());
    let in_sync_again = start.elapsed();
    Ok(DbTimes {
        empty,
        apply: apply_time,
        in_sync,
        introspect: introspect_time,
        in_sync_changes: again.changes.len(),
        in_sync_again,
        introspect_again,
    })
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
