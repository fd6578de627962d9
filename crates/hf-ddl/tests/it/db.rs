//! A fresh PostgreSQL database per test, dropped afterwards even when the test panics.
//!
//! Connects to the server at `HF_TEST_DATABASE_URL`, the variable every test of the workspace
//! reads (a URL or a libpq key/value string; default `host=127.0.0.1 port=5432 user=postgres`).

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::{Client, NoTls};

/// The test server's connection settings, for database `dbname`.
pub fn config(dbname: &str) -> tokio_postgres::Config {
    let server = std::env::var("HF_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres".to_owned());
    let mut config: tokio_postgres::Config = server
        .parse()
        .expect("HF_TEST_DATABASE_URL is a connection string");
    config.dbname(dbname);
    config
}

async fn connect(dbname: &str) -> Client {
    let (client, connection) = config(dbname)
        .connect(NoTls)
        .await
        .expect("PostgreSQL must run for the database tests (see HF_TEST_DATABASE_URL)");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Creates a database with a unique name and the `hf:authenticated` role the grants need.
pub async fn create() -> (String, Client) {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "hf_ddl_test_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let admin = connect("postgres").await;
    admin
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE \"hf:authenticated\" NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
        )
        .await
        .unwrap();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .unwrap();
    let client = connect(&name).await;
    (name, client)
}

/// Drops a database made by [`create`].
pub async fn drop(name: &str) {
    let admin = connect("postgres").await;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}

/// Runs `test` against a fresh database and drops it afterwards, then re-raises a panic.
pub async fn with_db<F, Fut>(test: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (name, client) = create().await;
    let outcome = tokio::spawn(test(client)).await;
    drop(&name).await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}
