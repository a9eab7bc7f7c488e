//! `conversationalAgent`: Flowise's conversational agent, run on native tool
//! calling like `toolAgent`, with its own default system message.

use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct ConversationalAgent;

const DEFAULT_SYSTEM: &str = "Assistant is a large language model. Assistant is designed to be able to assist with a wide range of tasks, from answering simple questions to providing in-depth explanations and discussions on a wide range of topics. Assistant uses its tools when they help answer the question.";

static SPEC: NodeSpec = NodeSpec {
    name: "conversationalAgent",
    category: Category::Agent,
    inputs: &super::tool_agent::AGENT_INPUTS,
};

impl Node for ConversationalAgent {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        super::tool_agent::agent(node, DEFAULT_SYSTEM)
    }
}
