//! `supervisor`: the router of a multi-agent flow. It asks its model, through a
//! forced `route` tool call, which worker acts next or whether to FINISH.

use crate::flow::FlowError;
use crate::flow::component::{Component, SupervisorSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct Supervisor;

/// Flowise's default supervisor prompt; `{team_members}` lists the workers.
pub const DEFAULT_PROMPT: &str = "You are a supervisor tasked with managing a conversation between the following workers: {team_members}.\nGiven the following user request, respond with the worker to act next.\nEach worker will perform a task and respond with their results and status.\nWhen finished, respond with FINISH.\nSelect strategically to minimize the number of steps taken.";

const DEFAULT_RECURSION_LIMIT: u32 = 100;

static SPEC: NodeSpec = NodeSpec {
    name: "supervisor",
    category: Category::Supervisor,
    inputs: &[
        input("supervisorName", K::Text),
        input("supervisorPrompt", K::Text),
        required("model", K::Anchor(Category::ChatModel)),
        input("agentMemory", K::Anchor(Category::Memory)),
        input("summarization", K::Ignored),
        input("recursionLimit", K::Integer),
        input("inputModeration", K::Anchors(Category::Moderation)),
    ],
};

impl Node for Supervisor {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let model = node.required_model("model")?;
        super::tool_agent::refuse_local(node, &model.provider)?;
        Ok(Component::Supervisor(SupervisorSpec {
            node_id: node.id().to_owned(),
            name: node
                .text("supervisorName")
                .unwrap_or("Supervisor")
                .to_owned(),
            prompt: node
                .text("supervisorPrompt")
                .unwrap_or(DEFAULT_PROMPT)
                .to_owned(),
            model,
            memory: node.memory("agentMemory")?,
            recursion_limit: node.count("recursionLimit", DEFAULT_RECURSION_LIMIT, 1000)?,
        }))
    }
}
