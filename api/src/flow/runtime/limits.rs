//! The limits that keep an agentflow run from running away: the server's
//! settings (`AGENTFLOW_*`), with these constants as their defaults.

/// Node executions one run takes at most (Flowise's `MAX_ITERATIONS`), unless
/// configured (`AGENTFLOW_MAX_NODE_RUNS`).
pub const MAX_NODE_RUNS: usize = 1000;
/// Items one iteration node runs its block for at most, unless configured
/// (`AGENTFLOW_MAX_ITERATION_ITEMS`).
pub const MAX_ITERATION_ITEMS: usize = 1000;
/// How deep `executeFlowAgentflow` calls may nest (a flow calling a flow that
/// calls a flow ...); the call past it fails, so a cycle of flows ends. Unless
/// configured (`AGENTFLOW_MAX_FLOW_DEPTH`).
pub const MAX_FLOW_DEPTH: u32 = 5;
/// How long one run may take, unless configured (`AGENTFLOW_TIMEOUT_SECS`).
pub const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// One run of a custom JavaScript function (`SANDBOX_TIMEOUT`).
pub const CODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The limits that keep an agentflow run from running away (the server's
/// settings; the constants above are their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_node_runs: usize,
    pub max_iteration_items: usize,
    pub max_flow_depth: u32,
    /// The whole run, its waits for models and tools included.
    pub run_timeout: std::time::Duration,
    /// One run of JavaScript (a custom function) in the Python runtime.
    pub code_timeout: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_node_runs: MAX_NODE_RUNS,
            max_iteration_items: MAX_ITERATION_ITEMS,
            max_flow_depth: MAX_FLOW_DEPTH,
            run_timeout: RUN_TIMEOUT,
            code_timeout: CODE_TIMEOUT,
        }
    }
}
