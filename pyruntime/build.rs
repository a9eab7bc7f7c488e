//! Build script: tie the `weir-pyruntime` binary to the CPython it was built against.
//!
//! - An rpath to that interpreter's libpython: without it the dynamic loader silently
//!   picks the distribution's `libpython3.11.so` (another patch release, another
//!   `sys.prefix`, other site-packages; see shared/FINDINGS.md).
//! - `WEIR_PYTHON_HOME`, the interpreter's `sys.base_prefix`, which the binary uses as
//!   `PYTHONHOME` when none is set: otherwise CPython derives its prefix from the first
//!   `python3` on `PATH` and, with `/usr/bin` first, loads Debian's standard library into
//!   the pyenv libpython (`No module named '_csv'`).
//!
//! Only binaries get these: the extension module in the wheel is loaded by a running
//! interpreter and must not point at the build machine.

use std::process::Command;

fn main() {
    let config = pyo3_build_config::get();
    if let Some(lib_dir) = config.lib_dir() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{lib_dir}");
    }
    let home = config.executable().and_then(|python| {
        let output = Command::new(python)
            .args(["-c", "import sys; print(sys.base_prefix)"])
            .output()
            .ok()?;
        let home = String::from_utf8(output.stdout).ok()?;
        (output.status.success() && !home.trim().is_empty()).then(|| home.trim().to_owned())
    });
    if let Some(home) = home {
        println!("cargo:rustc-env=WEIR_PYTHON_HOME={home}");
    }
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
