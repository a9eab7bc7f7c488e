//! The server's Prometheus metrics, served at `GET /metrics` (OpenMetrics text)
//! behind `METRICS_TOKEN`.
//!
//! One process-wide set ([`metrics`]) that every layer records into without
//! plumbing — the edge (requests by route and status, latency), the services
//! (predictions and streamed tokens by chatflow, predictions in flight, trigger
//! firings, their lag, missed runs, webhook verification failures) and the
//! providers (calls, errors, latency by provider). Recording is a few atomic
//! operations behind a label lookup; a scrape encodes what is there, with no
//! store query.

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
pub struct RequestLabels {
    pub method: String,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PredictionLabels {
    pub chatflow: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChatflowLabels {
    pub chatflow: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    pub provider: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderOnly {
    pub provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FiringLabels {
    pub kind: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelTokenLabels {
    pub chatflow: String,
    pub model: String,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RatingLabels {
    pub chatflow: String,
    pub rating: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpLabels {
    pub server: &'static str,
    pub method: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpServerLabels {
    pub server: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OAuthLabels {
    pub grant: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct McpServerOnly {
    pub server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuntimeLabels {
    pub runtime: String,
}

/// Every metric of the API server.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_seconds: Family<RouteLabels, Histogram>,
    pub predictions: Family<PredictionLabels, Counter>,
    pub tokens: Family<ChatflowLabels, Counter>,
    pub in_flight: Gauge,
    pub provider_calls: Family<ProviderLabels, Counter>,
    pub provider_seconds: Family<ProviderOnly, Histogram>,
    pub firings: Family<FiringLabels, Counter>,
    pub firing_lag_seconds: Histogram,
    pub missed_runs: Counter,
    pub webhook_rejected: Counter,
    pub callback_attempts: Family<OutcomeLabels, Counter>,
    pub feedback: Family<RatingLabels, Counter>,
    pub model_tokens: Family<ModelTokenLabels, Counter>,
    pub mcp_calls: Family<McpLabels, Counter>,
    pub mcp_server_calls: Family<McpServerLabels, Counter>,
    pub mcp_server_seconds: Family<McpServerOnly, Histogram>,
    pub oauth_token_requests: Family<OAuthLabels, Counter>,
    pub python_runtime_up: Family<RuntimeLabels, Gauge>,
    pub python_runtime_runs: Family<RuntimeLabels, Counter>,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// Seconds from 1 ms to about 65 s, doubling.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("weir");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        let request_seconds = Family::<RouteLabels, Histogram>::new_with_constructor(latency);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request (to its headers: a stream's body may last longer)",
            request_seconds.clone(),
        );
        let predictions = Family::<PredictionLabels, Counter>::default();
        registry.register(
            "predictions",
            "Predictions run, by chatflow and outcome (success, error, cancelled, aborted)",
            predictions.clone(),
        );
        let tokens = Family::<ChatflowLabels, Counter>::default();
        registry.register(
            "prediction_tokens",
            "Answer tokens streamed by the models, by chatflow",
            tokens.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "predictions_in_flight",
            "Predictions running now on this server",
            in_flight.clone(),
        );
        let provider_calls = Family::<ProviderLabels, Counter>::default();
        registry.register(
            "provider_requests",
            "Calls to model and embedding providers, by provider and outcome (ok, error)",
            provider_calls.clone(),
        );
        let provider_seconds = Family::<ProviderOnly, Histogram>::new_with_constructor(latency);
        registry.register(
            "provider_request_duration_seconds",
            "Time until a provider answered a call's headers",
            provider_seconds.clone(),
        );
        let firings = Family::<FiringLabels, Counter>::default();
        registry.register(
            "trigger_firings",
            "Trigger runs, by kind (cron, webhook) and outcome (success, failed)",
            firings.clone(),
        );
        let firing_lag_seconds = latency();
        registry.register(
            "trigger_firing_lag_seconds",
            "How late a cron firing started after its scheduled time",
            firing_lag_seconds.clone(),
        );
        let missed_runs = Counter::default();
        registry.register(
            "trigger_missed_runs",
            "Cron runs recorded as missed (the server was down at their time)",
            missed_runs.clone(),
        );
        let webhook_rejected = Counter::default();
        registry.register(
            "webhook_verification_failures",
            "Webhook calls refused for a missing or wrong signature",
            webhook_rejected.clone(),
        );
        let callback_attempts = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "trigger_callback_attempts",
            "Attempts to deliver a webhook call's callback, by outcome (delivered, retry, failed)",
            callback_attempts.clone(),
        );
        let model_tokens = Family::<ModelTokenLabels, Counter>::default();
        registry.register(
            "model_tokens",
            "Tokens models read (kind=input) and wrote (kind=output), by chatflow and model, as providers count them",
            model_tokens.clone(),
        );
        let feedback = Family::<RatingLabels, Counter>::default();
        registry.register(
            "chat_feedback",
            "Ratings given to answers (new or changed), by chatflow and rating",
            feedback.clone(),
        );
        let mcp_calls = Family::<McpLabels, Counter>::default();
        registry.register(
            "mcp_calls",
            "MCP requests answered, by server (flow: Flowise's per-flow endpoint, workspace: /api/v1/mcp), method and outcome",
            mcp_calls.clone(),
        );
        let mcp_server_calls = Family::<McpServerLabels, Counter>::default();
        registry.register(
            "mcp_server_requests",
            "Requests flows made to MCP servers (customMCP), by server (its host and port) and outcome: ok, error (unreachable, an HTTP error or a JSON-RPC error)",
            mcp_server_calls.clone(),
        );
        let mcp_server_seconds = Family::<McpServerOnly, Histogram>::new_with_constructor(latency);
        registry.register(
            "mcp_server_request_duration_seconds",
            "Time an MCP server took to answer a flow's request, by server (its host and port)",
            mcp_server_seconds.clone(),
        );
        let oauth_token_requests = Family::<OAuthLabels, Counter>::default();
        registry.register(
            "oauth_token_requests",
            "Token requests weir made for OAuth-protected MCP servers, by grant (authorization_code, refresh_token, client_credentials) and outcome: ok, refused (an OAuth error answer), failed (unreachable, or not a token)",
            oauth_token_requests.clone(),
        );
        let python_runtime_up = Family::<RuntimeLabels, Gauge>::default();
        registry.register(
            "python_runtime_up",
            "1 while the Python runtime answers its health check (or a call), else 0",
            python_runtime_up.clone(),
        );
        let python_runtime_runs = Family::<RuntimeLabels, Counter>::default();
        registry.register(
            "python_runtime_runs",
            "Calls sent to each Python runtime (where workspaces were placed)",
            python_runtime_runs.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            predictions,
            tokens,
            in_flight,
            provider_calls,
            provider_seconds,
            firings,
            firing_lag_seconds,
            missed_runs,
            webhook_rejected,
            callback_attempts,
            feedback,
            model_tokens,
            mcp_calls,
            mcp_server_calls,
            mcp_server_seconds,
            oauth_token_requests,
            python_runtime_up,
            python_runtime_runs,
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// One answered HTTP request.
    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabels {
                method: method.to_owned(),
                route: route.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// One provider call, answered (`ok`) or not. `provider` as error messages
    /// name it ("the OpenAI-compatible provider" is labelled without "the ").
    pub fn provider_call(&self, provider: &str, ok: bool, took: Duration) {
        let provider = provider.strip_prefix("the ").unwrap_or(provider);
        self.provider_calls
            .get_or_create(&ProviderLabels {
                provider: provider.to_owned(),
                outcome: if ok { "ok" } else { "error" },
            })
            .inc();
        self.provider_seconds
            .get_or_create(&ProviderOnly {
                provider: provider.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// One finished prediction of `chatflow` and the tokens it streamed.
    pub fn prediction(&self, chatflow: &str, outcome: &'static str, tokens: u64) {
        self.predictions
            .get_or_create(&PredictionLabels {
                chatflow: chatflow.to_owned(),
                outcome,
            })
            .inc();
        if tokens > 0 {
            self.tokens
                .get_or_create(&ChatflowLabels {
                    chatflow: chatflow.to_owned(),
                })
                .inc_by(tokens);
        }
    }

    /// One attempt at a callback: `delivered`, `retry` or `failed` (given up).
    pub fn callback_attempt(&self, outcome: &'static str) {
        self.callback_attempts
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// What one node's model calls of a run of `chatflow` read and wrote.
    pub fn model_tokens(&self, chatflow: &str, model: &str, input: u64, output: u64) {
        for (kind, count) in [("input", input), ("output", output)] {
            if count > 0 {
                self.model_tokens
                    .get_or_create(&ModelTokenLabels {
                        chatflow: chatflow.to_owned(),
                        model: model.to_owned(),
                        kind,
                    })
                    .inc_by(count);
            }
        }
    }

    /// A rating given (or changed) to an answer of `chatflow`.
    pub fn feedback(&self, chatflow: &str, rating: &'static str) {
        self.feedback
            .get_or_create(&RatingLabels {
                chatflow: chatflow.to_owned(),
                rating,
            })
            .inc();
    }

    /// One MCP request answered (`ok`: not a protocol error; a tool call that
    /// failed is still an answer). Methods outside MCP's count as `other`.
    pub fn mcp_call(&self, server: &'static str, method: &str, ok: bool) {
        let method = match method {
            "initialize" => "initialize",
            "ping" => "ping",
            "tools/list" => "tools/list",
            "tools/call" => "tools/call",
            _ => "other",
        };
        self.mcp_calls
            .get_or_create(&McpLabels {
                server,
                method,
                outcome: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    /// One request a flow made to an MCP server (`server`: its host and port,
    /// never its path or query, which may hold a key).
    pub fn mcp_server_request(&self, server: &str, ok: bool, took: Duration) {
        self.mcp_server_calls
            .get_or_create(&McpServerLabels {
                server: server.to_owned(),
                outcome: if ok { "ok" } else { "error" },
            })
            .inc();
        self.mcp_server_seconds
            .get_or_create(&McpServerOnly {
                server: server.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A token request's end.
    pub fn oauth_token_request(&self, grant: &'static str, outcome: &'static str) {
        self.oauth_token_requests
            .get_or_create(&OAuthLabels { grant, outcome })
            .inc();
    }

    /// Whether the Python runtime at `runtime` answers.
    pub fn python_runtime_up(&self, runtime: &str, up: bool) {
        self.python_runtime_up
            .get_or_create(&RuntimeLabels {
                runtime: without_credentials(runtime),
            })
            .set(i64::from(up));
    }

    /// One call sent to the Python runtime at `runtime`.
    pub fn python_runtime_run(&self, runtime: &str) {
        self.python_runtime_runs
            .get_or_create(&RuntimeLabels {
                runtime: without_credentials(runtime),
            })
            .inc();
    }

    /// One trigger run.
    pub fn firing(&self, kind: &'static str, success: bool) {
        self.firings
            .get_or_create(&FiringLabels {
                kind,
                outcome: if success { "success" } else { "failed" },
            })
            .inc();
    }
}

/// A URL without the `user:password@` it may carry (labels are read by anyone
/// with the metrics token).
fn without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_what_was_recorded() {
        let m = Metrics::new();
        m.request("GET", "/api/v1/ping", 200, Duration::from_millis(3));
        m.prediction("flow-1", "success", 12);
        m.provider_call("OpenAI", false, Duration::from_millis(40));
        let text = m.encode();
        assert!(text.contains(
            "weir_http_requests_total{method=\"GET\",route=\"/api/v1/ping\",status=\"200\"} 1"
        ));
        assert!(text.contains("weir_prediction_tokens_total{chatflow=\"flow-1\"} 12"));
        assert!(
            text.contains("weir_provider_requests_total{provider=\"OpenAI\",outcome=\"error\"} 1")
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
