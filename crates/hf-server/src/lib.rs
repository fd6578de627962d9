//! The HTTP surface of hf, and the only crate that knows HTTP.
//!
//! It maps requests to the domain crates and their results to responses: routes, extractors,
//! the error envelope (`{"errors":[...]}`), request ids, and the OpenAPI document generated from
//! the same route registrations that serve requests.

pub mod app;
pub mod auth;
pub mod auth_gate;
pub mod compression;
pub mod console;
pub mod cors;
pub mod dto;
pub mod error;
pub mod extract;
pub mod limits;
pub mod middleware;
pub mod openapi;
pub mod public_access;
pub mod routes;
pub mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::HttpServer;

pub use state::AppState;

/// Everything the HTTP server needs to know; filled from flags and `HF_*` variables by the CLI.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on, e.g. `127.0.0.1:8080` (port 0 picks a free one).
    pub listen: String,
    /// Largest accepted request body in bytes.
    pub body_limit: usize,
    /// Where the metadata repository lives.
    pub metadata_path: PathBuf,
    /// Worker threads; `None` is one per core ([`default_workers`]). Give the pool as many
    /// data shards (`PoolSettings::data_shards`), so that each worker has its own.
    pub workers: Option<usize>,
    /// How long requests in flight may take to finish at shutdown.
    pub shutdown_timeout: Duration,
    /// Tokens, secrets, login throttling and the bootstrap administrator.
    pub auth: auth::AuthConfig,
    /// The public URL and the trusted reverse proxies (`HF_PUBLIC_URL`, `HF_TRUSTED_PROXIES`).
    pub public_access: public_access::PublicAccess,
    /// Timeouts and caps of every phase of a request.
    pub limits: limits::Limits,
    /// Web origins whose pages may call the API (`HF_CORS_ORIGINS`); none by default.
    pub cors_origins: cors::CorsOrigins,
}

impl ServerConfig {
    /// Defaults of the contract, listening on `listen`.
    pub fn new(listen: impl Into<String>, metadata_path: PathBuf) -> Self {
        Self {
            listen: listen.into(),
            body_limit: extract::DEFAULT_BODY_LIMIT,
            metadata_path,
            workers: None,
            shutdown_timeout: Duration::from_secs(30),
            auth: auth::AuthConfig::default(),
            public_access: public_access::PublicAccess::default(),
            limits: limits::Limits::default(),
            cors_origins: cors::CorsOrigins::default(),
        }
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address from the configuration.
        address: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// Preparing the database (connecting, migrating) failed.
    #[error(transparent)]
    Storage(#[from] hf_storage::Error),
}

/// A bound, not yet running server.
pub struct Server {
    /// The address it listens on (with the real port when 0 was asked for).
    pub addr: SocketAddr,
    server: actix_web::dev::Server,
}

impl Server {
    /// A handle to stop the server gracefully from elsewhere.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until stopped.
    pub async fn run(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Prepares the database for the service: applies the `hf` schema migrations.
pub async fn prepare_database(pool: &hf_storage::Pool) -> Result<(), Error> {
    let mut client = pool.get().await.map_err(hf_storage::Error::from)?;
    let applied = hf_storage::migrate(&mut client).await?;
    if !applied.is_empty() {
        tracing::info!(?applied, "applied migrations of the hf schema");
    }
    Ok(())
}

/// The number of worker threads when none is configured: one per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Binds the listen address. Signals are not handled here: the caller decides when to stop
/// (the CLI on SIGTERM/SIGINT, tests when they finish) through [`Server::handle`].
pub fn bind(config: &ServerConfig, state: AppState) -> Result<Server, Error> {
    let body_limit = config.body_limit;
    let public_access = config.public_access.clone();
    let limits = config.limits;
    let cors_origins = config.cors_origins.clone();
    let slots = limits::AddressSlots::new(limits.max_connections_per_address);
    let workers = config.workers.unwrap_or_else(default_workers);
    // Each worker takes the next shard of the data pool when it builds its application.
    let next_worker = Arc::new(AtomicUsize::new(0));
    // The factory runs once on each worker thread, as the worker starts.
    let http = HttpServer::new(move || {
        hf_app::background::serve_with_short_slices();
        let worker = next_worker.fetch_add(1, Ordering::Relaxed);
        app::build(
            state.for_worker(worker),
            body_limit,
            public_access.clone(),
            &cors_origins,
        )
        .app_data(limits)
    })
    .disable_signals()
    .shutdown_timeout(config.shutdown_timeout.as_secs())
    .workers(workers)
    .client_request_timeout(limits.header_timeout)
    .keep_alive(limits.keep_alive)
    .max_connections(limits.max_connections_per_worker(workers))
    .on_connect(move |io, data| {
        limits::set_send_timeout(io, limits.send_timeout);
        slots.on_connect(io, data);
    });
    let http = http.bind(&config.listen).map_err(|source| Error::Bind {
        address: config.listen.clone(),
        source,
    })?;
    let addr = http.addrs().first().copied().ok_or_else(|| Error::Bind {
        address: config.listen.clone(),
        source: std::io::Error::other("no address bound"),
    })?;
    Ok(Server {
        addr,
        server: http.run(),
    })
}
