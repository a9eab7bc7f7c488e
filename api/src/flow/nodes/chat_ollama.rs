//! `chatOllama`: Ollama's native chat API (`baseUrl`).

use super::{K, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input};
use crate::llm::ollama;

pub struct ChatOllama;

const INPUTS: [InputSpec; 17] = with_ignored([
    input("allowImageUploads", K::Boolean),
    endpoint_url("baseUrl"),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("topP", K::Number),
    input("numPredict", K::Integer),
    input("seed", K::Integer),
    input("topK", K::Ignored),
    input("numCtx", K::Ignored),
    input("keepAlive", K::Ignored),
    input("jsonMode", K::Ignored),
    input("repeatPenalty", K::Ignored),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatOllama",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for ChatOllama {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: sampling(node, &["numPredict"], Some("seed"))?,
            provider: Provider::Ollama {
                base: super::base_url(node, &["baseUrl"], None, ollama::DEFAULT_BASE),
                model: model_name(node, "llama3.2"),
            },
        }))
    }
}
