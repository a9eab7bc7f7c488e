//! The runtime's Prometheus metrics, served at `GET /metrics` (OpenMetrics text) to
//! `Authorization: Bearer <PY_TOOL_METRICS_TOKEN>`; without that setting, off (404).
//!
//! Runs are counted at the edge by outcome (`success`, `error`: the tool raised,
//! `timeout`, `refused`: a 4xx or 429 before running, `failed`: the server's own
//! failure) with their duration. Load, zygotes and isolation layers are read when
//! scraped, so a scrape shows the state of that moment.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What `GET /metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LayerLabels {
    pub layer: &'static str,
}

/// Every metric of the runtime.
pub struct Metrics {
    registry: Registry,
    pub runs: Family<OutcomeLabels, Counter>,
    pub run_seconds: Histogram,
    pub running: Gauge,
    pub queued: Gauge,
    pub zygotes: Gauge,
    pub mcp_requests: Family<OutcomeLabels, Counter>,
    pub mcp_servers: Gauge,
    pub layers: Family<LayerLabels, Gauge>,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("weir_pyruntime");
        let runs = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "runs",
            "Python runs, by outcome (success, error, timeout, refused, failed)",
            runs.clone(),
        );
        // 5 ms to about 164 s, doubling.
        let run_seconds = Histogram::new(exponential_buckets(0.005, 2.0, 16));
        registry.register(
            "run_duration_seconds",
            "Time to answer an execute-python request",
            run_seconds.clone(),
        );
        let running = Gauge::default();
        registry.register("running", "Runs executing now", running.clone());
        let queued = Gauge::default();
        registry.register("queue_depth", "Runs waiting for a slot", queued.clone());
        let zygotes = Gauge::default();
        registry.register(
            "zygotes",
            "Warm zygotes (one per workspace in use)",
            zygotes.clone(),
        );
        let mcp_requests = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "mcp_requests",
            "Requests to stdio MCP servers, by outcome (result, error, refused, failed)",
            mcp_requests.clone(),
        );
        let mcp_servers = Gauge::default();
        registry.register(
            "mcp_servers",
            "Stdio MCP servers running now",
            mcp_servers.clone(),
        );
        let layers = Family::<LayerLabels, Gauge>::default();
        registry.register(
            "isolation_layer_enforced",
            "1 when the isolation layer is enforced, 0 when partial or unavailable",
            layers.clone(),
        );
        Metrics {
            registry,
            runs,
            run_seconds,
            running,
            queued,
            zygotes,
            mcp_requests,
            mcp_servers,
            layers,
        }
    }

    /// One answered execute-python request.
    pub fn run(&self, outcome: &'static str, took: Duration) {
        self.runs.get_or_create(&OutcomeLabels { outcome }).inc();
        self.run_seconds.observe(took.as_secs_f64());
    }

    /// One answered `/tools/mcp-stdio` request.
    pub fn mcp_request(&self, outcome: &'static str) {
        self.mcp_requests
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
