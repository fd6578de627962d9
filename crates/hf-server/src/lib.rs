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
pub mod objects_only;
pub mod openapi;
pub mod public_access;
pub mod request_heads;
pub mod routes;
pub mod state;
pub mod storage_refusals;

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
    /// every one of its addresses that can be bound, on one port.
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
    /// The first address it listens on: the one to tell a client.
    pub addr: SocketAddr,
    /// The addresses it listens on (with the real port when 0 was asked for), one for each
    /// address the listen address resolves to and could be bound.
    pub addrs: Vec<SocketAddr>,
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

/// Prepares the database for the service: applies the `hf` schema migrations and forgets the
/// idempotency keys of creates that have expired.
pub async fn prepare_database(pool: &hf_storage::Pool) -> Result<(), Error> {
    let mut client = pool.get().await?;
    let applied = hf_storage::migrate(&mut client).await?;
    if !applied.is_empty() {
        tracing::info!(?applied, "applied migrations of the hf schema");
    }
    drop(client);
    let forgotten = hf_storage::records::forget_expired_keys(pool).await?;
    if forgotten > 0 {
        tracing::info!(
            forgotten,
            "forgot expired idempotency keys of record creates"
        );
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
    let listeners = listen_on(&config.listen).map_err(bind_error)?;
    let addrs = listeners
        .iter()
        .map(std::net::TcpListener::local_addr)
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(bind_error)?;
    let addr = *addrs
        .first()
        .ok_or_else(|| bind_error(std::io::Error::other("the address resolves to nothing")))?;
    // Each worker takes the next shard of the data pool when it builds its first application,
    // and keeps it for the applications of its other listening sockets.
    let next_worker = Arc::new(AtomicUsize::new(0));
    let builder = actix_server::Server::build();
    let shutdown = builder.graceful_shutdown_signal();
    let mut builder = builder
        .disable_signals()
        .shutdown_timeout(config.shutdown_timeout.as_secs())
        .workers(workers)
        .max_concurrent_connections(limits.max_connections_per_worker(workers));
    for (listener, addr) in listeners.into_iter().zip(addrs.iter().copied()) {
        let state = state.clone();
        let public_access = public_access.clone();
        let cors_origins = cors_origins.clone();
        let slots = slots.clone();
        let shutdown = shutdown.clone();
        let next_worker = next_worker.clone();
        // The factory runs once on each worker thread, as the worker starts.
        builder = builder
            .listen("hf", listener, move || {
                hf_app::background::serve_with_short_slices();
                let worker = WORKER_INDEX.with(|index| {
                    *index.get_or_init(|| next_worker.fetch_add(1, Ordering::Relaxed))
                });
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
    }
    Ok(Server {
        addr,
        addrs,
        server: builder.run(),
    })
}

thread_local! {
    /// The index of the worker running on this thread (see [`bind`]).
    static WORKER_INDEX: std::cell::OnceCell<usize> = const { std::cell::OnceCell::new() };
}

/// How many connections may wait to be accepted (as `actix_web::HttpServer` has it).
const LISTEN_BACKLOG: i32 = 1024;

/// Listening sockets on every address `address` resolves to (`localhost` is often both `::1`
/// and `127.0.0.1`, and a client may try either), all on one port: the one asked for, or the
/// one the system picked for the first when 0 was asked for. An address that cannot be bound
/// (no IPv6 on the machine) is logged and left out; it is an error only when none can be.
fn listen_on(address: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    listen_on_each(std::net::ToSocketAddrs::to_socket_addrs(address)?)
}

/// [`listen_on`] for the addresses a listen address resolved to.
fn listen_on_each(
    resolved: impl Iterator<Item = SocketAddr>,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for addr in resolved {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    // An IPv6 socket on the same port as an IPv4 one must not claim IPv4 too.
    let v6_only = addrs.iter().any(SocketAddr::is_ipv4);
    let mut listeners = Vec::new();
    let mut failure = None;
    for mut addr in addrs {
        if let Some(first) = listeners.first().map(std::net::TcpListener::local_addr) {
            addr.set_port(first?.port());
        }
        match listen_at(addr, v6_only) {
            Ok(listener) => listeners.push(listener),
            Err(error) => {
                tracing::warn!(%addr, %error, "cannot listen on one of the listen address's addresses");
                failure = Some(error);
            }
        }
    }
    if listeners.is_empty() {
        return Err(
            failure.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing"))
        );
    }
    Ok(listeners)
}

/// A listening socket on `addr`.
fn listen_at(addr: SocketAddr, v6_only: bool) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() && v6_only {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name for both loopback addresses (as `localhost` often is) gets a socket on each, on
    /// the one port the system picked for the first, and each of them accepts.
    #[test]
    fn every_address_of_a_name_is_listened_on_one_port() {
        let ipv6: SocketAddr = "[::1]:0".parse().unwrap();
        let ipv4: SocketAddr = "127.0.0.1:0".parse().unwrap();
        if std::net::TcpListener::bind(ipv6).is_err() {
            eprintln!("no IPv6 loopback on this machine; skipped");
            return;
        }
        let listeners = listen_on_each([ipv6, ipv4, ipv6].into_iter()).unwrap();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        assert_eq!(addrs.len(), 2, "{addrs:?}");
        assert!(addrs[0].is_ipv6() && addrs[1].is_ipv4(), "{addrs:?}");
        assert_ne!(addrs[0].port(), 0);
        assert_eq!(addrs[0].port(), addrs[1].port());
        for addr in addrs {
            std::net::TcpStream::connect(addr).unwrap();
        }
    }

    /// An address that cannot be bound is left out when another can; when none can, its
    /// error is the answer.
    #[test]
    fn an_address_that_cannot_be_bound_is_left_out_unless_it_is_the_only_one() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_addr = taken.local_addr().unwrap();
        let error = listen_on_each([taken_addr].into_iter()).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);

        // 192.0.2.1 (TEST-NET-1) is on no interface of this machine.
        let elsewhere: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let free: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listeners = listen_on_each([elsewhere, free].into_iter()).unwrap();
        assert_eq!(listeners.len(), 1);
        assert!(listeners[0].local_addr().unwrap().ip().is_loopback());

        assert!(listen_on_each(std::iter::empty()).is_err());
    }
}
