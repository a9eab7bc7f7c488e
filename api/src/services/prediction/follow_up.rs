//! Follow-up prompts: with a chatflow's `chatbotConfig.followUpPrompts` on, a
//! model of its choosing suggests the questions a person would likely ask next,
//! after each answer (Flowise's setting, read as Flowise writes it):
//!
//! ```json
//! "followUpPrompts": {"status": true, "selectedProvider": "openAI",
//!   "openAI": {"credentialId": "…", "modelName": "gpt-4o-mini", "prompt": "…{history}…", "temperature": 0.9}}
//! ```
//!
//! The model is built as a flow's chat model node would be (its credential's
//! fields, where the credential may go); its answer is forced into
//! `{questions: [..]}` and sent as Flowise does: a JSON string of the list.

use serde_json::{Map, Value};

use crate::flow::component::{FieldKind, ModelSpec, OutputField};
use crate::flow::graph::FlowNode;
use crate::flow::runtime::{ModelLedger, RunError, structured::structured};
use crate::flow::{FlowError, Overrides};
use crate::llm::connect::Models;
use crate::llm::{ChatMessage, Role};

/// Flowise's default instruction; `{history}` is the conversation.
const DEFAULT_PROMPT: &str = "Given the following conversations: {history}. Please help me \
    predict the three most likely questions that human would ask and keeping each question \
    short and concise.";
/// Most suggestions kept (Flowise asks for three).
const MAX_PROMPTS: usize = 3;
/// The node id the suggestions' tokens are counted under (`usageMetadata`).
pub const USAGE_NODE: &str = "followUpPrompts";

/// A chatflow's follow-up setting, read from its `chatbotConfig`.
#[derive(Debug, Clone)]
pub struct FollowUpSetting {
    /// The model, as a chat model node of the provider's type.
    node: FlowNode,
    prompt: String,
}

impl FollowUpSetting {
    /// The setting when it is on; `Err` names what is wrong with it (an
    /// unknown provider, no model settings).
    pub fn of(chatbot_config: Option<&str>) -> Result<Option<Self>, FlowError> {
        // Read on every prediction: only this key is kept of the whole config.
        #[derive(serde::Deserialize)]
        struct Config {
            #[serde(rename = "followUpPrompts")]
            follow_up_prompts: Option<Map<String, Value>>,
        }
        let Some(setting) = chatbot_config
            .and_then(|text| serde_json::from_str::<Config>(text).ok())
            .and_then(|config| config.follow_up_prompts)
        else {
            return Ok(None);
        };
        let on = match setting.get("status") {
            Some(Value::Bool(on)) => *on,
            Some(Value::String(s)) => s == "true",
            _ => false,
        };
        if !on {
            return Ok(None);
        }
        let provider = setting
            .get("selectedProvider")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (node_name, base_input) = match provider {
            "openAI" => ("chatOpenAI", "basePath"),
            "anthropic" => ("chatAnthropic", "basePath"),
            "azureChatOpenAI" => ("azureChatOpenAI", "basePath"),
            "mistralAI" => ("chatMistralAI", "overrideEndpoint"),
            "ollama" => ("chatOllama", "baseUrl"),
            "googleGenerativeAI" => ("chatGoogleGenerativeAI", "baseUrl"),
            other => {
                return Err(FlowError::invalid(format!(
                    "chatbotConfig.followUpPrompts.selectedProvider '{other}' is not one weir \
                     runs (openAI, anthropic, azureChatOpenAI, mistralAI, ollama, googleGenerativeAI)"
                )));
            }
        };
        let Some(Value::Object(chosen)) = setting.get(provider) else {
            return Err(FlowError::invalid(format!(
                "chatbotConfig.followUpPrompts has no '{provider}' settings (its model)"
            )));
        };
        let text = |key: &str| {
            chosen
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let mut inputs = Map::new();
        if let Some(model) = text("modelName") {
            inputs.insert("modelName".into(), model.into());
        }
        if let Some(base) = text("baseUrl") {
            inputs.insert(base_input.into(), base.into());
        }
        if let Some(t) = chosen.get("temperature").filter(|t| !t.is_null()) {
            inputs.insert("temperature".into(), t.clone());
        }
        Ok(Some(FollowUpSetting {
            node: FlowNode {
                id: USAGE_NODE.into(),
                name: node_name.into(),
                label: "Follow-up prompts".into(),
                inputs,
                credential: text("credentialId").map(str::to_owned),
                parent: None,
            },
            prompt: text("prompt").unwrap_or(DEFAULT_PROMPT).to_owned(),
        }))
    }

    /// The credential the model uses, to open with the run's.
    pub fn credential(&self) -> Option<&str> {
        self.node.credential.as_deref()
    }

    /// The model, built with the run's opened credentials (no request
    /// overrides: the setting is the chatflow's).
    pub fn model(&self, overrides: &Overrides<'_>) -> Result<FollowUps, FlowError> {
        let model =
            crate::flow::registry::standalone_model(&self.node, overrides).map_err(|e| {
                FlowError::invalid(format!("chatbotConfig.followUpPrompts: {}", e.message))
            })?;
        Ok(FollowUps {
            model,
            prompt: self.prompt.clone(),
        })
    }
}

/// The follow-up model of a run, ready to ask.
#[derive(Debug, Clone)]
pub struct FollowUps {
    model: ModelSpec,
    prompt: String,
}

impl FollowUps {
    /// The questions a person would likely ask after `conversation` (its
    /// `Human:`/`AI:` lines), as Flowise sends them: a JSON string of the list.
    /// What the model used is counted in `ledger`.
    pub async fn suggest(
        &self,
        models: &Models,
        conversation: &str,
        ledger: &ModelLedger,
    ) -> Result<String, String> {
        let chat = models
            .chat_model(&self.model.provider)
            .await
            .map_err(|e| e.message)?;
        let ask = self.prompt.replace("{history}", conversation);
        let fields = [OutputField {
            key: "questions".into(),
            kind: FieldKind::StringArray,
            description: "Three follow-up questions".into(),
        }];
        let answer = structured(
            &self.model,
            &*chat,
            vec![ChatMessage::new(Role::User, ask)],
            &fields,
            ledger,
        )
        .await
        .map_err(|e| match e {
            RunError::Flow(e) => e.message,
            RunError::Cancelled => "cancelled".into(),
        })?;
        let questions: Vec<&str> = answer
            .get("questions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .take(MAX_PROMPTS)
            .collect();
        if questions.is_empty() {
            return Err("the model suggested no questions".into());
        }
        serde_json::to_string(&questions).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_read_as_flowise_writes_it() {
        assert!(FollowUpSetting::of(None).unwrap().is_none());
        let off = FollowUpSetting::of(Some(r#"{"followUpPrompts":{"status":false}}"#));
        assert!(off.unwrap().is_none());
        let on = FollowUpSetting::of(Some(
            r#"{"followUpPrompts":{"status":true,"selectedProvider":"ollama",
                "ollama":{"modelName":"llama3.2","baseUrl":"http://127.0.0.1:11434","temperature":0.5}}}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(on.node.name, "chatOllama");
        assert_eq!(on.node.inputs["baseUrl"], "http://127.0.0.1:11434");
        assert_eq!(on.prompt, DEFAULT_PROMPT);
        assert_eq!(on.credential(), None);
        let unknown = FollowUpSetting::of(Some(
            r#"{"followUpPrompts":{"status":true,"selectedProvider":"groqChat","groqChat":{}}}"#,
        ));
        assert!(unknown.unwrap_err().message.contains("groqChat"));
        let missing = FollowUpSetting::of(Some(
            r#"{"followUpPrompts":{"status":true,"selectedProvider":"openAI"}}"#,
        ));
        assert!(missing.is_err());
    }
}
