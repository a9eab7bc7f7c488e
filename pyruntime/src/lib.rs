//! weir's Python tool runtime: an HTTP server that runs user-supplied Python tool code in
//! per-workspace virtual environments, in sandboxed child processes.
//!
//! The server embeds CPython (PyO3) for trusted analysis only — template substitution
//! driven by CPython's tokenizer and import detection with its `ast` — and never runs tool
//! code in its own interpreter. The same library is the `weir-pyruntime` binary (which
//! initialises the interpreter) and the extension module `weir_runtime._weir_runtime` of
//! the wheel (where a Python process hosts the server through `serve`).
//!
//! # Layout
//! - `config`: the `PY_TOOL_*` settings (one clap struct).
//! - `server`: router, API-key middleware, handlers, `run`/`serve`, shutdown.
//! - `execute`: the pipeline behind execute-python and install-packages.
//! - `templates`: template grammar and resolution of `variables`.
//! - `imports`: import → distribution table, requirement validation, install planning.
//! - `venvs`: per-workspace venvs, locks, uv/pip installs.
//! - `sandbox`: the child process, its limits, output capture, its harness.
//! - `artifacts`: collecting files a run wrote and serving them.
//! - `workspace`: the rule for workspace ids.
//! - `py`: the PyO3 boundary (analysis calls and the `serve` pyfunction).
//! - `error`: `ApiError`, the JSON error body.

pub mod artifacts;
pub mod config;
pub mod error;
pub mod execute;
pub mod imports;
pub mod py;
pub mod sandbox;
pub mod server;
pub mod templates;
pub mod venvs;
pub mod workspace;

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

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
