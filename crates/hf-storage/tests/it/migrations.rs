//! Migrations apply once, even when several instances start at the same moment.

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
