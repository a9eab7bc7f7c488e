//! `agentAgentflow`: a model that calls tools — stored and built-in tools, and
//! document stores searched as tools — until it answers, optionally asking a
//! person before a tool call.

use serde_json::{Map, Value};

use super::{Read, clean_config, step};
use crate::flow::FlowError;
use crate::flow::component::step::{Agent, StepKind};
use crate::flow::component::{Component, ToolKind, ToolSpec, cell};
use crate::flow::graph::credential_of;
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct AgentAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "agentAgentflow",
    category: Category::Step,
    inputs: &[
        required("agentModel", InputKind::Text),
        input("agentModelConfig", InputKind::Json),
        input("agentMessages", InputKind::Json),
        input("agentTools", InputKind::Json),
        input("agentKnowledgeDocumentStores", InputKind::Json),
        input("agentKnowledgeVSEmbeddings", InputKind::Json),
        input("agentToolsBuiltInOpenAI", InputKind::Json),
        input("agentToolsBuiltInGemini", InputKind::Json),
        input("agentToolsBuiltInAnthropic", InputKind::Json),
        input("agentEnableMemory", InputKind::Boolean),
        input("agentMemoryType", InputKind::Text),
        input("agentMemoryWindowSize", InputKind::Integer),
        input("agentMemoryMaxTokenLimit", InputKind::Integer),
        input("agentUserMessage", InputKind::Text),
        input("agentReturnResponseAs", InputKind::Text),
        input("agentStructuredOutput", InputKind::Json),
        input("agentUpdateState", InputKind::Json),
    ],
};

/// Provider-side tools, which weir does not call.
const BUILT_IN_TOOLS: [&str; 3] = [
    "agentToolsBuiltInOpenAI",
    "agentToolsBuiltInGemini",
    "agentToolsBuiltInAnthropic",
];

impl Node for AgentAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        if !read.rows("agentKnowledgeVSEmbeddings")?.is_empty() {
            return Err(read.invalid(
                "searches vector stores through their own connections \
                 (agentKnowledgeVSEmbeddings), which weir does not make; give it \
                 document stores (agentKnowledgeDocumentStores) — in weir, chatflows \
                 holding a vector store",
            ));
        }
        let mut tools = Vec::new();
        let mut approval = Vec::new();
        for row in read.rows("agentKnowledgeDocumentStores")? {
            tools.push(document_store_tool(&read, &row, &tools)?);
            approval.push(false);
        }
        for row in read.rows("agentTools")? {
            let name = cell(row.get("agentSelectedTool"));
            if name.trim().is_empty() {
                continue;
            }
            let (config, credential) = match row.get("agentSelectedToolConfig") {
                Some(Value::Object(c)) => {
                    (clean_config(c, "agentSelectedTool"), credential_of(None, c))
                }
                _ => (Map::new(), None),
            };
            let built =
                match read.build_inner("agentSelectedTool", name.trim(), config, credential)? {
                    Component::Tool(tool) => vec![tool],
                    Component::Toolkit(kit) => kit,
                    _ => return Err(read.invalid(format_args!("'{name}' is not a tool"))),
                };
            let asks = matches!(
                row.get("agentSelectedToolRequiresHumanInput"),
                Some(Value::Bool(true))
            );
            approval.extend(built.iter().map(|_| asks));
            tools.extend(built);
        }
        if read.node.parent.is_some() && approval.iter().any(|a| *a) {
            return Err(read.invalid(
                "asks for approval before a tool inside an iteration; a block runs once \
                 per item without pausing",
            ));
        }
        for built_in in BUILT_IN_TOOLS {
            if read.value(built_in).is_some_and(|v| {
                v.as_array().is_some_and(|a| !a.is_empty())
                    || v.as_str()
                        .is_some_and(|s| !s.trim().is_empty() && s != "[]")
            }) {
                return Err(read.invalid(format_args!(
                    "uses the provider's built-in tools ('{built_in}'), which weir does not \
                     support yet"
                )));
            }
        }
        step(StepKind::Agent(Agent {
            model: read.model("agentModel")?,
            talk: read.talk("agent")?,
            tools,
            approval,
            structured: read.structured("agentStructuredOutput")?,
            update_state: read.update_state("agent")?,
        }))
    }
}

/// A knowledge row as the tool that searches its document store; two stores of
/// one name get two tool names (tool names are call names).
fn document_store_tool(
    read: &Read<'_>,
    row: &Map<String, Value>,
    tools: &[ToolSpec],
) -> Result<ToolSpec, FlowError> {
    let (chatflow, mut name) = read.document_store(row)?;
    let taken = |n: &str| {
        tools
            .iter()
            .any(|t| matches!(&t.kind, ToolKind::DocumentStore { name, .. } if name == n))
    };
    let stem = name.clone();
    let mut n = 2;
    while taken(&name) {
        name = format!("{stem}_{n}");
        n += 1;
    }
    let description = cell(row.get("docStoreDescription"));
    Ok(ToolSpec {
        node_id: read.node.id.clone(),
        kind: ToolKind::DocumentStore {
            description: if description.trim().is_empty() {
                format!("Searches the document store {name}.")
            } else {
                description
            },
            name,
            chatflow,
            return_sources: matches!(row.get("returnSourceDocuments"), Some(Value::Bool(true))),
        },
    })
}
