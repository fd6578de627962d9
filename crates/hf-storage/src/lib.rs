//! PostgreSQL for hf: the connection pool, the embedded private cluster, the service's own schema
//! (`hf`) and its versioned migrations, and the mapping of database failures to error kinds.
//!
//! This crate knows nothing of HTTP. The server maps [`ErrorKind`] to status codes.

pub mod auth;
mod connect_gate;
pub mod deploy;
mod embedded;
mod error;
mod listen;
pub mod metadata;
mod migrations;
mod pool;
pub mod query;
pub mod records;
pub mod run_as;
pub mod secrets;
mod status;
mod supervisor;
pub mod tls;

pub use embedded::{find_postgres_bindir, EmbeddedCluster};
pub use error::{Error, ErrorKind};
pub use migrations::{migrate, migrate_steps, Migration, MIGRATIONS, MIGRATION_LOCK_WAIT};
pub use pool::{
    connect, create_database_if_missing, Pool, PoolSettings, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL,
    SERVICE_LOCK_TIMEOUT, SERVICE_STATEMENT_TIMEOUT, UNACKNOWLEDGED_LIMIT,
};
pub use status::{database_status, DatabaseStatus, SslStatus};
pub use supervisor::{ClusterHealth, ClusterWatch, Supervised};

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
