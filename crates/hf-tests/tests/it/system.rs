//! `/health` and `/status`, including the database going away and coming back.

use hf_testkit::TestServer;
use serde_json::Value;

#[tokio::test]
async fn health_answers_ok() {
    let server = TestServer::start().await;
    let response = server.http.get(server.url("/health")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"status": "ok"}));
    server.stop().await;
}

#[tokio::test]
async fn status_has_the_exact_shape() {
    let server = TestServer::start().await;
    let response = server.http.get(server.url("/status")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    assert!(body["metadata_path"].is_string());
    let db = &body["database"];
    assert!(db["latency_ms"].is_u64());
    assert_eq!(db["name"], server.db.name());
    assert!(db["server_version"]
        .as_str()
        .unwrap()
        .starts_with(char::is_numeric));
    let connections = &db["connections"];
    for key in ["active", "max", "pool_idle", "pool_size"] {
        assert!(connections[key].is_i64(), "{key}: {body}");
    }
    assert!(connections["active"].as_i64().unwrap() >= 1);
    assert!(connections["max"].as_i64().unwrap() > 0);
    let ssl = &db["ssl"];
    assert!(ssl["enabled"].is_boolean());
    assert!(ssl["bits"].is_i64());
    assert!(ssl["cipher"].is_string() && ssl["version"].is_string());
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["status", "metadata_path", "database"]);
    server.stop().await;
}

#[tokio::test]
async fn status_is_503_while_the_database_is_gone_and_recovers() {
    let server = TestServer::start().await;
    let url = server.url("/status");
    assert_eq!(server.http.get(&url).send().await.unwrap().status(), 200);

    // Take the database away: forbid connections and end the pool's sessions.
    let admin = server.db.admin_client().await;
    let name = server.db.name().to_owned();
    admin
        .batch_execute(&format!(
            "ALTER DATABASE \"{name}\" WITH ALLOW_CONNECTIONS false"
        ))
        .await
        .unwrap();
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            &[&name],
        )
        .await
        .unwrap();

    let response = server.http.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "unavailable");
    // What is down, without the driver's or the pool's text.
    assert_eq!(body["error"], "the database is unreachable", "{body}");
    assert!(body["metadata_path"].is_string());

    admin
        .batch_execute(&format!(
            "ALTER DATABASE \"{name}\" WITH ALLOW_CONNECTIONS true"
        ))
        .await
        .unwrap();
    let mut recovered = false;
    for _ in 0..50 {
        if server.http.get(&url).send().await.unwrap().status() == 200 {
            recovered = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        recovered,
        "/status did not recover after the database returned"
    );
    server.stop().await;
}

#[tokio::test]
async fn request_id_is_echoed_or_made() {
    let server = TestServer::start().await;
    let response = server
        .http
        .get(server.url("/health"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "abc-123");
    let response = server
        .http
        .get(server.url("/nope"))
        .header("x-request-id", "bad id with spaces")
        .send()
        .await
        .unwrap();
    let made = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_ne!(made, "bad id with spaces");
    assert_eq!(made.len(), 36);
    server.stop().await;
}

/// The HTTP worker threads ask for the short time slice (so a woken request takes a core at
/// once), where the kernel reports slices (`se.slice` in `/proc/<pid>/task/<tid>/sched`, Linux
/// 6.6 and later with scheduler statistics).
///
/// The threads are those of the whole test process, where other tests start servers of their
/// own at the same time: a thread of another server may not have started serving yet (and so
/// not have asked yet), and the test kit's system thread is named like a worker. So the test
/// asks for this server's two workers (the test kit starts two) among the threads named like
/// workers, rather than for every such thread.
#[tokio::test]
async fn the_http_workers_ask_for_the_short_time_slice() {
    let server = TestServer::start().await;
    // A request has been served, so the workers have started.
    let response = server.http.get(server.url("/health")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let (mut workers, mut short) = (0, 0);
    let mut slices_reported = false;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        // Named by actix: `actix-server worker N` under `hf serve`, `actix-rt|system:…` in the
        // test kit's system (the name is cut to 15 bytes here).
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !name.starts_with("actix-server wo") && !name.starts_with("actix-rt|system") {
            continue;
        }
        workers += 1;
        let Ok(sched) = std::fs::read_to_string(task.join("sched")) else {
            continue;
        };
        let Some(slice) = sched
            .lines()
            .find(|line| line.starts_with("se.slice"))
            .and_then(|line| line.split(':').nth(1))
        else {
            continue;
        };
        slices_reported = true;
        let slice: u64 = slice.trim().parse().unwrap();
        if slice == hf_app::background::SLICE_NANOS {
            short += 1;
        }
    }
    assert!(workers >= 2, "{workers} HTTP worker threads found");
    // Linux 6.12 and later honour the slice asked for; older kernels keep their default.
    let honoured = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .is_ok_and(|release| kernel_at_least(&release, 6, 12));
    if slices_reported && honoured {
        assert!(
            short >= 2,
            "{short} of {workers} threads named like HTTP workers run on the short slice"
        );
    }
    server.stop().await;
}

/// Whether a kernel release (`6.18.44-…`) is at least `major.minor`.
fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|part| part.parse::<u32>().ok());
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
