//! `chatGoogleGenerativeAI`: Google's Gemini through the Generative Language
//! API (`baseUrl`, else `GOOGLE_GENERATIVE_AI_BASE_URL`, else Google's), the
//! key from the node's credential (`googleGenerativeAPIKey`) or
//! `GOOGLE_GENERATIVE_AI_API_KEY`.

use serde_json::Value;

use super::{GEMINI, K, endpoint, sampling, with_ignored};
use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, Provider};
use crate::flow::node::{
    Build, Category, InputSpec, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::llm::SamplingParams;
use crate::llm::gemini::GeminiOptions;

pub struct ChatGoogleGenerativeAi;

const INPUTS: [InputSpec; 17] = with_ignored([
    input("allowImageUploads", K::Boolean),
    input("modelName", K::Text),
    input("customModelName", K::Text),
    input("temperature", K::Number),
    input("maxOutputTokens", K::Integer),
    input("topP", K::Number),
    input("topK", K::Integer),
    input("thinkingBudget", K::Integer),
    input("thinkingLevel", K::Text),
    input("safetySettings", K::Json),
    endpoint_url("baseUrl"),
    sensitive("googleGenerativeAPIKey", K::Text),
]);

static SPEC: NodeSpec = NodeSpec {
    name: "chatGoogleGenerativeAI",
    category: Category::ChatModel,
    inputs: &INPUTS,
};

/// Gemini's harm categories and thresholds (Flowise's lists).
const CATEGORIES: [&str; 5] = [
    "HARM_CATEGORY_DANGEROUS_CONTENT",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "HARM_CATEGORY_CIVIC_INTEGRITY",
];
const THRESHOLDS: [&str; 5] = [
    "BLOCK_NONE",
    "BLOCK_ONLY_HIGH",
    "BLOCK_MEDIUM_AND_ABOVE",
    "BLOCK_LOW_AND_ABOVE",
    "HARM_BLOCK_THRESHOLD_UNSPECIFIED",
];

impl Node for ChatGoogleGenerativeAi {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, api_key) = endpoint(node, &GEMINI)?;
        let model = node
            .text_of(&["customModelName", "modelName"])
            .unwrap_or("gemini-1.5-flash-latest")
            .to_owned();
        let thinking_level = match node.text("thinkingLevel") {
            None => None,
            Some(level @ ("LOW" | "MEDIUM" | "HIGH")) => Some(level.to_owned()),
            Some(other) => {
                return Err(node.invalid(format_args!(
                    "input 'thinkingLevel' must be LOW, MEDIUM or HIGH, not '{other}'"
                )));
            }
        };
        Ok(Component::Model(ModelSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            params: SamplingParams {
                thinking_budget: node
                    .integer("thinkingBudget")?
                    .map(|b| u32::try_from(b).unwrap_or(u32::MAX)),
                ..sampling(node, &["maxOutputTokens"], None)?
            },
            provider: Provider::Gemini {
                base,
                api_key,
                model,
                options: GeminiOptions {
                    top_k: node
                        .integer("topK")?
                        .map(|k| u32::try_from(k).unwrap_or(u32::MAX)),
                    safety_settings: safety_settings(node)?,
                    thinking_level,
                },
            },
        }))
    }
}

/// `safetySettings` rows `{harmCategory, harmBlockThreshold}`, each category
/// once (its first row), both from Gemini's lists.
fn safety_settings(node: &Build<'_>) -> Result<Vec<(String, String)>, FlowError> {
    let rows = match node.json("safetySettings")? {
        None => return Ok(Vec::new()),
        Some(Value::Array(rows)) => rows,
        Some(_) => return Err(node.invalid("input 'safetySettings' must be a list of rows")),
    };
    let mut settings: Vec<(String, String)> = Vec::new();
    for row in &rows {
        let field = |key: &str| row.get(key).and_then(Value::as_str).map(str::trim);
        let (Some(category), Some(threshold)) =
            (field("harmCategory"), field("harmBlockThreshold"))
        else {
            continue;
        };
        if !CATEGORIES.contains(&category) || !THRESHOLDS.contains(&threshold) {
            return Err(node.invalid(format_args!(
                "has an unknown safety setting {category} = {threshold}"
            )));
        }
        if !settings.iter().any(|(c, _)| c == category) {
            settings.push((category.to_owned(), threshold.to_owned()));
        }
    }
    Ok(settings)
}
