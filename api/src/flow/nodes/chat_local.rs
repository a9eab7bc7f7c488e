//! `chatLocal`: the embedded model (no provider, no key). It cannot call tools,
//! so agents refuse it when the flow is built.

use super::{K, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, input};

pub struct ChatLocal;

const INPUTS: [InputSpec; 10] = with_ignored([
    input("allowImageUploads", K::Ignored),
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("seed", K::Integer),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatLocal",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for ChatLocal {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: sampling(node, &["maxTokens"], Some("seed"))?,
            provider: Provider::Local,
        }))
    }
}
