//! Storage tests against a real PostgreSQL: migrations, the pool's bounded waits, the principal
//! cache, TLS to the database, and the embedded cluster's life cycle.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod embedded;
mod migrations;
mod pool;
mod principal_cache;
mod shared_metadata;
mod tls;
