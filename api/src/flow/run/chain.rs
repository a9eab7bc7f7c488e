//! Chains: a prompt filled in (`llmChain`) or a conversation (`conversationChain`)
//! sent to one model, its answer streamed token by token.

use super::{FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step};
use crate::flow::component::{ChainKind, ChainSpec, PromptSpec};
use crate::flow::prompt;
use crate::llm::{ChatMessage, ChatRequest, Role};

/// The messages a chain sends to its model.
pub fn messages(chain: &ChainSpec, input: &RunInput) -> Vec<ChatMessage> {
    let history_text = || input.history_text();
    match (chain.kind, &chain.prompt) {
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
                _ => chain.system_message.clone(),
            };
            let mut out = Vec::with_capacity(input.history.len() + 2);
            out.push(ChatMessage::new(Role::System, system));
            out.extend(input.history.iter().cloned());
            out.push(ChatMessage::new(Role::User, input.question.clone()));
            out
        }
    }
}

/// Runs a chain; its tokens stream as they arrive.
pub async fn run<E: From<FlowEvent>>(
    chain: &ChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let spec = &chain.model;
    let model = ctx.model(spec).await?;
    let request = ChatRequest::text(messages(chain, input), spec.params.clone());
    let text = model_step(spec, &*model, request, Some(tokens), false)
        .await?
        .text;
    Ok(RunOutput {
        text,
        ..RunOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::component::{MemorySpec, ModelSpec, Provider};
    use serde_json::{Map, json};

    fn runnable(kind: ChainKind, prompt: Option<PromptSpec>) -> ChainSpec {
        ChainSpec {
            kind,
            node_id: "c".into(),
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
            ..RunInput::default()
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
            ..RunInput::default()
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
