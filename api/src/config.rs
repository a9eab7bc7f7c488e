//! Configuration of the `weir` binary: one clap struct whose every field can come
//! from a flag or an environment variable (mirrored in `.env.sample`).
//!
//! Values are validated here, at start, so that a wrong value fails with one clear
//! line before anything is opened. The rest of the crate receives typed values only.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Settings shared by every subcommand (`serve`, `migrate`, `keys …`).
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address the API listens on.
    #[arg(long, env = "HOST", default_value = "0.0.0.0", global = true)]
    pub host: IpAddr,

    /// Port the API listens on.
    #[arg(long, env = "PORT", default_value_t = 3000, global = true)]
    pub port: u16,

    /// Directory of the embedded store, the initial API key and other local state.
    #[arg(long, env = "WEIR_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Where the embedded models are (`scripts/fetch-models` fills it); default
    /// `$WEIR_DATA_DIR/models`.
    #[arg(long, env = "WEIR_MODELS_DIR", global = true)]
    pub models_dir: Option<PathBuf>,

    /// `postgres://…` selects PostgreSQL; unset means the SQLite file
    /// `$WEIR_DATA_DIR/weir.db`.
    #[arg(long, env = "DATABASE_URL", value_parser = parse_database_url, global = true)]
    pub database_url: Option<String>,

    /// PostgreSQL schema holding weir's tables (created when absent). Lets several
    /// installations, or test runs, share one database.
    #[arg(long, env = "DATABASE_SCHEMA", value_parser = parse_schema_name, global = true)]
    pub database_schema: Option<String>,

    /// Address of the Python tool runtime.
    #[arg(
        long,
        env = "PYTHON_RUNTIME",
        default_value = "http://127.0.0.1:8000",
        value_parser = parse_http_url,
        global = true
    )]
    pub python_runtime: String,

    /// Key sent to the Python tool runtime (`Authorization: Bearer`); the
    /// runtime's own `PY_TOOL_API_KEY`.
    #[arg(long, env = "PY_TOOL_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub py_tool_api_key: Option<Secret>,

    /// The key credentials are sealed with (AES-256-GCM): 64 hex digits or the base64
    /// of 32 bytes. Unset: `$WEIR_DATA_DIR/secret.key`, generated on first start.
    /// Every replica of one store needs the same key.
    #[arg(long, env = "WEIR_SECRET_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub secret_key: Option<Secret>,

    /// Keys credentials may still be sealed with (a comma list), while rotating: at
    /// start, what they sealed is resealed with `WEIR_SECRET_KEY`.
    #[arg(long, env = "WEIR_SECRET_KEY_PREVIOUS", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub secret_key_previous: Option<Secret>,

    /// The bearer token `GET /metrics` asks for (Prometheus' `authorization`
    /// credentials). Unset: no metrics are served.
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub metrics_token: Option<Secret>,

    /// Server environment variables a workspace's `runtime` variables may read:
    /// comma-separated names, or prefixes ending in `*` (`TOOL_*`); `*` for all
    /// but weir's own secrets. Unset: none (tool code never sees the server's
    /// environment unless you say so).
    #[arg(long, env = "RUNTIME_VARIABLES", default_value = "", global = true)]
    pub runtime_variables: String,

    /// Non-public addresses the request tools may reach: `true` for all, or a
    /// comma-separated list of addresses and CIDR networks. Unset: none (no SSRF
    /// through a public chatflow).
    #[arg(long, env = "ALLOW_PRIVATE_REQUESTS", default_value = "",
          value_parser = parse_address_policy, global = true)]
    pub allow_private_requests: crate::netguard::AddressPolicy,

    /// Log line format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Log level or filter directive (`info`, `debug`, `weir_api=debug,tower_http=info`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info", value_parser = parse_log_level, global = true)]
    pub log_level: String,

    /// Connections open at once; more wait in the kernel's backlog. Never more than the
    /// open-file limit leaves room for.
    #[arg(
        long,
        env = "WEIR_MAX_CONNECTIONS",
        default_value_t = 10_000,
        global = true
    )]
    pub max_connections: usize,

    /// Seconds a client has to send a request's headers (the first on a connection or
    /// the next on a kept-alive one) before the connection is closed.
    #[arg(
        long,
        env = "WEIR_HEADER_TIMEOUT_SECS",
        default_value_t = 10,
        global = true
    )]
    pub header_timeout_secs: u64,

    /// Seconds a request's body may take to arrive after its headers; a slower one is
    /// answered 408 and its connection closed.
    #[arg(
        long,
        env = "WEIR_BODY_TIMEOUT_SECS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..=3600),
        global = true
    )]
    pub body_timeout_secs: u64,

    /// Seconds in-flight requests get to finish after SIGTERM/Ctrl-C.
    #[arg(long, env = "SHUTDOWN_GRACE_SECS", default_value_t = 30, global = true)]
    pub shutdown_grace_secs: u64,

    /// Origins whose pages may call the API from a browser (Flowise's name): a comma
    /// list of origins, or `*` for any (the origin is then reflected, never with
    /// credentials). Empty: no cross-origin access.
    #[arg(long, env = "CORS_ORIGINS", default_value = "*", global = true)]
    pub cors_origins: String,

    /// Origins whose pages may frame weir's responses (Flowise's name), sent as the
    /// `frame-ancestors` of a `Content-Security-Policy` header: a space or comma list, or
    /// `*`.
    #[arg(long, env = "IFRAME_ORIGINS", default_value = "*", global = true)]
    pub iframe_origins: String,

    /// Serve HTML, SVG and XML artifacts inline (still under `Content-Security-Policy:
    /// sandbox`) instead of as downloads.
    #[arg(
        long,
        env = "ARTIFACTS_INLINE_HTML",
        default_value_t = false,
        global = true
    )]
    pub artifacts_inline_html: bool,

    /// Trust `X-Forwarded-For` to name the client (only behind a proxy you run).
    #[arg(long, env = "TRUST_PROXY", default_value_t = false, global = true)]
    pub trust_proxy: bool,

    /// The address clients reach this server at (`https://weir.example.com`):
    /// webhook URLs in answers and the URL registered with Telegram.
    #[arg(long, env = "PUBLIC_URL", value_parser = parse_http_url, global = true)]
    pub public_url: Option<String>,

    /// Base URL of the Telegram Bot API.
    #[arg(
        long,
        env = "TELEGRAM_API_URL",
        default_value = "https://api.telegram.org",
        value_parser = parse_http_url,
        global = true
    )]
    pub telegram_api_url: String,

    /// SMTP relay for failure e-mail: `smtp://host:25`, `smtps://user:pass@host`
    /// (TLS), `smtp://user:pass@host:587?tls=required` (STARTTLS).
    #[arg(long, env = "SMTP_URL", value_parser = parse_smtp_url, global = true)]
    pub smtp_url: Option<String>,

    /// Sender address of failure e-mail.
    #[arg(
        long,
        env = "SMTP_FROM",
        default_value = "weir <weir@localhost>",
        global = true
    )]
    pub smtp_from: String,

    /// Results kept per trigger (older ones are pruned as new ones arrive).
    #[arg(long, env = "TRIGGER_RESULTS_KEEP", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub trigger_results_keep: u32,

    /// Days a trigger result is kept.
    #[arg(long, env = "TRIGGER_RESULTS_MAX_AGE_DAYS", default_value_t = 90,
          value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub trigger_results_max_age_days: u32,

    /// Seconds a replica's claim on a running firing lasts without renewal; a
    /// firing whose replica died is recorded as failed after this long.
    #[arg(long, env = "TRIGGER_LEASE_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(3..=3600), global = true)]
    pub trigger_lease_secs: u32,

    /// Triggers one workspace may have; creating one more is a 409.
    #[arg(long, env = "WORKSPACE_MAX_TRIGGERS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub workspace_max_triggers: u64,

    /// The shortest time between two firings of one cron trigger, in seconds; a
    /// schedule that fires sooner after a firing is refused (400). 60 allows every
    /// minute, the finest a 5-field expression gives.
    #[arg(long, env = "TRIGGER_MIN_INTERVAL_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(60..=86_400), global = true)]
    pub trigger_min_interval_secs: u64,

    /// Predictions one workspace may have running at once on this server (webhook
    /// and cron firings included); more are answered 429 at once.
    #[arg(long, env = "WORKSPACE_MAX_PREDICTIONS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000), global = true)]
    pub workspace_max_predictions: u64,

    /// Bytes of chat uploads one workspace keeps on this server; a question whose
    /// files would go over is answered 413.
    #[arg(long, env = "WORKSPACE_UPLOAD_QUOTA", default_value_t = 1024 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub workspace_upload_quota: u64,

    /// Days a chat's uploaded files are kept (a sweeper removes older ones hourly).
    #[arg(long, env = "UPLOAD_TTL_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=36_500), global = true)]
    pub upload_ttl_days: u32,

    /// Milliseconds an API key or a chatflow read from the store is reused before
    /// being read again. Changes made on this replica apply at once; this bounds
    /// how long another replica (or `weir keys revoke`) may still see the old one.
    /// 0 turns the cache off.
    #[arg(long, env = "STORE_CACHE_TTL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=60_000), global = true)]
    pub store_cache_ttl_ms: u64,

    /// Largest body of one vector upsert (`POST /api/v1/vector/upsert/:id`), files
    /// included, in bytes.
    #[arg(long, env = "VECTOR_UPSERT_MAX_BYTES", default_value_t = 50 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=4 * 1024 * 1024 * 1024), global = true)]
    pub vector_upsert_max_bytes: u64,

    /// On PostgreSQL, whether the `postgres` vector store node is searched by
    /// pgvector when the database offers it (`auto`: installed if need be,
    /// which needs the right to create extensions) or always in weir's own
    /// index (`off`).
    #[arg(long, env = "PGVECTOR", value_enum, default_value_t = PgvectorMode::Auto, global = true)]
    pub pgvector: PgvectorMode,

    /// Node runs one agentflow run takes at most (its loops included).
    #[arg(long, env = "AGENTFLOW_MAX_NODE_RUNS", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub agentflow_max_node_runs: u32,

    /// Items one iteration node of an agentflow runs its block for at most.
    #[arg(long, env = "AGENTFLOW_MAX_ITERATION_ITEMS", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub agentflow_max_iteration_items: u32,

    /// How deep agentflows may run other flows (`executeFlowAgentflow`) inside each other.
    #[arg(long, env = "AGENTFLOW_MAX_FLOW_DEPTH", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=50), global = true)]
    pub agentflow_max_flow_depth: u32,

    /// Seconds one agentflow run may take in all.
    #[arg(long, env = "AGENTFLOW_TIMEOUT_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub agentflow_timeout_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PgvectorMode {
    Auto,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where the store lives, decided once from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    Postgres { url: String, schema: Option<String> },
}

impl Config {
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("models"))
    }

    pub fn store_cache_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.store_cache_ttl_ms)
    }

    pub fn store_location(&self) -> StoreLocation {
        match &self.database_url {
            Some(url) => StoreLocation::Postgres {
                url: url.clone(),
                schema: self.database_schema.clone(),
            },
            None => StoreLocation::Sqlite(self.data_dir.join("weir.db")),
        }
    }
}

fn parse_database_url(value: &str) -> Result<String, String> {
    if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        value
            .parse::<tokio_postgres::Config>()
            .map_err(|e| format!("not a valid PostgreSQL URL: {e}"))?;
        Ok(value.to_owned())
    } else {
        Err("must start with postgres:// or postgresql:// (leave it unset for SQLite)".into())
    }
}

fn parse_schema_name(value: &str) -> Result<String, String> {
    let valid = !value.is_empty()
        && value.len() <= 63
        && value.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(value.to_owned())
    } else {
        Err("must be 1-63 characters of a-z, 0-9 and _, not starting with a digit".into())
    }
}

fn parse_http_url(value: &str) -> Result<String, String> {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))
        .ok_or("must start with http:// or https://")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("has no host".into());
    }
    Ok(value.trim_end_matches('/').to_owned())
}

/// A value never shown by `Debug` (the configuration may be printed whole).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

fn parse_secret(value: &str) -> Result<Secret, String> {
    Ok(Secret(value.to_owned()))
}

fn parse_address_policy(value: &str) -> Result<crate::netguard::AddressPolicy, String> {
    crate::netguard::AddressPolicy::parse(value)
}

fn parse_smtp_url(value: &str) -> Result<String, String> {
    if value.starts_with("smtp://") || value.starts_with("smtps://") {
        lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::from_url(value)
            .map_err(|e| format!("not a valid SMTP URL: {e}"))?;
        Ok(value.to_owned())
    } else {
        Err("must start with smtp:// or smtps://".into())
    }
}

fn parse_log_level(value: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(value)
        .map_err(|e| format!("not a log level or filter: {e}"))?;
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_must_be_postgres() {
        assert!(parse_database_url("postgres://postgres@127.0.0.1:5432/test").is_ok());
        assert!(parse_database_url("mysql://x").is_err());
        assert!(parse_database_url("sqlite:weir.db").is_err());
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(parse_schema_name("weir_test_1").is_ok());
        for bad in ["", "1abc", "Bad", "a;drop", "a-b", &"x".repeat(64)] {
            assert!(parse_schema_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runtime_url_is_http_and_loses_trailing_slash() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:8000/").as_deref(),
            Ok("http://127.0.0.1:8000")
        );
        assert!(parse_http_url("ftp://x").is_err());
        assert!(parse_http_url("http://").is_err());
    }
}
