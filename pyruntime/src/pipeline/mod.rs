//! The execution pipeline behind `/tools/execute-python`, `/tools/execute-javascript`
//! (`javascript`: the same run, of a harness evaluating the JavaScript) and
//! `/tools/install-packages`, and the stdio MCP servers of `/tools/mcp-stdio`
//! (`mcp_stdio`: long-lived runs of a harness that becomes the server):
//! admission (the concurrency cap and the fair bounded queue), analysis of the code in
//! a worker, the workspace's venv, the run, the collection of its files. It speaks in its
//! own `Error`, which the edge maps to HTTP statuses.

pub mod admission;
pub mod execute;
pub mod javascript;
pub mod mcp_stdio;

/// Why an execution or install was not done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or refers to something invalid.
    #[error("{0}")]
    Invalid(String),
    /// A required field was not provided.
    #[error("`{0}` is required")]
    MissingField(&'static str),
    /// `code` is longer than `PY_TOOL_MAX_CODE` (its value).
    #[error("the code is larger than PY_TOOL_MAX_CODE ({} KiB)", .0 >> 10)]
    CodeTooLarge(u64),
    /// Every run slot is taken and the queue is full.
    #[error("the runtime is busy: every run slot is taken and the queue is full; retry shortly")]
    Busy,
    /// The workspace already has its share of the queue waiting.
    #[error(
        "this workspace has too many executions waiting (PY_TOOL_MAX_QUEUE_PER_WORKSPACE); \
         retry shortly"
    )]
    WorkspaceBusy,
    /// The workspace runs `PY_TOOL_MCP_SERVERS_PER_WORKSPACE` (its value) stdio MCP
    /// servers already.
    #[error(
        "this workspace runs {0} stdio MCP servers already (PY_TOOL_MCP_SERVERS_PER_WORKSPACE); \
         they stop after PY_TOOL_MCP_IDLE unused"
    )]
    TooManyServers(usize),
    /// Anything else: the detail is for the log, never for the caller.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::Internal(detail.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
