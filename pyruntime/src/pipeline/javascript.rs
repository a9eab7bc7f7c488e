//! `POST /tools/execute-javascript`: JavaScript (Flowise's custom functions and
//! tools) run the way Python tools are. The request becomes a Python execution
//! of a fixed harness (`javascript.py`) that evaluates the code in QuickJS
//! (quickjs-ng, pinned, installed in the workspace's venv on its first
//! JavaScript run), so the code gets exactly a Python tool's confinement: the
//! same forked child of the workspace's zygote, namespaces, Landlock, seccomp,
//! cgroup, network policy (`fetch` goes out through Python), time and memory
//! limits. The code is the body of an async function; the request's variables
//! are its globals; what it returns is the result.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::execute::ExecuteRequest;
use super::{Error, Result};

/// The Python program that runs the JavaScript.
pub const HARNESS: &str = include_str!("javascript.py");

/// The engine, pinned: a workspace's first JavaScript run installs it.
pub const ENGINE: &str = "quickjs-ng==0.17.0.2";

/// What the engine leaves in a venv's site-packages once installed: later runs
/// then ask for no install at all (not even the installer's check).
pub const ENGINE_INSTALLED: &str = "quickjs_ng-0.17.0.2.dist-info";

/// Body of `POST /tools/execute-javascript`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JavaScriptRequest {
    /// The body of an async function.
    pub code: Option<String>,
    /// Globals by name (`$input`, `$vars`, `$flow`, `$<argument>`…): JSON values.
    pub variables: Option<Value>,
    pub timeout: Option<f64>,
    #[serde(alias = "workspace_id")]
    pub workspace_id: Option<String>,
}

impl JavaScriptRequest {
    /// The Python execution running it. `memory`: what QuickJS may allocate;
    /// `max_code`: the largest code taken (`PY_TOOL_MAX_CODE`); `installed`:
    /// whether the workspace's venv has the engine already.
    pub fn into_execution(
        self,
        memory: u64,
        max_code: u64,
        installed: bool,
    ) -> Result<ExecuteRequest> {
        let code = self.code.ok_or(Error::MissingField("code"))?;
        if code.len() as u64 > max_code {
            return Err(Error::CodeTooLarge(max_code));
        }
        let globals = match self.variables {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(globals)) => globals,
            Some(_) => {
                return Err(Error::Invalid(
                    "`variables` must be an object of globals".into(),
                ));
            }
        };
        if let Some(bad) = globals.keys().find(|name| !is_identifier(name)) {
            return Err(Error::Invalid(format!(
                "variable `{bad}` is not a JavaScript identifier"
            )));
        }
        Ok(ExecuteRequest {
            code: Some(HARNESS.to_owned()),
            variables: Some(json!({
                "weir_javascript": {"code": code, "globals": globals, "memory": memory},
            })),
            requirements: (!installed).then(|| vec![ENGINE.to_owned()]),
            timeout: self.timeout,
            workspace_id: self.workspace_id,
        })
    }
}

/// `$input`, `a_b`, `x1`: what a global may be named.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '$' || c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '$' || c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(code: Option<&str>, variables: Value) -> JavaScriptRequest {
        JavaScriptRequest {
            code: code.map(str::to_owned),
            variables: Some(variables),
            timeout: Some(5.0),
            workspace_id: Some("w1".into()),
        }
    }

    #[test]
    fn javascript_becomes_the_harness_with_its_globals() {
        let run = request(
            Some("return $input;"),
            json!({"$input": "hi", "$vars": {"a": 1}}),
        )
        .into_execution(1 << 20, 1 << 20, false)
        .unwrap();
        assert_eq!(run.code.as_deref(), Some(HARNESS));
        assert_eq!(run.requirements, Some(vec![ENGINE.to_owned()]));
        let spec = &run.variables.unwrap()["weir_javascript"];
        assert_eq!(spec["code"], "return $input;");
        assert_eq!(spec["globals"]["$vars"]["a"], 1);
        assert_eq!(run.timeout, Some(5.0));
        let warm = request(Some("return 1;"), json!({}))
            .into_execution(1 << 20, 1 << 20, true)
            .unwrap();
        assert_eq!(warm.requirements, None);
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(matches!(
            request(None, json!({})).into_execution(1, 10, false),
            Err(Error::MissingField("code"))
        ));
        assert!(matches!(
            request(Some("return 1;".repeat(5).as_str()), json!({})).into_execution(1, 10, false),
            Err(Error::CodeTooLarge(10))
        ));
        for bad in [
            json!([1]),
            json!({"a-b": 1}),
            json!({"1x": 1}),
            json!({"": 1}),
        ] {
            assert!(matches!(
                request(Some("return 1"), bad).into_execution(1, 100, false),
                Err(Error::Invalid(_))
            ));
        }
    }
}
