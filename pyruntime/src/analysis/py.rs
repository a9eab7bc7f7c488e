//! The PyO3 boundary: every call into the server's embedded CPython goes through here.
//!
//! The interpreter is used only for trusted analysis of tool code (tokenizer-driven
//! template substitution, `ast` import detection, module and distribution look-ups in a
//! venv). The Python side of that analysis is `analysis.py`,
//! compiled once per process. No other module names `Python<'py>`; the functions here
//! take and return plain Rust types and block, so async callers use `spawn_blocking`.
//! Tool code is never executed in this interpreter: see `process::sandbox`.

use std::collections::BTreeMap;
use std::ffi::CString;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

const ANALYSIS_SOURCE: &str = include_str!("analysis.py");

/// A Python exception raised by the analysis helpers (always a bug or a broken
/// interpreter, never the user's code), carried as text.
#[derive(Debug, thiserror::Error)]
#[error("embedded Python failed: {0}")]
pub struct PyFailure(String);

impl From<PyErr> for PyFailure {
    fn from(err: PyErr) -> Self {
        Self(err.to_string())
    }
}

/// Facts about the embedded interpreter.
#[derive(Debug, Clone)]
pub struct InterpreterInfo {
    /// `sys.version` without the build details, e.g. `3.11.7`.
    pub version: String,
    /// A `python3.X` executable of the same installation (base for new venvs).
    pub executable: String,
    /// The installation's (or active venv's) scripts directory, where a wheel-installed
    /// `uv` lives.
    pub scripts: String,
    /// `sys.executable` of the hosting process (the wheel's interpreter starts zygotes).
    pub host: String,
    /// `sys.base_prefix`: the installation every run sees read-only.
    pub base_prefix: String,
}

static ANALYSIS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn call<T>(
    name: &str,
    f: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
) -> Result<T, PyFailure> {
    Python::attach(|py| {
        let module = ANALYSIS.get_or_try_init(py, || -> PyResult<Py<PyModule>> {
            let source = CString::new(ANALYSIS_SOURCE)?;
            Ok(PyModule::from_code(py, &source, c"weir_analysis.py", c"weir_analysis")?.unbind())
        })?;
        let function = module.bind(py).getattr(name)?;
        f(&function)
    })
    .map_err(PyFailure::from)
}

/// Applies `replacements` — `(start, end, text, json)` in character offsets — to `code`
/// where CPython's tokenizer says each one stands; returns the new code and warnings.
/// `None` when the code cannot be tokenized (it would not compile either).
pub fn substitute(
    code: &str,
    replacements: Vec<(usize, usize, &str, &str)>,
) -> Result<Option<(String, Vec<String>)>, PyFailure> {
    call("substitute", |f| f.call1((code, replacements))?.extract())
}

/// Top-level names of the non-stdlib absolute imports of `code`, in source order.
pub fn imports(code: &str) -> Result<Vec<String>, PyFailure> {
    call("imports", |f| f.call1((code,))?.extract())
}

/// The module names of `names` that are not installed in `site_packages`.
pub fn missing_modules(site_packages: &str, names: &[String]) -> Result<Vec<String>, PyFailure> {
    call("missing_modules", |f| {
        f.call1((site_packages, names.to_vec()))?.extract()
    })
}

/// Installed distributions of `site_packages`: normalized name → version.
pub fn distributions(site_packages: &str) -> Result<BTreeMap<String, String>, PyFailure> {
    call("distributions", |f| f.call1((site_packages,))?.extract())
}

/// Version, base executable and scripts directory of the embedded interpreter.
pub fn interpreter() -> Result<InterpreterInfo, PyFailure> {
    let facts: BTreeMap<String, String> = call("interpreter", |f| f.call0()?.extract())?;
    let get = |key: &str| facts.get(key).cloned().unwrap_or_default();
    Ok(InterpreterInfo {
        version: get("version"),
        executable: get("executable"),
        scripts: get("scripts"),
        host: get("host"),
        base_prefix: get("base_prefix"),
    })
}
