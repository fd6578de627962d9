//! The state every handler shares, built once at start-up.

use std::sync::Arc;

use hf_storage::Pool;

/// Shared, read-mostly state of the running service.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database pool; every statement borrows a connection from it.
    pub pool: Pool,
    /// The metadata repository's path, as `/status` reports it.
    pub metadata_path: String,
    /// Signing keys and authentication settings (see [`crate::auth::prepare`]).
    pub auth: std::sync::Arc<crate::auth::AuthState>,
    /// The metadata repository.
    pub store: Arc<hf_metastore::Store>,
    /// The branch the database reflects.
    pub live_branch: String,
    /// The supervisor's view of the embedded PostgreSQL, when the service runs one.
    pub embedded: Option<hf_storage::ClusterWatch>,
}
