//! Language models behind one interface: chat providers (OpenAI-compatible,
//! Anthropic, Ollama, the embedded local model) that stream their answer.
//!
//! The flow engine speaks only [`ChatRequest`] → a stream of [`Delta`]s: pieces of
//! text as they arrive and, for models that call tools, whole tool calls (their
//! streamed argument fragments assembled here, in the provider module). Each
//! provider turns that into its wire format (or, for the local model, into
//! tokens) and turns its failures into an [`LlmError`] whose message tells the
//! user what to fix.

pub mod local;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// The result of a tool call, answering an assistant message's call.
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// Calls an assistant turn made (answered by the `Tool` turns after it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a `Tool` turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool a `Tool` turn comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the model thought before an assistant turn that called tools:
    /// Anthropic wants it back, signed, with the calls' results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Pictures sent with a user turn, for a model that sees (never kept:
    /// a stored conversation holds their names, not their bytes).
    #[serde(skip)]
    pub images: Vec<Image>,
}

/// A picture as a vision model takes it: its type and its bytes in base64
/// (shared: a conversation is cloned for every step of an agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime: &'static str,
    pub base64: std::sync::Arc<str>,
}

impl Image {
    /// The picture as a data URL (`data:image/png;base64,…`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64)
    }
}

/// A model's reasoning before its answer (Anthropic's thinking block, an
/// OpenAI-compatible server's `reasoning_content`, Ollama's `thinking`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thinking {
    pub text: String,
    /// Anthropic's signature of the block (sent back as it came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            thinking: None,
            images: Vec::new(),
        }
    }

    /// A user turn with pictures.
    pub fn user_with_images(content: impl Into<String>, images: Vec<Image>) -> Self {
        ChatMessage {
            images,
            ..ChatMessage::new(Role::User, content)
        }
    }

    /// An assistant turn that called tools (with whatever text came with the calls).
    pub fn tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        ChatMessage {
            tool_calls: calls,
            ..ChatMessage::new(Role::Assistant, content)
        }
    }

    /// The answer to one tool call.
    pub fn tool_result(call: &ToolCall, output: impl Into<String>) -> Self {
        ChatMessage {
            tool_call_id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            ..ChatMessage::new(Role::Tool, output)
        }
    }
}

/// A tool call a model made. `arguments` is the JSON the model wrote; when that is
/// not valid JSON it is kept as a string, so the tool can say what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A tool as a model sees it: a name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Whether the model may answer in text or must call one given tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ToolChoice {
    #[default]
    Auto,
    Force(String),
}

/// What one generation is asked.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDef>,
    pub tool_choice: ToolChoice,
    pub params: SamplingParams,
}

impl ChatRequest {
    /// A request without tools.
    pub fn text(messages: Vec<ChatMessage>, params: SamplingParams) -> Self {
        ChatRequest {
            messages,
            params,
            ..ChatRequest::default()
        }
    }
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text(String),
    /// A whole call, sent once its last argument fragment arrived.
    ToolCall(ToolCall),
    /// What the call has cost so far, as the provider counts it (each count
    /// is the call's total up to now: a later report replaces an earlier one).
    Usage(Usage),
    /// A piece of the model's reasoning, before its answer.
    Thinking(String),
    /// The signature of the reasoning so far (Anthropic), to send back with it.
    ThinkingSignature(String),
}

/// Tokens a model call read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// The later of two reports of one call: each count as its largest.
    pub fn latest(self, report: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.max(report.input_tokens),
            output_tokens: self.output_tokens.max(report.output_tokens),
        }
    }

    pub fn total(self) -> u64 {
        self.input_tokens + self.output_tokens
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
    /// Tokens the model may think with before answering (Anthropic's extended
    /// thinking); `None`: no thinking asked for.
    pub thinking_budget: Option<u32>,
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
pub mod connect;
pub mod embedded;
pub mod endpoints;
pub mod gemini;
pub mod http;
pub mod ollama;
pub mod openai;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

/// The pieces of an answer as the provider produces them. Dropping the stream
/// cancels the provider call.
pub type DeltaStream = BoxStream<'static, Result<Delta, LlmError>>;

/// A chat model: messages (and tools) in, a stream of text and tool calls out.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Starts a generation. Errors before the first piece (a wrong key, an unknown
    /// model) come back here; later ones as items of the stream.
    async fn stream(&self, request: ChatRequest) -> Result<DeltaStream, LlmError>;

    /// Whether [`ChatRequest::tools`] are offered to the model natively.
    fn calls_tools(&self) -> bool;
}

/// Tool calls streamed in fragments (OpenAI's indexed deltas, Anthropic's
/// content blocks), assembled by their position in the answer. A fragment that
/// brings a different id at a known position starts a new call (some
/// compatible servers send parallel calls all at index 0).
#[derive(Debug, Default)]
pub struct ToolCallParts {
    /// (index, id, name, arguments) in the order calls began.
    parts: Vec<(u64, String, String, String)>,
}

impl ToolCallParts {
    /// Adds what one fragment says of the call at `index`.
    pub fn push(&mut self, index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) {
        let id = id.filter(|s| !s.is_empty());
        let current = self.parts.iter().rposition(|(i, known, _, _)| {
            *i == index && (known.is_empty() || id.is_none_or(|id| id == known))
        });
        let at = match current {
            Some(at) => at,
            None => {
                self.parts
                    .push((index, String::new(), String::new(), String::new()));
                self.parts.len() - 1
            }
        };
        let (_, call_id, call_name, args) = &mut self.parts[at];
        if let Some(id) = id {
            id.clone_into(call_id);
        }
        // Names come whole; a server repeating it must not double it.
        if let Some(name) = name.filter(|s| !s.is_empty())
            && call_name.is_empty()
        {
            name.clone_into(call_name);
        }
        args.push_str(arguments);
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The calls, in order; emptied.
    pub fn finish(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.parts)
            .into_iter()
            .enumerate()
            .map(|(n, (_, id, name, args))| ToolCall {
                id: if id.is_empty() {
                    format!("call_{n}")
                } else {
                    id
                },
                name,
                arguments: parse_arguments(&args),
            })
            .collect()
    }
}

/// A model's argument text as JSON: empty is `{}`, unreadable stays a string.
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_assemble_into_calls_in_order() {
        let mut parts = ToolCallParts::default();
        parts.push(1, Some("b"), Some("calculator"), "{\"inp");
        parts.push(0, Some("a"), Some("now"), "");
        parts.push(1, None, None, "ut\": \"1+1\"}");
        let mut calls = parts.finish();
        calls.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "now");
        assert_eq!(calls[0].arguments, serde_json::json!({}));
        assert_eq!(calls[1].arguments, serde_json::json!({"input": "1+1"}));
        assert!(parts.is_empty());
        assert_eq!(parse_arguments("{oops"), Value::String("{oops".into()));
        // Parallel calls at one index with their own ids; a repeated name.
        parts.push(0, Some("x"), Some("calc"), "{}");
        parts.push(0, Some("y"), Some("calc"), "{\"a\":1}");
        parts.push(0, Some("y"), Some("calc"), "");
        let calls = parts.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].name, "calc");
        assert_eq!(calls[1].arguments, serde_json::json!({"a": 1}));
    }
}
