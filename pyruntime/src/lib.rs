//! weir's Python tool runtime: an HTTP server that runs user-supplied Python tool code in
//! per-workspace virtual environments, in sandboxed child processes.
//!
//! The server embeds CPython (PyO3) for trusted analysis only — template substitution
//! driven by CPython's tokenizer and import detection with its `ast` — and never runs tool
//! code in its own interpreter: tool code runs in forks of per-workspace zygotes, each
//! fork confined by every OS isolation layer the kernel grants. The same library is the `weir-pyruntime` binary (which
//! initialises the interpreter) and the extension module `weir_runtime._weir_runtime` of
//! the wheel (where a Python process hosts the server through `serve`).
//!
//! # Layout
//! Floors that import only downward (a module never imports one above it):
//! - `edge` — the HTTP edge: `server` (router, API-key middleware, handlers, `run`,
//!   shutdown) and `error` (`ApiError`, the JSON error body).
//! - `pipeline` — `execute` (the pipeline behind execute-python and install-packages),
//!   `javascript` (execute-javascript: a harness run), `mcp_stdio` (the long-lived
//!   stdio MCP servers of `/tools/mcp-stdio`) and `admission` (the concurrency cap,
//!   the fair bounded queue), with their `Error`.
//! - `process` — the children: `sandbox` (one run, one install), `pool` and `zygote`
//!   (the warm per-workspace processes), `protocol` (every message between them and its
//!   validation), `home` (a zygote's view and cgroups), `launcher`, and `analysts` (the
//!   code-analysis workers).
//! - the ground floor: `isolation` (namespaces, mounts, network, Landlock, seccomp,
//!   cgroups, disk; imports nothing of ours), `analysis` (`py`, `templates`, `imports`;
//!   imports nothing of ours) and `storage` (`venvs`, `artifacts`, `workspace`,
//!   `beneath`; uses `analysis` and the run limits of `isolation`).
//!
//! Beside them: `config` (the `PY_TOOL_*` settings: parsed at the top, read by the edge
//! and the pipeline; it names only `isolation`'s network mode) and `wheel` (the
//! extension module's entry points).

pub mod analysis;
pub mod config;
pub mod edge;
pub mod isolation;
pub mod pipeline;
pub mod process;
pub mod storage;
pub mod wheel;

pub use config::Config;
pub use edge::error::{ApiError, Result};
pub use edge::server::{run, serve};

use pyo3::pymodule;

/// The extension module shipped in the wheel: `from weir_runtime._weir_runtime import serve`.
#[pymodule]
mod _weir_runtime {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::wheel::serve;

    #[pymodule_export]
    use crate::wheel::zygote;

    #[pymodule_export]
    use crate::wheel::analyst;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
