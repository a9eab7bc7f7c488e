//! Google's Gemini (the Generative Language API: `POST
//! {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`, key in
//! `x-goog-api-key`): system text apart (`systemInstruction`), turns `user` and
//! `model` made of parts — text, pictures (`inlineData`), calls
//! (`functionCall`) and their results (`functionResponse`). Calls come whole,
//! reasoning as parts marked `thought` (asked with `thinkingConfig`).

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::http::{deltas, send, sse_events};
use super::{
    ChatMessage, ChatModel, ChatRequest, Delta, DeltaStream, LlmError, Role, ToolCallParts,
    ToolChoice, Usage,
};

pub const DEFAULT_BASE: &str = "https://generativelanguage.googleapis.com";
const PROVIDER: &str = "Google Gemini";

/// What a Gemini node sets beyond the sampling every model shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeminiOptions {
    pub top_k: Option<u32>,
    /// `(category, threshold)` pairs (`HARM_CATEGORY_HARASSMENT`, `BLOCK_NONE`).
    pub safety_settings: Vec<(String, String)>,
    /// Gemini 3's `thinkingLevel` (`LOW`, `MEDIUM`, `HIGH`): ahead of a budget.
    pub thinking_level: Option<String>,
}

pub struct GeminiChat {
    pub client: reqwest::Client,
    pub base: String,
    pub api_key: Option<String>,
    pub model: String,
    pub options: GeminiOptions,
}

#[async_trait]
impl ChatModel for GeminiChat {
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError> {
        let body = request_body(&request, &self.options);
        let url = format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            self.base, self.model
        );
        let mut http = self.client.post(url).json(&body);
        if let Some(key) = &self.api_key {
            http = http.header("x-goog-api-key", key);
        }
        let response = send(PROVIDER, &self.base, http).await?;
        let mut calls_seen = 0u64;
        Ok(deltas(
            sse_events(PROVIDER, response),
            move |(_, data): (String, String), parts, out| {
                chunk(&data, parts, out, &mut calls_seen)
            },
        ))
    }

    fn calls_tools(&self) -> bool {
        true
    }
}

fn request_body(request: &ChatRequest, options: &GeminiOptions) -> Value {
    let (system, contents) = to_gemini(&request.messages);
    let mut body = Map::new();
    body.insert("contents".into(), contents.into());
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    let params = &request.params;
    let mut config = Map::new();
    let fields = [
        ("temperature", params.temperature.map(Value::from)),
        ("topP", params.top_p.map(Value::from)),
        ("topK", options.top_k.map(Value::from)),
        ("maxOutputTokens", params.max_tokens.map(Value::from)),
        ("seed", params.seed.map(Value::from)),
    ];
    for (name, value) in fields {
        if let Some(v) = value {
            config.insert(name.into(), v);
        }
    }
    // A level (Gemini 3) takes precedence over a budget (Gemini 2.5), as in Flowise.
    let thinking = match (&options.thinking_level, params.thinking_budget) {
        (Some(level), _) => Some(json!({"thinkingLevel": level, "includeThoughts": true})),
        (None, Some(budget)) => Some(json!({"thinkingBudget": budget, "includeThoughts": true})),
        (None, None) => None,
    };
    if let Some(thinking) = thinking {
        config.insert("thinkingConfig".into(), thinking);
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if !options.safety_settings.is_empty() {
        let settings = options
            .safety_settings
            .iter()
            .map(|(category, threshold)| json!({"category": category, "threshold": threshold}))
            .collect();
        body.insert("safetySettings".into(), settings);
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                       "parameters": schema_for_gemini(&t.parameters)})
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
        if let ToolChoice::Force(name) = &request.tool_choice {
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}),
            );
        }
    }
    Value::Object(body)
}

/// System text apart; each turn as parts, consecutive turns of one role merged
/// (a call's results are the user's one turn, as Gemini wants them).
fn to_gemini(messages: &[ChatMessage]) -> (String, Vec<Value>) {
    let mut system = String::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, parts) = match m.role {
            Role::System => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&m.content);
                continue;
            }
            Role::Tool => (
                "user",
                vec![json!({"functionResponse": {
                    "name": m.name.as_deref().unwrap_or_default(),
                    "response": {"result": m.content},
                }})],
            ),
            Role::User => {
                let mut parts = Vec::with_capacity(1 + m.images.len());
                if !m.content.is_empty() {
                    parts.push(json!({"text": m.content}));
                }
                for image in &m.images {
                    parts.push(
                        json!({"inlineData": {"mimeType": image.mime, "data": &*image.base64}}),
                    );
                }
                ("user", parts)
            }
            Role::Assistant => {
                let mut parts = Vec::with_capacity(1 + m.tool_calls.len());
                if !m.content.is_empty() {
                    parts.push(json!({"text": m.content}));
                }
                let signature = m.thinking.as_ref().and_then(|t| t.signature.as_deref());
                for (n, call) in m.tool_calls.iter().enumerate() {
                    let args = match &call.arguments {
                        Value::Object(_) => call.arguments.clone(),
                        _ => json!({}),
                    };
                    let mut part = json!({"functionCall": {"name": call.name, "args": args}});
                    // The model's signature goes back on its first call, as it came.
                    if let (0, Some(signature)) = (n, signature) {
                        part["thoughtSignature"] = Value::from(signature);
                    }
                    parts.push(part);
                }
                ("model", parts)
            }
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let contents = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    (system, contents)
}

/// A JSON Schema as Gemini's function declarations take it: an OpenAPI subset
/// without `$schema`, `additionalProperties`, `default`, `examples` or `title`.
fn schema_for_gemini(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !matches!(
                        key.as_str(),
                        "$schema" | "additionalProperties" | "default" | "examples" | "title"
                    )
                })
                .map(|(key, value)| {
                    // Under `properties` the keys are names, not schema words.
                    let value = if key == "properties" {
                        match value {
                            Value::Object(props) => Value::Object(
                                props
                                    .iter()
                                    .map(|(name, prop)| (name.clone(), schema_for_gemini(prop)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        }
                    } else {
                        schema_for_gemini(value)
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(schema_for_gemini).collect()),
        other => other.clone(),
    }
}

/// Reads one streamed chunk (`GenerateContentResponse`); the body's end ends
/// the answer.
fn chunk(
    data: &str,
    parts: &mut ToolCallParts,
    out: &mut Vec<Delta>,
    calls_seen: &mut u64,
) -> Result<bool, LlmError> {
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable chunk: {e}")))?;
    if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
        return Err(LlmError::new(format!(
            "{PROVIDER} failed mid-answer: {message}"
        )));
    }
    if let Some(reason) = chunk
        .pointer("/promptFeedback/blockReason")
        .and_then(Value::as_str)
    {
        return Err(LlmError::new(format!(
            "{PROVIDER} refused the prompt ({reason}): see the node's safety settings"
        )));
    }
    if let Some(usage) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
        let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or_default();
        out.push(Delta::Usage(Usage {
            input_tokens: count("promptTokenCount"),
            // Thinking is written output, billed as such.
            output_tokens: count("candidatesTokenCount") + count("thoughtsTokenCount"),
        }));
    }
    let Some(candidate) = chunk.pointer("/candidates/0") else {
        return Ok(false);
    };
    for part in candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(text) = part
            .get("text")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                out.push(Delta::Thinking(text.to_owned()));
            } else {
                out.push(Delta::Text(text.to_owned()));
            }
        }
        if let Some(call) = part.get("functionCall") {
            // The signature of the reasoning behind the calls rides on the first.
            if *calls_seen == 0
                && let Some(signature) = part.get("thoughtSignature").and_then(Value::as_str)
            {
                out.push(Delta::ThinkingSignature(signature.to_owned()));
            }
            let arguments = call.get("args").map(Value::to_string).unwrap_or_default();
            parts.push(
                *calls_seen,
                call.get("id").and_then(Value::as_str),
                call.get("name").and_then(Value::as_str),
                &arguments,
            );
            *calls_seen += 1;
        }
    }
    match candidate.get("finishReason").and_then(Value::as_str) {
        Some(
            reason @ ("SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "MALFORMED_FUNCTION_CALL"),
        ) => Err(LlmError::new(format!(
            "{PROVIDER} stopped its answer ({reason})"
        ))),
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Image, Thinking, ToolCall, ToolDef};

    #[test]
    fn turns_become_parts_and_results_one_user_turn() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "calc".into(),
            arguments: json!({"x": 1}),
        };
        let mut calling = ChatMessage::tool_calls("", vec![call("a"), call("b")]);
        calling.thinking = Some(Thinking {
            text: "hm".into(),
            signature: Some("sig".into()),
        });
        let picture = Image {
            mime: "image/png",
            base64: "iVBO".into(),
        };
        let (system, contents) = to_gemini(&[
            ChatMessage::new(Role::System, "be brief"),
            ChatMessage::user_with_images("what?", vec![picture]),
            calling,
            ChatMessage::tool_result(&call("a"), "1"),
            ChatMessage::tool_result(&call("b"), "2"),
        ]);
        assert_eq!(system, "be brief");
        assert_eq!(
            contents[0],
            json!({"role": "user", "parts": [{"text": "what?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]})
        );
        assert_eq!(contents[1]["role"], "model");
        assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "sig");
        assert!(contents[1]["parts"][1].get("thoughtSignature").is_none());
        assert_eq!(
            contents[2]["parts"][1],
            json!({"functionResponse": {"name": "calc", "response": {"result": "2"}}})
        );
        assert_eq!(contents.len(), 3);
    }

    #[test]
    fn tools_forced_and_schemas_cleaned() {
        let request = ChatRequest {
            messages: vec![ChatMessage::new(Role::User, "q")],
            tools: vec![ToolDef {
                name: "structured_output".into(),
                description: "d".into(),
                parameters: json!({"$schema": "x", "type": "object", "additionalProperties": false,
                    "properties": {"title": {"type": "string", "title": "T", "default": "a"}}}),
            }],
            tool_choice: ToolChoice::Force("structured_output".into()),
            params: crate::llm::SamplingParams {
                temperature: Some(0.2),
                thinking_budget: Some(512),
                ..Default::default()
            },
        };
        let body = request_body(&request, &GeminiOptions::default());
        let parameters = &body["tools"][0]["functionDeclarations"][0]["parameters"];
        assert_eq!(
            parameters,
            &json!({"type": "object", "properties": {"title": {"type": "string"}}})
        );
        assert_eq!(
            body["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"],
            json!(["structured_output"])
        );
        assert_eq!(
            body["generationConfig"],
            json!({"temperature": 0.2, "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}})
        );
    }

    #[test]
    fn chunks_give_text_thoughts_calls_and_usage() {
        let mut parts = ToolCallParts::default();
        let mut out = Vec::new();
        let mut seen = 0;
        let data = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Considering.", "thought": true},
            {"text": "Hi"},
            {"functionCall": {"name": "calc", "args": {"x": 2}}, "thoughtSignature": "s1"}]}}],
            "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3, "thoughtsTokenCount": 2}});
        assert_eq!(
            chunk(&data.to_string(), &mut parts, &mut out, &mut seen),
            Ok(false)
        );
        assert_eq!(
            out,
            vec![
                Delta::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 5
                }),
                Delta::Thinking("Considering.".into()),
                Delta::Text("Hi".into()),
                Delta::ThinkingSignature("s1".into()),
            ]
        );
        let calls = parts.finish();
        assert_eq!(
            (calls[0].name.as_str(), &calls[0].arguments),
            ("calc", &json!({"x": 2}))
        );
        let blocked = json!({"candidates": [{"finishReason": "SAFETY"}]});
        assert!(chunk(&blocked.to_string(), &mut parts, &mut out, &mut seen).is_err());
        let refused = json!({"promptFeedback": {"blockReason": "SAFETY"}});
        assert!(chunk(&refused.to_string(), &mut parts, &mut out, &mut seen).is_err());
    }
}
