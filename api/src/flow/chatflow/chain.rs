//! Chains: a prompt filled in (`llmChain`) or a conversation (`conversationChain`)
//! sent to one model, its answer streamed token by token.

use crate::flow::component::{ChainKind, ChainSpec, PromptSpec};
use crate::flow::output_parser::OutputParserSpec;
use crate::flow::prompt;
use crate::flow::runtime::{
    FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::llm::{ChatMessage, ChatRequest, Role};

/// The messages a chain sends to its model.
pub fn messages(chain: &ChainSpec, input: &RunInput) -> Vec<ChatMessage> {
    let history_text = || input.history_text();
    // An output parser's instructions follow the prompt (its system message, for
    // a chat prompt), as Flowise appends them, after the prompt is filled in: their
    // braces are not prompt variables.
    let instructions = chain
        .output_parser
        .as_ref()
        .map(OutputParserSpec::format_instructions);
    let instructed = |mut text: String| {
        if let Some(instructions) = &instructions {
            text.push('\n');
            text.push_str(instructions);
        }
        text
    };
    match (chain.kind, &chain.prompt) {
        (ChainKind::Llm, Some(PromptSpec::Text { template, values })) => vec![ChatMessage::new(
            Role::User,
            instructed(prompt::format(
                template,
                values,
                &input.question,
                &history_text(),
                &input.flow_vars,
            )),
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
            if !system.is_empty() || instructions.is_some() {
                out.push(ChatMessage::new(
                    Role::System,
                    instructed(prompt::format(
                        system,
                        values,
                        &input.question,
                        &history,
                        &input.flow_vars,
                    )),
                ));
            }
            out.push(ChatMessage::new(
                Role::User,
                prompt::format(human, values, &input.question, &history, &input.flow_vars),
            ));
            out
        }
        (ChainKind::Llm, None) => vec![input.question_turn()],
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
            out.push(input.question_turn());
            out
        }
    }
}

/// Runs a chain; its tokens stream as they arrive (not with an output parser:
/// its answer is whole JSON or nothing).
pub async fn run<E: From<FlowEvent>>(
    chain: &ChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    answer(chain, input, ctx, Some(tokens)).await
}

/// A chain's prediction read by another node (Flowise's `outputPrediction`):
/// its answer as text (parsed JSON as JSON), streamed to nobody.
pub async fn prediction(
    chain: &ChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
) -> Result<String, RunError> {
    let output = answer::<FlowEvent>(chain, input, ctx, None).await?;
    Ok(match output.json {
        Some(json) => json.to_string(),
        None => output.text,
    })
}

async fn answer<E: From<FlowEvent>>(
    chain: &ChainSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: Option<&Tokens<'_, E>>,
) -> Result<RunOutput, RunError> {
    let spec = &chain.model;
    let model = ctx.model(spec).await?;
    let request = ChatRequest::text(messages(chain, input), spec.params.clone());
    let Some(parser) = &chain.output_parser else {
        let text = model_step(spec, &*model, request, tokens, false, &ctx.ledger)
            .await?
            .text;
        return Ok(RunOutput {
            text,
            ..RunOutput::default()
        });
    };
    let text = model_step::<E>(spec, &*model, request, None, false, &ctx.ledger)
        .await?
        .text;
    let json = match parser.parse(&text) {
        Ok(json) => json,
        Err(why) if parser.autofix => {
            let fix = ChatRequest::text(
                vec![ChatMessage::new(
                    Role::User,
                    parser.fix_request(&text, &why),
                )],
                spec.params.clone(),
            );
            let fixed = model_step::<E>(spec, &*model, fix, None, false, &ctx.ledger)
                .await?
                .text;
            parser
                .parse(&fixed)
                .map_err(|why| unparsed(parser, &format!("{why}, after one attempt to fix it")))?
        }
        Err(why) => return Err(unparsed(parser, &why)),
    };
    Ok(RunOutput {
        text: json_text(&json),
        json: Some(json),
        ..RunOutput::default()
    })
}

/// A parsed answer as text (the stored message, a trigger's result): the JSON
/// in a fenced block, as Flowise keeps it (and closed).
pub fn json_text(json: &serde_json::Value) -> String {
    let pretty = serde_json::to_string_pretty(json).unwrap_or_else(|_| json.to_string());
    format!("```json\n{pretty}\n```")
}

fn unparsed(parser: &OutputParserSpec, why: &str) -> RunError {
    RunError::Flow(crate::flow::FlowError::failed(format!(
        "node {} ({}) could not read the model's answer: {why}",
        parser.node_id, parser.node_type
    )))
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
                label: None,
                redis: None,
            }),
            system_message: "sys".into(),
            output_parser: None,
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
