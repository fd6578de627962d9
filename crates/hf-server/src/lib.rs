//! The HTTP surface of hf, and the only crate that knows HTTP.
//!
//! It maps requests to the domain crates and their results to responses: routes, extractors,
//! the error envelope (`{"errors":[...]}`), request ids, and the OpenAPI document generated from
//! the same route registrations that serve requests.

pub mod app;
pub mod auth;
pub mod auth_gate;
pub mod client_stream;
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
pub mod request_heads;
pub mod routes;
pub mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_service::{fn_service, map_config, IntoServiceFactory as _, ServiceFactoryExt as _};
use actix_web::dev::{AppConfig, ServerHandle};
use actix_web::rt::net::TcpStream;

use client_stream::ClientStream;
use request_heads::RequestHeads;

pub use state::AppState;

/// Everything the HTTP server needs to know; filled from flags and `HF_*` variables by the CLI.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on, e.g. `127.0.0.1:8080` (port 0 picks a free one); for a host name,
    /// the first of its addresses that can be bound.
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
    let mut client = pool.get().await?;
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
///
/// The server is put together from actix's parts (what `actix_web::HttpServer` does, minus
/// HTTP/2 and TLS, which the service does not offer) so that the HTTP layer reads and writes
/// each connection through a [`client_stream::ClientStream`]: `HttpServer` only ever hands it
/// the bare socket.
pub fn bind(config: &ServerConfig, state: AppState) -> Result<Server, Error> {
    let body_limit = config.body_limit;
    let public_access = config.public_access.clone();
    let limits = config.limits;
    let cors_origins = config.cors_origins.clone();
    let slots = limits::AddressSlots::new(limits.max_connections_per_address);
    let workers = config.workers.unwrap_or_else(default_workers);
    let bind_error = |source| Error::Bind {
        address: config.listen.clone(),
        source,
    };
    let listener = listen_on(&config.listen).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    // Each worker takes the next shard of the data pool when it builds its application.
    let next_worker = Arc::new(AtomicUsize::new(0));
    let builder = actix_server::Server::build();
    let shutdown = builder.graceful_shutdown_signal();
    // The factory runs once on each worker thread, as the worker starts.
    let builder = builder
        .disable_signals()
        .shutdown_timeout(config.shutdown_timeout.as_secs())
        .workers(workers)
        .max_concurrent_connections(limits.max_connections_per_worker(workers))
        .listen("hf", listener, move || {
            hf_app::background::serve_with_short_slices();
            let worker = next_worker.fetch_add(1, Ordering::Relaxed);
            let app = app::build(
                state.for_worker(worker),
                body_limit,
                public_access.clone(),
                &cors_origins,
            )
            .app_data(limits)
            .into_factory()
            .map_err(|error| error.error_response());
            let slots = slots.clone();
            let shutdown = shutdown.clone();
            let decoder_config = request_heads::decoder_config(&limits);
            let http = actix_http::HttpService::build()
                .graceful_shutdown_signal(move || {
                    let shutdown = shutdown.clone();
                    async move { shutdown.notified().await }
                })
                .keep_alive(limits.keep_alive)
                // Every request's head is timed by `ClientStream` (see `request_heads`), which
                // answers a late one with the envelope; actix's own timer covers only the
                // first head and answers with an empty body.
                .client_request_timeout(Duration::ZERO)
                // As `HttpServer` has it: after answering a request whose body it did not read
                // (an early 413 or 408), wait a second for the client to close first.
                .client_disconnect_timeout(Duration::from_secs(1))
                .local_addr(addr)
                .on_connect_ext(move |stream: &ClientStream, data| {
                    slots.on_connect(stream.socket(), data);
                    data.insert(stream.answers());
                })
                // The application's connection settings: not served over TLS itself (`secure`
                // comes from the public URL, see `public_access`).
                .h1(map_config(app, |_| AppConfig::default()));
            fn_service(move |socket: TcpStream| {
                let heads = RequestHeads::new(decoder_config.clone(), &limits);
                async move {
                    let peer = socket.peer_addr().ok();
                    let stream = ClientStream::new(socket, limits.send_timeout, heads);
                    Ok::<_, actix_http::error::DispatchError>((stream, peer))
                }
            })
            .and_then(http)
        })
        .map_err(bind_error)?;
    Ok(Server {
        addr,
        server: builder.run(),
    })
}

/// How many connections may wait to be accepted (as `actix_web::HttpServer` has it).
const LISTEN_BACKLOG: i32 = 1024;

/// A listening socket on the first address `address` resolves to that can be bound.
fn listen_on(address: &str) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let mut failure = None;
    for addr in std::net::ToSocketAddrs::to_socket_addrs(address)? {
        let bound = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .and_then(|socket| {
                socket.set_reuse_address(true)?;
                socket.bind(&addr.into())?;
                socket.listen(LISTEN_BACKLOG)?;
                Ok(socket)
            });
        match bound {
            Ok(socket) => return Ok(socket.into()),
            Err(error) => failure = Some(error),
        }
    }
    Err(failure.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
}
