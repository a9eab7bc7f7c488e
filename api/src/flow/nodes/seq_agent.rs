//! `seqAgent`: a tool-calling agent as one step of a sequential flow, and what
//! the agent and LLM steps share (their prompts and optional own model).

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqAgent, SeqStep};
use crate::flow::node::{
    Build, Category, InputKind as K, InputSpec, Node, NodeSpec, concat, input,
};

pub struct SeqAgentNode;

/// Inputs Flowise writes on sequential steps: the state updates, and what
/// weir accepts without effect (history selection, human-in-the-loop approval).
pub(super) const STEP_IGNORED: [InputSpec; 10] = [
    input("messageHistory", K::Ignored),
    input("conversationHistorySelection", K::Ignored),
    input("interrupt", K::Ignored),
    input("approvalPrompt", K::Ignored),
    input("approveButtonText", K::Ignored),
    input("rejectButtonText", K::Ignored),
    input("updateStateMemoryUI", K::Json),
    input("updateStateMemoryCode", K::Text),
    // The chosen tab's name, or (older flows) the rows themselves.
    input("updateStateMemory", K::Ignored),
    input("selectedUpdateStateMemoryTab", K::Ignored),
];

/// A step's state update: its rows, or its JavaScript.
pub(super) type StateUpdate = (Vec<(String, String)>, Option<String>);

/// A step's `Update State` rows `{key, value}` (the table tab; older flows wrote
/// `{Key, Value}` rows into `updateStateMemory`), or its JavaScript (the code
/// tab, when it is the one chosen and holds code), run in the Python runtime.
pub(super) fn update_state(node: &Build<'_>) -> Result<StateUpdate, FlowError> {
    let tab = node
        .value(&format!("selectedUpdateStateMemoryTab_{}", node.id()))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("updateStateMemoryUI");
    if tab.starts_with("updateStateMemoryCode")
        && let Some(code) = node.text("updateStateMemoryCode")
    {
        super::javascript::refuse_node_modules(node, "updateStateMemoryCode", code)?;
        return Ok((Vec::new(), Some(code.to_owned())));
    }
    let mut rows = Vec::new();
    for input in ["updateStateMemoryUI", "updateStateMemory"] {
        let Some(serde_json::Value::Array(items)) = json_rows(node, input)? else {
            continue;
        };
        for item in items {
            let text = |names: &[&str]| row_text(&item, names);
            let key = text(&["key", "Key"]);
            if key.is_empty() {
                return Err(node.invalid("has an Update State row without a key"));
            }
            rows.push((key, text(&["value", "Value"])));
        }
        break;
    }
    Ok((rows, None))
}

const INPUTS: [InputSpec; 18] = concat(
    [
        input("agentName", K::Text),
        input("systemMessagePrompt", K::Text),
        input("humanMessagePrompt", K::Text),
        input("tools", K::Anchors(Category::Tool)),
        input("sequentialNode", K::Anchors(Category::Sequential)),
        input("model", K::Anchor(Category::ChatModel)),
        input("promptValues", K::Json),
        input("maxIterations", K::Integer),
    ],
    STEP_IGNORED,
);

static SPEC: NodeSpec = NodeSpec {
    name: "seqAgent",
    category: Category::Sequential,
    inputs: &INPUTS,
};

impl Node for SeqAgentNode {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let step = step(node, "agentName", "Agent")?;
        Ok(Component::Sequential(SeqStep::Agent(SeqAgent {
            tools: node.tools("tools")?,
            max_iterations: node.count(
                "maxIterations",
                super::tool_agent::DEFAULT_MAX_ITERATIONS,
                100,
            )?,
            ..step
        })))
    }
}

/// A table row's cell, trimmed, under the first of `names` it has (Flowise
/// wrote `Key`, `Operation`… before `key`, `type`…); empty when it has none.
pub(super) fn row_text(row: &serde_json::Value, names: &[&str]) -> String {
    crate::flow::component::cell(names.iter().find_map(|n| row.get(*n)))
        .trim()
        .to_owned()
}

/// A table input: a list, or its JSON text; `None` when absent, blank or a
/// tab's name (inputs such as `updateStateMemory` hold either).
pub(super) fn json_rows(
    node: &Build<'_>,
    input: &str,
) -> Result<Option<serde_json::Value>, FlowError> {
    match node.value(input) {
        Some(serde_json::Value::Array(items)) => Ok(Some(serde_json::Value::Array(items.clone()))),
        Some(serde_json::Value::String(text)) if text.trim_start().starts_with('[') => {
            serde_json::from_str(text)
                .map(Some)
                .map_err(|e| node.invalid(format_args!("input '{input}' is not valid JSON: {e}")))
        }
        _ => Ok(None),
    }
}

/// The prompts, name and model of an agent or LLM step (no tools yet).
pub(super) fn step(
    node: &Build<'_>,
    name_input: &str,
    default: &str,
) -> Result<SeqAgent, FlowError> {
    let model = node.model("model")?;
    if let Some(m) = &model {
        super::tool_agent::refuse_local(node, &m.provider)?;
    }
    let (update_state, update_code) = update_state(node)?;
    Ok(SeqAgent {
        name: node.text(name_input).unwrap_or(default).to_owned(),
        system: node
            .text("systemMessagePrompt")
            .unwrap_or_default()
            .to_owned(),
        human: node
            .text("humanMessagePrompt")
            .unwrap_or_default()
            .to_owned(),
        values: node.json_object("promptValues")?,
        model,
        tools: Vec::new(),
        max_iterations: 1,
        update_state,
        update_code,
    })
}
