//! Running a [`Runnable`]: assemble the messages for its chain, stream the model's
//! answer, and send each piece as a [`FlowEvent`] the moment it arrives.
//!
//! A closed event channel means the client is gone: the run stops and the
//! provider stream is dropped, which cancels the provider call.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::plan::{ChainKind, PromptSpec, Provider, Runnable};
use super::{FlowError, prompt};
use crate::llm::anthropic::AnthropicChat;
use crate::llm::ollama::OllamaChat;
use crate::llm::openai::OpenAiChat;
use crate::llm::{ChatMessage, ChatModel, LlmError, Role};

/// What a run emits, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowEvent {
    Token(String),
}

/// The conversation a run starts from.
#[derive(Debug, Clone, Default)]
pub struct RunInput {
    pub question: String,
    /// Earlier turns, oldest first: stored memory, then the request's `history`.
    pub history: Vec<ChatMessage>,
    /// `$flow` values a prompt value may name as `{{$flow.<key>}}` (a webhook's
    /// `body` and `headers`).
    pub flow_vars: serde_json::Map<String, serde_json::Value>,
}

/// Where chat models come from: the shared HTTP client for providers, and the
/// embedded model.
#[derive(Clone)]
pub struct Models {
    pub http: reqwest::Client,
    pub local: Arc<dyn LocalModels>,
}

/// Access to the embedded model, loaded on first use.
#[async_trait::async_trait]
pub trait LocalModels: Send + Sync {
    async fn chat(&self) -> Result<Arc<dyn ChatModel>, LlmError>;
}

impl Models {
    async fn chat_model(&self, provider: &Provider) -> Result<Arc<dyn ChatModel>, LlmError> {
        Ok(match provider {
            Provider::OpenAi {
                base,
                api_key,
                model,
            } => Arc::new(OpenAiChat {
                client: self.http.clone(),
                base: base.clone(),
                api_key: api_key.clone(),
                model: model.clone(),
            }),
            Provider::Anthropic {
                base,
                api_key,
                model,
            } => Arc::new(AnthropicChat {
                client: self.http.clone(),
                base: base.clone(),
                api_key: api_key.clone(),
                model: model.clone(),
            }),
            Provider::Ollama { base, model } => Arc::new(OllamaChat {
                client: self.http.clone(),
                base: base.clone(),
                model: model.clone(),
            }),
            Provider::Local => self.local.chat().await?,
        })
    }
}

/// The messages a chain sends to its model.
pub fn messages(runnable: &Runnable, input: &RunInput) -> Vec<ChatMessage> {
    let history_text = || {
        input
            .history
            .iter()
            .map(|m| {
                let who = if m.role == Role::User { "Human" } else { "AI" };
                format!("{who}: {}", m.content)
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match (runnable.chain, &runnable.prompt) {
        (ChainKind::Llm, Some(PromptSpec::Text { template, values })) => vec![ChatMessage::new(
            Role::User,
            prompt::format(
                template,
                values,
                &input.question,
                &history_text(),
                &input.flow_vars,
            ),
        )],
        (
            ChainKind::Llm,
            Some(PromptSpec::Chat {
                system,
                human,
                values,
            }),
        ) => {
            let history = history_text();
            let mut out = Vec::with_capacity(2);
            if !system.is_empty() {
                out.push(ChatMessage::new(
                    Role::System,
                    prompt::format(system, values, &input.question, &history, &input.flow_vars),
                ));
            }
            out.push(ChatMessage::new(
                Role::User,
                prompt::format(human, values, &input.question, &history, &input.flow_vars),
            ));
            out
        }
        (ChainKind::Llm, None) => vec![ChatMessage::new(Role::User, input.question.clone())],
        (ChainKind::Conversation, prompt) => {
            let system = match prompt {
                Some(PromptSpec::Chat { system, values, .. }) if !system.is_empty() => {
                    prompt::format(system, values, &input.question, "", &input.flow_vars)
                }
                _ => runnable.system_message.clone(),
            };
            let mut out = Vec::with_capacity(input.history.len() + 2);
            out.push(ChatMessage::new(Role::System, system));
            out.extend(input.history.iter().cloned());
            out.push(ChatMessage::new(Role::User, input.question.clone()));
            out
        }
    }
}

/// Runs the flow; returns the whole answer. Tokens go to `events` as they come,
/// converted into the caller's own event type (no relay between channels).
pub async fn run<E: From<FlowEvent>>(
    runnable: &Runnable,
    input: &RunInput,
    models: &Models,
    events: &mpsc::Sender<E>,
) -> Result<String, RunError> {
    let node = &runnable.model;
    let failed = |e: LlmError| {
        RunError::Flow(FlowError::failed(format!(
            "node {} ({}) failed: {}",
            node.node_id, node.node_type, e.message
        )))
    };
    let model = models.chat_model(&node.provider).await.map_err(failed)?;
    let mut stream = model
        .stream(messages(runnable, input), node.params.clone())
        .await
        .map_err(failed)?;
    let mut answer = String::new();
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(failed)?;
        answer.push_str(&piece);
        if events.send(FlowEvent::Token(piece).into()).await.is_err() {
            return Err(RunError::Cancelled);
        }
    }
    Ok(answer)
}

#[derive(Debug)]
pub enum RunError {
    Flow(FlowError),
    /// Nobody listens any more (the client disconnected).
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::plan::{MemorySpec, ModelSpec};
    use serde_json::{Map, json};

    fn runnable(chain: ChainKind, prompt: Option<PromptSpec>) -> Runnable {
        Runnable {
            chain,
            chain_node: "c".into(),
            model: ModelSpec {
                node_id: "m".into(),
                node_type: "chatLocal",
                provider: Provider::Local,
                params: Default::default(),
            },
            prompt,
            memory: Some(MemorySpec {
                node_id: "mem".into(),
                window: None,
                session_id: None,
            }),
            system_message: "sys".into(),
        }
    }

    #[test]
    fn conversation_puts_system_history_question() {
        let input = RunInput {
            question: "and now?".into(),
            history: vec![
                ChatMessage::new(Role::User, "hi"),
                ChatMessage::new(Role::Assistant, "hello"),
            ],
            flow_vars: Map::new(),
        };
        let m = messages(&runnable(ChainKind::Conversation, None), &input);
        let roles: Vec<_> = m.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::User]
        );
        assert_eq!(m[0].content, "sys");
        assert_eq!(m[3].content, "and now?");
    }

    #[test]
    fn llm_chain_formats_its_prompt() {
        let values = json!({"topic": "{{question}}"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let p = PromptSpec::Text {
            template: "About {topic}:".into(),
            values,
        };
        let input = RunInput {
            question: "owls".into(),
            history: vec![],
            flow_vars: Map::new(),
        };
        let m = messages(&runnable(ChainKind::Llm, Some(p)), &input);
        assert_eq!(m, vec![ChatMessage::new(Role::User, "About owls:")]);
        let chat = PromptSpec::Chat {
            system: "You like {x}".into(),
            human: "{input}!".into(),
            values: Map::new(),
        };
        let m = messages(&runnable(ChainKind::Llm, Some(chat)), &input);
        assert_eq!(m[0], ChatMessage::new(Role::System, "You like owls"));
        assert_eq!(m[1], ChatMessage::new(Role::User, "owls!"));
    }
}
