//! The state every handler shares, built once at start-up.

use hf_storage::Pool;

/// Shared, read-mostly state of the running service.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database pool; every statement borrows a connection from it.
    pub pool: Pool,
    /// The metadata repository's path, as `/status` reports it.
    pub metadata_path: String,
}
