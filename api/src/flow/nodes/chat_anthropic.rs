//! `chatAnthropic`: Anthropic's Messages API (`basePath` or `ANTHROPIC_BASE_URL`).

use super::{ANTHROPIC, K, endpoint, model_name, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::SamplingParams;

pub struct ChatAnthropic;

const INPUTS: [InputSpec; 16] = with_ignored([
    input("allowImageUploads", K::Boolean),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokensToSample", K::Integer),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("topK", K::Ignored),
    sensitive("anthropicApiKey", K::Text),
    endpoint_url("basePath"),
    input("extendedThinking", K::Boolean),
    input("budgetTokens", K::Integer),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatAnthropic",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

impl Node for ChatAnthropic {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, api_key) = endpoint(node, &ANTHROPIC)?;
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: SamplingParams {
                thinking_budget: thinking_budget(node)?,
                ..sampling(node, &["maxTokensToSample", "maxTokens"], None)?
            },
            provider: Provider::Anthropic {
                base,
                api_key,
                model: model_name(node, "claude-3-5-haiku-latest"),
            },
        }))
    }
}

/// Anthropic's least thinking budget, also Flowise's default.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The thinking budget when `extendedThinking` is on: `budgetTokens`, at least
/// Anthropic's minimum.
fn thinking_budget(node: &Build<'_>) -> Result<Option<u32>, FlowError> {
    if !node.boolean("extendedThinking")? {
        return Ok(None);
    }
    let budget = node
        .integer("budgetTokens")?
        .unwrap_or(MIN_THINKING_BUDGET.into());
    Ok(Some(
        u32::try_from(budget)
            .unwrap_or(u32::MAX)
            .max(MIN_THINKING_BUDGET),
    ))
}
