//! The principal cache answers from memory, yet sees every committed change to `hf.principals`
//! made by anyone (another instance, psql), including changes made while its listening
//! connection was down.
//!
//! The principals here are rows only: the cache reads `hf.principals` and never the roles, so no
//! cluster-wide role is created.

use std::future::Future;
use std::time::{Duration, Instant};

use hf_storage::auth::{
    Acknowledgements, Principal, PrincipalBarrier, PrincipalCache, BARRIER_SETUP_TIMEOUT,
    LISTENER_NAME_PREFIX, LOOKUP_SILENCE,
};
use hf_storage::ErrorKind;
use hf_testkit::{StoppedBackend, TestDb};
use tokio_postgres::Client;

/// How long a change may take to reach the cache before the test fails; in practice a few
/// milliseconds.
const DEADLINE: Duration = Duration::from_secs(10);

async fn prepared_db() -> (TestDb, Client) {
    let db = TestDb::new().await;
    let mut client = db.client().await;
    hf_storage::migrate(&mut client).await.unwrap();
    (db, client)
}

/// Inserts a principal row and returns its `sub`.
async fn insert_principal(client: &Client, name: &str) -> String {
    client
        .query_one(
            "INSERT INTO hf.principals (name) VALUES ($1) RETURNING sub",
            &[&name],
        )
        .await
        .unwrap()
        .get(0)
}

/// Polls `check` until it holds; fails the test after [`DEADLINE`]. Returns how long it took.
async fn eventually<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < DEADLINE,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

async fn find(cache: &PrincipalCache, sub: &str) -> Option<Principal> {
    cache.find_by_sub(sub).await.unwrap()
}

/// A change made with the announcing trigger switched off, which the cache cannot hear of.
async fn silently(client: &Client, statement: &str) {
    client
        .batch_execute(&format!(
            "ALTER TABLE hf.principals DISABLE TRIGGER principals_announce_row;
             {statement};
             ALTER TABLE hf.principals ENABLE TRIGGER principals_announce_row;"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn answers_from_memory_and_forgets_what_others_change() {
    let (db, client) = prepared_db().await;
    let sub = insert_principal(&client, "alice").await;
    let cache = PrincipalCache::new(db.pool(), db.url()).unwrap();

    assert_eq!(find(&cache, &sub).await.unwrap().name, "alice");
    eventually("the cache listens", || async { cache.is_listening() }).await;
    assert!(!find(&cache, &sub).await.unwrap().is_admin);

    // Proof that it answers from memory: a change nobody announces is not seen.
    silently(&client, "UPDATE hf.principals SET is_admin = true").await;
    assert!(!find(&cache, &sub).await.unwrap().is_admin, "cached");
    silently(&client, "UPDATE hf.principals SET is_admin = false").await;

    // Announced changes, made on another connection as another instance or psql would.
    client
        .execute(
            "UPDATE hf.principals SET is_admin = true WHERE sub = $1",
            &[&sub],
        )
        .await
        .unwrap();
    let took = eventually("the promotion is seen", || async {
        find(&cache, &sub).await.is_some_and(|p| p.is_admin)
    })
    .await;
    eprintln!("promotion seen after {took:?}");
    client
        .execute("DELETE FROM hf.principals WHERE sub = $1", &[&sub])
        .await
        .unwrap();
    let took = eventually("the deletion is seen", || async {
        find(&cache, &sub).await.is_none()
    })
    .await;
    eprintln!("deletion seen after {took:?}");

    // TRUNCATE forgets everyone.
    let bob = insert_principal(&client, "bob").await;
    assert!(find(&cache, &bob).await.is_some());
    assert!(find(&cache, &bob).await.is_some());
    client
        .batch_execute("TRUNCATE hf.principals CASCADE")
        .await
        .unwrap();
    eventually("the truncation is seen", || async {
        find(&cache, &bob).await.is_none()
    })
    .await;
}

#[tokio::test]
async fn forget_takes_effect_before_any_notification() {
    let (db, client) = prepared_db().await;
    let sub = insert_principal(&client, "carol").await;
    let cache = PrincipalCache::new(db.pool(), db.url()).unwrap();
    find(&cache, &sub).await;
    eventually("the cache listens", || async { cache.is_listening() }).await;
    find(&cache, &sub).await;
    silently(&client, "DELETE FROM hf.principals").await;
    assert!(find(&cache, &sub).await.is_some(), "cached");
    cache.forget(&sub);
    assert!(find(&cache, &sub).await.is_none());
}

/// Notifications sent while the listening connection is down are lost; the cache must not
/// keep trusting what it held before. Here the listener is killed, and a change is made that
/// is never announced: the cache must still see it, because it empties itself when the
/// connection drops and again when it listens anew.
#[tokio::test]
async fn a_lost_listener_cannot_leave_stale_entries() {
    let (db, client) = prepared_db().await;
    let sub = insert_principal(&client, "dave").await;
    let cache = PrincipalCache::new(db.pool(), db.url()).unwrap();
    find(&cache, &sub).await;
    eventually("the cache listens", || async { cache.is_listening() }).await;
    find(&cache, &sub).await;

    let killed = client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE starts_with(application_name, $1) AND datname = current_database()",
            &[&LISTENER_NAME_PREFIX],
        )
        .await
        .unwrap();
    assert_eq!(killed, 1, "one listening connection");
    silently(&client, "UPDATE hf.principals SET is_admin = true").await;
    eventually("the unannounced change is seen", || async {
        find(&cache, &sub).await.is_some_and(|p| p.is_admin)
    })
    .await;
    eventually("the cache listens again", || async { cache.is_listening() }).await;
    assert!(
        find(&cache, &sub).await.unwrap().is_admin,
        "nothing from before the connection dropped is trusted once it listens again"
    );

    // And once listening again, announced changes arrive as before.
    client
        .execute("DELETE FROM hf.principals WHERE sub = $1", &[&sub])
        .await
        .unwrap();
    eventually("the deletion is seen", || async {
        find(&cache, &sub).await.is_none()
    })
    .await;
}

/// A barrier returns only once every listening instance has processed every change committed
/// before it, so a change is seen by all of them when the writer answers; an instance that does
/// not listen is not waited for.
#[tokio::test]
async fn a_barrier_waits_until_every_listening_instance_has_seen_the_change() {
    let (db, client) = prepared_db().await;
    let barrier = PrincipalBarrier::new(db.url()).unwrap();
    let bound = Duration::from_secs(5);
    assert_eq!(
        barrier.wait(bound).await.unwrap(),
        Acknowledgements {
            acknowledged: 0,
            missing: Vec::new()
        },
        "nobody listens yet"
    );

    let sub = insert_principal(&client, "erin").await;
    let caches = [
        PrincipalCache::new(db.pool(), db.url()).unwrap(),
        PrincipalCache::new(db.pool(), db.url()).unwrap(),
    ];
    for cache in &caches {
        find(cache, &sub).await;
        eventually("the cache listens", || async { cache.is_listening() }).await;
        eventually("the cache is a member", || async {
            client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE application_name = $1 AND datname = current_database()",
                    &[&format!("{LISTENER_NAME_PREFIX}{}", cache.instance_id())],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 1
        })
        .await;
        assert!(find(cache, &sub).await.is_some());
    }
    for round in 0..20 {
        client
            .execute(
                "UPDATE hf.principals SET is_admin = $2 WHERE sub = $1",
                &[&sub, &(round % 2 == 0)],
            )
            .await
            .unwrap();
        let answer = barrier.wait(bound).await.unwrap();
        assert_eq!(answer.acknowledged, 2, "{answer:?}");
        assert!(answer.missing.is_empty(), "{answer:?}");
        for cache in &caches {
            assert_eq!(
                find(cache, &sub).await.unwrap().is_admin,
                round % 2 == 0,
                "round {round}: a change committed before the barrier is seen by every instance"
            );
        }
    }
}

/// A database that stops answering on the connection the lookups share (a frozen host keeps it
/// open) fails a lookup once it has been silent for [`LOOKUP_SILENCE`], instead of holding every
/// authenticated request for ever; the next lookup takes a new connection.
#[tokio::test]
async fn a_lookup_the_database_stops_answering_fails_in_time_and_the_next_is_served() {
    let (db, client) = prepared_db().await;
    let cache = PrincipalCache::new(db.pool(), db.url()).unwrap();
    // Nobody has this `sub`, so no answer is cached and every lookup asks the database.
    let absent = uuid::Uuid::new_v4().to_string();
    assert!(find(&cache, &absent).await.is_none());
    let lookup_backend: i32 = client
        .query_one(
            "SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()
                AND query LIKE 'SELECT id, name, sub, is_admin, created_at FROM hf.principals%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let stopped = StoppedBackend::stop(lookup_backend);

    let started = Instant::now();
    let error = cache.find_by_sub(&absent).await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(
        waited >= LOOKUP_SILENCE && waited < LOOKUP_SILENCE + Duration::from_secs(3),
        "failed after {waited:?}"
    );

    let next = tokio::time::timeout(Duration::from_secs(5), cache.find_by_sub(&absent))
        .await
        .expect("the next lookup is answered while the old backend is still stopped");
    assert!(next.unwrap().is_none());
    drop(stopped);
}

/// A barrier whose database accepts the connection and then says nothing (a frozen host) gives
/// up once the wait and [`BARRIER_SETUP_TIMEOUT`] have passed, so the change that sent it is
/// still answered.
#[tokio::test]
async fn a_barrier_the_database_never_answers_gives_up_in_time() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let barrier =
        PrincipalBarrier::new(&format!("postgres://postgres@127.0.0.1:{port}/hf")).unwrap();
    let bound = Duration::from_secs(1);

    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(15), barrier.wait(bound))
        .await
        .expect("the barrier ends by itself");
    let waited = started.elapsed();

    let error = answer.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(
        waited >= bound + BARRIER_SETUP_TIMEOUT
            && waited < bound + BARRIER_SETUP_TIMEOUT + Duration::from_secs(2),
        "gave up after {waited:?}"
    );
    drop(silent);
}
