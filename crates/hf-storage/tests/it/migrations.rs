//! Migrations apply once, even when several instances start at the same moment.

use std::time::{Duration, Instant};

use hf_testkit::TestDb;

#[tokio::test]
async fn concurrent_starts_apply_each_migration_once() {
    let db = TestDb::new().await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        let url = db.url().to_owned();
        runs.push(tokio::spawn(async move {
            let pool = hf_storage::connect(&url, &Default::default()).unwrap();
            let mut client = pool.get().await.unwrap();
            hf_storage::migrate(&mut client).await.unwrap()
        }));
    }
    let mut applied_total = 0;
    for run in runs {
        applied_total += run.await.unwrap().len();
    }
    assert_eq!(applied_total, hf_storage::MIGRATIONS.len());
    let client = db.client().await;
    let count: i64 = client
        .query_one("SELECT count(*) FROM hf.schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count as usize, hf_storage::MIGRATIONS.len());
}

#[tokio::test]
async fn a_newer_database_is_refused() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut client = pool.get().await.unwrap();
    hf_storage::migrate(&mut client).await.unwrap();
    client
        .execute(
            "INSERT INTO hf.schema_migrations (version, name) VALUES (9999, 'future')",
            &[],
        )
        .await
        .unwrap();
    let error = hf_storage::migrate(&mut client).await.unwrap_err();
    assert!(error.to_string().contains("9999"), "{error}");
}

/// A migration that alters a table waits for its lock behind a long reader (a backup, say), and
/// PostgreSQL queues every later reader of the table behind the migration. It gives way after
/// `MIGRATION_LOCK_WAIT`, so the running service's statements on the table are held up no
/// longer than that, and it applies once the long reader is done.
#[tokio::test]
async fn a_migration_waiting_for_a_lock_holds_up_the_tables_readers_only_briefly() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut migrator = pool.get().await.unwrap();
    hf_storage::migrate(&mut migrator).await.unwrap();
    let next = hf_storage::Migration {
        version: hf_storage::MIGRATIONS.len() as i32 + 1,
        name: "test_alter",
        sql: "ALTER TABLE hf.principals ADD COLUMN test_note text",
    };
    let steps: Vec<_> = hf_storage::MIGRATIONS
        .iter()
        .copied()
        .chain([next])
        .collect();

    let mut backup = db.client().await;
    let long_reader = backup.transaction().await.unwrap();
    long_reader
        .query("SELECT count(*) FROM hf.principals", &[])
        .await
        .unwrap();
    let migrating =
        tokio::spawn(async move { hf_storage::migrate_steps(&mut migrator, &steps).await });

    // Readers arriving while the migration waits and retries each get through within one lock
    // wait (without the bound they would wait for the long reader, here for ever).
    let reader = db.client().await;
    let allowed = hf_storage::MIGRATION_LOCK_WAIT + Duration::from_millis(1500);
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let started = Instant::now();
        let read = tokio::time::timeout(
            allowed * 2,
            reader.query("SELECT count(*) FROM hf.principals", &[]),
        )
        .await;
        assert!(
            matches!(read, Ok(Ok(_))),
            "a reader waited behind the migration: {read:?}"
        );
        assert!(started.elapsed() < allowed, "{:?}", started.elapsed());
    }
    assert!(!migrating.is_finished(), "the migration cannot apply yet");

    long_reader.commit().await.unwrap();
    let applied = tokio::time::timeout(Duration::from_secs(30), migrating)
        .await
        .expect("the migration applies once the long reader is done")
        .unwrap()
        .unwrap();
    assert_eq!(applied, [next.version]);
    reader
        .query("SELECT test_note FROM hf.principals", &[])
        .await
        .unwrap();
}
