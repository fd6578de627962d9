//! Test support shared by every crate's tests: a fresh PostgreSQL database per test, the real hf
//! server on a free port for tests that speak HTTP, and, for tests of a database that stops
//! answering, a database backend stopped in its tracks or a network path to the database cut
//! ([`NetworkPath`]), and for tests of a full disk, a tablespace on a file system a test can fill
//! ([`SmallTablespace`]).
//!
//! Databases come from `HF_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); when that server cannot be reached, a private
//! cluster is started once per test process under the system temp directory. Each database is
//! dropped when its [`TestDb`] is dropped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: failing loudly is the point"
)]

use std::sync::OnceLock;

use tokio_postgres::NoTls;

mod disk;
mod network;

pub use disk::{SmallDisk, SmallTablespace};
pub use network::NetworkPath;

/// The server every test database is created on.
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database backend process stopped with `SIGSTOP` while this lives, as a frozen server, or a
/// network that drops everything, looks to its client: the connection stays open and nothing
/// answers. Continued (`SIGCONT`) when dropped. Signalling a backend needs the database on
/// this machine and a test running as root or as the database's owner, as the tests here do.
#[derive(Debug)]
pub struct StoppedBackend {
    pid: i32,
}

impl StoppedBackend {
    /// Stops backend `pid` (a `pg_backend_pid()`).
    pub fn stop(pid: i32) -> StoppedBackend {
        assert!(
            signal_backend("STOP", pid),
            "kill -STOP {pid} failed: the test must run on the database's machine, as root or \
             as the database's owner"
        );
        StoppedBackend { pid }
    }

    /// The stopped backend's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Drop for StoppedBackend {
    fn drop(&mut self) {
        signal_backend("CONT", self.pid);
    }
}

/// The process id of the backend serving `client` (what [`StoppedBackend::stop`] takes).
pub async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    let row = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap();
    row.get(0)
}

/// Sends signal `name` to process `pid`; whether it was delivered.
fn signal_backend(name: &str, pid: i32) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|status| status.success())
}

/// A database that exists for one test.
#[derive(Debug)]
pub struct TestDb {
    name: String,
    url: String,
    maintenance_url: String,
}

impl TestDb {
    /// Creates a new, empty database with a unique name.
    pub async fn new() -> Self {
        let maintenance_url = maintenance_url().await;
        let name = format!("hf_test_{}", uuid::Uuid::new_v4().simple());
        let (client, connection) = tokio_postgres::connect(&maintenance_url, NoTls)
            .await
            .expect("connect to the test server");
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "CREATE DATABASE {}",
                hf_sql::quote_ident(&name).unwrap()
            ))
            .await
            .expect("create the test database");
        drop(client);
        driver.abort();
        let url = with_database(&maintenance_url, &name);
        Self {
            name,
            url,
            maintenance_url,
        }
    }

    /// The connection URL of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A pool on this database with the service's settings.
    pub fn pool(&self) -> hf_storage::Pool {
        hf_storage::connect(&self.url, &hf_storage::PoolSettings::default()).expect("pool")
    }

    /// A client on the server's maintenance database, for tests that manage this database from
    /// outside (forbid connections, terminate sessions).
    pub async fn admin_client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.maintenance_url, NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
    }

    /// A plain client on this database (its connection task runs on the current runtime).
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
    }

    /// Drops the role of every principal of this database, the way deleting a principal does
    /// (roles belong to the cluster, so a dropped database leaves them behind). Safe in a `Drop`.
    pub fn drop_principal_roles(&self) {
        let dropped = with_detached_client(&self.url, |client| async move {
            let rows = client
                .query(
                    "SELECT name FROM hf.principals \
                      WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = name)",
                    &[],
                )
                .await
                .ok()?;
            for row in rows {
                let role = hf_sql::quote_ident(row.get::<_, &str>(0)).ok()?;
                let statement = format!(
                    "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP OWNED BY {role}; \
                     DROP ROLE {role};"
                );
                client.batch_execute(&statement).await.ok()?;
            }
            Some(())
        });
        if dropped.is_none() {
            eprintln!(
                "hf-testkit: could not drop the principals' roles of {}",
                self.name
            );
        }
    }

    /// A session of its own that holds the transaction-scoped advisory lock `key`, as another
    /// instance in the middle of a write would, until [`HeldLock::release`] (or its drop, which
    /// closes the session).
    pub async fn hold_advisory_lock(&self, key: i64) -> HeldLock {
        let client = self.client().await;
        client.batch_execute("BEGIN").await.expect("BEGIN");
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&key])
            .await
            .expect("the advisory lock");
        HeldLock { client }
    }
}

/// An advisory lock held by a session of its own ([`TestDb::hold_advisory_lock`]).
pub struct HeldLock {
    client: tokio_postgres::Client,
}

impl HeldLock {
    /// Ends the holding transaction, which frees the lock.
    pub async fn release(self) {
        self.client
            .batch_execute("ROLLBACK")
            .await
            .expect("ROLLBACK");
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let dropped = hf_sql::quote_ident(&self.name).is_ok_and(|name| {
            execute_detached(
                &self.maintenance_url,
                format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            )
        });
        if !dropped {
            eprintln!("hf-testkit: could not drop test database {}", self.name);
        }
    }
}

/// Runs `statement` on the server at `url` (see [`with_detached_client`]); whether it succeeded.
fn execute_detached(url: &str, statement: String) -> bool {
    with_detached_client(url, |client| async move {
        client.batch_execute(&statement).await.ok()
    })
    .is_some()
}

/// What `work` gives with a client on the server at `url`, run from a thread and runtime of
/// their own, as a `Drop` must (it runs outside any runtime guarantee); `None` when it could not
/// connect or `work` failed.
fn with_detached_client<T, W, F>(url: &str, work: W) -> Option<T>
where
    T: Send + 'static,
    W: FnOnce(tokio_postgres::Client) -> F + Send + 'static,
    F: std::future::Future<Output = Option<T>>,
{
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.ok()?;
            tokio::spawn(connection);
            work(client).await
        })
    })
    .join()
    .ok()
    .flatten()
}

/// The maintenance URL of the test server: the configured one if it answers, else a private
/// cluster started once per process.
async fn maintenance_url() -> String {
    static URL: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    URL.get_or_init(|| async {
        let configured =
            std::env::var("HF_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
        let reachable = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio_postgres::connect(&configured, NoTls),
        )
        .await
        .is_ok_and(|result| result.is_ok());
        if reachable {
            return configured;
        }
        eprintln!("hf-testkit: {configured} is unreachable; starting a private PostgreSQL cluster");
        private_cluster().maintenance_url()
    })
    .await
    .clone()
}

fn private_cluster() -> &'static hf_storage::EmbeddedCluster {
    static CLUSTER: OnceLock<hf_storage::EmbeddedCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("hf-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the private cluster directory");
        make_traversable(&dir);
        hf_storage::EmbeddedCluster::start(&dir).expect("start a private PostgreSQL cluster")
    })
}

fn make_traversable(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
}

/// Replaces the database of a URL (URL form or key=value form).
fn with_database(url: &str, database: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let (base, query) = url
            .split_once('?')
            .map_or((url, None), |(b, q)| (b, Some(q)));
        let scheme_end = base.find("://").map_or(0, |i| i + 3);
        let path_start = base[scheme_end..].find('/').map(|i| i + scheme_end);
        let authority = path_start.map_or(base, |i| &base[..i]);
        match query {
            Some(query) => format!("{authority}/{database}?{query}"),
            None => format!("{authority}/{database}"),
        }
    } else {
        let rest: Vec<&str> = url
            .split_whitespace()
            .filter(|part| !part.starts_with("dbname="))
            .collect();
        format!("{} dbname={database}", rest.join(" "))
    }
}

/// What a test server starts with.
#[derive(Debug, Default)]
struct Options {
    /// Load `fixtures/demo` into the live branch and apply it.
    demo: bool,
    /// The service's pool settings, when not the defaults.
    pool: Option<hf_storage::PoolSettings>,
    /// Reach the database through a [`NetworkPath`] the test can cut.
    network_path: bool,
    /// The database's default tablespace, where every table the service creates goes.
    tablespace: Option<String>,
    /// The live branch's name, when not `main`.
    live_branch: Option<String>,
}

/// A running hf server on a free loopback port, backed by its own fresh database.
pub struct TestServer {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base_url: String,
    /// The database behind the server.
    pub db: TestDb,
    /// An HTTP client for the tests.
    pub http: reqwest::Client,
    /// The administrator created at start (unique per server, because roles are cluster-wide).
    pub admin_name: String,
    /// Its password, when the configuration gave one (the default does).
    pub admin_password: Option<String>,
    server: ServerThread,
    /// The path to the database the service connects through, when it was started with one.
    network: Option<NetworkPath>,
}

impl TestServer {
    /// Starts the server with default configuration and an empty metadata repository.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts the server with the demo CRM loaded and applied.
    pub async fn start_demo() -> Self {
        Self::start_demo_with(|_| {}).await
    }

    /// Starts the server with the demo CRM after letting the test adjust its configuration.
    pub async fn start_demo_with(adjust: impl FnOnce(&mut hf_server::ServerConfig)) -> Self {
        Self::launch(
            Options {
                demo: true,
                ..Options::default()
            },
            adjust,
        )
        .await
    }

    /// Starts the server with the demo CRM, connected to its database through a
    /// [`NetworkPath`] the test can cut ([`TestServer::network`]).
    pub async fn start_demo_over_network_path() -> Self {
        Self::launch(
            Options {
                demo: true,
                network_path: true,
                ..Options::default()
            },
            |_| {},
        )
        .await
    }

    /// Starts the server with the demo CRM on a database whose tables all live on `disk`, which
    /// the test can fill.
    pub async fn start_demo_on(disk: &SmallTablespace) -> Self {
        Self::launch(
            Options {
                demo: true,
                tablespace: Some(disk.name().to_owned()),
                ..Options::default()
            },
            |_| {},
        )
        .await
    }

    /// Starts the server with the demo CRM on a live branch named `live_branch` (a deployment's
    /// `HF_LIVE_BRANCH`).
    pub async fn start_demo_on_live_branch(live_branch: &str) -> Self {
        Self::launch(
            Options {
                demo: true,
                live_branch: Some(live_branch.to_owned()),
                ..Options::default()
            },
            |_| {},
        )
        .await
    }

    /// The path to the database the service connects through (see
    /// [`TestServer::start_demo_over_network_path`]).
    pub fn network(&self) -> &NetworkPath {
        self.network
            .as_ref()
            .expect("a server started over a network path")
    }

    /// Starts the server with the demo CRM and a pool of its own settings (a tiny pool, short
    /// waits), for tests of an exhausted pool.
    pub async fn start_demo_with_pool(pool: hf_storage::PoolSettings) -> Self {
        Self::launch(
            Options {
                demo: true,
                pool: Some(pool),
                ..Options::default()
            },
            |_| {},
        )
        .await
    }

    /// Starts the server after letting the test adjust its configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut hf_server::ServerConfig)) -> Self {
        Self::launch(Options::default(), adjust).await
    }

    async fn launch(options: Options, adjust: impl FnOnce(&mut hf_server::ServerConfig)) -> Self {
        let db = TestDb::new().await;
        if let Some(tablespace) = &options.tablespace {
            db.admin_client()
                .await
                .batch_execute(&format!(
                    "ALTER DATABASE {} SET default_tablespace = {}",
                    hf_sql::quote_ident(db.name()).unwrap(),
                    hf_sql::quote_ident(tablespace).unwrap()
                ))
                .await
                .expect("set the database's tablespace");
        }
        // A data shard per worker, as `hf serve` has.
        let settings = options.pool.clone().unwrap_or(hf_storage::PoolSettings {
            data_shards: 2,
            ..hf_storage::PoolSettings::default()
        });
        let network = options.network_path.then(|| NetworkPath::to(db.url()));
        let database_url = network
            .as_ref()
            .map_or(db.url(), NetworkPath::url)
            .to_owned();
        let pool = hf_storage::connect(&database_url, &settings).expect("pool");
        hf_server::prepare_database(&pool)
            .await
            .expect("prepare the database");
        let metadata = std::env::temp_dir().join(format!("hf-test-metadata-{}", db.name()));
        let mut config = test_config(metadata.clone());
        config.auth.admin_name =
            format!("admin_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        config.auth.admin_password = Some(TEST_ADMIN_PASSWORD.to_owned());
        adjust(&mut config);
        let (auth, _bootstrap) = hf_server::auth::prepare(&pool, &database_url, &config.auth)
            .await
            .expect("prepare authentication");
        let admin_name = config.auth.admin_name.clone();
        let admin_password = config.auth.admin_password.clone();
        let store = hf_storage::metadata::open_store(
            &database_url,
            &metadata,
            options.live_branch.as_deref().unwrap_or("main"),
            &hf_storage::metadata::SharedOptions::default(),
        )
        .await
        .expect("open the metadata store");
        let app = hf_app::App::new(pool, store);
        if options.demo {
            let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo");
            let files = hf_model::files::read_dir_files(&demo).expect("read the demo");
            app.seed_live(files, "the demo")
                .await
                .expect("seed the demo")
                .expect("an empty live branch");
        }
        let state = hf_server::AppState {
            app,
            metadata_path: metadata.display().to_string(),
            auth: std::sync::Arc::new(auth),
            embedded: None,
            storage_refusals: Default::default(),
        };
        let (addr, server) = spawn_server(config, state);
        Self {
            base_url: format!("http://{addr}"),
            db,
            // Idle connections are dropped well before the server's keep-alive closes them, so
            // a request never goes out on a connection the server is closing (IncompleteMessage
            // on a loaded machine).
            http: reqwest::Client::builder()
                .pool_idle_timeout(std::time::Duration::from_secs(2))
                .build()
                .expect("client"),
            admin_name,
            admin_password,
            server,
            network,
        }
    }

    /// Starts a second instance of the service on this server's database and metadata
    /// repository, with its own pool, caches and signing-key state, as a second instance behind
    /// a load balancer would run. It is stopped when dropped.
    pub async fn another_instance(&self) -> TestInstance {
        let pool = self.db.pool();
        let mut config = test_config(self.metadata_path());
        config.auth.admin_name = self.admin_name.clone();
        config.auth.admin_password = self.admin_password.clone();
        let (auth, _bootstrap) = hf_server::auth::prepare(&pool, self.db.url(), &config.auth)
            .await
            .expect("prepare authentication");
        // Its own cache directory, as on another machine; the metadata is in the database.
        let cache = std::env::temp_dir().join(format!(
            "hf-test-metadata-{}-{}",
            self.db.name(),
            uuid::Uuid::new_v4().simple()
        ));
        let store = hf_storage::metadata::open_store(
            self.db.url(),
            &cache,
            "main",
            &hf_storage::metadata::SharedOptions::default(),
        )
        .await
        .expect("open the metadata store");
        let state = hf_server::AppState {
            app: hf_app::App::new(pool, store),
            metadata_path: self.metadata_path().display().to_string(),
            auth: std::sync::Arc::new(auth),
            embedded: None,
            storage_refusals: Default::default(),
        };
        let (addr, server) = spawn_server(config, state);
        TestInstance {
            base_url: format!("http://{addr}"),
            server,
            cache,
        }
    }

    /// The metadata repository's path, for tests that inspect it with git.
    pub fn metadata_path(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("hf-test-metadata-{}", self.db.name()))
    }

    /// The full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Logs in with a password over HTTP and returns the token; panics unless that succeeds.
    pub async fn login(&self, username: &str, password: &str) -> String {
        let response = self
            .http
            .post(self.url("/auth/login"))
            .json(&serde_json::json!({"username": username, "password": password}))
            .send()
            .await
            .expect("POST /auth/login");
        let status = response.status();
        let body: serde_json::Value = response.json().await.expect("a JSON body");
        assert_eq!(status, 200, "login of {username} failed: {body}");
        body["token"].as_str().expect("a token").to_owned()
    }

    /// A token of the administrator created at start.
    pub async fn admin_token(&self) -> String {
        let password = self
            .admin_password
            .clone()
            .expect("the server was started with an admin password");
        self.login(&self.admin_name, &password).await
    }

    /// Creates a principal over HTTP (as the administrator), sets its password with the setup
    /// token, and returns it with a token. Its role is dropped when the server is dropped.
    pub async fn create_principal(&self, name: &str, is_admin: bool) -> TestPrincipal {
        let admin = self.admin_token().await;
        let response = self
            .http
            .post(self.url("/iam/principals"))
            .bearer_auth(&admin)
            .json(&serde_json::json!({"name": name, "isAdmin": is_admin}))
            .send()
            .await
            .expect("POST /iam/principals");
        let status = response.status();
        let created: serde_json::Value = response.json().await.expect("a JSON body");
        assert_eq!(status, 201, "creating {name} failed: {created}");
        let password = format!("pw-{}", uuid::Uuid::new_v4().simple());
        // Password checks are bounded (a busy machine or concurrent creations may be told 503
        // OVERLOADED before anything is done); like any client, try again after `Retry-After`.
        let mut attempts = 0;
        let (status, body) = loop {
            let response = self
                .http
                .post(self.url("/auth/set-password"))
                .json(&serde_json::json!({
                    "setupToken": created["setupToken"],
                    "password": password,
                }))
                .send()
                .await
                .expect("POST /auth/set-password");
            let status = response.status();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
            let body: serde_json::Value = response.json().await.expect("a JSON body");
            attempts += 1;
            match retry_after {
                Some(seconds) if status == 503 && attempts < 10 => {
                    tokio::time::sleep(std::time::Duration::from_secs(seconds.clamp(1, 5))).await;
                }
                _ => break (status, body),
            }
        };
        assert_eq!(status, 200, "setting the password of {name} failed: {body}");
        TestPrincipal {
            id: created["id"].as_str().expect("an id").to_owned(),
            name: name.to_owned(),
            password,
            token: body["token"].as_str().expect("a token").to_owned(),
        }
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        self.server.stop().await;
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.server.signal_stop();
        // Roles belong to the whole cluster and outlive the test database: drop the principals'.
        self.db.drop_principal_roles();
        // The metadata repository lives in the system's temporary directory (a parallel test
        // run left about 50 MB of them behind each time); removing it is best effort.
        let _ = std::fs::remove_dir_all(self.metadata_path());
    }
}

/// What every test server and extra instance is configured with, before its administrator.
fn test_config(metadata: std::path::PathBuf) -> hf_server::ServerConfig {
    let mut config = hf_server::ServerConfig::new("127.0.0.1:0", metadata);
    config.workers = Some(2);
    config.shutdown_timeout = std::time::Duration::from_secs(5);
    // Tests fire a few password checks at once on small machines, whose cores the other tests
    // of a parallel run keep busy (a hash that takes 30 ms alone then takes a second or more at
    // its low priority); the load-shedding tests set their own bounds.
    config.auth.hashing_queue = 32;
    config.auth.hashing_wait = TEST_HASHING_WAIT;
    config
}

/// A server running on a thread of its own; stopped when dropped.
struct ServerThread {
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Stops the server gracefully and waits for its thread.
    async fn stop(&mut self) {
        self.handle.stop(true).await;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Asks the server to stop without waiting; needs no runtime of ours, because the handle
    /// only sends a message to the server thread.
    fn signal_stop(&self) {
        drop(self.handle.stop(false));
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// Runs a server on its own thread and actix system; returns its address and the thread.
fn spawn_server(
    config: hf_server::ServerConfig,
    state: hf_server::AppState,
) -> (std::net::SocketAddr, ServerThread) {
    let (sender, receiver) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let system = actix_web::rt::System::new();
        system.block_on(async move {
            let server = hf_server::bind(&config, state).expect("bind the test server");
            sender
                .send((server.addr, server.handle()))
                .expect("report the address");
            server.run().await.expect("serve");
        });
    });
    let (addr, handle) = receiver.recv().expect("the server thread starts");
    let server = ServerThread {
        handle,
        thread: Some(thread),
    };
    (addr, server)
}

/// A further instance of a [`TestServer`]'s service (see [`TestServer::another_instance`]).
pub struct TestInstance {
    /// Base URL, e.g. `http://127.0.0.1:41235`.
    pub base_url: String,
    server: ServerThread,
    /// Its metadata cache directory, removed when the instance is dropped.
    cache: std::path::PathBuf,
}

impl TestInstance {
    /// The full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Stops the instance gracefully and waits for it.
    pub async fn stop(mut self) {
        self.server.stop().await;
    }
}

impl Drop for TestInstance {
    fn drop(&mut self) {
        // Asked to stop before its cache goes (the server thread's own drop asks again, which
        // is harmless). Best effort, like the rest of the clean-up: a directory left behind only
        // takes space.
        self.server.signal_stop();
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

/// The password of every test server's administrator.
pub const TEST_ADMIN_PASSWORD: &str = "test-admin-password";

/// How long a test server lets a login wait for a password check before refusing it (2 s in
/// production): in a parallel test run on 2 cores, four logins at once waited longer than 2 s
/// behind each other and were refused `OVERLOADED`, failing tests that are not about load.
pub const TEST_HASHING_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A principal a test created, logged in.
#[derive(Debug, Clone)]
pub struct TestPrincipal {
    /// Its id.
    pub id: String,
    /// Its name (and role).
    pub name: String,
    /// Its password.
    pub password: String,
    /// A token from setting its password.
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_the_database_in_both_url_forms() {
        assert_eq!(
            with_database("postgres://u@h:5/postgres", "x"),
            "postgres://u@h:5/x"
        );
        assert_eq!(
            with_database("postgres://u@h:5/postgres?sslmode=disable", "x"),
            "postgres://u@h:5/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
        assert_eq!(
            with_database("host=/tmp port=5 user=p dbname=postgres", "x"),
            "host=/tmp port=5 user=p x".replace(" x", " dbname=x")
        );
    }
}
