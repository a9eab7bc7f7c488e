//! Python tools, run by the Python tool runtime (`PYTHON_RUNTIME`,
//! `POST /tools/execute-python` with `PY_TOOL_API_KEY`), and JavaScript (Flowise's
//! custom tool bodies and custom functions: `POST /tools/execute-javascript`,
//! the same sandbox). The model's arguments go as direct parameters
//! (`{{$name}}`; JavaScript globals `$name`), beside `$vars`, `$flow` and `$form`;
//! the function's result comes back as the tool's output, and the files it
//! wrote as artifacts whose URLs weir serves (`/api/v1/artifacts/…`), so
//! clients never see the runtime. A runtime that is down, slow or over its
//! limits is an `Error: …` output, within a bounded time.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::runtimes::Runtimes;
use super::{FlowContext, ToolEnv, ToolOutcome};
use crate::flow::component::{PythonDefinition, StdioMcpServer};
use crate::llm::http::root_cause;

/// Seconds a run gets when its tool sets no timeout (the runtime's default).
const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
/// Seconds a stdio MCP server gets to answer a request (its start not included).
const MCP_TIMEOUT_SECS: f64 = 60.0;
/// The JSON-RPC codes of the runtime's own stdio MCP errors (not the server's):
/// no answer in time, the server exited or could not start.
const MCP_RUNTIME_ERRORS: [i64; 2] = [-32001, -32002];
/// Time beyond the run's own timeout for installing requirements and queueing.
const INSTALL_ALLOWANCE: Duration = Duration::from_secs(120);

#[derive(Clone)]
pub struct RuntimeClient {
    client: reqwest::Client,
    /// Where each workspace's runs go (`PYTHON_RUNTIME`: one address or several).
    runtimes: Runtimes,
    api_key: Option<String>,
}

impl RuntimeClient {
    pub fn new(client: reqwest::Client, bases: &[String], api_key: Option<String>) -> Self {
        RuntimeClient {
            client,
            runtimes: Runtimes::new(bases),
            api_key: api_key.filter(|k| !k.is_empty()),
        }
    }

    /// The runtimes and the placement of workspaces on them.
    pub fn runtimes(&self) -> Runtimes {
        self.runtimes.clone()
    }

    /// The HTTP client calls go through (the health checks use it too).
    pub fn http(&self) -> reqwest::Client {
        self.client.clone()
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// The runtimes that do not answer their health check, and why (for a
    /// warning at start).
    pub async fn unreachable(&self) -> Vec<(String, String)> {
        let checks = self.runtimes.bases().map(|base| async move {
            super::runtimes::health(&self.client, base, Duration::from_secs(3))
                .await
                .err()
                .map(|why| (base.to_owned(), why))
        });
        futures_util::future::join_all(checks)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// A file a run wrote, as the runtime serves it (`GET /tools/artifacts/…`):
    /// from the workspace's runtime, else from the one it ran on while that was
    /// down (the first answer that is not a 404).
    pub async fn artifact(
        &self,
        workspace: &str,
        filename: &str,
    ) -> Result<reqwest::Response, String> {
        let mut last = Err("no Python runtime is configured".to_owned());
        for base in self.runtimes.order(workspace) {
            let url = format!(
                "{base}/tools/artifacts/{}/{}",
                super::percent_encode(workspace),
                super::percent_encode(filename)
            );
            let answer = self
                .authorized(self.client.get(&url))
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .map_err(|e| format!("the Python runtime cannot be reached: {}", root_cause(&e)));
            match answer {
                Ok(r) if r.status() != reqwest::StatusCode::NOT_FOUND => return Ok(r),
                // A runtime that is down may hold it: keep looking, report the miss.
                Err(_) if last.is_ok() => {}
                other => last = other,
            }
        }
        last
    }

    pub async fn execute(
        &self,
        tool: &PythonDefinition,
        arguments: Map<String, Value>,
        timeout: Option<f64>,
        env: &ToolEnv,
        flow: &FlowContext,
    ) -> ToolOutcome {
        let timeout = timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        let mut variables = Map::with_capacity(arguments.len() + 3);
        for (name, value) in arguments {
            variables.insert(format!("${name}"), value);
        }
        variables.insert("$vars".into(), Value::Object(env.vars.clone()));
        variables.insert(
            "$flow".into(),
            json!({
                "input": flow.input,
                "chatHistory": flow.chat_history,
                "sessionId": flow.session_id,
                "chatId": flow.session_id,
                "chatflowId": flow.chatflow_id,
                "workspaceId": env.workspace_id,
            }),
        );
        variables.insert("$form".into(), Value::Object(env.form.clone()));
        let (path, body) = if tool.javascript {
            (
                "execute-javascript",
                json!({
                    "code": tool.code,
                    "variables": variables,
                    "timeout": timeout,
                    "workspaceId": env.workspace_id,
                }),
            )
        } else {
            (
                "execute-python",
                json!({
                    "code": tool.code,
                    "variables": variables,
                    "requirements": tool.requirements,
                    "timeout": timeout,
                    "workspaceId": env.workspace_id,
                }),
            )
        };
        match self.run(&env.workspace_id, path, &body, timeout).await {
            Ok(answer) => outcome(&answer, &env.workspace_id),
            Err(why) => ToolOutcome::error(why),
        }
    }

    /// Runs the body of an async JavaScript function with these globals
    /// (`$input`, `$vars`, `$flow` …) in the runtime's sandbox: what it
    /// returned, or why it failed (its error, or the runtime's).
    pub async fn run_javascript(
        &self,
        code: &str,
        globals: Map<String, Value>,
        timeout: Option<f64>,
        workspace: &str,
    ) -> Result<Value, String> {
        let timeout = timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        let body = json!({
            "code": code,
            "variables": globals,
            "timeout": timeout,
            "workspaceId": workspace,
        });
        let answer = self
            .run(workspace, "execute-javascript", &body, timeout)
            .await?;
        if answer.get("success").and_then(Value::as_bool) == Some(true) {
            return Ok(answer.get("result").cloned().unwrap_or(Value::Null));
        }
        if answer.get("timedOut").and_then(Value::as_bool) == Some(true) {
            return Err(format!(
                "the function ran past its {timeout} s limit and was stopped"
            ));
        }
        Err(failure(&answer))
    }

    /// One request to a stdio MCP server the runtime runs in its sandbox for
    /// `workspace` (`/tools/mcp-stdio`: started and initialised there on first
    /// use): the server's result, or why there is none.
    pub async fn mcp_stdio(
        &self,
        workspace: &str,
        server: &StdioMcpServer,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let body = json!({
            "workspaceId": workspace,
            "server": server,
            "method": method,
            "params": params,
            "timeout": MCP_TIMEOUT_SECS,
        });
        let mut answer = self
            .run(workspace, "mcp-stdio", &body, MCP_TIMEOUT_SECS)
            .await?;
        if let Some(error) = answer.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            // The runtime's own errors (no answer in time, the server exited)
            // speak for themselves; a server's are quoted.
            let code = error.get("code").and_then(Value::as_i64);
            return Err(match code {
                Some(code) if MCP_RUNTIME_ERRORS.contains(&code) => message.to_owned(),
                _ => format!("the server answered: {message}"),
            });
        }
        Ok(answer
            .as_object_mut()
            .and_then(|a| a.remove("result"))
            .unwrap_or(Value::Null))
    }

    /// One execution in the workspace's runtime (`/tools/<path>`): its answer,
    /// or why there is none. A runtime that refuses the connection never saw
    /// the request, so the next one in the workspace's order gets it; any other
    /// failure is the answer (a run is never repeated).
    async fn run(
        &self,
        workspace: &str,
        path: &str,
        body: &Value,
        timeout: f64,
    ) -> Result<Value, String> {
        let order = self.runtimes.order(workspace);
        let mut refused = None;
        let mut sent = None;
        for base in order {
            let url = format!("{base}/tools/{path}");
            let request = self
                .authorized(self.client.post(&url))
                .timeout(Duration::from_secs_f64(timeout) + INSTALL_ALLOWANCE)
                .json(body);
            crate::metrics::metrics().python_runtime_run(base);
            match request.send().await {
                Ok(r) => {
                    self.runtimes.saw(base, true);
                    sent = Some(r);
                    break;
                }
                Err(e) if e.is_connect() => {
                    let why = root_cause(&e);
                    tracing::warn!(runtime = %base, error = %why, "the Python runtime cannot be reached");
                    self.runtimes.saw(base, false);
                    refused.get_or_insert(why);
                }
                // The runtime's address is the operator's business, not the caller's.
                Err(e) if e.is_timeout() => {
                    tracing::warn!(runtime = %base, "a runtime call timed out");
                    return Err("the Python runtime did not answer in time".into());
                }
                Err(e) => {
                    let why = root_cause(&e);
                    tracing::warn!(runtime = %base, error = %why, "the Python runtime cannot be reached");
                    return Err(format!("the Python runtime cannot be reached: {why}"));
                }
            }
        }
        let Some(response) = sent else {
            let why = refused.unwrap_or_else(|| "no runtime is configured".into());
            return Err(format!("the Python runtime cannot be reached: {why}"));
        };
        let status = response.status();
        let answer: Value = response.json().await.map_err(|e| {
            format!(
                "the Python runtime sent an unreadable answer (HTTP {}): {}",
                status.as_u16(),
                root_cause(&e)
            )
        })?;
        if !status.is_success() {
            let message = answer
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            return Err(format!(
                "the Python runtime refused the call (HTTP {}): {message}",
                status.as_u16()
            ));
        }
        Ok(answer)
    }
}

/// A failed run's error as `Type: message`.
fn failure(answer: &Value) -> String {
    let error = answer.get("error").unwrap_or(&Value::Null);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("Error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the tool failed");
    format!("{kind}: {message}")
}

/// The tool's output and artifacts from the runtime's answer.
fn outcome(answer: &Value, workspace: &str) -> ToolOutcome {
    let artifacts = answer
        .get("artifacts")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|a| artifact(a, workspace))
                .collect()
        })
        .unwrap_or_default();
    let output = if answer.get("success").and_then(Value::as_bool) == Some(true) {
        match answer.get("result") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => answer
                .get("output")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some(other) => other.to_string(),
        }
    } else {
        format!("Error: {}", failure(answer))
    };
    ToolOutcome {
        output,
        artifacts,
        ..ToolOutcome::default()
    }
}

/// A runtime artifact as the answer lists it, with the URL weir serves it at.
fn artifact(item: &Value, workspace: &str) -> Option<Value> {
    let filename = item.get("filename").and_then(Value::as_str)?;
    let url = format!(
        "/api/v1/artifacts/{}/{}",
        workspace,
        super::percent_encode(filename)
    );
    let kind = filename
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    Some(json!({
        "type": kind,
        "filename": filename,
        "mimeType": item.get("mimeType").cloned().unwrap_or(Value::Null),
        "size": item.get("size").cloned().unwrap_or(Value::Null),
        "url": url,
        "data": url,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_outcomes() {
        let ok = json!({"success": true, "result": {"rows": 2}, "output": "{\"rows\": 2}",
            "artifacts": [{"filename": "report 1.csv", "mimeType": "text/csv", "size": 10, "url": "/tools/artifacts/w/report 1.csv"}]});
        let out = outcome(&ok, "w");
        assert_eq!(out.output, "{\"rows\":2}");
        assert_eq!(
            out.artifacts[0]["url"],
            "/api/v1/artifacts/w/report%201.csv"
        );
        assert_eq!(out.artifacts[0]["type"], "csv");
        let text = outcome(&json!({"success": true, "result": "hi"}), "w");
        assert_eq!(text.output, "hi");
        let failed = json!({"success": false, "error": {"type": "KeyError", "message": "'x'"}});
        assert_eq!(outcome(&failed, "w").output, "Error: KeyError: 'x'");
    }
}
