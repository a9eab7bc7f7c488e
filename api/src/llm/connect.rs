//! Provider construction: what a model node names (a [`Provider`] with its
//! endpoint and key) turned into a [`ChatModel`] client, over the server's one
//! shared HTTP client, or the embedded model. The engine asks here and never
//! names a provider's client type itself.

use std::sync::Arc;

use super::anthropic::AnthropicChat;
use super::gemini::{GeminiChat, GeminiOptions};
use super::ollama::OllamaChat;
use super::openai::OpenAiChat;
use super::{ChatModel, LlmError};

/// Which provider a chat model node talks to, with its endpoint and key.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider {
    OpenAi {
        base: String,
        auth: super::openai::Auth,
        model: String,
        /// Who this is in error messages (`the OpenAI-compatible provider`, `Mistral AI`).
        label: &'static str,
    },
    Anthropic {
        base: String,
        api_key: Option<String>,
        model: String,
    },
    Ollama {
        base: String,
        model: String,
    },
    Gemini {
        base: String,
        api_key: Option<String>,
        model: String,
        options: GeminiOptions,
    },
    Local,
}

impl Provider {
    /// The model a node asks for (`embedded` for the embedded model).
    pub fn model_name(&self) -> &str {
        match self {
            Provider::OpenAi { model, .. }
            | Provider::Anthropic { model, .. }
            | Provider::Ollama { model, .. }
            | Provider::Gemini { model, .. } => model,
            Provider::Local => "embedded",
        }
    }
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
    /// The chat model a node's provider settings name.
    pub async fn chat_model(&self, provider: &Provider) -> Result<Arc<dyn ChatModel>, LlmError> {
        Ok(match provider {
            Provider::OpenAi {
                base,
                auth,
                model,
                label,
            } => Arc::new(OpenAiChat {
                client: self.http.clone(),
                base: base.clone(),
                auth: auth.clone(),
                model: model.clone(),
                provider: label,
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
            Provider::Gemini {
                base,
                api_key,
                model,
                options,
            } => Arc::new(GeminiChat {
                client: self.http.clone(),
                base: base.clone(),
                api_key: api_key.clone(),
                model: model.clone(),
                options: options.clone(),
            }),
            Provider::Local => self.local.chat().await?,
        })
    }
}
