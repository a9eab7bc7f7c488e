//! `seqAgent`: a tool-calling agent as one step of a sequential flow, and what
//! the agent and LLM steps share (their prompts and optional own model).

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqAgent, SeqStep};
use crate::flow::node::{
    Build, Category, InputKind as K, InputSpec, Node, NodeSpec, concat, input,
};

pub struct SeqAgentNode;

/// Inputs Flowise writes on sequential steps that weir accepts without effect
/// (history selection, human-in-the-loop approval, state updates).
pub(super) const STEP_IGNORED: [InputSpec; 10] = [
    input("messageHistory", K::Ignored),
    input("conversationHistorySelection", K::Ignored),
    input("interrupt", K::Ignored),
    input("approvalPrompt", K::Ignored),
    input("approveButtonText", K::Ignored),
    input("rejectButtonText", K::Ignored),
    input("updateStateMemoryUI", K::Ignored),
    input("updateStateMemoryCode", K::Ignored),
    input("updateStateMemory", K::Ignored),
    input("selectedUpdateStateMemoryTab", K::Ignored),
];

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
    })
}
