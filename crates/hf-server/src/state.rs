//! The state every handler shares, built once at start-up.

use std::sync::Arc;

use hf_metastore::Store;
use hf_storage::Pool;

/// Shared, read-mostly state of the running service.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The use cases, with the database pool, the metadata repository and the caches they share.
    pub app: hf_app::App,
    /// The metadata repository's path, as `/status` reports it.
    pub metadata_path: String,
    /// Signing keys and authentication settings (see [`crate::auth::prepare`]).
    pub auth: Arc<crate::auth::AuthState>,
    /// The supervisor's view of the embedded PostgreSQL, when the service runs one.
    pub embedded: Option<hf_storage::ClusterWatch>,
    /// Writes refused lately for want of storage, which `/status` reports.
    pub storage_refusals: Arc<crate::storage_refusals::StorageRefusals>,
}

impl AppState {
    /// The same state for worker thread `index`, with its own shard of the data pool.
    pub fn for_worker(&self, index: usize) -> AppState {
        AppState {
            app: self.app.for_worker(index),
            ..self.clone()
        }
    }

    /// The database pool; every statement borrows a connection from it.
    pub fn pool(&self) -> &Pool {
        self.app.pool()
    }

    /// The metadata repository.
    pub fn store(&self) -> &Arc<Store> {
        self.app.store()
    }

    /// The branch the database reflects.
    pub fn live_branch(&self) -> &str {
        self.app.live_branch()
    }
}
