//! PostgreSQL store specifics: migrations, version refusal, URL opening.

use countersign::StoreError;
use countersign::store::{open_url, open_url_async};
use countersign_conformance::store_kit::{StoreBackend, admin_pool, postgres_url_from_env};

use super::support::{fresh, postgres, schema_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_database_migrated_by_a_newer_version() {
    let backend = postgres("pgstore");
    let fresh = fresh(&backend, "newer_version").await;
    let schema = schema_of(&fresh.url);
    let admin = admin_pool(&postgres_url_from_env().expect("url"))
        .await
        .expect("admin");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".countersign_schema_version (version) VALUES (99)"
    )))
    .execute(&admin)
    .await
    .expect("pretend a newer Countersign migrated it");
    let Err(error) = backend.reopen(&fresh).await else {
        panic!("a database from a newer version was opened")
    };
    assert!(error.contains("schema version 99 is newer"), "{error}");
    match open_url_async(&fresh.url).await {
        Err(StoreError::Incompatible {
            found: 99,
            supported,
        }) => assert_eq!(supported, countersign::store::postgres::SCHEMA_VERSION),
        Err(other) => panic!("expected Incompatible, got {other}"),
        Ok(_) => panic!("expected Incompatible, the store opened"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_each_migration_once_however_often_it_is_opened() {
    let backend = postgres("pgstore");
    let fresh = fresh(&backend, "reopen").await;
    let mut opens = Vec::new();
    for _ in 0..4 {
        let url = fresh.url.clone();
        opens.push(tokio::spawn(
            async move { open_url_async(&url).await.map(drop) },
        ));
    }
    for open in opens {
        open.await
            .expect("no panic")
            .expect("a concurrent open succeeds");
    }
    let schema = schema_of(&fresh.url);
    let admin = admin_pool(&postgres_url_from_env().expect("url"))
        .await
        .expect("admin");
    let versions: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM \"{schema}\".countersign_schema_version ORDER BY version"
    )))
    .fetch_all(&admin)
    .await
    .expect("versions");
    // Every migration from the first, each recorded once.
    assert_eq!(
        versions,
        (1..=countersign::store::postgres::SCHEMA_VERSION).collect::<Vec<_>>()
    );
}

#[test]
fn sync_open_url_points_postgres_at_the_async_opener() {
    let error = open_url("postgres://root@127.0.0.1:5432/test")
        .err()
        .expect("refused");
    assert!(error.to_string().contains("open_url_async"), "{error}");
}
