//! `reactAgentChat`: Flowise's ReAct agent for chat models. weir runs it on
//! native tool calling (the reason-act-observe loop without parsing prose).

use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct ReactAgentChat;

const DEFAULT_SYSTEM: &str = "Answer the question as well as you can. Think step by step; use a tool whenever it helps, look at its result, and answer when you know.";

static SPEC: NodeSpec = NodeSpec {
    name: "reactAgentChat",
    category: Category::Agent,
    inputs: &super::tool_agent::AGENT_INPUTS,
};

impl Node for ReactAgentChat {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        super::tool_agent::agent(node, DEFAULT_SYSTEM)
    }
}
