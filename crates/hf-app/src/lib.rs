//! The application layer of hf: the use cases, one home for each rule, shared by the HTTP
//! service (`hf-server`, which only translates HTTP to these calls and their errors to
//! responses) and the command line (`hf plan`, `hf apply`, ...), so a tool cannot go around a
//! rule the service keeps.
//!
//! [`App`] holds what the use cases share: the database pool, the metadata store, the secret
//! that signs paging cursors (shared by every instance through the database, see [`secrets`]),
//! and the process's caches and bounds (the compile limiter and module cache, the records'
//! statement plans) as state of the value rather than statics, so two applications in one
//! process (tests, a second instance) do not share them by accident. It knows nothing of HTTP.

pub mod auth;
pub mod background;
pub mod compile;
pub mod deploy;
pub mod error;
mod expressions;
pub mod iam;
pub mod metadata;
pub mod query;
pub mod records;
pub mod repository;
pub mod secrets;
pub mod shed;

use std::sync::Arc;

use hf_metastore::{Snapshot, Store};
use hf_storage::Pool;

pub use compile::Compiler;
pub use error::{Error, ErrorKind, Result};
pub use metadata::{Edit, FileWritten, MetadataWritten, WriteOptions};
pub use query::{QueryAnswer, QueryInput};
pub use shed::WorkQueue;

/// The application: cheap to clone (one shared inside).
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
    /// The database pools; outside `inner` so that each worker thread of the HTTP server can
    /// hold its own shard of the data pool (see [`App::for_worker`]).
    pool: Pool,
}

struct Inner {
    store: Arc<Store>,
    compiler: Compiler,
    plans: hf_storage::records::PlanCache,
    /// The secrets of paging cursors, read from the database and kept current (see
    /// [`secrets`]).
    secrets: secrets::SecretCache,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The application over a pool and a metadata store; the store's live branch is the one the
    /// database reflects.
    pub fn new(pool: Pool, store: Arc<Store>) -> Self {
        Self::with_compiler(pool, store, Compiler::default())
    }

    /// [`App::new`] with a compiler of the host's making: `hf serve` compiles screens in
    /// processes of their own (see [`compile::Isolation`]).
    pub fn with_compiler(pool: Pool, store: Arc<Store>, compiler: Compiler) -> Self {
        Self {
            pool,
            inner: Arc::new(Inner {
                store,
                compiler,
                plans: hf_storage::records::PlanCache::default(),
                secrets: secrets::SecretCache::default(),
            }),
        }
    }

    /// The database pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The same application for worker thread `index` of the HTTP server: it runs callers'
    /// statements on that worker's shard of the data pool (see [`Pool::for_shard`]).
    pub fn for_worker(&self, index: usize) -> App {
        App {
            inner: self.inner.clone(),
            pool: self.pool.for_shard(index),
        }
    }

    /// The metadata store.
    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    /// The branch the database reflects.
    pub fn live_branch(&self) -> &str {
        self.inner.store.live_branch()
    }

    /// Reads the secrets every instance shares from the database (making them on the first
    /// start), so a start-up fails here rather than on the first request. A use case that
    /// needs a secret not loaded yet loads it itself.
    pub async fn load_secrets(&self) -> Result<()> {
        self.cursor_secrets().await.map(|_| ())
    }

    /// The compile limiter and module cache.
    pub fn compiler(&self) -> &Compiler {
        &self.inner.compiler
    }

    /// The current snapshot of a branch.
    pub async fn snapshot(&self, branch: &str) -> Result<Arc<Snapshot>> {
        let store = Arc::clone(self.store());
        let branch = branch.to_owned();
        Ok(blocking(move || store.snapshot(&branch)).await??)
    }
}

/// Runs metadata store work (git) off the async executor.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| Error::Internal(format!("a metadata task failed: {error}")))
}
