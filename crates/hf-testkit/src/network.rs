//! A network path to the test database that a test can cut and restore, as a partition between
//! the service and its database would.
//!
//! A partition is not a stopped server: nothing on the far side acknowledges what is sent, so
//! the sender's TCP retries and waits, and nothing comes back. Two things make a path on one
//! machine behave so. The service connects to a relay on an address of its own in `127.0.0.0/8`
//! instead of to the database; to cut the path, a blackhole route for that one address drops
//! every packet the service sends there (so nothing it sends is acknowledged), and the relay
//! stops carrying what the database answers. Restoring removes the route and the relay carries
//! on, with what was held.
//!
//! Written here rather than taken from a library: the usual tools (Toxiproxy, `tc netem`) are
//! not available on the machines the tests run on, and a relay is a few lines of tokio. Cutting
//! needs root and iproute2 (`ip route`), as stopping a backend needs root (see
//! [`crate::StoppedBackend`]).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

/// A relay to the test database at an address of its own, which [`NetworkPath::cut`] cuts off.
/// The relay runs on a thread of its own until this is dropped (which restores a cut path).
#[derive(Debug)]
pub struct NetworkPath {
    address: Ipv4Addr,
    url: String,
    /// Whether the relay carries bytes (`false` while cut).
    carrying: watch::Sender<bool>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where the relay connects: the database server of the URL it was made for.
#[derive(Debug, Clone)]
enum Target {
    Tcp(String, u16),
    Unix(PathBuf),
}

impl NetworkPath {
    /// A path to the database `database_url` names (a URL or key=value string, as the tests
    /// use); connect through [`NetworkPath::url`].
    pub fn to(database_url: &str) -> NetworkPath {
        let config: tokio_postgres::Config = database_url.parse().expect("a database URL");
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let target = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Unix(directory)) => {
                Target::Unix(directory.join(format!(".s.PGSQL.{port}")))
            }
            Some(tokio_postgres::config::Host::Tcp(host)) => Target::Tcp(host.clone(), port),
            None => Target::Tcp("localhost".to_owned(), port),
        };
        let address = next_address();
        // A test killed while its path was cut leaves its route behind.
        blackhole(&address, "del");
        let listener = std::net::TcpListener::bind((address, 0)).expect("bind the relay");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking relay");
        let relay_port = listener.local_addr().expect("the relay's port").port();
        let (carrying, carrying_changes) = watch::channel(true);
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the relay's runtime");
            runtime.block_on(relay(listener, target, carrying_changes, stopped));
        });
        let mut url = format!("host={address} port={relay_port}");
        if let Some(user) = config.get_user() {
            url.push_str(&format!(" user={}", quote(user)));
        }
        if let Some(password) = config.get_password() {
            url.push_str(&format!(
                " password={}",
                quote(&String::from_utf8_lossy(password))
            ));
        }
        if let Some(dbname) = config.get_dbname() {
            url.push_str(&format!(" dbname={}", quote(dbname)));
        }
        NetworkPath {
            address,
            url,
            carrying,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The connection string that goes through this path.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Cuts the path: what is sent to the database is dropped unacknowledged, and nothing it
    /// answers comes through, until [`NetworkPath::restore`].
    pub fn cut(&self) {
        assert!(
            blackhole(&self.address, "replace"),
            "ip route replace blackhole {} failed: cutting a network path needs root and \
             iproute2",
            self.address
        );
        self.carrying.send_replace(false);
    }

    /// Stops the database answering without the network refusing anything, as a database host
    /// that froze would: the relay carries nothing either way, and accepts new connections only
    /// to say nothing on them, so an attempt to connect waits for its timeout (as it does where
    /// a network drops connection attempts silently, which a route on loopback cannot do).
    /// Until [`NetworkPath::restore`].
    pub fn hang(&self) {
        self.carrying.send_replace(false);
    }

    /// Restores a cut or hung path; what the relay held is carried on.
    pub fn restore(&self) {
        if !*self.carrying.borrow() {
            blackhole(&self.address, "del");
            self.carrying.send_replace(true);
        }
    }
}

impl Drop for NetworkPath {
    fn drop(&mut self) {
        self.restore();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A fresh loopback address for a relay, distinct across test processes (by process id) and
/// within one (by a counter), so that a route one test adds touches no other test's path.
fn next_address() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(0);
    let process = (std::process::id() % 256) as u8;
    let serial = NEXT.fetch_add(1, Ordering::Relaxed) % 254 + 1;
    Ipv4Addr::new(127, 88, process, serial)
}

/// Adds (`"replace"`) or removes (`"del"`) a blackhole route for `address`; whether `ip` succeeded.
/// The route goes into the `local` table, where a route for one address outranks the one for
/// all of `127.0.0.0/8`.
fn blackhole(address: &Ipv4Addr, action: &str) -> bool {
    std::process::Command::new("ip")
        .args(["route", action, "blackhole", &format!("{address}/32")])
        .args(["table", "local"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A key=value connection string value, quoted.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Accepts connections and relays each to `target` until `stopped`.
async fn relay(
    listener: std::net::TcpListener,
    target: Target,
    carrying: watch::Receiver<bool>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("the relay's listener");
    loop {
        let client = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => client,
                Err(_) => continue,
            },
            _ = &mut stopped => return,
        };
        let target = target.clone();
        let carrying = carrying.clone();
        tokio::spawn(async move {
            match target {
                Target::Tcp(host, port) => {
                    if let Ok(server) = tokio::net::TcpStream::connect((host.as_str(), port)).await
                    {
                        carry_both(client, server, carrying).await;
                    }
                }
                Target::Unix(path) => {
                    if let Ok(server) = tokio::net::UnixStream::connect(path).await {
                        carry_both(client, server, carrying).await;
                    }
                }
            }
        });
    }
}

/// Carries bytes both ways between `client` and `server` until either ends.
async fn carry_both(
    client: tokio::net::TcpStream,
    server: impl AsyncRead + AsyncWrite + Send + 'static,
    carrying: watch::Receiver<bool>,
) {
    let (client_read, client_write) = tokio::io::split(client);
    let (server_read, server_write) = tokio::io::split(server);
    tokio::join!(
        carry(client_read, server_write, carrying.clone()),
        carry(server_read, client_write, carrying),
    );
}

/// Carries bytes from `from` to `to` while the path carries; what is read while it is cut is
/// held until it carries again.
async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut carrying: watch::Receiver<bool>,
) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        if carrying.wait_for(|carrying| *carrying).await.is_err() {
            break;
        }
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if carrying.wait_for(|carrying| *carrying).await.is_err() {
            break;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
