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
