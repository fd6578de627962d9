//! The connection pool, with every timeout set explicitly.
//!
//! deadpool's defaults wait forever for a free connection; a saturated pool would then hang every
//! request. Here each wait is bounded, so an exhausted pool answers "busy" instead.

use std::time::Duration;

use crate::tls::Tls;
use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime, Timeouts};

use crate::{Error, Result};

/// The pool every request borrows its connection from.
pub type Pool = deadpool_postgres::Pool;

/// How the pool is sized and how long each step may take.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The most connections the pool opens.
    pub max_size: usize,
    /// How long a request waits for a free connection before it is told the database is busy.
    pub wait_timeout: Duration,
    /// How long opening a new connection may take (TCP connect and startup together).
    pub create_timeout: Duration,
    /// How long checking a returned connection may take.
    pub recycle_timeout: Duration,
    /// The `application_name` the connections report in `pg_stat_activity`.
    pub application_name: String,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_size: 16,
            wait_timeout: Duration::from_secs(5),
            create_timeout: Duration::from_secs(5),
            recycle_timeout: Duration::from_secs(2),
            application_name: "hf".to_owned(),
        }
    }
}

/// Builds a pool for a PostgreSQL URL (or a key=value connection string). Opens no connection
/// yet: the first one is made when a request asks for it.
///
/// The URL's `sslmode` and `sslrootcert` mean what they mean to libpq; see [`crate::tls`].
pub fn connect(database_url: &str, settings: &PoolSettings) -> Result<Pool> {
    let (config, tls) = connection_config(database_url, settings)?;
    let manager = Manager::from_config(
        config,
        tls,
        // Fast recycling is enough because nothing ever changes session state: every role switch
        // and timeout is `SET LOCAL`/`set_config(.., true)` inside a transaction, which ends with
        // the transaction (a dropped transaction is rolled back by tokio-postgres).
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(settings.max_size)
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(settings.wait_timeout),
            create: Some(settings.create_timeout),
            recycle: Some(settings.recycle_timeout),
        })
        .build()
        .map_err(|error| Error::Config(error.to_string()))
}

/// The connection settings of a PostgreSQL URL (or key=value string) with the pool's connect
/// timeout, TCP keepalives and application name applied, and the TLS connector its `sslmode`
/// asks for; for connections made outside the pool too, such as the one that listens for
/// notifications.
pub fn connection_config(
    database_url: &str,
    settings: &PoolSettings,
) -> Result<(tokio_postgres::Config, Tls)> {
    let (mut config, tls) = crate::tls::parse(database_url)?;
    config
        .connect_timeout(settings.create_timeout)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30))
        .keepalives_interval(Duration::from_secs(10))
        .keepalives_retries(3)
        .application_name(&settings.application_name);
    Ok((config, tls))
}

/// Creates a database unless it exists, connecting through `maintenance_url` (a database that
/// always exists, such as `postgres`). Used for the embedded cluster and by the test kit.
pub async fn create_database_if_missing(maintenance_url: &str, name: &str) -> Result<()> {
    let (config, tls) = crate::tls::parse(maintenance_url)?;
    let (client, connection) = config.connect(tls).await?;
    let driver = tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        let statement = format!("CREATE DATABASE {}", quote(name)?);
        if let Err(error) = client.batch_execute(&statement).await {
            // Another process may have created it between our check and our CREATE.
            if error.code() != Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) {
                return Err(error.into());
            }
        }
    }
    drop(client);
    driver.abort();
    Ok(())
}

fn quote(name: &str) -> Result<String> {
    hf_sql::quote_ident(name).map_err(|error| Error::Config(error.to_string()))
}
