//! `chatMistralAI`: Mistral's chat API, which speaks the OpenAI wire format
//! (`overrideEndpoint` replaces the default base, key from the node or
//! `MISTRAL_API_KEY`).

use super::{K, MISTRAL, endpoint, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::openai::Auth;

pub struct ChatMistralAI;

const INPUTS: [InputSpec; 15] = with_ignored([
    input("allowImageUploads", K::Ignored),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxOutputTokens", K::Integer),
    input("topP", K::Number),
    input("randomSeed", K::Integer),
    input("safeMode", K::Ignored),
    endpoint_url("overrideEndpoint"),
    sensitive("mistralAIAPIKey", K::Text),
    sensitive("apiKey", K::Text),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatMistralAI",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for ChatMistralAI {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, key) = endpoint(node, &MISTRAL)?;
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: sampling(node, &["maxOutputTokens"], Some("randomSeed"))?,
            provider: Provider::OpenAi {
                base,
                auth: Auth::Bearer(key),
                model: model_name(node, "mistral-small-latest"),
                label: "Mistral AI",
            },
        }))
    }
}
