//! How the server starts a child of its own code: a workspace's zygote or a code
//! analyser, either as this binary with a role argument (`ZYGOTE_ARG`, `ANALYST_ARG`) or,
//! when a Python process hosts the server (the wheel), as that interpreter calling the
//! extension module's `zygote()` or `analyst()`.

use std::io;
use std::path::PathBuf;

/// The first argument that makes the binary a workspace's zygote.
pub const ZYGOTE_ARG: &str = "__zygote";
/// The first argument that makes the binary a code analyser.
pub const ANALYST_ARG: &str = "__analyze";

/// How zygote processes are started: this binary with `__zygote`, or — when the server is
/// hosted by a Python process (the wheel) — that interpreter calling
/// `weir_runtime._weir_runtime.zygote()`.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub(super) program: PathBuf,
    pub(super) args: Vec<String>,
    /// The arguments that make the same program a code analyser (`analysts`).
    analyst_args: Vec<String>,
}

impl Launcher {
    /// `host_python` is `sys.executable` of the process hosting the server.
    pub fn detect(host_python: &str) -> io::Result<Self> {
        let exe = std::env::current_exe()?;
        let is_binary = exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("weir-pyruntime"));
        let python = |function: &str| {
            vec![
                "-I".to_owned(),
                "-c".to_owned(),
                format!(
                    "import sys; from weir_runtime._weir_runtime import {function}; \
                     sys.exit({function}())"
                ),
            ]
        };
        Ok(if is_binary {
            Self {
                program: exe,
                args: vec![ZYGOTE_ARG.to_owned()],
                analyst_args: vec![ANALYST_ARG.to_owned()],
            }
        } else {
            Self {
                program: PathBuf::from(host_python),
                args: python("zygote"),
                analyst_args: python("analyst"),
            }
        })
    }

    /// The program and arguments of a code analyser.
    pub fn analyst(&self) -> (&PathBuf, &[String]) {
        (&self.program, &self.analyst_args)
    }
}
