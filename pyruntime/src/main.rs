//! `weir-pyruntime`: parses the configuration, starts the embedded interpreter once and
//! hands off to `_weir_runtime::run`, which serves until Ctrl-C or SIGTERM.

use clap::Parser;
use pyo3::Python;

fn main() -> std::process::ExitCode {
    let config = _weir_runtime::Config::parse();
    // The one place the binary enters CPython; the library only attaches to it.
    Python::initialize();
    match _weir_runtime::run(config) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("weir-pyruntime: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
