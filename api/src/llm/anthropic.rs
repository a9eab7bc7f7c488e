//! Anthropic's Messages API (`POST {base}/v1/messages`, streamed): the system
//! prompt goes apart, turns must alternate user/assistant starting with the user.

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::http::{send, sse_events};
use super::{ChatMessage, ChatModel, LlmError, Role, SamplingParams, TokenStream};

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
    async fn stream(
        &self,
        messages: Vec<ChatMessage>,
        params: SamplingParams,
    ) -> Result<TokenStream, LlmError> {
        let (system, turns) = to_anthropic(messages);
        let mut body = json!({
            "model": self.model,
            "max_tokens": params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": turns,
            "stream": true,
        });
        if !system.is_empty() {
            body["system"] = Value::from(system);
        }
        if let Some(t) = params.temperature {
            body["temperature"] = Value::from(t);
        }
        if let Some(p) = params.top_p {
            body["top_p"] = Value::from(p);
        }
        let mut request = self
            .client
            .post(format!("{}/v1/messages", self.base))
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key);
        }
        let response = send(PROVIDER, &self.base, request).await?;
        let tokens = sse_events(PROVIDER, response)
            .take_while(|e| {
                let stop = matches!(e, Ok((name, _)) if name == "message_stop");
                futures_util::future::ready(!stop)
            })
            .filter_map(|event| {
                futures_util::future::ready(match event {
                    Err(e) => Some(Err(e)),
                    Ok((name, data)) => event_text(&name, &data).transpose(),
                })
            });
        Ok(tokens.boxed())
    }
}

/// System text apart; consecutive turns of one role merged; a leading assistant
/// turn preceded by an empty user turn is not allowed, so it is dropped.
fn to_anthropic(messages: Vec<ChatMessage>) -> (String, Vec<Value>) {
    let mut system = String::new();
    let mut turns: Vec<(Role, String)> = Vec::new();
    for m in messages {
        match m.role {
            Role::System => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&m.content);
            }
            role => match turns.last_mut() {
                Some((last, text)) if *last == role => {
                    text.push_str("\n\n");
                    text.push_str(&m.content);
                }
                None if role == Role::Assistant => {}
                _ => turns.push((role, m.content)),
            },
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role.as_str(), "content": content}))
        .collect();
    (system, turns)
}

fn event_text(name: &str, data: &str) -> Result<Option<String>, LlmError> {
    match name {
        "content_block_delta" => {
            let v: Value = serde_json::from_str(data)
                .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable event: {e}")))?;
            Ok(v.pointer("/delta/text")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned))
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
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_is_apart_and_roles_alternate() {
        let (system, turns) = to_anthropic(vec![
            ChatMessage::new(Role::System, "be brief"),
            ChatMessage::new(Role::Assistant, "hello"),
            ChatMessage::new(Role::User, "a"),
            ChatMessage::new(Role::User, "b"),
            ChatMessage::new(Role::Assistant, "c"),
        ]);
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
    fn deltas_and_errors() {
        let d =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        assert_eq!(event_text("content_block_delta", d), Ok(Some("Hi".into())));
        assert_eq!(event_text("ping", "{}"), Ok(None));
        assert!(event_text("error", r#"{"error":{"message":"overloaded"}}"#).is_err());
    }
}
