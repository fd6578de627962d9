//! Faults injected for real: an exhausted pool, a read-only metadata cache, a database
//! connection killed in the middle of a live write or of a record write's `COMMIT`, a database
//! backend that stops answering, a network partition from the database, a database gone
//! silent, a lock held on the service's own tables, the disk under the database's tables full,
//! a ref lock file left in the cache, a login flood, logins with slow bodies. Each gets its
//! status and code, nothing is lost, and the service is normal afterwards.

use std::time::Duration;

use hf_testkit::TestServer;
use serde_json::{json, Value};

use crate::support::{assert_envelope, json_with_status};

/// The live branch's head, read with git.
fn git_head(server: &TestServer) -> String {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args(["rev-parse", "refs/heads/main"])
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Adds field `key` to `crm.account` of the live branch (a write that runs DDL).
async fn add_field(server: &TestServer, token: &str, key: &str) -> reqwest::Response {
    server
        .http
        .post(server.url(&format!("/metadata@main/crm/objects/account/fields/{key}")))
        .bearer_auth(token)
        .json(&json!({"fieldKind": "scalar", "label": "Note", "fieldType": "text"}))
        .send()
        .await
        .unwrap()
}

/// Whether column `key` exists on `crm.account`.
async fn has_column(server: &TestServer, key: &str) -> bool {
    let client = server.db.client().await;
    let row = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns \
              WHERE table_schema = 'crm' AND table_name = 'account' AND column_name = $1",
            &[&key],
        )
        .await
        .unwrap();
    row.get::<_, i64>(0) == 1
}

#[tokio::test]
async fn an_exhausted_pool_answers_pool_busy_and_recovers() {
    let server = TestServer::start_demo_with_pool(hf_storage::PoolSettings {
        max_size: 2,
        wait_timeout: Duration::from_millis(500),
        ..hf_storage::PoolSettings::default()
    })
    .await;
    let token = server.admin_token().await;
    // Hold both pooled connections: two reads wait on a table lock held by another session.
    let mut holder = server.db.client().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE crm.account IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let read = |id: &'static str| {
        let request = server
            .http
            .get(server.url(&format!("/data/crm/account/{id}")))
            .bearer_auth(&token);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let first = read("00000000-0000-0000-0000-000000000001");
    let second = read("00000000-0000-0000-0000-000000000002");
    let held = tokio::spawn(async move { tokio::join!(first, second) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let response = server
        .http
        .get(server.url("/data/crm/account/00000000-0000-0000-0000-000000000003"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["retry-after"], "1");
    assert_envelope(response, 503, "POOL_BUSY").await;
    // `/status` says what is down, without the pool's text.
    let response = server.http.get(server.url("/status")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"],
        "the database is busy: every pooled connection stayed in use"
    );

    lock.rollback().await.unwrap();
    assert_eq!(held.await.unwrap(), (404, 404), "the held reads finish");
    let response = server
        .http
        .get(server.url("/data/crm/account/00000000-0000-0000-0000-000000000003"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404, "the service is normal again");
    server.stop().await;
}

/// A metadata write to the live branch waits for the live writes ahead of it (here another
/// instance's, holding the database lock) no longer than its bound: then 503 `METADATA_LOCKED`
/// with `Retry-After`, nothing written; once the lock is free the same write lands.
#[tokio::test]
async fn a_live_write_held_up_past_its_bound_answers_metadata_locked() {
    let wait = Duration::from_secs(1);
    let server = TestServer::start_demo_with_pool(hf_storage::PoolSettings {
        live_write_wait: wait,
        ..hf_storage::PoolSettings::default()
    })
    .await;
    let token = server.admin_token().await;
    let held = server
        .db
        .hold_advisory_lock(hf_storage::deploy::APPLY_LOCK_KEY)
        .await;

    let started = std::time::Instant::now();
    let response = add_field(&server, &token, "held_up").await;
    let waited = started.elapsed();
    assert_eq!(response.headers()["retry-after"], "1");
    assert_envelope(response, 503, "METADATA_LOCKED").await;
    assert!(
        waited >= wait && waited < wait + Duration::from_secs(3),
        "answered after {waited:?}"
    );
    assert!(!has_column(&server, "held_up").await, "nothing was applied");

    held.release().await;
    let response = add_field(&server, &token, "held_up").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(has_column(&server, "held_up").await);
    server.stop().await;
}

/// Record requests beyond what the data pool can start soon are refused at once, with
/// `Retry-After`, instead of queueing for the pool's whole wait timeout.
#[tokio::test]
async fn record_requests_beyond_the_pool_wait_are_shed_with_overloaded() {
    let server = TestServer::start_demo_with_pool(hf_storage::PoolSettings {
        max_size: 1,
        ..hf_storage::PoolSettings::default()
    })
    .await;
    let token = server.admin_token().await;
    // The one data connection waits on a table lock, and as many reads as the wait admits
    // queue behind it.
    let mut holder = server.db.client().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE crm.account IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let read = || {
        let request = server
            .http
            .get(server.url("/data/crm/account/00000000-0000-0000-0000-000000000001"))
            .bearer_auth(&token);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let held: Vec<_> = (0..=hf_app::shed::DATA_WAITERS_PER_SHARD)
        .map(|_| tokio::spawn(read()))
        .collect();
    // The refusal comes before anything is spent on a request, the token check included: a
    // read without a token is answered 401 until the reads above fill the wait, then refused.
    let probe = server.url("/data/crm/account/00000000-0000-0000-0000-000000000002");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = server.http.get(&probe).send().await.unwrap();
        if response.status() == 503 {
            assert_envelope(response, 503, "OVERLOADED").await;
            break;
        }
        assert_eq!(response.status(), 401);
        assert!(
            std::time::Instant::now() < deadline,
            "the reads never filled the wait"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = std::time::Instant::now();
    let response = server
        .http
        .get(&probe)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once"
    );
    assert_eq!(response.headers()["retry-after"], "1");
    assert_envelope(response, 503, "OVERLOADED").await;

    lock.rollback().await.unwrap();
    for read in held {
        assert_eq!(read.await.unwrap(), 404, "the admitted reads finish");
    }
    let response = server
        .http
        .get(server.url("/data/crm/account/00000000-0000-0000-0000-000000000002"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404, "the service is normal again");
    server.stop().await;
}

/// Makes the repository's object store immutable (even root cannot write into it) until dropped.
struct ReadOnlyObjects(std::path::PathBuf);

impl ReadOnlyObjects {
    fn new(repository: std::path::PathBuf) -> Self {
        let objects = repository.join("objects");
        let status = std::process::Command::new("chattr")
            .args(["-R", "+i"])
            .arg(&objects)
            .status()
            .expect("chattr (e2fsprogs) makes the objects directory read-only even for root");
        assert!(status.success(), "chattr +i failed");
        Self(objects)
    }
}

impl Drop for ReadOnlyObjects {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .args(["-R", "-i"])
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn a_read_only_repository_answers_storage_unavailable_and_loses_nothing() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let head = git_head(&server);
    let read_only = ReadOnlyObjects::new(server.metadata_path());
    let response = add_field(&server, &token, "note").await;
    assert!(response.headers().contains_key("retry-after"));
    let envelope = assert_envelope(response, 503, "STORAGE_UNAVAILABLE").await;
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    assert!(
        !message.contains("objects/"),
        "no file system internals: {message}"
    );
    assert_eq!(git_head(&server), head, "the branch did not move");
    assert!(
        !has_column(&server, "note").await,
        "the database is untouched"
    );

    drop(read_only);
    let response = add_field(&server, &token, "note").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(has_column(&server, "note").await);
    server.stop().await;
}

#[tokio::test]
async fn a_connection_killed_mid_write_answers_database_unavailable() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let head = git_head(&server);
    // Another session holds a lock the DDL needs, so the live write waits inside its
    // transaction; its backend is then terminated.
    let mut holder = server.db.client().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE crm.account IN ACCESS SHARE MODE")
        .await
        .unwrap();
    let write = tokio::spawn({
        let http = server.http.clone();
        let url = server.url("/metadata@main/crm/objects/account/fields/note");
        let token = token.clone();
        async move {
            http.post(url)
                .bearer_auth(token)
                .json(&json!({"fieldKind": "scalar", "label": "Note", "fieldType": "text"}))
                .send()
                .await
                .unwrap()
        }
    });
    let admin = server.db.client().await;
    let mut terminated = false;
    for _ in 0..150 {
        let row = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                  WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            terminated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(terminated, "the write's backend was found waiting");
    let response = write.await.unwrap();
    let envelope = assert_envelope(response, 503, "DATABASE_UNAVAILABLE").await;
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    assert!(
        !message.contains("terminating connection"),
        "no driver text: {message}"
    );
    lock.rollback().await.unwrap();
    assert_eq!(git_head(&server), head, "the branch did not move");
    assert!(!has_column(&server, "note").await, "nothing was applied");

    let response = add_field(&server, &token, "note").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(has_column(&server, "note").await);
    server.stop().await;
}

/// A database that stops answering (its backend frozen, as a hung host or a network dropping
/// everything looks) holds no request for ever: a record read on that connection is answered
/// 503 `DATABASE_UNAVAILABLE` once the read timeout and the answer grace have passed, and the
/// next read runs on a new connection.
#[tokio::test]
async fn a_database_that_stops_answering_answers_database_unavailable_in_time() {
    // One data connection, so the read below takes the one whose backend is stopped.
    let server = TestServer::start_demo_with_pool(hf_storage::PoolSettings {
        max_size: 1,
        data_shards: 1,
        ..hf_storage::PoolSettings::default()
    })
    .await;
    let token = server.admin_token().await;
    let create = server
        .http
        .post(server.url("/data/crm/account"))
        .bearer_auth(&token)
        .json(&json!({"name": "Frozen"}));
    let created = json_with_status(create.send().await.unwrap(), 201).await;
    let record = server.url(&format!(
        "/data/crm/account/{}",
        created["id"].as_str().unwrap()
    ));
    let read = || server.http.get(&record).bearer_auth(&token).send();
    // The data connection's backend is the one whose last statement was a record read. A read
    // that switches the session ends with `COMMIT` instead (the first one after the create, and
    // any after a principal changed anywhere in this process, which other tests do), so reads
    // go on until one ran alone.
    let admin = server.db.client().await;
    let mut backend = None;
    for _ in 0..50 {
        assert_eq!(read().await.unwrap().status(), 200);
        backend = admin
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                  AND query LIKE '%row_to_json%' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
        if backend.is_some() {
            break;
        }
    }
    let row = backend.expect("a read ran alone on the data connection");
    let stopped = hf_testkit::StoppedBackend::stop(row.get(0));

    let started = std::time::Instant::now();
    let response = read().await.unwrap();
    let waited = started.elapsed();
    let retry_after = response.headers().get("retry-after").cloned();
    assert_envelope(response, 503, "DATABASE_UNAVAILABLE").await;
    assert_eq!(retry_after.unwrap(), "1");
    let deadline = hf_storage::run_as::READ_TIMEOUT + hf_storage::run_as::ANSWER_GRACE;
    assert!(
        waited >= deadline && waited < deadline + Duration::from_secs(5),
        "answered after {waited:?}"
    );

    // The next read is served on a new connection while the old backend is still stopped.
    assert_eq!(read().await.unwrap().status(), 200);
    drop(stopped);
    assert_eq!(read().await.unwrap().status(), 200);
    server.stop().await;
}

/// Every authenticated request checks that its principal still exists, on one connection that
/// all such checks share. A database that stops answering on it holds no request for ever: a
/// principal not in memory is answered 503 `DATABASE_UNAVAILABLE` once the lookup's allowed
/// silence has passed, and the next request checks on a new connection.
#[tokio::test]
async fn a_principal_check_the_database_stops_answering_answers_in_time() {
    let server = TestServer::start_demo().await;
    let name = crate::auth::unique_name(&server, "frozen");
    // Its token comes from setting its password, which checks no principal, so the first
    // request with it asks the database.
    let principal = server.create_principal(&name, false).await;
    let admin = server.db.client().await;
    let row = admin
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
              AND query LIKE 'SELECT id, name, sub, is_admin, created_at FROM hf.principals WHERE sub%' \
              AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    let stopped = hf_testkit::StoppedBackend::stop(row.get(0));

    let started = std::time::Instant::now();
    let response = crate::auth::me(&server, &principal.token).await;
    let waited = started.elapsed();
    let retry_after = response.headers().get("retry-after").cloned();
    assert_envelope(response, 503, "DATABASE_UNAVAILABLE").await;
    assert_eq!(retry_after.unwrap(), "1");
    let silence = hf_storage::auth::LOOKUP_SILENCE;
    assert!(
        waited >= silence && waited < silence + Duration::from_secs(5),
        "answered after {waited:?}"
    );

    // The next check runs on a new connection while the old backend is still stopped.
    let response = crate::auth::me(&server, &principal.token).await;
    assert_eq!(
        json_with_status(response, 200).await["pgRole"],
        name.as_str()
    );
    drop(stopped);
    server.stop().await;
}

/// What `work` gives, and how long it took.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = std::time::Instant::now();
    let done = work.await;
    (done, started.elapsed())
}

/// Creates an account named `name`; its id.
async fn create_account(server: &TestServer, token: &str, name: &str) -> String {
    let response = server
        .http
        .post(server.url("/data/crm/account"))
        .bearer_auth(token)
        .json(&json!({"name": name}))
        .send()
        .await
        .unwrap();
    json_with_status(response, 201).await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Reads the account `id`.
fn read_account(
    server: &TestServer,
    token: &str,
    id: &str,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
    server
        .http
        .get(server.url(&format!("/data/crm/account/{id}")))
        .bearer_auth(token)
        .send()
}

/// A database that stops answering without refusing anything (its host froze; the relay to it
/// accepts connections and says nothing) holds the read under way for its allowed silence;
/// from then on record reads, logins and `/status` are answered 503 at once, while one request
/// at a time tries the database. Once it answers again the service is normal.
#[tokio::test]
async fn a_database_gone_silent_is_found_out_once_and_then_refuses_at_once() {
    let server = TestServer::start_demo_over_network_path().await;
    let token = server.admin_token().await;
    let record = create_account(&server, &token, "before the silence").await;
    let read = || read_account(&server, &token, &record);
    server.network().hang();

    let (first, took) = timed(async { read().await.unwrap() }).await;
    assert_envelope(first, 503, "DATABASE_UNAVAILABLE").await;
    let silence = hf_storage::run_as::READ_TIMEOUT + hf_storage::run_as::ANSWER_GRACE;
    assert!(took >= silence, "the first read answered after {took:?}");

    // One request tries the database (and waits for it); the others are refused at once.
    let trying = tokio::spawn(read());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let login = server
        .http
        .post(server.url("/auth/login"))
        .json(&json!({
            "username": server.admin_name,
            "password": server.admin_password.as_deref().unwrap(),
        }))
        .send();
    let ((read_answer, read_took), (login_answer, login_took), (status, status_took)) = tokio::join!(
        timed(async { read().await.unwrap() }),
        timed(async { login.await.unwrap() }),
        timed(async { server.http.get(server.url("/status")).send().await.unwrap() }),
    );
    let at_once = Duration::from_secs(1);
    assert!(read_took < at_once, "a read answered after {read_took:?}");
    assert_eq!(read_answer.headers()["retry-after"], "1");
    assert_envelope(read_answer, 503, "DATABASE_UNAVAILABLE").await;
    assert!(
        login_took < at_once,
        "a login answered after {login_took:?}"
    );
    assert_envelope(login_answer, 503, "DATABASE_UNAVAILABLE").await;
    assert!(
        status_took < at_once,
        "/status answered after {status_took:?}"
    );
    assert_eq!(status.status(), 503);
    let body: Value = status.json().await.unwrap();
    assert_eq!(body["error"], "the database is unreachable");

    server.network().restore();
    let tried = trying.await.unwrap().unwrap();
    assert!(
        [200, 503].contains(&tried.status().as_u16()),
        "{}",
        tried.status()
    );
    let response = read().await.unwrap();
    assert_eq!(
        json_with_status(response, 200).await["name"],
        "before the silence"
    );
    let password = server.admin_password.clone().unwrap();
    server.login(&server.admin_name, &password).await;
    server.stop().await;
}

/// Creates object `key` in `crm` on the live branch (a write that creates a table).
async fn add_object(server: &TestServer, token: &str, key: &str) -> reqwest::Response {
    server
        .http
        .post(server.url(&format!("/metadata@main/crm/objects/{key}")))
        .bearer_auth(token)
        .json(&json!({"label": "Deal"}))
        .send()
        .await
        .unwrap()
}

/// The disk under the database's tables full: record writes, and a live write that creates a
/// table, are answered 503 `STORAGE_UNAVAILABLE` with `Retry-After` and none of the server's text
/// (which names its files); reads go on. Once there is room, writes succeed again and every
/// write acknowledged before, during and after is there.
#[tokio::test]
async fn a_full_database_disk_answers_storage_unavailable_and_loses_nothing() {
    let disk = hf_testkit::SmallTablespace::new().await;
    let server = TestServer::start_demo_on(&disk).await;
    let token = server.admin_token().await;
    let mut acknowledged = vec![create_account(&server, &token, "before the disk filled").await];
    let head = git_head(&server);
    disk.fill();

    // The table's last page may have room for a few more rows: write until the disk refuses.
    let mut refused = None;
    for n in 0..5000 {
        let response = server
            .http
            .post(server.url("/data/crm/account"))
            .bearer_auth(&token)
            .json(&json!({"name": format!("while full {n}")}))
            .send()
            .await
            .unwrap();
        if response.status() != 201 {
            refused = Some(response);
            break;
        }
        let body: Value = response.json().await.unwrap();
        acknowledged.push(body["id"].as_str().unwrap().to_owned());
    }
    let response = refused.expect("the full disk refused a write");
    assert_eq!(response.headers()["retry-after"], "5");
    let envelope = assert_envelope(response, 503, "STORAGE_UNAVAILABLE").await;
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    for internal in ["space", "extend", "pg_tblspc", disk.name()] {
        assert!(!message.contains(internal), "server text: {message}");
    }
    let response = read_account(&server, &token, &acknowledged[0])
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "reads go on");
    // The database still answers `/status`'s query; the status says what the writes met.
    let response = server.http.get(server.url("/status")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let status: Value = response.json().await.unwrap();
    assert_eq!(status["storage"]["writes_refused"], 1, "{status}");
    assert!(
        status["storage"]["last_refused_secs_ago"].as_u64().unwrap() < 60,
        "{status}"
    );
    let problem = status["storage"]["problem"].as_str().unwrap();
    assert!(problem.contains("full or failing"), "{problem}");

    let response = add_object(&server, &token, "deal").await;
    assert!(response.headers().contains_key("retry-after"));
    assert_envelope(response, 503, "STORAGE_UNAVAILABLE").await;
    assert_eq!(git_head(&server), head, "the branch did not move");
    // A field (DDL that needs no new space) is stored with the metadata: fields are added until
    // the metadata's own tables have no room either.
    let mut fields = Vec::new();
    let mut refused = None;
    for n in 0..200 {
        let key = format!("note_{n}");
        let response = add_field(&server, &token, &key).await;
        if response.status() != 201 {
            refused = Some(response);
            break;
        }
        fields.push(key);
    }
    let response = refused.expect("the full disk refused a metadata write");
    assert!(response.headers().contains_key("retry-after"));
    assert_envelope(response, 503, "STORAGE_UNAVAILABLE").await;

    disk.make_room();
    acknowledged.push(create_account(&server, &token, "after room was made").await);
    let response = add_object(&server, &token, "deal").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    for id in &acknowledged {
        let response = read_account(&server, &token, id).await.unwrap();
        assert_eq!(response.status(), 200, "account {id}");
    }
    for key in &fields {
        assert!(has_column(&server, key).await, "field {key}");
    }
    // Every refusal is counted, the record's, the object's and the field's; the run is
    // reported until a minute after the last.
    let status: Value = server
        .http
        .get(server.url("/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["storage"]["writes_refused"], 3, "{status}");
    server.stop().await;
}

/// A table of the service's own schema locked by another session (an operator's `LOCK TABLE`,
/// `VACUUM FULL` or `ALTER TABLE`, or a migration queued behind a backup) holds a login no
/// longer than the service's lock wait, then it is answered in the envelope; what does not need
/// the table goes on meanwhile, and once the lock is gone logins work again.
#[tokio::test]
async fn a_lock_held_on_the_services_own_tables_holds_a_login_only_briefly() {
    let server = TestServer::start_demo().await;
    let password = server.admin_password.clone().unwrap();
    let mut holder = server.db.client().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE hf.credentials IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    let login = server
        .http
        .post(server.url("/auth/login"))
        .json(&json!({"username": server.admin_name, "password": password}));
    let (response, waited) = timed(login.send()).await;
    let response = response.unwrap();
    assert!(
        waited >= hf_storage::SERVICE_LOCK_TIMEOUT
            && waited < hf_storage::SERVICE_LOCK_TIMEOUT + Duration::from_secs(5),
        "answered after {waited:?}"
    );
    assert_envelope(response, 504, "TIMEOUT").await;
    let response = server.http.get(server.url("/status")).send().await.unwrap();
    assert_eq!(response.status(), 200, "the database itself is fine");

    lock.rollback().await.unwrap();
    server.login(&server.admin_name, &password).await;
    server.stop().await;
}

/// A network partition between the service and its database (nothing the service sends is
/// acknowledged, nothing comes back) holds no request for long. A live write under way when the
/// network stops waits for an answer on a connection TCP sees as idle, and is answered 503
/// `DATABASE_UNAVAILABLE` once TCP's keepalive probes go unanswered (15 s here; a minute before
/// the service bounded them), with nothing written. A record read, a login and `/status` are
/// answered within seconds: those that need a new connection at once (nothing can connect), a
/// read on an open connection once its allowed silence has passed. Once the network carries
/// again the service is normal, and what was acknowledged before is there.
#[tokio::test]
async fn a_network_partition_from_the_database_holds_no_request_for_long() {
    let server = TestServer::start_demo_over_network_path().await;
    let token = server.admin_token().await;
    let record = create_account(&server, &token, "before the partition").await;
    let read = || read_account(&server, &token, &record);
    let login = || {
        server
            .http
            .post(server.url("/auth/login"))
            .json(&json!({
                "username": server.admin_name,
                "password": server.admin_password.as_deref().unwrap(),
            }))
            .send()
    };
    // The live write waits for the live-write lock another session holds (not through the
    // path); the network stops while it waits, and the lock is then given to it.
    let held = server
        .db
        .hold_advisory_lock(hf_storage::deploy::APPLY_LOCK_KEY)
        .await;
    let write = timed(add_field(&server, &token, "cut_off"));
    let during = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.network().cut();
        held.release().await;
        tokio::join!(
            timed(async { read().await.unwrap() }),
            timed(async { login().await.unwrap() }),
            timed(async { server.http.get(server.url("/status")).send().await.unwrap() }),
        )
    };
    let (
        (write, write_took),
        ((read_answer, read_took), (login_answer, login_took), (status, status_took)),
    ) = tokio::join!(write, during);

    let margin = Duration::from_secs(5);
    assert_eq!(read_answer.headers()["retry-after"], "1");
    assert_envelope(read_answer, 503, "DATABASE_UNAVAILABLE").await;
    let read_silence = hf_storage::run_as::READ_TIMEOUT + hf_storage::run_as::ANSWER_GRACE;
    assert!(
        read_took < read_silence + margin,
        "the read answered after {read_took:?}"
    );
    assert_envelope(login_answer, 503, "DATABASE_UNAVAILABLE").await;
    assert!(
        login_took < margin,
        "the login answered after {login_took:?}"
    );
    assert_eq!(status.status(), 503);
    let body: Value = status.json().await.unwrap();
    assert_eq!(body["error"], "the database is unreachable");
    assert!(
        status_took < margin,
        "/status answered after {status_took:?}"
    );
    assert_eq!(write.headers()["retry-after"], "1");
    assert_envelope(write, 503, "DATABASE_UNAVAILABLE").await;
    let write_bound = hf_storage::KEEPALIVE_IDLE + hf_storage::UNACKNOWLEDGED_LIMIT + margin;
    assert!(
        write_took < write_bound,
        "the live write answered after {write_took:?}"
    );
    assert!(!has_column(&server, "cut_off").await, "nothing was applied");

    server.network().restore();
    let response = read().await.unwrap();
    assert_eq!(
        json_with_status(response, 200).await["name"],
        "before the partition"
    );
    assert_eq!(login().await.unwrap().status(), 200);
    let response = add_field(&server, &token, "cut_off").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(has_column(&server, "cut_off").await);
    server.stop().await;
}

/// Leaves `refs/heads/main.lock` as a crashed writer would, `age` old.
fn leave_ref_lock(server: &TestServer, age: Duration) -> std::path::PathBuf {
    let path = server.metadata_path().join("refs/heads/main.lock");
    let file = std::fs::File::create(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() - age)
        .unwrap();
    path
}

/// Branch heads live in the database, so a ref lock file a crashed process left in the local
/// repository (only a cache now) blocks nothing: writes go through and `/status` is fine.
#[tokio::test]
async fn a_ref_lock_left_in_the_cache_blocks_nothing() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let lock = leave_ref_lock(&server, Duration::from_secs(10));
    let response = add_field(&server, &token, "first").await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(has_column(&server, "first").await);
    let response = server.http.get(server.url("/status")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    std::fs::remove_file(&lock).unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_login_flood_is_shed_with_overloaded() {
    let server = TestServer::start_with(|config| {
        config.auth.hashing_concurrency = 1;
        config.auth.hashing_queue = 1;
    })
    .await;
    let logins = (0..16).map(|_| {
        let request = server
            .http
            .post(server.url("/auth/login"))
            .json(&json!({"username": "nobody", "password": "wrong-password"}));
        async move {
            let started = std::time::Instant::now();
            let response = request.send().await.unwrap();
            (response, started.elapsed())
        }
    });
    let mut overloaded = 0;
    for (response, elapsed) in futures_util::future::join_all(logins).await {
        match response.status().as_u16() {
            401 => {}
            503 => {
                // Paced: a client that retries at once cannot spin the service on refusals.
                assert!(
                    elapsed >= hf_server::middleware::LOGIN_REFUSAL_PACE,
                    "refused after {elapsed:?}"
                );
                assert_eq!(response.headers()["retry-after"], "1");
                assert_envelope(response, 503, "OVERLOADED").await;
                overloaded += 1;
            }
            other => panic!("unexpected {other}: {}", response.text().await.unwrap()),
        }
    }
    assert!(overloaded > 0, "some logins were shed");
    // Afterwards logins work as before.
    let password = server.admin_password.clone().unwrap();
    server.login(&server.admin_name, &password).await;
    server.stop().await;
}

/// A login takes its place among those the password checks can run and queue only once its
/// body is read: logins whose bodies never arrive hold no place, and others still log in.
#[tokio::test]
async fn logins_with_slow_bodies_hold_no_place_in_the_password_checks() {
    use tokio::io::AsyncWriteExt;
    let server = TestServer::start_with(|config| {
        config.auth.hashing_concurrency = 1;
        config.auth.hashing_queue = 1;
    })
    .await;
    let address = server.base_url.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /auth/login HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    // Let the service take up the heads (and, were it wrong, the places).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let password = server.admin_password.clone().unwrap();
    server.login(&server.admin_name, &password).await;
    drop(slow);
    server.stop().await;
}

/// A write whose connection is cut while its `COMMIT` runs cannot know whether it committed:
/// it answers 503 `COMMIT_OUTCOME_UNKNOWN`, telling the client to read before it retries,
/// rather than a plain `DATABASE_UNAVAILABLE` (which promises nothing was written).
#[tokio::test]
async fn a_connection_cut_during_commit_answers_commit_outcome_unknown() {
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    // A deferred constraint trigger runs inside `COMMIT`; this one sleeps there, so the test
    // can terminate the backend while the commit is in flight.
    let admin = server.db.client().await;
    admin
        .batch_execute(
            "CREATE FUNCTION public.hf_test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS \
               $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$; \
             CREATE CONSTRAINT TRIGGER hf_test_slow_commit AFTER INSERT ON crm.account \
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
               EXECUTE FUNCTION public.hf_test_slow_commit()",
        )
        .await
        .unwrap();
    // The client names its create, so that it can send it again safely.
    let key = "a0c4e1b2-commit-or-not";
    let create = || {
        server
            .http
            .post(server.url("/data/crm/account"))
            .bearer_auth(&token)
            .header("Idempotency-Key", key)
            .json(&json!({"name": "Committed or not"}))
    };
    let write = tokio::spawn({
        let request = create();
        async move { request.send().await.unwrap() }
    });
    let mut terminated = false;
    for _ in 0..500 {
        let row = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                  WHERE datname = current_database() AND wait_event = 'PgSleep' \
                    AND query = 'COMMIT'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            terminated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(terminated, "the write's backend was found committing");
    let response = write.await.unwrap();
    let retry_after = response.headers().get("retry-after").cloned();
    let envelope = assert_envelope(response, 503, "COMMIT_OUTCOME_UNKNOWN").await;
    assert_eq!(retry_after.unwrap(), "1");
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("Read the data again"), "{message}");
    assert!(
        !message.contains("terminating"),
        "no driver text: {message}"
    );

    // Here the server rolled the transaction back: reading shows no such record.
    let stored = || async {
        let row = admin
            .query_one(
                "SELECT count(*) FROM crm.account WHERE name = 'Committed or not'",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    assert_eq!(stored().await, 0);

    // The service is normal afterwards.
    admin
        .batch_execute("DROP TRIGGER hf_test_slow_commit ON crm.account")
        .await
        .unwrap();
    let response = server
        .http
        .post(server.url("/data/crm/account"))
        .bearer_auth(&token)
        .json(&json!({"name": "After the cut"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());

    // The client sends its create again with the same key: the key went with the rolled-back
    // record, so this one creates it; sent once more, it is answered with that record.
    let response = create().send().await.unwrap();
    assert_eq!(response.status(), 201);
    assert!(!response.headers().contains_key("idempotent-replayed"));
    let made: Value = response.json().await.unwrap();
    let response = create().send().await.unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    let replayed: Value = response.json().await.unwrap();
    assert_eq!(replayed, made);
    assert_eq!(stored().await, 1, "one record for the key");
    server.stop().await;
}
