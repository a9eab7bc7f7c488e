//! `groqChat`: Groq's chat API, which speaks the OpenAI wire format at
//! `https://api.groq.com/openai/v1` (`basePath`, weir's, replaces it; key from
//! the node's `groqApi` credential or `GROQ_API_KEY`).

use super::{GROQ, K, endpoint, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::openai::Auth;

pub struct GroqChat;

const INPUTS: [InputSpec; 10] = with_ignored([
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    endpoint_url("basePath"),
    sensitive("groqApiKey", K::Text),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "groqChat",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for GroqChat {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, key) = endpoint(node, &GROQ)?;
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: sampling(node, &["maxTokens"], None)?,
            provider: Provider::OpenAi {
                base,
                auth: Auth::Bearer(key),
                model: model_name(node, "llama-3.3-70b-versatile"),
                label: "Groq",
            },
        }))
    }
}
