//! OpenAI-compatible chat completions (`POST {base}/chat/completions` with
//! `stream: true`): OpenAI itself and any compatible server (Ollama's `/v1`, vLLM,
//! llama.cpp, LM Studio, Mistral's API), and Azure OpenAI deployments (an
//! `api-version` query and an `api-key` header instead of a bearer token).
//!
//! Tool calls arrive as indexed fragments (`delta.tool_calls[i]`, the arguments
//! split across chunks) and leave as whole [`Delta::ToolCall`]s.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::http::{deltas, send, sse_events};
use super::{
    ChatMessage, ChatModel, ChatRequest, Delta, DeltaStream, LlmError, Role, ToolCallParts,
    ToolChoice, Usage,
};

pub const DEFAULT_BASE: &str = "https://api.openai.com/v1";
pub const PROVIDER: &str = "the OpenAI-compatible provider";

/// How the key travels.
#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    /// `Authorization: Bearer <key>` (no header without a key).
    Bearer(Option<String>),
    /// Azure: `api-key: <key>` and `?api-version=<version>`.
    Azure {
        key: Option<String>,
        version: String,
    },
}

pub struct OpenAiChat {
    pub client: reqwest::Client,
    /// Base URL up to and including the version segment (Azure: the deployment),
    /// without trailing slash.
    pub base: String,
    pub auth: Auth,
    pub model: String,
    /// Who this is, in error messages.
    pub provider: &'static str,
}

#[async_trait]
impl ChatModel for OpenAiChat {
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError> {
        let body = request_body(&self.model, &request);
        let url = format!("{}/chat/completions", self.base);
        let mut http = self.client.post(&url).json(&body);
        match &self.auth {
            Auth::Bearer(Some(key)) => http = http.bearer_auth(key),
            Auth::Bearer(None) => {}
            Auth::Azure { key, version } => {
                http = http.query(&[("api-version", version)]);
                if let Some(key) = key {
                    http = http.header("api-key", key);
                }
            }
        }
        let provider = self.provider;
        let response = send(provider, &self.base, http).await?;
        Ok(deltas(
            sse_events(provider, response),
            move |(_, data): (String, String), parts, out| chunk(provider, &data, parts, out),
        ))
    }

    fn calls_tools(&self) -> bool {
        true
    }
}

fn request_body(model: &str, request: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        request.messages.iter().map(wire_message).collect(),
    );
    body.insert("stream".into(), true.into());
    // The last chunk then reports the call's tokens (what a flow costs).
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let params = &request.params;
    let fields = [
        ("temperature", params.temperature.map(Value::from)),
        ("top_p", params.top_p.map(Value::from)),
        ("max_tokens", params.max_tokens.map(Value::from)),
        ("seed", params.seed.map(Value::from)),
    ];
    for (name, value) in fields {
        if let Some(v) = value {
            body.insert(name.into(), v);
        }
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters
                }})
            })
            .collect();
        body.insert("tools".into(), tools);
        if let ToolChoice::Force(name) = &request.tool_choice {
            body.insert(
                "tool_choice".into(),
                json!({"type": "function", "function": {"name": name}}),
            );
        }
    }
    Value::Object(body)
}

/// One message in the chat completions format.
fn wire_message(m: &ChatMessage) -> Value {
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function", "function": {
                        "name": c.name, "arguments": arguments_text(&c.arguments)
                    }})
                })
                .collect();
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                Value::from(m.content.as_str())
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.content,
        }),
        Role::User if !m.images.is_empty() => {
            let mut parts = vec![json!({"type": "text", "text": m.content})];
            parts.extend(
                m.images
                    .iter()
                    .map(|i| json!({"type": "image_url", "image_url": {"url": i.data_url()}})),
            );
            json!({"role": "user", "content": parts})
        }
        role => json!({"role": role.as_str(), "content": m.content}),
    }
}

/// Arguments as the model wrote them: JSON text.
pub fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Reads one streamed chunk; `[DONE]` ends the answer.
fn chunk(
    provider: &str,
    data: &str,
    parts: &mut ToolCallParts,
    out: &mut Vec<Delta>,
) -> Result<bool, LlmError> {
    if data.trim() == "[DONE]" {
        return Ok(true);
    }
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| LlmError::new(format!("{provider} sent an unreadable chunk: {e}")))?;
    if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
        return Err(LlmError::new(format!(
            "{provider} failed mid-answer: {message}"
        )));
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or_default();
        out.push(Delta::Usage(Usage {
            input_tokens: count("prompt_tokens"),
            output_tokens: count("completion_tokens"),
        }));
    }
    let Some(delta) = chunk.pointer("/choices/0/delta") else {
        return Ok(false);
    };
    // DeepSeek's and vLLM's name of the reasoning, then OpenRouter's and newer vLLM's.
    if let Some(thinking) = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|field| delta.get(*field).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
    {
        out.push(Delta::Thinking(thinking.to_owned()));
    }
    if let Some(text) = delta
        .get("content")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        out.push(Delta::Text(text.to_owned()));
    }
    for (position, call) in delta
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        parts.push(
            index,
            call.get("id").and_then(Value::as_str),
            call.pointer("/function/name").and_then(Value::as_str),
            call.pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn read(chunks: &[&str]) -> Result<Vec<Delta>, LlmError> {
        let mut parts = ToolCallParts::default();
        let mut out = Vec::new();
        for c in chunks {
            if chunk(PROVIDER, c, &mut parts, &mut out)? {
                break;
            }
        }
        out.extend(parts.finish().into_iter().map(Delta::ToolCall));
        Ok(out)
    }

    #[test]
    fn chunks_yield_text_and_assembled_calls() {
        let text = read(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(text, Ok(vec![Delta::Text("Hel".into())]));
        let calls = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"calculator","arguments":"{\"in"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"put\":\"2\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            calls,
            Ok(vec![Delta::ToolCall(ToolCall {
                id: "c1".into(),
                name: "calculator".into(),
                arguments: json!({"input": "2"})
            })])
        );
        assert!(read(&[r#"{"error":{"message":"boom"}}"#]).is_err());
        assert!(read(&["nope"]).is_err());
    }

    #[test]
    fn tool_turns_use_the_wire_format() {
        let call = ToolCall {
            id: "c1".into(),
            name: "calculator".into(),
            arguments: json!({"input": "1+1"}),
        };
        let assistant = wire_message(&ChatMessage::tool_calls("", vec![call.clone()]));
        assert_eq!(assistant["content"], Value::Null);
        assert_eq!(
            assistant["tool_calls"][0]["function"]["arguments"],
            "{\"input\":\"1+1\"}"
        );
        let result = wire_message(&ChatMessage::tool_result(&call, "2"));
        assert_eq!(
            result,
            json!({"role": "tool", "tool_call_id": "c1", "content": "2"})
        );
    }
}
