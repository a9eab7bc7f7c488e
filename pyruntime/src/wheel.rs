//! The entry points of the wheel's extension module `weir_runtime._weir_runtime`: the
//! server, a zygote and a code analyser, each run in the calling Python process (the
//! binary reaches the same code from `main`).

use pyo3::prelude::*;

use crate::config::Config;

/// Runs the server inside the calling Python process (the wheel's `weir-pyruntime`
/// console script). `argv` are the command-line arguments including the program name.
/// Returns when the server has shut down (Ctrl-C or SIGTERM).
#[pyfunction]
#[pyo3(signature = (argv = None))]
pub fn serve(py: Python<'_>, argv: Option<Vec<String>>) -> PyResult<()> {
    use clap::Parser;
    let argv = argv.unwrap_or_else(|| vec!["weir-pyruntime".to_owned()]);
    let config = match Config::try_parse_from(argv) {
        Ok(config) => config,
        Err(err) if !err.use_stderr() => {
            // --help / --version: print and return normally.
            println!("{err}");
            return Ok(());
        }
        Err(err) => return Err(pyo3::exceptions::PyValueError::new_err(err.to_string())),
    };
    py.detach(|| crate::edge::server::run(config))
        .map_err(|err| pyo3::exceptions::PyRuntimeError::new_err(err.to_string()))
}

/// Runs a code analyser in the calling Python process (how the wheel starts them; the
/// binary uses `weir-pyruntime __analyze`). Returns the process exit status.
#[pyfunction]
pub fn analyst(py: Python<'_>) -> i32 {
    py.detach(crate::process::analysts::worker_main);
    0
}

/// Runs a zygote in the calling Python process (how the wheel starts them; the binary
/// uses `weir-pyruntime __zygote`). Returns the process exit status.
#[pyfunction]
pub fn zygote() -> i32 {
    match crate::process::zygote::serve() {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("weir-pyruntime zygote: {err}");
            1
        }
    }
}
