//! `azureOpenAIEmbeddings`: an Azure OpenAI embeddings deployment, its URL and
//! key found as for `azureChatOpenAI` (`nodes::azure_endpoint`), the deployment
//! from the node or from `AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME` (else
//! `…_DEPLOYMENT_NAME`), the API version from the node or
//! `AZURE_OPENAI_API_VERSION`.

use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec, endpoint_url, sensitive};
use crate::llm::openai::Auth;

pub struct AzureOpenAiEmbeddings;

static SPEC: NodeSpec = NodeSpec {
    name: "azureOpenAIEmbeddings",
    category: Category::Embeddings,
    inputs: &[
        input("modelName", K::Text),
        input("batchSize", K::Integer),
        endpoint_url("basePath"),
        endpoint_url("basepath"),
        sensitive("azureOpenAIApiKey", K::Text),
        sensitive("azureOpenAIApiInstanceName", K::Text),
        sensitive("azureOpenAIApiDeploymentName", K::Text),
        sensitive("azureOpenAIApiVersion", K::Text),
        input("credential", K::Ignored),
        input("timeout", K::Ignored),
        input("baseOptions", K::Ignored),
    ],
};

impl Node for AzureOpenAiEmbeddings {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let setting = |input: &str, env: &str| super::setting(node, &[input], env);
        let deployment = setting(
            "azureOpenAIApiDeploymentName",
            "AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME",
        )
        .or_else(|| {
            node.settings()
                .get("AZURE_OPENAI_API_DEPLOYMENT_NAME")
                .map(str::to_owned)
        });
        let (base, key) = super::azure_endpoint(
            node,
            deployment,
            "AZURE_OPENAI_API_EMBEDDINGS_DEPLOYMENT_NAME",
        )?;
        Ok(Component::Embeddings(EmbeddingsSpec::OpenAi {
            base,
            auth: Auth::Azure {
                key,
                version: setting("azureOpenAIApiVersion", "AZURE_OPENAI_API_VERSION")
                    .unwrap_or_else(|| super::azure_chat_openai::DEFAULT_API_VERSION.to_owned()),
            },
            model: node
                .text("modelName")
                .unwrap_or("text-embedding-ada-002")
                .to_owned(),
            dimensions: None,
            batch_size: node.count("batchSize", 100, 2048)? as usize,
            strip_newlines: true,
            label: "Azure OpenAI",
        }))
    }
}
