//! Test support shared by every crate's tests: a fresh PostgreSQL database per test, and the
//! real hf server on a free port for tests that speak HTTP.
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

/// The server every test database is created on.
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

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
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs outside any runtime guarantee, so the DROP gets a thread and runtime of its own.
        let name = self.name.clone();
        let url = self.maintenance_url.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, NoTls).await.ok()?;
                tokio::spawn(connection);
                let statement = format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    hf_sql::quote_ident(&name).ok()?
                );
                client.batch_execute(&statement).await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("hf-testkit: could not drop test database {}", self.name);
        }
    }
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

/// A running hf server on a free loopback port, backed by its own fresh database.
pub struct TestServer {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base_url: String,
    /// The database behind the server.
    pub db: TestDb,
    /// An HTTP client for the tests.
    pub http: reqwest::Client,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts the server with default configuration.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts the server after letting the test adjust its configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut hf_server::ServerConfig)) -> Self {
        let db = TestDb::new().await;
        let pool = db.pool();
        hf_server::prepare_database(&pool)
            .await
            .expect("prepare the database");
        let metadata = std::env::temp_dir().join(format!("hf-test-metadata-{}", db.name()));
        let mut config = hf_server::ServerConfig::new("127.0.0.1:0", metadata.clone());
        config.workers = Some(2);
        config.shutdown_timeout = std::time::Duration::from_secs(5);
        adjust(&mut config);
        let state = hf_server::AppState {
            pool,
            metadata_path: metadata.display().to_string(),
        };
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
        Self {
            base_url: format!("http://{addr}"),
            db,
            http: reqwest::Client::builder().build().expect("client"),
            handle,
            thread: Some(thread),
        }
    }

    /// The full URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        self.handle.stop(true).await;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Stopping needs no runtime of ours: the handle only sends a message to the server thread.
        drop(self.handle.stop(false));
    }
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
