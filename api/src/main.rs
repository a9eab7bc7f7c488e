//! The `weir` binary: parses the command line and hands off to the library.
//!
//! `weir serve` runs the API; `weir migrate` applies migrations; `weir keys
//! create|list|revoke` manages API keys. Configuration errors print one line and
//! exit with status 2.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use uuid::Uuid;

use weir_api::domain::{DEFAULT_WORKSPACE, Permission, time};
use weir_api::store::Pgvector;
use weir_api::{AppState, Config, keys, store, telemetry};

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "weir: a self-hosted server for AI workflows"
)]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API (applies migrations first).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Install the demo chatflow (local model, conversation, memory) in the
    /// default workspace when absent; prints its id.
    Demo,
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key; its plaintext is the last line printed.
    Create {
        /// Workspace of the key (created when absent).
        #[arg(long, default_value = DEFAULT_WORKSPACE)]
        workspace: String,
        /// Display name.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Permission to grant (repeatable); default: all.
        #[arg(long = "permission")]
        permissions: Vec<Permission>,
    },
    /// List keys (never the keys themselves).
    List,
    /// Revoke a key by id.
    Revoke { id: Uuid },
}

fn main() -> ExitCode {
    // The PDF loader's confined child (args_os: `args` panics on a non-UTF-8 path).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "__extract-pdf")
    {
        return weir_api::retrieval::load::pdf::run_extractor_child();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("weir: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    telemetry::init(&cli.config);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weir: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("weir: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let config = cli.config;
    let store = store::open(&config.store_location(), config.store_cache_ttl())
        .await
        .map_err(|e| format!("cannot open the store: {e}"))?;
    match cli.command {
        Command::Migrate => {
            tracing::info!(backend = store.backend(), "migrations applied");
            Ok(())
        }
        Command::Serve => serve(config, store).await,
        Command::Keys(cmd) => keys_command(cmd, &*store).await,
        Command::Demo => {
            let flow = weir_api::demo::ensure(&*store)
                .await
                .map_err(|e| format!("cannot install the demo chatflow: {e}"))?;
            println!("{}", flow.id);
            Ok(())
        }
    }
}

async fn serve(config: Config, store: Arc<dyn weir_api::Store>) -> Result<(), String> {
    if let Some(key) = keys::bootstrap(&*store, &config.data_dir).await? {
        println!(
            "Created workspace '{DEFAULT_WORKSPACE}' and its first API key (saved to {}):",
            config.data_dir.join("initial-api-key").display()
        );
        println!("{key}");
    }
    let fd_limit = match weir_api::http::listener::raise_fd_limit() {
        Ok((before, after)) => {
            if before < after {
                tracing::info!(before, after, "open-file limit raised to the hard limit");
            }
            after
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-file limit");
            1024
        }
    };
    let mut config = config;
    let bound = weir_api::http::listener::connection_bound(config.max_connections, fd_limit);
    if bound < config.max_connections {
        tracing::warn!(
            asked = config.max_connections,
            bound,
            fd_limit,
            "WEIR_MAX_CONNECTIONS lowered to what the open-file limit leaves room for"
        );
        config.max_connections = bound;
    }
    let addr = std::net::SocketAddr::new(config.host, config.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, backend = store.backend(), "weir is serving");
    say_how_vectors_are_searched(
        store
            .enable_pgvector(config.pgvector == weir_api::config::PgvectorMode::Auto)
            .await,
    );
    let grace = std::time::Duration::from_secs(config.shutdown_grace_secs);
    let runtime_health = config.python_runtime_health();
    let state = AppState::new(store, config)?;
    match weir_api::services::credentials::reseal_all(&state).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            credentials = n,
            "resealed credentials with the current WEIR_SECRET_KEY"
        ),
        Err(e) => tracing::error!(error = %e, "cannot reseal credentials"),
    }
    match weir_api::services::triggers::secrets::reseal_all(&state).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            triggers = n,
            "sealed trigger secrets with the current WEIR_SECRET_KEY"
        ),
        Err(e) => tracing::error!(error = %e, "cannot seal trigger secrets"),
    }
    // The runtimes may start after us (or not at all if no flow uses Python tools).
    let runtime = state.tools.runtime.clone();
    tokio::spawn(async move {
        for (base, why) in runtime.unreachable().await {
            tracing::warn!(
                runtime = base,
                "the Python tool runtime is not reachable ({why}); Python tools fail until it is"
            );
        }
    });
    tokio::spawn(
        state
            .tools
            .runtime
            .runtimes()
            .watch(state.tools.runtime.http(), runtime_health),
    );
    weir_api::serve(listener, state, shutdown_signal(), grace)
        .await
        .map_err(|e| format!("server failed: {e}"))?;
    tracing::info!("shut down cleanly");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}

async fn keys_command(cmd: KeysCommand, store: &dyn weir_api::Store) -> Result<(), String> {
    match cmd {
        KeysCommand::Create {
            workspace,
            name,
            permissions,
        } => {
            let permissions = if permissions.is_empty() {
                Permission::ALL.to_vec()
            } else {
                permissions
            };
            let (key, plaintext) = keys::create(store, &workspace, &name, permissions)
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "Created API key {} '{}' in workspace '{}' with: {}",
                key.id,
                key.name,
                key.workspace_name,
                Permission::join(&key.permissions)
            );
            println!("{plaintext}");
        }
        KeysCommand::List => {
            let keys = store.list_api_keys(None).await.map_err(|e| e.to_string())?;
            println!("id\tname\tworkspace\tpermissions\tcreated\tlast_used");
            for k in keys {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    k.id,
                    k.name,
                    k.workspace_name,
                    Permission::join(&k.permissions),
                    time::format(&k.created_date),
                    k.last_used_date
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), time::format)
                );
            }
        }
        KeysCommand::Revoke { id } => {
            if !keys::revoke(store, id).await.map_err(|e| e.to_string())? {
                return Err(format!("no API key with id {id}"));
            }
            println!("Revoked API key {id}");
        }
    }
    Ok(())
}

/// The start's word on how the `postgres` vector store node is searched.
fn say_how_vectors_are_searched(found: Result<Pgvector, weir_api::store::StoreError>) {
    const OWN: &str = "vector stores (the postgres node included) are searched in weir's own index";
    match found {
        Ok(Pgvector::NotPostgres) => {}
        Ok(Pgvector::Off) => tracing::info!("PGVECTOR=off: {OWN}"),
        Ok(Pgvector::Unavailable) => {
            tracing::info!("pgvector is not installed in this PostgreSQL: {OWN}")
        }
        Ok(Pgvector::Refused(why)) => {
            tracing::warn!("pgvector cannot be used ({why}): {OWN}")
        }
        Ok(Pgvector::Enabled {
            version,
            backfilled,
        }) => tracing::info!(
            %version,
            backfilled,
            "pgvector is in use: the postgres node's vector stores are searched by PostgreSQL \
             (pgvector); the other vector stores in weir's own index"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot set pgvector up: {OWN}"),
    }
}
