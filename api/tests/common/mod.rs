//! Shared helpers of the integration tests: fresh stores of each backend and an
//! in-process app ([`app`]) with keys, driven through `tower::ServiceExt::oneshot`
//! exactly as the server would dispatch.
//!
//! PostgreSQL runs when `WEIR_TEST_DATABASE_URL` is set; each store gets its own
//! schema, dropped by [`TestStore::cleanup`], so runs never collide.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use clap::Parser;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use weir_api::domain::Permission;
use weir_api::store::{PostgresOptions, PostgresStore, SqliteStore, Store};
use weir_api::{AppState, Config, keys};

pub struct TestStore {
    pub store: Arc<dyn Store>,
    dir: Option<tempfile::TempDir>,
    pg_schema: Option<(String, String)>,
}

impl TestStore {
    /// A directory of this store's own for the server's local state (its secret
    /// key): never the working directory.
    pub fn state_dir(&self) -> std::path::PathBuf {
        match &self.dir {
            Some(dir) => dir.path().join("state"),
            None => std::env::temp_dir().join(format!("weir-test-{}", uuid::Uuid::new_v4())),
        }
    }

    /// A second handle on the same database, opened (and migrated) anew.
    pub async fn reopen(&self) -> Arc<dyn Store> {
        match (&self.dir, &self.pg_schema) {
            (Some(dir), _) => Arc::new(
                SqliteStore::open(&dir.path().join("weir.db"))
                    .await
                    .unwrap_or_else(|e| panic!("reopen sqlite: {e}")),
            ),
            (None, Some((url, schema))) => Arc::new(
                PostgresStore::connect(url, Some(schema), PostgresOptions::default())
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
    let store = PostgresStore::connect(&url, Some(&schema), PostgresOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connect postgres: {e}"));
    Some(TestStore {
        store: Arc::new(store),
        dir: None,
        pg_schema: Some((url, schema)),
    })
}

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    config: Config,
}

/// The router over a fresh SQLite store, with three keys: `admin` (every
/// permission) and `reader` (`chatflows:read`) of the `default` workspace, and
/// `stranger` (every permission) of another workspace.
pub struct App {
    pub router: axum::Router,
    pub admin: String,
    pub reader: String,
    pub stranger: String,
    pub store: TestStore,
}

pub async fn app() -> App {
    let store = sqlite().await;
    let s = &*store.store;
    let create = |workspace: &'static str, name: &'static str, perms: Vec<Permission>| async move {
        keys::create(s, workspace, name, perms)
            .await
            .unwrap_or_else(|e| panic!("create key: {e}"))
            .1
    };
    let admin = create("default", "admin", Permission::ALL.to_vec()).await;
    let reader = create("default", "reader", vec![Permission::ChatflowsRead]).await;
    let stranger = create("elsewhere", "x", Permission::ALL.to_vec()).await;
    let mut config = Args::parse_from(["weir"]).config;
    config.data_dir = store.state_dir();
    let state = AppState::new(store.store.clone(), config).unwrap_or_else(|e| panic!("{e}"));
    App {
        router: weir_api::router(state),
        admin,
        reader,
        stranger,
        store,
    }
}

impl App {
    /// One request; the answer's status and JSON body (`Null` when empty).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        key: Option<&str>,
        body: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(k) = key {
            req = req.header(header::AUTHORIZATION, format!("Bearer {k}"));
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Body::from(body.unwrap_or_default().to_owned()))
            .unwrap_or_else(|e| panic!("request: {e}"));
        let resp = self
            .router
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| panic!("dispatch: {e}"));
        let status = resp.status();
        assert!(
            resp.headers().contains_key("x-request-id"),
            "every answer carries a request id"
        );
        let bytes = resp
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("body: {e}"))
            .to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }
}

/// An error answer: the status, and a `{message}` body with a non-empty message.
pub fn assert_error(status: StatusCode, body: &Value, expected: u16) {
    assert_eq!(status.as_u16(), expected, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "error body must be {{message}}: {body}"
    );
}
