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
//! - `config`: the `PY_TOOL_*` settings (one clap struct).
//! - `admission`: the concurrency cap, the bounded fair queue, 429 when it is full.
//! - `analysts`: template substitution and import detection in worker processes.
//! - `server`: router, API-key middleware, handlers, `run`/`serve`, shutdown.
//! - `execute`: the pipeline behind execute-python and install-packages.
//! - `templates`: template grammar and resolution of `variables`.
//! - `imports`: import → distribution table, requirement validation, install planning.
//! - `venvs`: per-workspace venvs, locks, uv/pip installs.
//! - `sandbox`: one run: its directories, plan, cgroup, outputs and report.
//! - `isolation`: the layers a run applies to itself (namespaces, file-system view,
//!   ids, Landlock, seccomp) and per-run cgroups, each reported enforced/partial/unavailable.
//! - `pool`: the per-workspace zygotes (start, reuse, replace) as the server sees them.
//! - `zygote`: the zygote process itself: a warm interpreter that forks a confined child
//!   per run.
//! - `artifacts`: collecting files a run wrote and serving them.
//! - `beneath`: opening what a run left without following anything it planted.
//! - `workspace`: the rule for workspace ids.
//! - `py`: the PyO3 boundary (analysis calls and the `serve` pyfunction).
//! - `error`: `ApiError`, the JSON error body.

pub mod admission;
pub mod analysts;
pub mod artifacts;
pub mod beneath;
pub mod config;
pub mod error;
pub mod execute;
pub mod imports;
pub mod isolation;
pub mod pool;
pub mod py;
pub mod sandbox;
pub mod server;
pub mod templates;
pub mod venvs;
pub mod workspace;
pub mod zygote;

pub use config::Config;
pub use error::{ApiError, Result};
pub use server::{run, serve};

use pyo3::pymodule;

/// The extension module shipped in the wheel: `from weir_runtime._weir_runtime import serve`.
#[pymodule]
mod _weir_runtime {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::py::serve;

    #[pymodule_export]
    use crate::py::zygote;

    #[pymodule_export]
    use crate::py::analyst;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
