//! The tools agents call: what each one looks like to a model ([`ToolDef`]) and
//! what calling it does. A tool never fails the run: whatever goes wrong (bad
//! arguments, a refused address, the Python runtime down or over its limits)
//! becomes an `Error: …` output the model reads and the answer reports.
//!
//! - [`calculator`]: arithmetic, parsed (never evaluated as code).
//! - [`web`]: the request tools and SearXNG search, public addresses only
//!   ([`crate::netguard`]) unless `ALLOW_PRIVATE_REQUESTS` allows more.
//! - [`python`]: Python tools, run by the Python tool runtime.
//! - [`openapi`]: the operations of an OpenAPI description (`openAPIToolkit`).
//! - [`retriever`]: vector store searches (the `retrieverTool`, retrieval chains).
//! - [`sql`]: SQL databases read by `sqlDatabaseChain` (read only, guarded).
//! - [`mcp`]: MCP servers' tools (`customMCP`), listed when a run starts.
//! - [`oauth`]: the OAuth 2.1 client that OAuth-protected MCP servers' tokens
//!   come from (discovery, registration, PKCE, refresh, client credentials).

pub mod calculator;
pub mod mcp;
mod mcp_legacy;
pub mod oauth;
pub mod openapi;
pub mod python;
pub mod retriever;
pub mod runtimes;
pub mod search;
pub mod sql;
pub mod web;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::FlowError;
use super::component::{
    McpEndpoint, McpSource, McpTools, PythonDefinition, PythonSource, ToolKind, ToolSpec,
};
use crate::llm::ToolDef;

/// What tools reach outside the run: the guarded web client, the runtime, and
/// the stored vector stores.
#[derive(Clone)]
pub struct ToolClients {
    pub web: web::WebClient,
    pub runtime: python::RuntimeClient,
    pub retriever: Arc<dyn retriever::Retriever>,
    /// SQL databases flows read (`sqlDatabaseChain`).
    pub sql: sql::SqlClient,
    /// MCP servers' tools (`customMCP`).
    pub mcp: mcp::McpClient,
}

/// What the tools of one run share: who is asking and with what variables.
#[derive(Clone, Default)]
pub struct ToolEnv {
    /// The workspace whose tools, variables and artifacts these are.
    pub workspace_id: String,
    /// `$vars`: workspace variables, then `overrideConfig.vars`.
    pub vars: Map<String, Value>,
    /// `$form`.
    pub form: Map<String, Value>,
    /// The workspace's stored tools the run uses, by id.
    pub stored: HashMap<Uuid, Arc<PythonDefinition>>,
    /// The workspace's MCP servers the run uses (`customMcpServerTool`), by id,
    /// their headers opened.
    pub mcp_servers: HashMap<Uuid, Arc<super::component::McpEndpoint>>,
}

/// A tool ready to be offered and called.
#[derive(Debug, Clone)]
pub struct ReadyTool {
    pub def: ToolDef,
    action: Action,
    /// The tool's output is the answer (Flowise's `returnDirect`).
    pub return_direct: bool,
}

#[derive(Debug, Clone)]
enum Action {
    Calculator,
    CurrentDateTime,
    Request(super::component::RequestTool),
    OpenApi(Box<super::component::OpenApiOperation>),
    WebSearch(super::component::WebSearchTool),
    WebScraper(super::component::WebScraperTool),
    Python {
        definition: Arc<PythonDefinition>,
        timeout: Option<f64>,
    },
    Retriever {
        store: Box<super::component::VectorStoreSpec>,
        return_sources: bool,
    },
    DocumentStore {
        chatflow: Uuid,
        return_sources: bool,
    },
    Mcp {
        server: Arc<super::component::McpEndpoint>,
        tool: String,
    },
}

/// What a call gave back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutcome {
    /// What the model reads (and `usedTools[].toolOutput` shows).
    pub output: String,
    /// Files the tool wrote, as the answer lists them.
    pub artifacts: Vec<Value>,
    /// Documents that join the answer's `sourceDocuments`.
    pub sources: Vec<crate::retrieval::Document>,
}

impl ToolOutcome {
    pub fn text(output: impl Into<String>) -> Self {
        ToolOutcome {
            output: output.into(),
            ..ToolOutcome::default()
        }
    }

    pub fn error(why: impl std::fmt::Display) -> Self {
        ToolOutcome::text(format!("Error: {why}"))
    }
}

/// The workspace's stored tools and MCP servers (`customMcpServerTool`) these
/// tools name, by id: what their run reads from the store. Sorted, once each.
pub fn stored_ids<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> (Vec<Uuid>, Vec<Uuid>) {
    let (mut tools, mut servers) = (Vec::new(), Vec::new());
    for spec in specs {
        match &spec.kind {
            ToolKind::Python(python) => {
                if let PythonSource::Stored(id) = python.source {
                    tools.push(id);
                }
            }
            ToolKind::Mcp(mcp) => {
                if let McpSource::Stored(id) = mcp.source {
                    servers.push(id);
                }
            }
            _ => {}
        }
    }
    for ids in [&mut tools, &mut servers] {
        ids.sort_unstable();
        ids.dedup();
    }
    (tools, servers)
}

/// Whether these tools read workspace variables when made ready: an MCP
/// server's config that names one (`{{$vars.<name>}}`).
pub fn read_vars<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> bool {
    specs.into_iter().any(|t| {
        matches!(&t.kind, ToolKind::Mcp(McpTools { source: McpSource::Config(c), .. }) if c.contains("{{$vars."))
    })
}

/// The server a node's MCP tools are on: its config with `$vars` filled, or
/// the workspace's stored server it names.
pub fn mcp_server(
    node_id: &str,
    spec: &McpTools,
    env: &ToolEnv,
) -> Result<Arc<McpEndpoint>, FlowError> {
    match &spec.source {
        McpSource::Config(config) => mcp::read_config(config, &env.vars)
            .map(Arc::new)
            .map_err(|why| FlowError::failed(format!("node {node_id} (MCP): {why}"))),
        McpSource::Stored(id) => env.mcp_servers.get(id).cloned().ok_or_else(|| {
            FlowError::invalid(format!(
                "node {node_id} uses MCP server {id}, which is not a server of this workspace"
            ))
        }),
    }
}

/// The tools of one agent, ready to call: stored Python tools resolved, MCP
/// servers' tools listed, names unique (a model calls a tool by name).
pub async fn prepare(
    specs: &[ToolSpec],
    env: &ToolEnv,
    clients: &ToolClients,
) -> Result<Vec<ReadyTool>, FlowError> {
    let mut ready: Vec<ReadyTool> = Vec::with_capacity(specs.len());
    for spec in specs {
        let tools = match &spec.kind {
            ToolKind::Mcp(mcp) => mcp_tools(&spec.node_id, mcp, env, &clients.mcp).await?,
            _ => vec![ready_tool(spec, env)?],
        };
        for tool in tools {
            if ready.iter().any(|t| t.def.name == tool.def.name) {
                return Err(FlowError::invalid(format!(
                    "two tools of one agent are named '{}'; a model could not tell them apart",
                    tool.def.name
                )));
            }
            ready.push(tool);
        }
    }
    Ok(ready)
}

/// A `customMCP` node's tools: its server's listing, narrowed to the picked ones.
/// A server that cannot be reached fails the run, naming the node.
async fn mcp_tools(
    node_id: &str,
    spec: &super::component::McpTools,
    env: &ToolEnv,
    client: &mcp::McpClient,
) -> Result<Vec<ReadyTool>, FlowError> {
    let failed = |why: String| FlowError::failed(format!("node {node_id} (MCP): {why}"));
    let server = mcp_server(node_id, spec, env)?;
    let listed = client
        .tools(&server, &env.workspace_id)
        .await
        .map_err(|e| failed(format!("cannot list the MCP server's tools: {e}")))?;
    let picked: Vec<ReadyTool> = listed
        .iter()
        .filter(|tool| {
            spec.actions.is_empty()
                || spec
                    .actions
                    .iter()
                    .any(|a| *a == tool.name || *a == tool.remote_name)
        })
        .map(|tool| ReadyTool {
            def: ToolDef {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.input_schema.clone(),
            },
            action: Action::Mcp {
                server: Arc::clone(&server),
                tool: tool.remote_name.clone(),
            },
            return_direct: false,
        })
        .collect();
    if let Some(missing) = spec
        .actions
        .iter()
        .find(|a| !listed.iter().any(|t| t.name == **a || t.remote_name == **a))
    {
        return Err(failed(format!(
            "the MCP server has no tool '{missing}' (it has: {})",
            listed
                .iter()
                .map(|t| t.remote_name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(picked)
}

fn ready_tool(spec: &ToolSpec, env: &ToolEnv) -> Result<ReadyTool, FlowError> {
    let no_arguments = || json!({"type": "object", "properties": {}});
    let (def, action, return_direct) = match &spec.kind {
        ToolKind::Calculator => (
            ToolDef {
                name: "calculator".into(),
                description: "Useful for getting the result of a math expression. The input \
                              is a valid mathematical expression, such as (2 + 3) * 4 or \
                              sqrt(16)."
                    .into(),
                parameters: json!({"type": "object", "properties": {
                    "input": {"type": "string", "description": "The expression to compute."}
                }, "required": ["input"]}),
            },
            Action::Calculator,
            false,
        ),
        ToolKind::CurrentDateTime => (
            ToolDef {
                name: "current_date_time".into(),
                description: "Gives the current date and time (UTC, ISO 8601).".into(),
                parameters: no_arguments(),
            },
            Action::CurrentDateTime,
            false,
        ),
        ToolKind::Request(request) => (
            ToolDef {
                name: request.name.clone(),
                description: request.description.clone(),
                parameters: web::parameters(request),
            },
            Action::Request(request.clone()),
            false,
        ),
        ToolKind::OpenApi(operation) => (
            ToolDef {
                name: operation.name.clone(),
                description: operation.description.clone(),
                parameters: operation.parameters.clone(),
            },
            Action::OpenApi(operation.clone()),
            operation.return_direct,
        ),
        ToolKind::WebSearch(search) => (
            search_tool(&search.name, &search.description),
            Action::WebSearch(search.clone()),
            false,
        ),
        ToolKind::WebScraper(scraper) => (
            ToolDef {
                name: web::SCRAPER_NAME.into(),
                description: scraper.description.clone(),
                parameters: json!({"type": "object", "properties": {
                    "input": {"type": "string", "description": "The URL of the first page."}
                }, "required": ["input"]}),
            },
            Action::WebScraper(scraper.clone()),
            false,
        ),
        ToolKind::Python(python) => {
            let definition = match &python.source {
                PythonSource::Inline(d) => Arc::clone(d),
                PythonSource::Stored(id) => env.stored.get(id).cloned().ok_or_else(|| {
                    FlowError::invalid(format!(
                        "node {} uses tool {id}, which is not a tool of this workspace",
                        spec.node_id
                    ))
                })?,
            };
            (
                ToolDef {
                    name: definition.name.clone(),
                    description: definition.description.clone(),
                    parameters: crate::domain::tool::parameters_schema(&definition.schema),
                },
                Action::Python {
                    definition,
                    timeout: python.timeout,
                },
                python.return_direct,
            )
        }
        ToolKind::Retriever {
            name,
            description,
            store,
            return_sources,
        } => (
            search_tool(name, description),
            Action::Retriever {
                store: store.clone(),
                return_sources: *return_sources,
            },
            false,
        ),
        ToolKind::DocumentStore {
            name,
            description,
            chatflow,
            return_sources,
        } => (
            search_tool(name, description),
            Action::DocumentStore {
                chatflow: *chatflow,
                return_sources: *return_sources,
            },
            false,
        ),
        ToolKind::Mcp(_) => {
            return Err(FlowError::invalid(format!(
                "node {} (customMCP) lists its tools when a run starts",
                spec.node_id
            )));
        }
    };
    Ok(ReadyTool {
        def,
        action,
        return_direct,
    })
}

/// `$flow` of a Python tool: the run's context.
#[derive(Debug, Clone, Default)]
pub struct FlowContext {
    pub input: String,
    pub chat_history: String,
    pub session_id: String,
    /// The chatflow running (its vector stores are searched).
    pub chatflow_id: Uuid,
    /// Its workspace (the document stores it may search).
    pub workspace_id: String,
}

impl ReadyTool {
    pub async fn call(
        &self,
        clients: &ToolClients,
        env: &ToolEnv,
        flow: &FlowContext,
        arguments: &Value,
    ) -> ToolOutcome {
        match &self.action {
            Action::Calculator => {
                let expression = match arguments {
                    Value::String(s) => s.as_str(),
                    other => other
                        .get("input")
                        .or_else(|| other.get("expression"))
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                };
                match calculator::evaluate(expression) {
                    Ok(value) => ToolOutcome::text(calculator::format_number(value)),
                    Err(e) => ToolOutcome::error(e),
                }
            }
            Action::CurrentDateTime => ToolOutcome::text(
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
            Action::Request(request) => clients.web.call(request, arguments).await,
            Action::OpenApi(operation) => {
                openapi::call(
                    operation,
                    arguments,
                    &clients.web,
                    &clients.runtime,
                    env,
                    flow,
                )
                .await
            }
            Action::WebScraper(scraper) => {
                let start = match arguments {
                    Value::String(s) => s.as_str(),
                    other => other
                        .get("input")
                        .or_else(|| other.get("url"))
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                };
                clients.web.scrape(scraper, start.trim()).await
            }
            Action::WebSearch(search) => {
                clients
                    .web
                    .search(search, search_query(arguments).trim())
                    .await
            }
            Action::Python {
                definition,
                timeout,
            } => {
                let arguments =
                    match crate::domain::tool::check_arguments(&definition.schema, arguments) {
                        Ok(a) => a,
                        Err(e) => return ToolOutcome::error(e),
                    };
                clients
                    .runtime
                    .execute(definition, arguments, *timeout, env, flow)
                    .await
            }
            Action::Retriever {
                store,
                return_sources,
            } => {
                let query = search_query(arguments);
                retriever::search(
                    &*clients.retriever,
                    retriever::Searched::Store(store),
                    query,
                    flow,
                    *return_sources,
                )
                .await
            }
            Action::DocumentStore {
                chatflow,
                return_sources,
            } => {
                let query = search_query(arguments);
                let searched = retriever::Searched::DocumentStore {
                    chatflow: *chatflow,
                    workspace: &env.workspace_id,
                };
                retriever::search(&*clients.retriever, searched, query, flow, *return_sources).await
            }
            Action::Mcp { server, tool } => {
                clients
                    .mcp
                    .call(server, &env.workspace_id, tool, arguments)
                    .await
            }
        }
    }
}

/// The `usedTools` item of one call.
pub fn used_tool(name: &str, arguments: &Value, outcome: &ToolOutcome) -> Value {
    json!({"tool": name, "toolInput": arguments, "toolOutput": outcome.output})
}

/// A retriever tool's query: the model's `input` (or `query`), or a bare string.
fn search_query(arguments: &Value) -> &str {
    match arguments {
        Value::String(s) => s.as_str(),
        other => other
            .get("input")
            .or_else(|| other.get("query"))
            .and_then(Value::as_str)
            .unwrap_or_default(),
    }
}

/// The definition of a tool that searches documents: one `input` string.
fn search_tool(name: &str, description: &str) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: json!({"type": "object", "properties": {
            "input": {"type": "string", "description": "What to search for."}
        }, "required": ["input"]}),
    }
}

/// Text as one URL path segment: everything but unreserved characters escaped.
pub(super) fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
