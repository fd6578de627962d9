//! The embedded cluster: created on first start, reachable only on its socket, stopped cleanly,
//! and restartable after a crash left a stale `postmaster.pid`.

use std::os::unix::fs::PermissionsExt;

use hf_storage::EmbeddedCluster;

fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("hf-embedded-")
        .tempdir()
        .unwrap();
    // When the tests run as root the cluster runs as `postgres`, which must reach the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

async fn query_one(url: &str) -> i32 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.query_one("SELECT 1", &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn starts_stops_and_survives_a_stale_pid_file() {
    if hf_storage::find_postgres_bindir().is_none() {
        eprintln!("skipped: no PostgreSQL server binaries on this machine");
        return;
    }
    let dir = data_dir();
    let path = dir.path().to_path_buf();
    let mut cluster = tokio::task::spawn_blocking({
        let path = path.clone();
        move || EmbeddedCluster::start(&path)
    })
    .await
    .unwrap()
    .unwrap();
    hf_storage::create_database_if_missing(&cluster.maintenance_url(), cluster.database_name())
        .await
        .unwrap();
    assert_eq!(query_one(&cluster.database_url()).await, 1);
    // Only a Unix socket: no TCP listener configured.
    let settings = std::fs::read_to_string(path.join("pg/data/postmaster.pid")).unwrap();
    assert!(
        settings.lines().nth(5).unwrap_or("").trim().is_empty(),
        "listens on TCP: {settings}"
    );
    let mode = std::fs::metadata(path.join("pg/run"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
    assert!(!path.join("pg/data/postmaster.pid").exists());

    // A crash leaves postmaster.pid behind, naming a process that is gone.
    std::fs::write(path.join("pg/data/postmaster.pid"), "999999\n/nowhere\n").unwrap();
    let cluster = tokio::task::spawn_blocking({
        let path = path.clone();
        move || EmbeddedCluster::start(&path)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(query_one(&cluster.database_url()).await, 1);
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}
