//! Logging: `tracing` to stderr, as text or JSON lines (`LOG_FORMAT`), filtered by
//! `LOG_LEVEL`. Stdout stays free for what commands print on purpose (a new key).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};

pub fn init(config: &Config) {
    // The level was validated when the configuration was parsed.
    let filter = EnvFilter::builder()
        .parse(&config.log_level)
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}
