//! `chatOpenAI`: OpenAI or any OpenAI-compatible server (`basePath`).

use super::{K, OPENAI, endpoint, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::openai::{self, Auth};

pub struct ChatOpenAI;

const INPUTS: [InputSpec; 19] = with_ignored([
    input("allowImageUploads", K::Boolean),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("seed", K::Integer),
    endpoint_url("basePath"),
    endpoint_url("basepath"),
    sensitive("openAIApiKey", K::Text),
    sensitive("baseOptions", K::Json),
    sensitive("proxyUrl", K::Ignored),
    input("frequencyPenalty", K::Ignored),
    input("presencePenalty", K::Ignored),
    input("reasoningEffort", K::Ignored),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatOpenAI",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

/// LlamaIndex's OpenAI chat model in Flowise (`chatOpenAI_LlamaIndex`): the same
/// model, for LlamaIndex's chat engines.
pub struct ChatOpenAiLlamaIndex;

static LLAMA_INDEX_SPEC: NodeSpec = NodeSpec {
    name: "chatOpenAI_LlamaIndex",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for ChatOpenAiLlamaIndex {
    fn spec(&self) -> &'static NodeSpec {
        &LLAMA_INDEX_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        build(node, LLAMA_INDEX_SPEC.name)
    }
}

impl Node for ChatOpenAI {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        build(node, SPEC.name)
    }
}

/// The model of either node type.
fn build(node: &Build<'_>, node_type: &'static str) -> Result<Component, FlowError> {
    let (base, key) = endpoint(node, &OPENAI)?;
    Ok(Component::Model(ModelSpec {
        node_id: node.id().to_owned(),
        node_type,
        params: sampling(node, &["maxTokens"], Some("seed"))?,
        provider: Provider::OpenAi {
            base,
            auth: Auth::Bearer(key),
            model: model_name(node, "gpt-4o-mini"),
            label: openai::PROVIDER,
        },
    }))
}
