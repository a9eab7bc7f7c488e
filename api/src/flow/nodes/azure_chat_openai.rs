//! `azureChatOpenAI`: an Azure OpenAI deployment. Its URL and key are found by
//! `nodes::azure_endpoint` (the node's `basePath`, `basepath` or instance name,
//! else the server's `AZURE_OPENAI_*` variables; the server's key never goes to
//! a URL the node chose); deployment and API version come from the node or from
//! `AZURE_OPENAI_API_DEPLOYMENT_NAME`, `AZURE_OPENAI_API_VERSION`.

use super::{K, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::openai::Auth;

pub struct AzureChatOpenAI;

pub(super) const DEFAULT_API_VERSION: &str = "2024-10-21";

const INPUTS: [InputSpec; 18] = with_ignored([
    input("allowImageUploads", K::Boolean),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    endpoint_url("basePath"),
    endpoint_url("basepath"),
    sensitive("azureOpenAIApiKey", K::Text),
    sensitive("azureOpenAIApiInstanceName", K::Text),
    sensitive("azureOpenAIApiDeploymentName", K::Text),
    sensitive("azureOpenAIApiVersion", K::Text),
    input("frequencyPenalty", K::Ignored),
    input("presencePenalty", K::Ignored),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "azureChatOpenAI",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

/// LlamaIndex's Azure OpenAI chat model in Flowise
/// (`azureChatOpenAI_LlamaIndex`, as in its Simple Chat Engine template): the
/// same model, for LlamaIndex's chat engines.
pub struct AzureChatOpenAiLlamaIndex;

static LLAMA_INDEX_SPEC: NodeSpec = NodeSpec {
    name: "azureChatOpenAI_LlamaIndex",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for AzureChatOpenAiLlamaIndex {
    fn spec(&self) -> &'static NodeSpec {
        &LLAMA_INDEX_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        build(node, LLAMA_INDEX_SPEC.name)
    }
}

impl Node for AzureChatOpenAI {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        build(node, SPEC.name)
    }
}

/// The model of either node type.
fn build(node: &Build<'_>, node_type: &'static str) -> Result<Component, FlowError> {
    let setting = |input: &str, env: &str| super::setting(node, &[input], env);
    let (base, key) = super::azure_endpoint(
        node,
        setting(
            "azureOpenAIApiDeploymentName",
            "AZURE_OPENAI_API_DEPLOYMENT_NAME",
        ),
        "AZURE_OPENAI_API_DEPLOYMENT_NAME",
    )?;
    Ok(Component::Model(ModelSpec {
        node_id: node.id().to_owned(),
        node_type,
        params: sampling(node, &["maxTokens"], None)?,
        provider: Provider::OpenAi {
            base,
            auth: Auth::Azure {
                key,
                version: setting("azureOpenAIApiVersion", "AZURE_OPENAI_API_VERSION")
                    .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned()),
            },
            model: model_name(node, "gpt-4o-mini"),
            label: "Azure OpenAI",
        },
    }))
}
