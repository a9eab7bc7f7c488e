//! Ollama's native chat API (`POST {baseUrl}/api/chat`): newline-delimited JSON
//! chunks `{"message": {"content"}, "done"}`.

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::http::{lines, send};
use super::{ChatMessage, ChatModel, LlmError, SamplingParams, TokenStream};

pub const DEFAULT_BASE: &str = "http://localhost:11434";
const PROVIDER: &str = "Ollama";

pub struct OllamaChat {
    pub client: reqwest::Client,
    pub base: String,
    pub model: String,
}

#[async_trait]
impl ChatModel for OllamaChat {
    async fn stream(
        &self,
        messages: Vec<ChatMessage>,
        params: SamplingParams,
    ) -> Result<TokenStream, LlmError> {
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
        let body = json!({
            "model": self.model,
            "messages": messages.iter().map(|m| json!({"role": m.role.as_str(), "content": m.content})).collect::<Vec<_>>(),
            "stream": true,
            "options": options,
        });
        let request = self
            .client
            .post(format!("{}/api/chat", self.base))
            .json(&body);
        let response = send(PROVIDER, &self.base, request).await?;
        let tokens = lines(PROVIDER, response)
            .filter(|line| {
                futures_util::future::ready(!matches!(line, Ok(l) if l.trim().is_empty()))
            })
            .map(|line| line.and_then(|l| chunk(&l)))
            .take_while(|c| futures_util::future::ready(!matches!(c, Ok(Chunk::Done))))
            .filter_map(|c| {
                futures_util::future::ready(match c {
                    Ok(Chunk::Text(t)) => Some(Ok(t)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
            });
        Ok(tokens.boxed())
    }
}

#[derive(Debug, PartialEq)]
enum Chunk {
    Text(String),
    Empty,
    Done,
}

fn chunk(line: &str) -> Result<Chunk, LlmError> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| LlmError::new(format!("{PROVIDER} sent an unreadable chunk: {e}")))?;
    if let Some(error) = v.get("error").and_then(Value::as_str) {
        return Err(LlmError::new(format!(
            "{PROVIDER} failed mid-answer: {error}"
        )));
    }
    let text = v
        .pointer("/message/content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !text.is_empty() {
        return Ok(Chunk::Text(text.to_owned()));
    }
    if v.get("done").and_then(Value::as_bool) == Some(true) {
        return Ok(Chunk::Done);
    }
    Ok(Chunk::Empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks() {
        assert_eq!(
            chunk(r#"{"message":{"role":"assistant","content":"Hi"},"done":false}"#),
            Ok(Chunk::Text("Hi".into()))
        );
        assert_eq!(
            chunk(r#"{"message":{"role":"assistant","content":""},"done":true}"#),
            Ok(Chunk::Done)
        );
        assert!(chunk(r#"{"error":"model not found"}"#).is_err());
    }
}
