//! `weir-pyruntime`: parses the configuration, starts the embedded interpreter once and
//! hands off to `_weir_runtime::run`, which serves until Ctrl-C or SIGTERM. Started as
//! `weir-pyruntime __zygote` (by the server only) it is a workspace's zygote instead, and
//! as `weir-pyruntime __analyze` a code analyser.

use clap::Parser;
use pyo3::Python;

fn main() -> std::process::ExitCode {
    if std::env::args().nth(1).as_deref() == Some(_weir_runtime::process::launcher::ANALYST_ARG) {
        // A code analyser (started by the server itself, see `analysts`).
        pin_python_home();
        Python::initialize();
        return _weir_runtime::process::analysts::worker_main();
    }
    if std::env::args().nth(1).as_deref() == Some(_weir_runtime::process::launcher::ZYGOTE_ARG) {
        // A workspace's zygote (started by the server itself, see `pool`).
        _weir_runtime::process::zygote::reserve_report_fd();
        pin_python_home();
        // No `site` at start: the installation's .pth files (some import whole packages)
        // are not the workspace's; the zygote adds the venv's site-packages itself.
        // SAFETY: written before the interpreter exists, from the only thread.
        #[allow(deprecated)] // the flag is deprecated from Python 3.12; this is 3.11
        unsafe {
            pyo3::ffi::Py_NoSiteFlag = 1;
        }
        Python::initialize();
        return _weir_runtime::process::zygote::main();
    }
    let config = _weir_runtime::Config::parse();
    pin_python_home();
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

/// Points CPython at the installation it was built against (see build.rs) unless the
/// caller set `PYTHONHOME`; children never inherit it (their environments are rebuilt).
fn pin_python_home() {
    if std::env::var_os("PYTHONHOME").is_some() {
        return;
    }
    if let Some(home) = option_env!("WEIR_PYTHON_HOME") {
        // SAFETY: called at the start of main, before any thread exists.
        unsafe { std::env::set_var("PYTHONHOME", home) };
    }
}
