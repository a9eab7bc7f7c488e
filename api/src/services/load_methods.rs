//! Flowise's load methods (`POST /node-load-method/:name`): the options of a
//! node's input that only the server knows. What each method answers follows
//! Flowise's nodes, by method and by node:
//! - `listModels`: a provider node's models (Flowise's model list, from the
//!   pinned components); for an agentflow node, the chat model nodes weir runs;
//! - `listEmbeddings`, `listVectorStores`, `listTools` (agentflow nodes): the
//!   node types of that kind weir runs; `listTools` of `customTool`: the
//!   workspace's stored tools;
//! - `listStores`: the workspace's document stores (`<id>:<name>` for agentflow
//!   nodes, only those upserted; the id for the chatflow nodes);
//! - `listFlows`: the workspace's chatflows;
//! - `listRuntimeStateKeys`, `listPreviousNodes`: read from the flow being edited
//!   (the Start node's state, the nodes before this one), sent by the canvas;
//! - `listActions` (the MCP nodes): the tools of the node's server, reached as a
//!   run reaches it;
//! - `listServers`, `listEndpoints` (`openAPIToolkit`): the servers and operations
//!   of the description uploaded to the node;
//! - `listToolInputArgs` (the agentflow Tool node): the arguments of the tool it
//!   calls.
//!
//! A method weir does not answer is a 400 naming it; the catalog shows such an
//! input as typed text ([`crate::flow::catalog::ANSWERED_LOAD_METHODS`]).

use serde_json::{Value, json};
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services, credentials};
use crate::domain::{ChatflowType, DocumentStoreStatus, Page};
use crate::flow::catalog::Catalog;
use crate::flow::component::{Component, ToolKind};
use crate::flow::graph::FlowGraph;
use crate::flow::node::Build;
use crate::flow::nodes::openapi_toolkit;
use crate::flow::tools::{mcp_server, openapi, prepare, read_vars};
use crate::flow::{FlowError, Overrides, registry};

/// Tools Flowise leaves out of an agentflow's tool list.
const NOT_AGENT_TOOLS: [&str; 3] = ["chainTool", "retrieverTool", "webBrowser"];

/// The options `method` gives node type `node`'s input; `body` is what the
/// canvas sent (the node's data, `previousNodes`, `currentNode`).
/// `may_name_credentials` is the caller's `credentials:read`: a node naming a
/// stored credential is opened with it only then (as saving such a flow needs).
pub async fn load(
    state: &Services,
    workspace: Uuid,
    node: &str,
    method: &str,
    body: &Value,
    may_name_credentials: bool,
) -> ServiceResult<Vec<Value>> {
    let catalog = Catalog::get();
    let definition = catalog
        .definition(node)
        .ok_or(ServiceError::NotFound("node type"))?;
    let in_agentflow = definition["category"] == "Agent Flows";
    let options = match (method, in_agentflow) {
        ("listModels", false) => catalog
            .models(node)
            .iter()
            .map(|m| json!({"label": m.label, "name": m.name}))
            .collect(),
        ("listModels", true) => node_types(catalog, &["Chat Models"], &[]),
        ("listEmbeddings", true) => node_types(catalog, &["Embeddings"], &[]),
        ("listVectorStores", true) => node_types(catalog, &["Vector Stores"], &[]),
        ("listTools", true) => node_types(catalog, &["Tools", "Tools (MCP)"], &NOT_AGENT_TOOLS),
        ("listTools", false) => stored_tools(state, workspace).await?,
        ("listStores", _) => document_stores(state, workspace, node, in_agentflow).await?,
        ("listFlows", _) => chatflows(state, workspace).await?,
        ("listRuntimeStateKeys", _) => state_keys(body),
        ("listPreviousNodes", _) => previous_nodes(body),
        ("listActions", _) => mcp_actions(state, workspace, body, may_name_credentials).await?,
        ("listToolInputArgs", _) => {
            tool_arguments(state, workspace, body, may_name_credentials).await?
        }
        ("listServers" | "listEndpoints", _) if node == "openAPIToolkit" => {
            openapi_options(&state.config.providers, body, method)?
        }
        _ => {
            return Err(ServiceError::Invalid(format!(
                "weir does not answer the load method '{method}' of node '{node}'"
            )));
        }
    };
    Ok(options)
}

/// The node types of these palette categories, as an agentflow offers them.
fn node_types(catalog: &Catalog, categories: &[&str], except: &[&str]) -> Vec<Value> {
    catalog
        .definitions()
        .iter()
        .filter(|d| categories.iter().any(|c| d["category"] == *c))
        .filter_map(|d| d["name"].as_str().map(|name| (name, d)))
        .filter(|(name, _)| !except.contains(name) && !name.ends_with("_LlamaIndex"))
        .map(|(name, d)| {
            json!({"label": d["label"], "name": name, "imageSrc": format!("/api/v1/node-icon/{name}")})
        })
        .collect()
}

async fn stored_tools(state: &Services, workspace: Uuid) -> ServiceResult<Vec<Value>> {
    let mut tools = Vec::new();
    let mut page = Page {
        page: 1,
        limit: Page::MAX_LIMIT,
    };
    loop {
        let listing = state.store.list_tools(workspace, page).await?;
        tools.extend(
            listing
                .items
                .iter()
                .map(|t| json!({"label": t.name, "name": t.id, "description": t.description})),
        );
        if listing.items.is_empty() || tools.len() as u64 >= listing.total {
            return Ok(tools);
        }
        page.page += 1;
    }
}

async fn document_stores(
    state: &Services,
    workspace: Uuid,
    node: &str,
    in_agentflow: bool,
) -> ServiceResult<Vec<Value>> {
    // A loader reads a store's chunks once they are processed; a vector store
    // or an agent searches one that is upserted.
    let wanted = if node == "documentStore" {
        DocumentStoreStatus::Sync
    } else {
        DocumentStoreStatus::Upserted
    };
    let stores = state.store.list_document_stores(workspace, None).await?;
    Ok(stores
        .items
        .into_iter()
        .filter(|s| s.status == wanted)
        .map(|s| {
            let name = if in_agentflow {
                format!("{}:{}", s.id, s.name)
            } else {
                s.id.to_string()
            };
            json!({"label": s.name, "name": name, "description": s.description})
        })
        .collect())
}

async fn chatflows(state: &Services, workspace: Uuid) -> ServiceResult<Vec<Value>> {
    let mut flows: Vec<Value> = state
        .store
        .all_chatflows(workspace)
        .await?
        .into_iter()
        .map(|flow| {
            let kind = match flow.flow_type {
                ChatflowType::Agentflow => "Agentflow V2",
                ChatflowType::Multiagent => "Agentflow V1",
                _ => "Chatflow",
            };
            json!({"label": flow.name, "name": flow.id, "description": kind})
        })
        .collect();
    flows.sort_by(|a, b| {
        let label = |v: &Value| v["label"].as_str().unwrap_or_default().to_lowercase();
        label(a).cmp(&label(b))
    });
    Ok(flows)
}

/// The node the canvas sent, built as a run builds it: a stored credential it
/// names opened (only for a caller who may name credentials, as saving such a
/// flow needs), where the credential may go checked. `Ok(Err(why))` when the node
/// cannot be built: the load method's one `error` option says why.
async fn build_sent_node(
    state: &Services,
    workspace: Uuid,
    node_data: &Value,
    may_name_credentials: bool,
) -> ServiceResult<Result<(String, Component), String>> {
    let flow_data = one_node_flow(node_data);
    credentials::check_saved_flow(
        &*state.store,
        workspace,
        &flow_data,
        may_name_credentials,
        &state.config.providers.provider_key_hosts,
    )
    .await?;
    let graph = FlowGraph::parse(&flow_data)?;
    let Some(node) = graph.nodes.first() else {
        return Ok(Err("the canvas sent no node".into()));
    };
    let opened = credentials::open_for_run(
        &*state.store,
        &state.keyring,
        workspace,
        node.credential.as_slice(),
    )
    .await?;
    let overrides = Overrides {
        credentials: opened.as_ref(),
        ..Overrides::new(&state.config.providers)
    };
    Ok(registry::build_node(&graph, node, &overrides)
        .map(|built| (node.name.clone(), built))
        .map_err(|why| why.to_string()))
}

/// `listActions`: the tools of the MCP server the node reaches, as the canvas
/// sends the node (its data) — built as a run builds it: its stored credential
/// opened, the workspace's variables filled in its config, the same address
/// guard and listing cache. A node that cannot be built or a server that cannot
/// be listed is Flowise's one "No Available Actions" option, saying why.
async fn mcp_actions(
    state: &Services,
    workspace: Uuid,
    body: &Value,
    may_name_credentials: bool,
) -> ServiceResult<Vec<Value>> {
    let none = |why: String| vec![nothing_to_list("Actions", why)];
    let not_mcp = |name: &str| Ok(none(format!("'{name}' is not an MCP node")));
    let (name, spec) = match build_sent_node(state, workspace, body, may_name_credentials).await? {
        Ok((name, Component::Tool(spec))) => (name, spec),
        Ok((name, _)) => return not_mcp(&name),
        Err(why) => return Ok(none(why)),
    };
    let ToolKind::Mcp(mcp) = &spec.kind else {
        return not_mcp(&name);
    };
    let tools = std::slice::from_ref(&spec);
    let env = super::prediction::tools_env(state, workspace, tools, read_vars(tools)).await?;
    let server = match mcp_server(&spec.node_id, mcp, &env) {
        Ok(server) => server,
        Err(why) => return Ok(none(why.to_string())),
    };
    Ok(
        match state.tools.mcp.tools(&server, &workspace.to_string()).await {
            Ok(tools) => tools
                .iter()
                .map(|t| json!({"label": t.remote_name, "name": t.remote_name, "description": t.description}))
                .collect(),
            Err(why) => none(format!("the server's tools cannot be listed: {why}")),
        },
    )
}

/// `listToolInputArgs` (the agentflow Tool node): the arguments of the tool it
/// calls — its chosen node (`toolAgentflowSelectedTool`) built with that node's
/// config, as the run builds it, and made ready as an agent's tools are (a
/// stored tool's schema read, an MCP server's tools listed): the properties of
/// their parameters. Why a list cannot be made is the one `error` option.
async fn tool_arguments(
    state: &Services,
    workspace: Uuid,
    body: &Value,
    may_name_credentials: bool,
) -> ServiceResult<Vec<Value>> {
    let none = |why: String| vec![nothing_to_list("Arguments", why)];
    // The canvas sends the node being edited as `currentNode`, else as the body.
    let node = body
        .get("currentNode")
        .filter(|n| n.is_object())
        .unwrap_or(body);
    let inputs = &node["inputs"];
    let chosen = ["toolAgentflowSelectedTool", "selectedTool"]
        .iter()
        .find_map(|k| inputs[*k].as_str().filter(|t| !t.trim().is_empty()));
    let Some(chosen) = chosen else {
        return Ok(none("choose a tool first".into()));
    };
    let config = ["toolAgentflowSelectedToolConfig", "selectedToolConfig"]
        .iter()
        .find_map(|k| match &inputs[*k] {
            Value::Object(config) => Some(config.clone()),
            Value::String(text) => serde_json::from_str(text).ok(),
            _ => None,
        })
        .unwrap_or_default();
    let tool_node = json!({"id": format!("{chosen}_0"), "name": chosen, "inputs": config});
    let specs = match build_sent_node(state, workspace, &tool_node, may_name_credentials).await? {
        Ok((_, Component::Tool(spec))) => vec![spec],
        Ok((_, Component::Toolkit(specs))) => specs,
        Ok(_) => return Ok(none(format!("'{chosen}' is not a tool"))),
        Err(why) => return Ok(none(why)),
    };
    let env = super::prediction::tools_env(state, workspace, &specs, read_vars(&specs)).await?;
    let ready = match prepare(&specs, &env, &state.tools).await {
        Ok(ready) => ready,
        Err(why) => return Ok(none(why.to_string())),
    };
    let mut arguments: Vec<Value> = Vec::new();
    for tool in &ready {
        let properties = tool.def.parameters["properties"]
            .as_object()
            .into_iter()
            .flatten();
        for (name, property) in properties {
            if !arguments.iter().any(|a| a["name"] == *name) {
                arguments.push(json!({"label": name, "name": name,
                                      "description": property["description"].as_str().unwrap_or_default()}));
            }
        }
    }
    Ok(arguments)
}

/// Flowise's one option of a list that cannot be made (`name` "error"), saying why.
fn nothing_to_list(what: &str, why: String) -> Value {
    json!({"label": format!("No Available {what}"), "name": "error", "description": why})
}

/// The node the canvas sent (its data) as the one node of a flow, so it is read
/// and built as a saved flow's nodes are.
fn one_node_flow(body: &Value) -> String {
    let mut data = body.clone();
    if let Value::Object(fields) = &mut data {
        fields.remove("previousNodes");
        fields.remove("currentNode");
    }
    let id = body["id"].as_str().unwrap_or("node_0");
    json!({"nodes": [{"id": id, "data": data}], "edges": []}).to_string()
}

/// `listServers` and `listEndpoints` of `openAPIToolkit`: the servers and the
/// operations (by their tools' names) of the description uploaded to the node.
fn openapi_options(
    settings: &crate::config::ProviderSettings,
    body: &Value,
    method: &str,
) -> ServiceResult<Vec<Value>> {
    let what = if method == "listServers" {
        "Servers"
    } else {
        "Endpoints"
    };
    let graph = FlowGraph::parse(&one_node_flow(body))?;
    let overrides = Overrides::new(settings);
    let text = graph
        .nodes
        .first()
        .ok_or_else(|| FlowError::invalid("the canvas sent no node"))
        .and_then(|node| Build::new(registry::node, &graph, node, &overrides))
        .and_then(|node| openapi_toolkit::description(&node));
    let text = match text {
        Ok(text) => text,
        Err(why) => return Ok(vec![nothing_to_list(what, why.to_string())]),
    };
    let listed = if method == "listServers" {
        openapi::servers(&text).map(|servers| {
            servers
                .into_iter()
                .map(|(url, description)| json!({"label": url, "name": url, "description": description}))
                .collect()
        })
    } else {
        openapi::endpoints(&text).map(|endpoints| {
            endpoints
                .into_iter()
                .map(|e| json!({"label": e.label, "name": e.name, "description": e.description}))
                .collect()
        })
    };
    Ok(listed.unwrap_or_else(|why| vec![nothing_to_list(what, why)]))
}

/// The keys of the flow's state, as its Start node declares them.
fn state_keys(body: &Value) -> Vec<Value> {
    body["previousNodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["name"] == "startAgentflow")
        .and_then(|start| start["inputs"]["startState"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|row| row["key"].as_str())
        .filter(|key| !key.is_empty())
        .map(|key| json!({"label": key, "name": key}))
        .collect()
}

/// The nodes before this one, as a loop offers to go back to.
fn previous_nodes(body: &Value) -> Vec<Value> {
    body["previousNodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["id"].as_str()?, n["label"].as_str().unwrap_or_default())))
        .map(|(id, label)| json!({"label": label, "name": format!("{id}-{label}"), "description": id}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_and_previous_nodes_come_from_the_flow_being_edited() {
        let body = json!({"previousNodes": [
            {"id": "startAgentflow_0", "name": "startAgentflow", "label": "Start",
             "inputs": {"startState": [{"key": "topic", "value": ""}, {"key": "", "value": ""}]}},
            {"id": "llmAgentflow_0", "name": "llmAgentflow", "label": "Draft"}
        ]});
        assert_eq!(
            state_keys(&body),
            vec![json!({"label": "topic", "name": "topic"})]
        );
        assert_eq!(
            previous_nodes(&body)[1],
            json!({"label": "Draft", "name": "llmAgentflow_0-Draft", "description": "llmAgentflow_0"})
        );
        assert!(state_keys(&json!({})).is_empty());
    }

    #[test]
    fn an_agentflow_offers_the_node_types_weir_runs() {
        let models = node_types(Catalog::get(), &["Chat Models"], &[]);
        let names: Vec<&str> = models.iter().filter_map(|m| m["name"].as_str()).collect();
        assert!(names.contains(&"chatOpenAI") && !names.contains(&"chatOpenAI_LlamaIndex"));
        let tools = node_types(Catalog::get(), &["Tools", "Tools (MCP)"], &NOT_AGENT_TOOLS);
        assert!(!tools.iter().any(|t| t["name"] == "retrieverTool"));
        assert!(crate::flow::catalog::ANSWERED_LOAD_METHODS.contains(&"listModels"));
    }
}
