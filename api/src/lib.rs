//! weir's API server: chatflows, predictions and triggers over HTTP.
//!
//! # Layout
//!
//! - [`app`]: the router with its middleware, and `serve` (API + background loops).
//! - [`demo`]: the demo chatflow `scripts/start` installs.
//! - [`config`]: the env-backed configuration, validated at start.
//! - [`http`]: the edge — state, middleware, auth extractor, error type.
//! - [`routes`]: one module per API area; thin handlers documented for OpenAPI.
//! - [`domain`]: the records and their rules (keys, chatflows, variables, tools,
//!   executions, times).
//! - [`store`]: the `Store` trait with its SQLite and PostgreSQL implementations.
//! - [`flow`]: the chatflow engine: graph, registry, plans, runs.
//! - [`llm`]: language-model providers behind one streaming interface.
//! - [`retrieval`]: loaders, splitters, embeddings and vector indexes (the
//!   engine's retrieval parts; the services floor persists what they make).
//! - [`services`]: below the edge — predictions and triggers (schedule, firing,
//!   webhooks, Telegram, failure e-mail), called by routes and background loops.
//! - [`ratelimit`]: per-chatflow rate limits counted in the store.
//! - [`sealing`]: the server's secret keys and what they seal (credentials at rest).
//! - [`netguard`]: which addresses outbound requests may reach (the SSRF guard).
//! - [`keys`]: operator actions on API keys (CLI and first-start bootstrap).
//! - [`telemetry`]: logging setup.
//! - [`metrics`]: the Prometheus metrics every layer records (`GET /metrics`).
//!
//! The modules are built in floors, each importing only from those below it
//! (docs/architecture.md; `tests/floors.rs` enforces it).
//!
//! The binary (`main.rs`) only parses arguments and calls into this library, so the
//! integration tests drive exactly the code the binary runs.

pub mod app;
pub mod config;
pub mod demo;
pub mod domain;
pub mod flow;
#[cfg(test)]
mod generated_docs;
pub mod http;
pub mod keys;
pub mod llm;
pub mod metrics;
pub mod netguard;
pub mod ratelimit;
pub mod retrieval;
pub mod routes;
pub mod sealing;
pub mod services;
pub mod store;
pub mod telemetry;

pub use app::{router, serve};
pub use config::Config;
pub use http::AppState;
pub use store::Store;
