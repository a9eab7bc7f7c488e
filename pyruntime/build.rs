//! Build script: give the `weir-pyruntime` binary an rpath to the libpython it was built
//! against.
//!
//! Without it the dynamic loader silently picks the distribution's `libpython3.11.so`
//! (a different patch release, another `sys.prefix` and other site-packages) instead of
//! the interpreter PyO3 was configured with (see shared/FINDINGS.md). Only binaries get
//! the rpath: the extension module in the wheel is loaded by a running interpreter and
//! must not point at the build machine.

fn main() {
    let config = pyo3_build_config::get();
    if let Some(lib_dir) = config.lib_dir() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{lib_dir}");
    }
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
