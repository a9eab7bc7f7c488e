//! `localAIEmbeddings`: a LocalAI server (OpenAI's embeddings wire at `basePath`).

use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, endpoint_url, sensitive};
use crate::llm::openai::Auth;

pub struct LocalAiEmbeddings;

static SPEC: NodeSpec = NodeSpec {
    name: "localAIEmbeddings",
    category: Category::Embeddings,
    inputs: &[
        InputSpec {
            required: true,
            ..endpoint_url("basePath")
        },
        input("modelName", K::Text),
        sensitive("localAIApiKey", K::Text),
        input("credential", K::Ignored),
    ],
};

impl Node for LocalAiEmbeddings {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let base = node
            .text("basePath")
            .ok_or_else(|| node.invalid("needs its 'basePath'"))?
            .trim_end_matches('/')
            .to_owned();
        Ok(Component::Embeddings(EmbeddingsSpec::OpenAi {
            base,
            auth: Auth::Bearer(node.text("localAIApiKey").map(str::to_owned)),
            model: node
                .text("modelName")
                .unwrap_or("text-embedding-ada-002")
                .to_owned(),
            dimensions: None,
            batch_size: 512,
            strip_newlines: false,
            label: "LocalAI",
        }))
    }
}
