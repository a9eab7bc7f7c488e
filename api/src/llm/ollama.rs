//! Ollama's native chat API (`POST {baseUrl}/api/chat`): newline-delimited JSON
//! chunks `{"message": {"content"}, "done"}`.

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::http::{deltas, lines, send};
use super::{ChatMessage, ChatModel, ChatRequest, Delta, DeltaStream, LlmError, Role, Usage};

pub const DEFAULT_BASE: &str = "http://localhost:11434";
const PROVIDER: &str = "Ollama";

pub struct OllamaChat {
    pub client: reqwest::Client,
    pub base: String,
    pub model: String,
}

#[async_trait]
impl ChatModel for OllamaChat {
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError> {
        let params = &request.params;
        let mut options = serde_json::Map::new();
        if let Some(t) = params.temperature {
            options.insert("temperature".into(), Value::from(t));
        }
        if let Some(p) = params.top_p {
            options.insert("top_p".into(), Value::from(p));
        }
        if let Some(n) = params.max_tokens {
            options.insert("num_predict".into(), Value::from(n));
        }
        if let Some(s) = params.seed {
            options.insert("seed".into(), Value::from(s));
        }
        let mut body = json!({
            "model": self.model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": true,
            "options": options,
        });
        if !request.tools.is_empty() {
            // Ollama has no way to force a tool; the supervisor's prompt asks for it.
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
        }
        let http = self
            .client
            .post(format!("{}/api/chat", self.base))
            .json(&body);
        let response = send(PROVIDER, &self.base, http).await?;
        let lines = lines(PROVIDER, response).filter(|line| {
            futures_util::future::ready(!matches!(line, Ok(l) if l.trim().is_empty()))
        });
        let mut calls_seen = 0u64;
        Ok(deltas(lines, move |line: String, parts, out| {
            let v = parse(&line)?;
            // A thinking model's reasoning (`think`, Ollama 0.9 on).
            if let Some(thinking) = v
                .pointer("/message/thinking")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.push(Delta::Thinking(thinking.to_owned()));
            }
            if let Some(text) = v
                .pointer("/message/content")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.push(Delta::Text(text.to_owned()));
            }
            for call in v
                .pointer("/message/tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let arguments = match call.pointer("/function/arguments") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                parts.push(
                    calls_seen,
                    call.get("id").and_then(Value::as_str),
                    call.pointer("/function/name").and_then(Value::as_str),
                    &arguments,
                );
                calls_seen += 1;
            }
            let done = v.get("done").and_then(Value::as_bool) == Some(true);
            if done {
                let count = |field: &str| v.get(field).and_then(Value::as_u64).unwrap_or_default();
                out.push(Delta::Usage(Usage {
                    input_tokens: count("prompt_eval_count"),
                    output_tokens: count("eval_count"),
                }));
            }
            Ok(done)
        }))
    }

    fn calls_tools(&self) -> bool {
        true
    }
}

fn wire_message(m: &ChatMessage) -> Value {
    let mut out = json!({"role": m.role.as_str(), "content": m.content});
    if !m.tool_calls.is_empty() {
        out["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| json!({"function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    if m.role == Role::Tool
        && let Some(name) = &m.name
    {
        out["tool_name"] = Value::from(name.as_str());
    }
    if !m.images.is_empty() {
        out["images"] = m.images.iter().map(|i| Value::from(&*i.base64)).collect();
    }
    out
}

fn parse(line: &str) -> Result<Value, LlmError> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable chunk: {e}")))?;
    if let Some(error) = v.get("error").and_then(Value::as_str) {
        return Err(LlmError::new(format!(
            "{PROVIDER} failed mid-answer: {error}"
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    #[test]
    fn chunks_and_tool_turns() {
        let v = parse(r#"{"message":{"role":"assistant","content":"Hi"},"done":false}"#).unwrap();
        assert_eq!(v.pointer("/message/content"), Some(&json!("Hi")));
        assert!(parse(r#"{"error":"model not found"}"#).is_err());
        let call = ToolCall {
            id: "call_0".into(),
            name: "calculator".into(),
            arguments: json!({"input": "1"}),
        };
        let turn = wire_message(&ChatMessage::tool_calls("", vec![call.clone()]));
        assert_eq!(
            turn["tool_calls"][0]["function"]["arguments"],
            json!({"input": "1"})
        );
        let result = wire_message(&ChatMessage::tool_result(&call, "1"));
        assert_eq!(result["tool_name"], "calculator");
    }
}
