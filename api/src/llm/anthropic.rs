//! Anthropic's Messages API (`POST {base}/v1/messages`, streamed): the system
//! prompt goes apart, turns must alternate user/assistant starting with the user.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::http::{deltas, send, sse_events};
use super::{
    ChatMessage, ChatModel, ChatRequest, Delta, DeltaStream, LlmError, Role, Thinking,
    ToolCallParts, ToolChoice, Usage,
};

pub const DEFAULT_BASE: &str = "https://api.anthropic.com";
const PROVIDER: &str = "Anthropic";
const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; used when the flow does not set one.
const DEFAULT_MAX_TOKENS: u32 = 1024;

pub struct AnthropicChat {
    pub client: reqwest::Client,
    pub base: String,
    pub api_key: Option<String>,
    pub model: String,
}

#[async_trait]
impl ChatModel for AnthropicChat {
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError> {
        let params = &request.params;
        let (system, turns) = to_anthropic(&request.messages, !request.tools.is_empty());
        // Anthropic refuses thinking beside a forced tool (a structured answer).
        let thinking = params
            .thinking_budget
            .filter(|_| !matches!(request.tool_choice, ToolChoice::Force(_)));
        let mut max_tokens = params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        if let Some(budget) = thinking {
            // The budget is part of `max_tokens`, which must leave room to answer.
            max_tokens = max_tokens.max(budget.saturating_add(DEFAULT_MAX_TOKENS));
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": turns,
            "stream": true,
        });
        if !system.is_empty() {
            body["system"] = Value::from(system);
        }
        match thinking {
            // Thinking takes no temperature or top_p other than the defaults.
            Some(budget) => body["thinking"] = json!({"type": "enabled", "budget_tokens": budget}),
            None => {
                if let Some(t) = params.temperature {
                    body["temperature"] = Value::from(t);
                }
                if let Some(p) = params.top_p {
                    body["top_p"] = Value::from(p);
                }
            }
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let ToolChoice::Force(name) = &request.tool_choice {
                body["tool_choice"] = json!({"type": "tool", "name": name});
            }
        }
        let mut http = self
            .client
            .post(format!("{}/v1/messages", self.base))
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key);
        }
        let response = send(PROVIDER, &self.base, http).await?;
        Ok(deltas(
            sse_events(PROVIDER, response),
            |(name, data): (String, String), parts, out| event(&name, &data, parts, out),
        ))
    }

    fn calls_tools(&self) -> bool {
        true
    }
}

/// System text apart; consecutive turns of one role merged (tool results are the
/// user's turn); a leading assistant turn is not allowed, so it is dropped, and
/// so are empty turns. A turn of text only is sent as one string. Without tools
/// offered, Anthropic refuses tool blocks, so earlier calls and results (a
/// sequential flow's previous steps) are told as text.
fn to_anthropic(messages: &[ChatMessage], tools_offered: bool) -> (String, Vec<Value>) {
    let mut system = String::new();
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&m.content);
                continue;
            }
            Role::Tool if !tools_offered => (
                Role::User,
                vec![json!({"type": "text", "text": format!(
                    "Result of {}: {}", m.name.as_deref().unwrap_or("the tool"), m.content
                )})],
            ),
            Role::Tool => (
                Role::User,
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            role => {
                let mut blocks = Vec::with_capacity(2 + m.tool_calls.len());
                // A turn that called tools starts with its signed thinking.
                if let Some(Thinking {
                    text,
                    signature: Some(signature),
                }) = &m.thinking
                    && tools_offered
                    && !m.tool_calls.is_empty()
                {
                    blocks.push(
                        json!({"type": "thinking", "thinking": text, "signature": signature}),
                    );
                }
                // Pictures before the text, as Anthropic advises.
                for image in &m.images {
                    blocks.push(json!({"type": "image", "source": {
                        "type": "base64", "media_type": image.mime, "data": &*image.base64,
                    }}));
                }
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for call in &m.tool_calls {
                    if !tools_offered {
                        blocks.push(json!({"type": "text", "text": format!(
                            "(called {} with {})", call.name, call.arguments
                        )}));
                        continue;
                    }
                    let input = match &call.arguments {
                        Value::Object(_) => call.arguments.clone(),
                        _ => json!({}),
                    };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                (role, blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            None if role == Role::Assistant => {}
            _ => turns.push((role, blocks)),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, blocks)| {
            let text_only = blocks.iter().all(|b| b["type"] == "text");
            let content = if text_only {
                let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
                Value::from(texts.join("\n\n"))
            } else {
                Value::Array(blocks)
            };
            json!({"role": role.as_str(), "content": content})
        })
        .collect();
    (system, turns)
}

/// Reads one streamed event; `message_stop` ends the answer.
fn event(
    name: &str,
    data: &str,
    parts: &mut ToolCallParts,
    out: &mut Vec<Delta>,
) -> Result<bool, LlmError> {
    let parse = || -> Result<Value, LlmError> {
        serde_json::from_str(data)
            .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable event: {e}")))
    };
    let usage = |v: &Value| {
        v.as_object().map(|u| {
            let count = |field: &str| u.get(field).and_then(Value::as_u64).unwrap_or_default();
            Delta::Usage(Usage {
                input_tokens: count("input_tokens")
                    + count("cache_creation_input_tokens")
                    + count("cache_read_input_tokens"),
                output_tokens: count("output_tokens"),
            })
        })
    };
    match name {
        "message_stop" => Ok(true),
        // The input's count comes first, the output's with the end (totals).
        "message_start" => {
            out.extend(parse()?.pointer("/message/usage").and_then(usage));
            Ok(false)
        }
        "message_delta" => {
            out.extend(parse()?.get("usage").and_then(usage));
            Ok(false)
        }
        "content_block_start" => {
            let v = parse()?;
            if v.pointer("/content_block/type").and_then(Value::as_str) == Some("tool_use") {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or_default();
                parts.push(
                    index,
                    v.pointer("/content_block/id").and_then(Value::as_str),
                    v.pointer("/content_block/name").and_then(Value::as_str),
                    "",
                );
            }
            Ok(false)
        }
        "content_block_delta" => {
            let v = parse()?;
            let index = v.get("index").and_then(Value::as_u64).unwrap_or_default();
            match v.pointer("/delta/type").and_then(Value::as_str) {
                Some("input_json_delta") => {
                    let piece = v
                        .pointer("/delta/partial_json")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    parts.push(index, None, None, piece);
                }
                Some("thinking_delta") => {
                    if let Some(text) = v
                        .pointer("/delta/thinking")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                    {
                        out.push(Delta::Thinking(text.to_owned()));
                    }
                }
                Some("signature_delta") => {
                    if let Some(signature) = v.pointer("/delta/signature").and_then(Value::as_str) {
                        out.push(Delta::ThinkingSignature(signature.to_owned()));
                    }
                }
                _ => {
                    if let Some(text) = v
                        .pointer("/delta/text")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                    {
                        out.push(Delta::Text(text.to_owned()));
                    }
                }
            }
            Ok(false)
        }
        "error" => {
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            let message = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or(data);
            Err(LlmError::new(format!(
                "{PROVIDER} failed mid-answer: {message}"
            )))
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_is_apart_and_roles_alternate() {
        let (system, turns) = to_anthropic(
            &[
                ChatMessage::new(Role::System, "be brief"),
                ChatMessage::new(Role::User, ""),
                ChatMessage::new(Role::Assistant, "hello"),
                ChatMessage::new(Role::User, "a"),
                ChatMessage::new(Role::User, "b"),
                ChatMessage::new(Role::Assistant, "c"),
            ],
            false,
        );
        assert_eq!(system, "be brief");
        assert_eq!(
            turns,
            vec![
                json!({"role": "user", "content": "a\n\nb"}),
                json!({"role": "assistant", "content": "c"})
            ]
        );
    }

    #[test]
    fn deltas_calls_and_errors() {
        let mut parts = ToolCallParts::default();
        let mut out = Vec::new();
        let d =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        assert_eq!(
            event("content_block_delta", d, &mut parts, &mut out),
            Ok(false)
        );
        assert_eq!(out, vec![Delta::Text("Hi".into())]);
        let start = r#"{"index":1,"content_block":{"type":"tool_use","id":"t1","name":"calculator","input":{}}}"#;
        event("content_block_start", start, &mut parts, &mut out).unwrap();
        for piece in [r#"{"input":"#, r#""2*3"}"#] {
            let d =
                json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}});
            event("content_block_delta", &d.to_string(), &mut parts, &mut out).unwrap();
        }
        let calls = parts.finish();
        assert_eq!(calls[0].name, "calculator");
        assert_eq!(calls[0].arguments, json!({"input": "2*3"}));
        assert_eq!(event("message_stop", "{}", &mut parts, &mut out), Ok(true));
        assert!(
            event(
                "error",
                r#"{"error":{"message":"overloaded"}}"#,
                &mut parts,
                &mut out
            )
            .is_err()
        );
    }

    #[test]
    fn thinking_comes_apart_and_goes_back_signed() {
        let mut parts = ToolCallParts::default();
        let mut out = Vec::new();
        for d in [
            json!({"index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me add."}}),
            json!({"index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}}),
            json!({"index": 1, "delta": {"type": "text_delta", "text": "4"}}),
        ] {
            event("content_block_delta", &d.to_string(), &mut parts, &mut out).unwrap();
        }
        assert_eq!(
            out,
            vec![
                Delta::Thinking("Let me add.".into()),
                Delta::ThinkingSignature("sig==".into()),
                Delta::Text("4".into())
            ]
        );
        let call = crate::llm::ToolCall {
            id: "t1".into(),
            name: "calc".into(),
            arguments: json!({}),
        };
        let mut turn = ChatMessage::tool_calls("", vec![call.clone()]);
        turn.thinking = Some(Thinking {
            text: "Let me add.".into(),
            signature: Some("sig==".into()),
        });
        let (_, turns) = to_anthropic(
            &[
                ChatMessage::new(Role::User, "2+2?"),
                turn,
                ChatMessage::tool_result(&call, "4"),
            ],
            true,
        );
        assert_eq!(
            turns[1]["content"][0],
            json!({"type": "thinking", "thinking": "Let me add.", "signature": "sig=="})
        );
        assert_eq!(turns[1]["content"][1]["type"], "tool_use");
    }

    #[test]
    fn tool_turns_become_blocks() {
        let call = crate::llm::ToolCall {
            id: "t1".into(),
            name: "calc".into(),
            arguments: json!({"x": 1}),
        };
        let conversation = [
            ChatMessage::new(Role::User, "q"),
            ChatMessage::tool_calls("let me see", vec![call.clone()]),
            ChatMessage::tool_result(&call, "2"),
        ];
        let (_, without_tools) = to_anthropic(&conversation, false);
        assert_eq!(
            without_tools[2],
            json!({"role": "user", "content": "Result of calc: 2"})
        );
        let (_, turns) = to_anthropic(&conversation, true);
        assert_eq!(turns[1]["content"][1]["type"], "tool_use");
        assert_eq!(
            turns[2],
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2"}]})
        );
    }
}
