//! An exhausted pool answers "busy" after its wait timeout instead of hanging; an unreachable
//! server is "unavailable"; a login connection whose backend stopped answering is not lent; a
//! connection the network stops carrying fails in bounded time.

use std::time::{Duration, Instant};

use hf_storage::{ErrorKind, PoolSettings, KEEPALIVE_IDLE, UNACKNOWLEDGED_LIMIT};
use hf_testkit::{NetworkPath, TestDb};

#[tokio::test]
async fn exhausted_pool_times_out_as_busy() {
    let db = TestDb::new().await;
    let settings = PoolSettings {
        max_size: 1,
        wait_timeout: Duration::from_millis(300),
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(db.url(), &settings).unwrap();
    let held = pool.get().await.unwrap();
    let started = Instant::now();
    let error = pool.get().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Busy);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "waited {:?}",
        started.elapsed()
    );
    drop(held);
    assert!(
        pool.get().await.is_ok(),
        "the pool recovers once a connection is returned"
    );
}

/// Each shard of the data pool opens its own connections, within its share of `max_size`, and
/// the status counts them all.
#[tokio::test]
async fn data_shards_share_the_pool_size_and_open_their_own_connections() {
    let db = TestDb::new().await;
    let settings = PoolSettings {
        max_size: 4,
        data_shards: 2,
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(db.url(), &settings).unwrap();
    assert_eq!(pool.status().max_size, 4 + 2 + 2);
    let caller = hf_storage::run_as::Caller::reader("postgres");
    let step = hf_storage::run_as::Step {
        sql: "SELECT 1",
        params: &[],
        fixed: &[],
    };
    for shard in [0, 1, 2, 3] {
        hf_storage::run_as::run_as(&pool.for_shard(shard), &caller, &[step])
            .await
            .unwrap()
            .into_rows()
            .unwrap();
    }
    // Shards 2 and 3 are shards 0 and 1 again: two data connections, none for logins yet.
    assert_eq!(pool.status().size, 2);
}

/// A login connection whose backend stopped answering (a hung server looks so: the connection
/// stays open) is checked when it is next lent, dropped once the check outlasts the recycle
/// timeout, and replaced: the service's own statements, whose statement timeout a hung server
/// does not enforce, never go out on it.
#[tokio::test]
async fn a_login_connection_whose_backend_stopped_is_not_lent_again() {
    let db = TestDb::new().await;
    let settings = PoolSettings {
        max_size: 1,
        recycle_timeout: Duration::from_millis(500),
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(db.url(), &settings).unwrap();
    let first = hf_testkit::backend_pid(&pool.get().await.unwrap()).await;
    let stopped = hf_testkit::StoppedBackend::stop(first);

    let started = Instant::now();
    let client = pool.get().await.unwrap();
    let lent = started.elapsed();
    let second = tokio::time::timeout(Duration::from_secs(5), hf_testkit::backend_pid(&client))
        .await
        .expect("the connection lent answers");
    assert_ne!(
        second, first,
        "the stopped backend's connection was lent again"
    );
    assert!(
        lent >= Duration::from_millis(500) && lent < Duration::from_secs(3),
        "lent after {lent:?}"
    );
    drop(stopped);
}

/// When the backends of several idle login connections stopped answering (a hung server looks
/// so, as does a partition), a request waits for one check, not for one per idle connection:
/// once a check failed, the other idle connections are dropped unchecked and a new one is lent.
#[tokio::test]
async fn idle_login_connections_whose_backends_stopped_cost_one_check() {
    let db = TestDb::new().await;
    let check = Duration::from_secs(1);
    let settings = PoolSettings {
        recycle_timeout: check,
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(db.url(), &settings).unwrap();
    // Six connections opened at once, then given back idle.
    let opened = tokio::join!(
        pool.get(),
        pool.get(),
        pool.get(),
        pool.get(),
        pool.get(),
        pool.get()
    );
    let mut idle = Vec::new();
    for client in [opened.0, opened.1, opened.2, opened.3, opened.4, opened.5] {
        idle.push(hf_testkit::backend_pid(&client.unwrap()).await);
    }
    let stopped: Vec<_> = idle
        .iter()
        .map(|&pid| hf_testkit::StoppedBackend::stop(pid))
        .collect();

    let started = Instant::now();
    let client = pool.get().await.unwrap();
    let lent = started.elapsed();
    let pid = tokio::time::timeout(Duration::from_secs(5), hf_testkit::backend_pid(&client))
        .await
        .expect("the connection lent answers");
    assert!(
        !idle.contains(&pid),
        "a stopped backend's connection was lent"
    );
    // Checking each idle connection in turn would take six checks; one check and a new
    // connection take a little over one, which leaves room for a loaded machine.
    assert!(lent >= check && lent < check * 3, "lent after {lent:?}");
    drop(stopped);
}

#[tokio::test]
async fn unreachable_server_is_unavailable_quickly() {
    let settings = PoolSettings {
        create_timeout: Duration::from_secs(2),
        ..PoolSettings::default()
    };
    // A port nothing listens on.
    let pool = hf_storage::connect("postgres://postgres@127.0.0.1:9/postgres", &settings).unwrap();
    let error = pool.get().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
}

#[tokio::test]
async fn sqlstates_map_to_kinds() {
    let db = TestDb::new().await;
    let client = db.client().await;
    client
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY, v int CHECK (v > 0))")
        .await
        .unwrap();
    client
        .execute("INSERT INTO t VALUES (1, 1)", &[])
        .await
        .unwrap();
    let kind = |e: tokio_postgres::Error| hf_storage::Error::from(e).kind();
    let duplicate = client
        .execute("INSERT INTO t VALUES (1, 1)", &[])
        .await
        .unwrap_err();
    assert_eq!(kind(duplicate), ErrorKind::UniqueViolation);
    let check = client
        .execute("INSERT INTO t VALUES (2, -1)", &[])
        .await
        .unwrap_err();
    assert_eq!(kind(check), ErrorKind::InvalidValue);
    let timeout = client
        .batch_execute("SET statement_timeout = '50ms'; SELECT pg_sleep(1)")
        .await
        .unwrap_err();
    assert_eq!(kind(timeout), ErrorKind::Timeout);
}

/// A statement on a connection the network stopped carrying (a partition, a host gone) fails
/// once TCP gives the connection up, whether the statement went out into the cut network (its
/// data stays unacknowledged: [`UNACKNOWLEDGED_LIMIT`]) or went out before and waits for an
/// answer that cannot come (the connection is idle to TCP: [`KEEPALIVE_IDLE`] until the first
/// probe, then the same limit), instead of waiting for TCP's own retries (about 15 minutes) or
/// for ever. Either way the connection is then closed, and the pool opens another once the
/// network carries again.
#[tokio::test]
async fn a_connection_the_network_stops_carrying_fails_in_bounded_time() {
    let db = TestDb::new().await;
    let path = NetworkPath::to(db.url());
    let pool = hf_storage::connect(path.url(), &PoolSettings::default()).unwrap();
    let sending = pool.get().await.unwrap();
    let waiting = pool.get().await.unwrap();
    sending.simple_query("SELECT 1").await.unwrap();

    let started = Instant::now();
    let answer = waiting.simple_query("SELECT pg_sleep(0.5)");
    let cut_and_send = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        path.cut();
        sending.simple_query("SELECT 1").await
    };
    let (answer, sent) = tokio::join!(
        async {
            let result = answer.await;
            (result, started.elapsed())
        },
        async {
            let result = cut_and_send.await;
            (result, started.elapsed())
        },
    );
    let margin = Duration::from_secs(5);
    let (result, took) = sent;
    assert!(result.is_err(), "a statement sent into the cut network");
    assert!(
        took < UNACKNOWLEDGED_LIMIT + margin,
        "sending failed after {took:?}"
    );
    let (result, took) = answer;
    assert!(result.is_err(), "a statement whose answer was cut off");
    assert!(
        took < KEEPALIVE_IDLE + UNACKNOWLEDGED_LIMIT + margin,
        "waiting failed after {took:?}"
    );
    assert!(sending.is_closed() && waiting.is_closed());

    path.restore();
    drop((sending, waiting));
    let client = pool.get().await.unwrap();
    client.simple_query("SELECT 1").await.unwrap();
}

/// The service's own statements (on login connections) wait for a lock and run no longer than
/// their bounds; a caller's data connection is left to its own statement timeout.
#[tokio::test]
async fn service_statements_wait_for_a_held_lock_only_briefly() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let client = pool.get().await.unwrap();
    let setting = |name: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one("SELECT current_setting($1)", &[&name])
                .await
                .unwrap();
            row.get::<_, String>(0)
        }
    };
    let seconds = |limit: Duration| format!("{}s", limit.as_secs());
    assert_eq!(
        setting("lock_timeout").await,
        seconds(hf_storage::SERVICE_LOCK_TIMEOUT)
    );
    assert_eq!(
        setting("statement_timeout").await,
        seconds(hf_storage::SERVICE_STATEMENT_TIMEOUT)
    );

    let mut holder = db.client().await;
    holder
        .batch_execute("CREATE TABLE held (id int)")
        .await
        .unwrap();
    let holding = holder.transaction().await.unwrap();
    holding
        .batch_execute("LOCK TABLE held IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let started = Instant::now();
    let error = client
        .query("SELECT 1 FROM public.held", &[])
        .await
        .map_err(hf_storage::Error::from)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    let waited = started.elapsed();
    assert!(
        waited >= hf_storage::SERVICE_LOCK_TIMEOUT
            && waited < hf_storage::SERVICE_LOCK_TIMEOUT + Duration::from_secs(3),
        "{waited:?}"
    );
    holding.rollback().await.unwrap();

    let caller = hf_storage::run_as::Caller::reader("postgres");
    let step = hf_storage::run_as::Step {
        sql: "SELECT current_setting('lock_timeout')",
        params: &[],
        fixed: &[],
    };
    let rows = hf_storage::run_as::run_as(&pool, &caller, &[step])
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    assert_eq!(
        rows[0][0].get::<_, String>(0),
        "0",
        "data connections keep the default"
    );

    // The URL's own options stand.
    let url = format!(
        "{}{}options=-c%20lock_timeout%3D1s",
        db.url(),
        if db.url().contains('?') { '&' } else { '?' }
    );
    let pool = hf_storage::connect(&url, &PoolSettings::default()).unwrap();
    let client = pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        (
            "1s".to_owned(),
            seconds(hf_storage::SERVICE_STATEMENT_TIMEOUT)
        )
    );
}

/// A statement for a caller's data connection that needs nothing of the database.
const SELECT_ONE: hf_storage::run_as::Step<'static> = hf_storage::run_as::Step {
    sql: "SELECT 1",
    params: &[],
    fixed: &[],
};

/// While no connection to the database can be made (its host froze, or the network drops
/// connection attempts silently), each attempt waits for the create timeout. Once one has
/// failed so, one request at a time tries again and the others that need a new connection are
/// refused at once, login and data connections alike; the first attempt that succeeds after
/// the database is back opens the pool to everyone again.
#[tokio::test]
async fn while_no_connection_can_be_made_one_request_tries_and_the_rest_are_refused_at_once() {
    let db = TestDb::new().await;
    let path = NetworkPath::to(db.url());
    let create = Duration::from_secs(1);
    let settings = PoolSettings {
        create_timeout: create,
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(path.url(), &settings).unwrap();
    let caller = hf_storage::run_as::Caller::reader("postgres");
    let read = || hf_storage::run_as::run_as(&pool, &caller, &[SELECT_ONE]);
    path.hang();

    let started = Instant::now();
    let error = pool.get().await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(started.elapsed() >= create, "{:?}", started.elapsed());

    // One tries (and waits); the others are refused at once.
    let trying = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..8 {
        let started = Instant::now();
        let error = pool.get().await.unwrap_err();
        assert!(
            matches!(error, hf_storage::Error::Unreachable { .. }),
            "{error}"
        );
        let error = read().await.unwrap_err();
        assert!(
            matches!(error, hf_storage::Error::Unreachable { .. }),
            "{error}"
        );
        assert_eq!(error.kind(), ErrorKind::Unavailable);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "refused after {:?}",
            started.elapsed()
        );
    }
    let error = trying.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");

    path.restore();
    // The next request tries, connects, and opens the pool again.
    drop(pool.get().await.unwrap());
    let (first, second) = tokio::join!(read(), read());
    first.unwrap();
    second.unwrap();
}

/// A connection given up for its silence (the database stopped answering on it) closes the
/// gate too: the requests after it are refused at once while one tries (principal checks,
/// which otherwise share a connection of their own, included), and that one's idle connection
/// is checked before it is lent (dead, so a new one is tried). Once the database answers
/// again, the next request opens the pool.
#[tokio::test]
async fn a_connection_given_up_for_its_silence_closes_the_pools_to_all_but_one_request() {
    let db = TestDb::new().await;
    let path = NetworkPath::to(db.url());
    let settings = PoolSettings {
        create_timeout: Duration::from_secs(1),
        recycle_timeout: Duration::from_millis(500),
        ..PoolSettings::default()
    };
    let pool = hf_storage::connect(path.url(), &settings).unwrap();
    let caller = hf_storage::run_as::Caller {
        timeout: Duration::from_millis(300),
        ..hf_storage::run_as::Caller::reader("postgres")
    };
    let read = || hf_storage::run_as::run_as(&pool, &caller, &[SELECT_ONE]);
    // Two data connections open and idle, and the principal checks' shared connection.
    hf_storage::migrate(&mut db.pool().get().await.unwrap())
        .await
        .unwrap();
    let (first, second) = tokio::join!(read(), read());
    first.unwrap();
    second.unwrap();
    let principals = hf_storage::auth::PrincipalCache::new(pool.clone(), path.url()).unwrap();
    assert!(principals.find_by_sub("nobody").await.unwrap().is_none());
    path.hang();

    let error = read().await.unwrap_err();
    assert!(
        matches!(error, hf_storage::Error::NoAnswer { .. }),
        "{error}"
    );
    let trying = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let error = read().await.unwrap_err();
    assert!(
        matches!(error, hf_storage::Error::Unreachable { .. }),
        "{error}"
    );
    // Record reads, which otherwise share the connections of their caller's reads in flight,
    // and the principal checks, which otherwise share a connection of their own, go to the gate.
    let error = hf_storage::run_as::read_record(&pool, &caller, &SELECT_ONE)
        .await
        .unwrap_err();
    assert!(
        matches!(error, hf_storage::Error::Unreachable { .. }),
        "{error}"
    );
    let error = principals.find_by_sub("nobody").await.unwrap_err();
    assert!(
        matches!(error, hf_storage::Error::Unreachable { .. }),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    let error = trying.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");

    path.restore();
    read().await.unwrap();
    let (first, second) = tokio::join!(read(), read());
    first.unwrap();
    second.unwrap();
    assert!(principals.find_by_sub("nobody").await.unwrap().is_none());
}
