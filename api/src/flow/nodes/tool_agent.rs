//! `toolAgent`: a model that calls tools natively until it answers, and what
//! the three agent node types share (they differ only in their default system
//! message here).

use super::AGENT_IGNORED;
use crate::flow::FlowError;
use crate::flow::component::{AgentSpec, Component, PromptSpec, Provider};
use crate::flow::node::{
    Build, Category, InputKind as K, InputSpec, Node, NodeSpec, input, required,
};

pub struct ToolAgent;

/// Model steps an agent takes before it stops, unless the node says otherwise.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
const MAX_ITERATIONS_LIMIT: u32 = 100;

/// The inputs every agent node declares.
pub(super) const AGENT_INPUTS: [InputSpec; 8] = [
    required("model", K::Anchor(Category::ChatModel)),
    input("tools", K::Anchors(Category::Tool)),
    input("memory", K::Anchor(Category::Memory)),
    input("systemMessage", K::Text),
    input("maxIterations", K::Integer),
    input("chatPromptTemplate", K::Anchor(Category::Prompt)),
    AGENT_IGNORED[0],
    AGENT_IGNORED[1],
];

static SPEC: NodeSpec = NodeSpec {
    name: "toolAgent",
    category: Category::Agent,
    inputs: &AGENT_INPUTS,
};

impl Node for ToolAgent {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        agent(node, "You are a helpful AI assistant.")
    }
}

/// An agent from its node's inputs.
pub(super) fn agent(node: &Build<'_>, default_system: &str) -> Result<Component, FlowError> {
    let model = node.required_model("model")?;
    refuse_local(node, &model.provider)?;
    let from_prompt = match node.prompt("chatPromptTemplate")? {
        Some(PromptSpec::Chat { system, .. }) if !system.is_empty() => Some(system),
        _ => None,
    };
    let system_message = node
        .text("systemMessage")
        .map(str::to_owned)
        .or(from_prompt)
        .unwrap_or_else(|| default_system.to_owned());
    Ok(Component::Agent(AgentSpec {
        node_id: node.id().to_owned(),
        name: node.id().to_owned(),
        model,
        tools: node.tools("tools")?,
        memory: node.memory("memory")?,
        system_message,
        max_iterations: node.count(
            "maxIterations",
            DEFAULT_MAX_ITERATIONS,
            MAX_ITERATIONS_LIMIT,
        )?,
    }))
}

/// The embedded model has no tool calling: an agent on it could only pretend.
pub(super) fn refuse_local(node: &Build<'_>, provider: &Provider) -> Result<(), FlowError> {
    if matches!(provider, Provider::Local) {
        return Err(node.invalid(
            "cannot run on the embedded local model (chatLocal): it cannot call tools; \
             connect a provider model such as chatOpenAI, chatAnthropic or chatOllama",
        ));
    }
    Ok(())
}
