//! The database facts `/status` reports, gathered in one round trip.

use std::time::Instant;

use crate::{Pool, Result};

/// What `/status` says about the database and the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseStatus {
    /// Round-trip time of the status query in whole milliseconds.
    pub latency_ms: u64,
    /// The current database's name.
    pub name: String,
    /// PostgreSQL's `server_version` setting.
    pub server_version: String,
    /// Backends on this database that are running a statement right now.
    pub active: i64,
    /// The server's `max_connections`.
    pub max: i64,
    /// Idle connections held by our pool.
    pub pool_idle: usize,
    /// Connections currently held by our pool (idle and in use).
    pub pool_size: usize,
    /// TLS of the service's own connection.
    pub ssl: SslStatus,
}

/// TLS facts of one connection, from `pg_stat_ssl`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SslStatus {
    /// Whether the connection is encrypted.
    pub enabled: bool,
    /// Key size in bits, 0 when off.
    pub bits: i32,
    /// Cipher name, empty when off.
    pub cipher: String,
    /// Protocol version, empty when off.
    pub version: String,
}

const STATUS_QUERY: &str = "\
SELECT current_database(),
       current_setting('server_version'),
       (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'active'),
       current_setting('max_connections')::bigint,
       coalesce(s.ssl, false),
       coalesce(s.bits, 0),
       coalesce(s.cipher, ''),
       coalesce(s.version, '')
  FROM (SELECT 1) AS one
  LEFT JOIN pg_stat_ssl AS s ON s.pid = pg_backend_pid()";

/// Asks the database for its status through the pool.
pub async fn database_status(pool: &Pool) -> Result<DatabaseStatus> {
    let started = Instant::now();
    // Requests wait for data connections: when none frees up in time, the database is busy
    // for them. The connection is only borrowed and given back; nothing runs on it.
    drop(pool.data_connection().await?);
    let client = pool.get().await?;
    let row = client.query_one(STATUS_QUERY, &[]).await?;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    drop(client);
    let pool_status = pool.status();
    Ok(DatabaseStatus {
        latency_ms,
        name: row.try_get(0)?,
        server_version: row.try_get(1)?,
        active: row.try_get(2)?,
        max: row.try_get(3)?,
        pool_idle: pool_status.available,
        pool_size: pool_status.size,
        ssl: SslStatus {
            enabled: row.try_get(4)?,
            bits: row.try_get(5)?,
            cipher: row.try_get(6)?,
            version: row.try_get(7)?,
        },
    })
}
