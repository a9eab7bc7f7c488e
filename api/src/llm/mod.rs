//! Language models behind one interface: chat providers (OpenAI-compatible,
//! Anthropic, Ollama, the embedded local model) that stream tokens.
//!
//! The flow engine speaks only [`ChatRequest`] → a stream of text pieces. Each
//! provider turns that into its wire format (or, for the local model, into
//! tokens) and turns its failures into an [`LlmError`] whose message tells the
//! user what to fix.

pub mod local;

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
        }
    }
}

/// How to sample. `None` means the provider's (or model's) default; the local
/// model decodes greedily when `temperature` is `None` or `0`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
}

/// A provider failure, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmError {
    pub message: String,
}

impl LlmError {
    pub fn new(message: impl Into<String>) -> Self {
        LlmError {
            message: message.into(),
        }
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LlmError {}

pub mod anthropic;
pub mod embedded;
pub mod http;
pub mod ollama;
pub mod openai;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

/// Text pieces of an answer as the provider produces them. Dropping the stream
/// cancels the provider call.
pub type TokenStream = BoxStream<'static, Result<String, LlmError>>;

/// A chat model: messages in, a stream of text out.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Starts a generation. Errors before the first token (a wrong key, an unknown
    /// model) come back here; later ones as items of the stream.
    async fn stream(
        &self,
        messages: Vec<ChatMessage>,
        params: SamplingParams,
    ) -> Result<TokenStream, LlmError>;
}
