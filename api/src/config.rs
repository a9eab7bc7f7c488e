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

    /// Directory of local state: `weir.db` (the embedded SQLite store), `initial-api-key`
    /// (the initial API key), the runtime's venvs and artifacts.
    #[arg(long, env = "WEIR_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Serve Flowise's own UI (the `flowise-ui` build `scripts/fetch-ui` unpacks) at `/`:
    /// `on` or `off`. Off, every path outside `/api` answers a JSON 404 as before.
    #[arg(long, env = "WEIR_UI", default_value = "on", value_parser = parse_switch, global = true)]
    pub ui: bool,

    /// Where the UI is: its build (`build/`) and its node icons (`components/`); default
    /// `$WEIR_DATA_DIR/ui` (`scripts/fetch-ui` fills it).
    #[arg(long, env = "WEIR_UI_DIR", global = true)]
    pub ui_dir: Option<PathBuf>,

    /// Hours a UI sign-in lasts (1–720); the session also ends with its API key.
    #[arg(long, env = "WEIR_UI_SESSION_HOURS", default_value_t = 12,
          value_parser = clap::value_parser!(u64).range(1..=720), global = true)]
    pub ui_session_hours: u64,

    /// Where the embedded models are (`scripts/fetch-models` fills it); default
    /// `$WEIR_DATA_DIR/models`.
    #[arg(long, env = "WEIR_MODELS_DIR", global = true)]
    pub models_dir: Option<PathBuf>,

    /// `postgres://…` selects PostgreSQL (plain TCP, no TLS); unset means the SQLite file
    /// `$WEIR_DATA_DIR/weir.db`.
    #[arg(long, env = "DATABASE_URL", value_parser = parse_database_url, global = true)]
    pub database_url: Option<String>,

    /// PostgreSQL schema holding weir's tables (created when absent). Lets several
    /// installations, or test runs, share one database.
    #[arg(long, env = "DATABASE_SCHEMA", value_parser = parse_schema_name, global = true)]
    pub database_schema: Option<String>,

    /// Address of the Python tool runtime, or several separated by commas: each
    /// workspace is then placed on one of them (rendezvous hashing, the same on every
    /// replica), and moves to its next choice while its own is down. Unreachable at start
    /// is a warning in the log, not a failure; Python tools answer a tool error until one
    /// is up. See Scaling out in docs/deployment.md.
    #[arg(
        long,
        env = "PYTHON_RUNTIME",
        default_value = "http://127.0.0.1:8000",
        value_parser = parse_runtime_list,
        global = true
    )]
    pub python_runtime: String,

    /// Milliseconds between health checks of each Python runtime when `PYTHON_RUNTIME`
    /// names several (100–60,000): how soon a dead one's workspaces move, and move back.
    #[arg(long, env = "PYTHON_RUNTIME_HEALTH_MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(100..=60_000), global = true)]
    pub python_runtime_health_ms: u64,

    /// Key sent to the Python tool runtime (`Authorization: Bearer`); the runtime's own
    /// `PY_TOOL_API_KEY`. Never logged, never passed to tool code.
    #[arg(long, env = "PY_TOOL_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub py_tool_api_key: Option<Secret>,

    /// The key credentials are sealed with (AES-256-GCM): 64 hex digits or the base64 of
    /// 32 bytes (`openssl rand -hex 32`). Unset: `$WEIR_DATA_DIR/secret.key`, generated
    /// on first start (mode 0600); back it up with the data. Every replica of one store
    /// needs the same key: replicas sharing a PostgreSQL store must all be given it. A
    /// malformed key stops the server at start. See Credentials in docs/security.md.
    #[arg(long, env = "WEIR_SECRET_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub secret_key: Option<Secret>,

    /// While rotating: the old key(s) credentials may still be sealed with,
    /// comma-separated. At start every credential sealed by one of them is resealed with
    /// `WEIR_SECRET_KEY` (logged); then the setting can go.
    #[arg(long, env = "WEIR_SECRET_KEY_PREVIOUS", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub secret_key_previous: Option<Secret>,

    /// The bearer token `GET /metrics` asks for (Prometheus' `authorization:
    /// {credentials: …}`). Unset: no metrics are served, `/metrics` answers 404. See
    /// Metrics in docs/api.md.
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub metrics_token: Option<Secret>,

    /// Server environment variables a workspace's `runtime` variables may read:
    /// comma-separated names, or prefixes ending in `*` (`TOOL_*`); `*` for all. weir's
    /// own secrets (`DATABASE_URL`, `DATABASE_SCHEMA`, `PY_TOOL_API_KEY`, `SMTP_URL`,
    /// `WEIR_SECRET_KEY[_PREVIOUS]`, `METRICS_TOKEN`, the providers' API keys) never. Unset: none, runtime
    /// variables read as empty (tool code never sees the server's environment unless you
    /// say so).
    #[arg(long, env = "RUNTIME_VARIABLES", default_value = "", global = true)]
    pub runtime_variables: String,

    /// Non-public addresses the request tools (`requestsGet`, `requestsPost`) may reach:
    /// `true` for all, or a comma-separated list of addresses and CIDR networks
    /// (`10.0.0.0/8,192.168.1.5`). Unset: only public addresses (no SSRF through a public
    /// chatflow).
    #[arg(long, env = "ALLOW_PRIVATE_REQUESTS", default_value = "",
          value_parser = parse_address_policy, global = true)]
    pub allow_private_requests: crate::netguard::AddressPolicy,

    /// Log line format: `text` or `json` (one JSON object per line, on stderr).
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// Log level or filter directive (`info`, `debug`, `weir_api=debug,tower_http=info`).
    /// Every request gets a line (method, path, status, latency, request id) at `debug`;
    /// server errors (500) are logged at `error` with their request id.
    #[arg(long, env = "LOG_LEVEL", default_value = "info", value_parser = parse_log_level, global = true)]
    pub log_level: String,

    /// Connections held open at once; more wait in the kernel's backlog (not as open
    /// files). Lowered at start, with a warning, to what the open-file limit leaves room
    /// for (the limit minus 256).
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

    /// Seconds a request's body may take to arrive after its headers (1–3600); a slower
    /// one is answered 408 and its connection closed. The clock stops at the body's last
    /// byte: a long run after it is never cut.
    #[arg(
        long,
        env = "WEIR_BODY_TIMEOUT_SECS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..=3600),
        global = true
    )]
    pub body_timeout_secs: u64,

    /// Seconds in-flight requests (streams included) get to finish after SIGTERM/Ctrl-C.
    #[arg(long, env = "SHUTDOWN_GRACE_SECS", default_value_t = 30, global = true)]
    pub shutdown_grace_secs: u64,

    /// Origins whose pages may call the API from a browser (Flowise's name and default):
    /// a comma list of origins, `*` for any, empty for none (no cross-origin access). An
    /// allowed origin is reflected with `Vary: Origin` (never `*`, never with
    /// credentials: keys are bearer tokens, not cookies); preflights are answered on
    /// every route; other origins get no CORS header. A chatflow's
    /// `chatbotConfig.allowedOrigins` narrows its predictions further: a browser request
    /// from another site is a 403 "This site is not allowed to access this chatbot"
    /// (requests without `Origin` are not from a site and pass).
    #[arg(long, env = "CORS_ORIGINS", default_value = "*", global = true)]
    pub cors_origins: String,

    /// Origins whose pages may frame weir's responses (Flowise's name and default): a
    /// space or comma list, or `*`. Every response carries `Content-Security-Policy:
    /// frame-ancestors <origins>` (`'none'` when empty).
    #[arg(long, env = "IFRAME_ORIGINS", default_value = "*", global = true)]
    pub iframe_origins: String,

    /// Origins whose pages may call the MCP endpoints (`/api/v1/mcp`,
    /// `/api/v1/mcp/<chatflowId>`): `*`, or a comma list. Empty (the default)
    /// admits no page at all: a request with an `Origin` header is a 403, what
    /// MCP asks of servers against DNS rebinding; MCP clients send none.
    #[arg(long, env = "MCP_CORS_ORIGINS", default_value = "", global = true)]
    pub mcp_cors_origins: String,

    /// Serve HTML, SVG and XML artifacts inline (still under `Content-Security-Policy:
    /// sandbox`) instead of as downloads. See Artifacts under Predictions in docs/api.md.
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

    /// The address clients reach this server at (`https://weir.example.com`): the
    /// `webhookUrl` in trigger answers (else the request's `Host`) and the URL registered
    /// with Telegram (required for Telegram bots).
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

    /// SMTP relay for failure e-mail: `smtp://host:25`, `smtps://user:pass@host` (TLS),
    /// `smtp://user:pass@host:587?tls=required` (STARTTLS). Unset: failure mail stays in
    /// the outbox and the start log says so once.
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

    /// Seconds a replica's claim on a running firing lasts without renewal (renewed every
    /// third of it; 3–3600); a firing whose replica died is recorded as failed after this
    /// long.
    #[arg(long, env = "TRIGGER_LEASE_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(3..=3600), global = true)]
    pub trigger_lease_secs: u32,

    /// Triggers one workspace may have; creating one more is a 409. See docs/triggers.md.
    #[arg(long, env = "WORKSPACE_MAX_TRIGGERS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub workspace_max_triggers: u64,

    /// The shortest time between two firings of one cron trigger, in seconds (60–86,400);
    /// a schedule that fires sooner after a firing is refused (400). 60 allows every
    /// minute, the finest a 5-field expression gives.
    #[arg(long, env = "TRIGGER_MIN_INTERVAL_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(60..=86_400), global = true)]
    pub trigger_min_interval_secs: u64,

    /// Predictions one workspace may have running at once on this server, webhook and
    /// cron firings included (1–1,000,000); more are answered 429 at once, with
    /// `Retry-After: 1`. See Predictions in docs/api.md.
    #[arg(long, env = "WORKSPACE_MAX_PREDICTIONS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000), global = true)]
    pub workspace_max_predictions: u64,

    /// Tokens one workspace's model calls may read and write per day (UTC), as providers
    /// report them; unset (the default) sets no budget and counts nothing. Over it, the
    /// workspace's predictions, webhook calls and cron firings are refused (429 naming the
    /// budget) until midnight UTC. See Token usage in docs/chat.md.
    #[arg(long, env = "WORKSPACE_TOKEN_BUDGET_DAILY",
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub workspace_token_budget_daily: Option<u64>,

    /// Bytes of chat uploads one workspace keeps on this server (default 1 GiB); a
    /// question whose files would go over is answered 413 naming it, and nothing of it is
    /// kept. See Predictions in docs/api.md.
    #[arg(long, env = "WORKSPACE_UPLOAD_QUOTA", default_value_t = 1024 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub workspace_upload_quota: u64,

    /// Days a chat's uploaded files are kept (1–36,500); a sweeper removes older ones at
    /// start and hourly.
    #[arg(long, env = "UPLOAD_TTL_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=36_500), global = true)]
    pub upload_ttl_days: u32,

    /// Milliseconds an API key, a chatflow, a page of chatflows or the trigger a webhook
    /// call is addressed to, read from the store, is reused before being read again (0–60,000; 0 turns the cache off). Changes made
    /// through this process apply at once; this bounds how long another replica, or `weir
    /// keys revoke` run beside a server, may still see the old record. See Caching and
    /// durability in docs/api.md.
    #[arg(long, env = "STORE_CACHE_TTL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=60_000), global = true)]
    pub store_cache_ttl_ms: u64,

    /// PostgreSQL connections each replica keeps (1–1,024). A prediction holds one
    /// only for its statements, never across a model call. Size it to the database
    /// server rather than to weir: on a 16-core machine, 32 connections to a
    /// PostgreSQL on 3 cores ran 3.7 times slower than 16 (BENCHMARKS.md, Scaling).
    #[arg(long, env = "DATABASE_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=1024), global = true)]
    pub database_pool_size: u64,

    /// Largest body of one vector upsert (`POST /api/v1/vector/upsert/:id`), files
    /// included, in bytes (1024 to 4 GiB); larger is a 413 before the body is read.
    #[arg(long, env = "VECTOR_UPSERT_MAX_BYTES", default_value_t = 50 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=4 * 1024 * 1024 * 1024), global = true)]
    pub vector_upsert_max_bytes: u64,

    /// On PostgreSQL, `auto` lets pgvector search the `postgres` vector store node when
    /// the database offers it (installing the extension if need be, which needs the right
    /// to create extensions); `off` keeps every store in weir's own index. See
    /// docs/retrieval.md.
    #[arg(long, env = "PGVECTOR", value_enum, default_value_t = PgvectorMode::Auto, global = true)]
    pub pgvector: PgvectorMode,

    /// Candidates pgvector's HNSW index keeps while searching (`hnsw.ef_search`,
    /// 10–1,000): higher finds more of the true nearest chunks, slower. See pgvector in
    /// docs/retrieval.md.
    #[arg(long, env = "PGVECTOR_EF_SEARCH", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(10..=1000), global = true)]
    pub pgvector_ef_search: u64,

    /// Node runs one agentflow run takes at most, its loops included (1–1,000,000). See
    /// Limits in docs/agentflows.md.
    #[arg(long, env = "AGENTFLOW_MAX_NODE_RUNS", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub agentflow_max_node_runs: u32,

    /// Items one iteration node of an agentflow runs its block for at most (1–1,000,000).
    #[arg(long, env = "AGENTFLOW_MAX_ITERATION_ITEMS", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub agentflow_max_iteration_items: u32,

    /// How deep agentflows may run other flows (`executeFlowAgentflow`) inside each other
    /// (1–50).
    #[arg(long, env = "AGENTFLOW_MAX_FLOW_DEPTH", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=50), global = true)]
    pub agentflow_max_flow_depth: u32,

    /// Seconds one agentflow run may take in all (1–86,400).
    #[arg(long, env = "AGENTFLOW_TIMEOUT_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub agentflow_timeout_secs: u64,

    /// Milliseconds one run of JavaScript (a custom function node or a
    /// JavaScript custom tool) may take in the Python runtime's sandbox
    /// (100–3,600,000; Flowise's name; its default is 300,000).
    #[arg(long, env = "SANDBOX_TIMEOUT", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000), global = true)]
    pub sandbox_timeout_ms: u64,

    /// The directory `sqlDatabaseChain` nodes may open SQLite databases from (read
    /// only; a path outside it is refused). Default `$WEIR_DATA_DIR/sql`.
    #[arg(long, env = "SQL_DATABASE_DIR", global = true)]
    pub sql_database_dir: Option<PathBuf>,

    /// Milliseconds one SQL query of a flow (`sqlDatabaseChain`) may run before it
    /// is stopped (100–600,000).
    #[arg(long, env = "SQL_QUERY_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=600_000), global = true)]
    pub sql_query_timeout_ms: u64,

    /// A PEM file of certificate authorities that Redis servers reached over TLS
    /// (`rediss://`, `redisCacheSslEnabled`) may be signed by, besides the public
    /// roots (a private CA, a self-signed server).
    #[arg(long, env = "REDIS_TLS_CA_FILE", global = true)]
    pub redis_tls_ca_file: Option<PathBuf>,

    #[command(flatten)]
    pub providers: ProviderSettings,
}

/// The server's model-provider settings, under the names Flowise and LangChain
/// read: what a node falls back on when it brings no key, endpoint or
/// deployment of its own. Read once at start like every setting; the engine
/// receives them with each build.
#[derive(Debug, Clone, Default, Args)]
pub struct ProviderSettings {
    /// OpenAI key for nodes without a key or credential of their own (sent only to
    /// api.openai.com, or where the server sends it, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub openai_api_key: Option<Secret>,

    /// Anthropic key for nodes without one of their own (the same rule).
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub anthropic_api_key: Option<Secret>,

    /// Base URL of the Anthropic API for nodes that name none (default
    /// `https://api.anthropic.com`).
    #[arg(long, env = "ANTHROPIC_BASE_URL", global = true)]
    pub anthropic_base_url: Option<String>,

    /// Google Gemini key for nodes without one of their own (sent only to
    /// generativelanguage.googleapis.com, or where the server sends it, or
    /// `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "GOOGLE_GENERATIVE_AI_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub google_generative_ai_api_key: Option<Secret>,

    /// Base URL of Google's Generative Language API for nodes that name none
    /// (default `https://generativelanguage.googleapis.com`).
    #[arg(long, env = "GOOGLE_GENERATIVE_AI_BASE_URL", global = true)]
    pub google_generative_ai_base_url: Option<String>,

    /// Mistral AI key for nodes without one of their own (the same rule).
    #[arg(long, env = "MISTRAL_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub mistral_api_key: Option<Secret>,

    /// Groq key for nodes without one of their own (sent only to api.groq.com, or
    /// where the server sends it, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "GROQ_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub groq_api_key: Option<Secret>,

    /// Azure OpenAI key for nodes without one of their own (sent only to Azure's
    /// hosts, or where the server sends it, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "AZURE_OPENAI_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub azure_openai_api_key: Option<Secret>,

    /// Azure instance (`<instance>.openai.azure.com`) for nodes that name none.
    #[arg(long, env = "AZURE_OPENAI_API_INSTANCE_NAME", global = true)]
    pub azure_openai_api_instance_name: Option<String>,

    /// Azure chat deployment for nodes that name none (also the embeddings'
    /// when `AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME` is unset).
    #[arg(long, env = "AZURE_OPENAI_API_DEPLOYMENT_NAME", global = true)]
    pub azure_openai_api_deployment_name: Option<String>,

    /// Azure embeddings deployment for nodes that name none.
    #[arg(
        long,
        env = "AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME",
        global = true
    )]
    pub azure_openai_api_embeddings_deployment_name: Option<String>,

    /// Azure API version for nodes that name none.
    #[arg(long, env = "AZURE_OPENAI_API_VERSION", global = true)]
    pub azure_openai_api_version: Option<String>,

    /// Root of Azure deployments (`…/openai/deployments`) for nodes that name no
    /// endpoint; before `AZURE_OPENAI_ENDPOINT` and the instance name.
    #[arg(long, env = "AZURE_OPENAI_BASE_PATH", global = true)]
    pub azure_openai_base_path: Option<String>,

    /// Azure endpoint (`https://<resource>.openai.azure.com`) for nodes that name none.
    #[arg(long, env = "AZURE_OPENAI_ENDPOINT", global = true)]
    pub azure_openai_endpoint: Option<String>,

    /// Brave Search API key for `braveSearchAPI` tools without a credential (sent
    /// only to api.search.brave.com, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "BRAVE_SEARCH_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub brave_search_api_key: Option<Secret>,

    /// Base URL of Brave's search API for tools that name none (default
    /// `https://api.search.brave.com`).
    #[arg(long, env = "BRAVE_SEARCH_BASE_URL", global = true)]
    pub brave_search_base_url: Option<String>,

    /// SerpAPI key for `serpAPI` tools without a credential (sent only to
    /// serpapi.com, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "SERPAPI_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub serpapi_api_key: Option<Secret>,

    /// Base URL of SerpAPI for tools that name none (default `https://serpapi.com`).
    #[arg(long, env = "SERPAPI_BASE_URL", global = true)]
    pub serpapi_base_url: Option<String>,

    /// Serper key for `serper` tools without a credential (sent only to
    /// google.serper.dev, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "SERPER_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub serper_api_key: Option<Secret>,

    /// Base URL of Serper for tools that name none (default `https://google.serper.dev`).
    #[arg(long, env = "SERPER_BASE_URL", global = true)]
    pub serper_base_url: Option<String>,

    /// Google Custom Search JSON API key for `googleCustomSearch` tools without a
    /// credential (sent only to googleapis.com's hosts, or `PROVIDER_KEY_HOSTS`).
    #[arg(long, env = "GOOGLE_CUSTOM_SEARCH_API_KEY", hide_env_values = true,
          value_parser = parse_secret, global = true)]
    pub google_custom_search_api_key: Option<Secret>,

    /// The Programmable Search Engine id (`cx`) for `googleCustomSearch` tools
    /// without a credential.
    #[arg(long, env = "GOOGLE_CUSTOM_SEARCH_ENGINE_ID", global = true)]
    pub google_custom_search_engine_id: Option<String>,

    /// Base URL of Google's Custom Search JSON API for tools that name none
    /// (default `https://www.googleapis.com`).
    #[arg(long, env = "GOOGLE_CUSTOM_SEARCH_BASE_URL", global = true)]
    pub google_custom_search_base_url: Option<String>,

    /// Base URL of Pipedream's API, where `pipedreamMCP` nodes get their tokens
    /// (default `https://api.pipedream.com`).
    #[arg(long, env = "PIPEDREAM_API_URL", global = true)]
    pub pipedream_api_url: Option<String>,

    /// Pipedream's remote MCP server for `pipedreamMCP` nodes (default
    /// `https://remote.mcp.pipedream.net`).
    #[arg(long, env = "PIPEDREAM_MCP_URL", global = true)]
    pub pipedream_mcp_url: Option<String>,

    /// Hosts besides each provider's own that the server's provider keys
    /// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `MISTRAL_API_KEY`, `GROQ_API_KEY`, `AZURE_OPENAI_API_KEY`,
    /// `GOOGLE_GENERATIVE_AI_API_KEY`, and the search tools' keys)
    /// may be sent to when a node points there (`host` or `host:port`, comma-separated):
    /// a gateway or proxy you run. Credentials may go there too. See Credentials in
    /// docs/security.md.
    #[arg(long, env = "PROVIDER_KEY_HOSTS", value_delimiter = ',',
          value_parser = parse_key_host, global = true)]
    pub provider_key_hosts: Vec<String>,
}

impl ProviderSettings {
    /// A setting by its environment variable's name (the names nodes know from
    /// Flowise); `None` when unset, empty, or not a provider setting.
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = match name {
            "OPENAI_API_KEY" => secret(&self.openai_api_key),
            "ANTHROPIC_API_KEY" => secret(&self.anthropic_api_key),
            "ANTHROPIC_BASE_URL" => self.anthropic_base_url.as_deref(),
            "MISTRAL_API_KEY" => secret(&self.mistral_api_key),
            "GROQ_API_KEY" => secret(&self.groq_api_key),
            "GOOGLE_GENERATIVE_AI_API_KEY" => secret(&self.google_generative_ai_api_key),
            "GOOGLE_GENERATIVE_AI_BASE_URL" => self.google_generative_ai_base_url.as_deref(),
            "AZURE_OPENAI_API_KEY" => secret(&self.azure_openai_api_key),
            "AZURE_OPENAI_API_INSTANCE_NAME" => self.azure_openai_api_instance_name.as_deref(),
            "AZURE_OPENAI_API_DEPLOYMENT_NAME" => self.azure_openai_api_deployment_name.as_deref(),
            "AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME" => {
                self.azure_openai_api_embeddings_deployment_name.as_deref()
            }
            "AZURE_OPENAI_API_VERSION" => self.azure_openai_api_version.as_deref(),
            "AZURE_OPENAI_BASE_PATH" => self.azure_openai_base_path.as_deref(),
            "AZURE_OPENAI_ENDPOINT" => self.azure_openai_endpoint.as_deref(),
            "BRAVE_SEARCH_API_KEY" => secret(&self.brave_search_api_key),
            "BRAVE_SEARCH_BASE_URL" => self.brave_search_base_url.as_deref(),
            "SERPAPI_API_KEY" => secret(&self.serpapi_api_key),
            "SERPAPI_BASE_URL" => self.serpapi_base_url.as_deref(),
            "SERPER_API_KEY" => secret(&self.serper_api_key),
            "SERPER_BASE_URL" => self.serper_base_url.as_deref(),
            "GOOGLE_CUSTOM_SEARCH_API_KEY" => secret(&self.google_custom_search_api_key),
            "GOOGLE_CUSTOM_SEARCH_ENGINE_ID" => self.google_custom_search_engine_id.as_deref(),
            "GOOGLE_CUSTOM_SEARCH_BASE_URL" => self.google_custom_search_base_url.as_deref(),
            "PIPEDREAM_API_URL" => self.pipedream_api_url.as_deref(),
            "PIPEDREAM_MCP_URL" => self.pipedream_mcp_url.as_deref(),
            _ => None,
        };
        value.filter(|v| !v.is_empty())
    }
}

fn secret(value: &Option<Secret>) -> Option<&str> {
    value.as_ref().map(|s| s.0.as_str())
}

/// A `PROVIDER_KEY_HOSTS` entry, compared lower-case (blank entries are dropped later).
fn parse_key_host(value: &str) -> Result<String, String> {
    Ok(value.trim().to_ascii_lowercase())
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

/// How the store uses its server, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Connections kept (`DATABASE_POOL_SIZE`).
    pub pool_size: usize,
    /// Candidates an HNSW search keeps (`PGVECTOR_EF_SEARCH`): recall against speed.
    pub hnsw_ef_search: u32,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            pool_size: 16,
            hnsw_ef_search: 100,
        }
    }
}

/// Where the store lives, decided once from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    Postgres {
        url: String,
        schema: Option<String>,
        options: PostgresOptions,
    },
}

impl Config {
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("models"))
    }

    pub fn ui_dir(&self) -> PathBuf {
        self.ui_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("ui"))
    }

    pub fn store_cache_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.store_cache_ttl_ms)
    }

    /// The Python runtimes' addresses, in the configured order.
    pub fn python_runtimes(&self) -> Vec<String> {
        self.python_runtime.split(',').map(str::to_owned).collect()
    }

    /// How often each Python runtime's health is checked.
    pub fn python_runtime_health(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.python_runtime_health_ms)
    }

    pub fn store_location(&self) -> StoreLocation {
        match &self.database_url {
            Some(url) => StoreLocation::Postgres {
                url: url.clone(),
                schema: self.database_schema.clone(),
                options: PostgresOptions {
                    pool_size: usize::try_from(self.database_pool_size).unwrap_or(usize::MAX),
                    hnsw_ef_search: u32::try_from(self.pgvector_ef_search).unwrap_or(u32::MAX),
                },
            },
            None => StoreLocation::Sqlite(self.data_dir.join("weir.db")),
        }
    }
}

/// `on`/`off` (also `true`/`false`, `1`/`0`).
fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err("expected 'on' or 'off'".into()),
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

/// One or more `http(s)://` addresses separated by commas, without repeats.
fn parse_runtime_list(value: &str) -> Result<String, String> {
    let mut bases: Vec<String> = Vec::new();
    for part in value.split(',').map(str::trim) {
        let base = parse_http_url(part).map_err(|why| format!("{part:?} {why}"))?;
        if bases.contains(&base) {
            return Err(format!("{base} is named twice"));
        }
        bases.push(base);
    }
    Ok(bases.join(","))
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

/// Where docs/configuration.md's table of settings begins and ends: the lines
/// between are [`reference_table`]'s, checked by a test.
pub const REFERENCE_BEGIN: &str = "<!-- generated from Config (api/src/config.rs): begin -->";
pub const REFERENCE_END: &str = "<!-- generated from Config: end -->";

/// Every setting of [`Config`] as a Markdown table (variable, default, meaning),
/// from the doc comments above: the configuration page is this table.
pub fn reference_table() -> String {
    let command = Config::augment_args(clap::Command::new("weir"));
    let mut out = String::from("| Variable | Default | Meaning |\n|---|---|---|\n");
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env() else {
            continue;
        };
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .filter(|v| !v.is_empty())
            .collect();
        let default = match defaults.is_empty() {
            true => "unset".to_owned(),
            false => format!("`{}`", defaults.join(",")),
        };
        let help = arg
            .get_long_help()
            .or_else(|| arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let meaning = help
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {default} | {meaning} |\n",
            env.to_string_lossy()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/configuration.md shows [`reference_table`]; `WEIR_WRITE_DOCS=1`
    /// rewrites it when a setting or its doc comment changed.
    #[test]
    fn the_configuration_page_shows_every_setting() {
        crate::generated_docs::check(
            "configuration.md",
            REFERENCE_BEGIN,
            REFERENCE_END,
            &reference_table(),
            "the table of settings is not what Config says",
        );
    }

    #[test]
    fn every_provider_setting_is_found_by_its_name() {
        use clap::{Args, FromArgMatches};
        let command = ProviderSettings::augment_args(clap::Command::new("weir"));
        let mut argv = vec!["weir".to_owned()];
        let mut names = Vec::new();
        for arg in command.get_arguments() {
            let name = arg.get_env().unwrap().to_string_lossy().into_owned();
            if name == "PROVIDER_KEY_HOSTS" {
                continue;
            }
            argv.push(format!("--{}", arg.get_long().unwrap()));
            argv.push(name.clone());
            names.push(name);
        }
        let matches = command.try_get_matches_from(argv).unwrap();
        let settings = ProviderSettings::from_arg_matches(&matches).unwrap();
        assert!(names.len() >= 11, "{names:?}");
        for name in &names {
            assert_eq!(settings.get(name), Some(name.as_str()), "{name}");
        }
        assert_eq!(settings.get("HOME"), None);
    }

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
