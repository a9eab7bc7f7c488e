//! Shared helpers of the integration tests: fresh stores of each backend and an
//! in-process app with a key.
//!
//! PostgreSQL runs when `WEIR_TEST_DATABASE_URL` is set; each store gets its own
//! schema, dropped by [`TestStore::cleanup`], so runs never collide.
#![allow(dead_code)]

use std::sync::Arc;

use weir_api::store::{PostgresStore, SqliteStore, Store};

pub struct TestStore {
    pub store: Arc<dyn Store>,
    dir: Option<tempfile::TempDir>,
    pg_schema: Option<(String, String)>,
}

impl TestStore {
    /// A second handle on the same database, opened (and migrated) anew.
    pub async fn reopen(&self) -> Arc<dyn Store> {
        match (&self.dir, &self.pg_schema) {
            (Some(dir), _) => Arc::new(
                SqliteStore::open(&dir.path().join("weir.db"))
                    .await
                    .unwrap_or_else(|e| panic!("reopen sqlite: {e}")),
            ),
            (None, Some((url, schema))) => Arc::new(
                PostgresStore::connect(url, Some(schema))
                    .await
                    .unwrap_or_else(|e| panic!("reopen postgres: {e}")),
            ),
            (None, None) => panic!("test store has no location"),
        }
    }

    pub async fn cleanup(self) {
        if let Some((url, schema)) = self.pg_schema {
            drop(self.store);
            if let Ok((client, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await;
            }
        }
    }
}

pub async fn sqlite() -> TestStore {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let store = SqliteStore::open(&dir.path().join("weir.db"))
        .await
        .unwrap_or_else(|e| panic!("open sqlite: {e}"));
    TestStore {
        store: Arc::new(store),
        dir: Some(dir),
        pg_schema: None,
    }
}

/// `None` (with a note on stderr) when no test database is configured.
pub async fn postgres() -> Option<TestStore> {
    let Ok(url) = std::env::var("WEIR_TEST_DATABASE_URL") else {
        eprintln!("skipped: WEIR_TEST_DATABASE_URL is not set, PostgreSQL case not run");
        return None;
    };
    let schema = format!("weir_t_{}", uuid::Uuid::new_v4().simple());
    let store = PostgresStore::connect(&url, Some(&schema))
        .await
        .unwrap_or_else(|e| panic!("connect postgres: {e}"));
    Some(TestStore {
        store: Arc::new(store),
        dir: None,
        pg_schema: Some((url, schema)),
    })
}
