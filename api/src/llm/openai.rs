//! OpenAI-compatible chat completions (`POST {basePath}/chat/completions` with
//! `stream: true`): OpenAI itself and any compatible server (Ollama's `/v1`, vLLM,
//! llama.cpp, LM Studio).

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::http::{send, sse_events};
use super::{ChatMessage, ChatModel, LlmError, SamplingParams, TokenStream};

pub const DEFAULT_BASE: &str = "https://api.openai.com/v1";
const PROVIDER: &str = "the OpenAI-compatible provider";

pub struct OpenAiChat {
    pub client: reqwest::Client,
    /// Base URL up to and including the version segment, without trailing slash.
    pub base: String,
    pub api_key: Option<String>,
    pub model: String,
}

#[async_trait]
impl ChatModel for OpenAiChat {
    async fn stream(
        &self,
        messages: Vec<ChatMessage>,
        params: SamplingParams,
    ) -> Result<TokenStream, LlmError> {
        let url = format!("{}/chat/completions", self.base);
        let mut body = json!({
            "model": self.model,
            "messages": messages.iter().map(|m| json!({"role": m.role.as_str(), "content": m.content})).collect::<Vec<_>>(),
            "stream": true,
        });
        let fields = [
            ("temperature", params.temperature.map(Value::from)),
            ("top_p", params.top_p.map(Value::from)),
            ("max_tokens", params.max_tokens.map(Value::from)),
            ("seed", params.seed.map(Value::from)),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                body[name] = v;
            }
        }
        let mut request = self.client.post(&url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = send(PROVIDER, &self.base, request).await?;
        let tokens = sse_events(PROVIDER, response)
            .take_while(|e| {
                let done = matches!(e, Ok((_, data)) if data.trim() == "[DONE]");
                futures_util::future::ready(!done)
            })
            .filter_map(|event| {
                futures_util::future::ready(match event {
                    Err(e) => Some(Err(e)),
                    Ok((_, data)) => delta_text(&data).transpose(),
                })
            });
        Ok(tokens.boxed())
    }
}

/// The text of one streamed chunk (`choices[0].delta.content`), if any.
fn delta_text(data: &str) -> Result<Option<String>, LlmError> {
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable chunk: {e}")))?;
    if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
        return Err(LlmError::new(format!(
            "{PROVIDER} failed mid-answer: {message}"
        )));
    }
    Ok(chunk
        .pointer("/choices/0/delta/content")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_yield_their_delta() {
        let chunk = r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#;
        assert_eq!(delta_text(chunk), Ok(Some("Hel".into())));
        let role_only = r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#;
        assert_eq!(delta_text(role_only), Ok(None));
        assert!(delta_text(r#"{"error":{"message":"boom"}}"#).is_err());
        assert!(delta_text("nope").is_err());
    }
}
