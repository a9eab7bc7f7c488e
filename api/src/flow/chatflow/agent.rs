//! A tool-calling agent (`toolAgent` and its siblings) as the flow's answer:
//! its system message, the conversation and the question run through the
//! shared tool loop ([`crate::flow::runtime::tool_loop`]), its text streamed.

use crate::flow::component::AgentSpec;
use crate::flow::runtime::tool_loop::run_loop;
use crate::flow::runtime::{FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens};
use crate::flow::tools;
use crate::llm::{ChatMessage, Role};

/// Runs a `toolAgent` (or its siblings) as the flow's answer, streaming its text.
pub async fn run<E: From<FlowEvent>>(
    spec: &AgentSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let tools = tools::prepare(&spec.tools, &ctx.env, ctx.tools).await?;
    let mut messages = Vec::with_capacity(input.history.len() + 2);
    messages.push(ChatMessage::new(Role::System, spec.system_message.clone()));
    messages.extend(input.history.iter().cloned());
    messages.push(input.question_turn());
    let done = run_loop(
        ctx,
        &spec.model,
        &tools,
        messages,
        spec.max_iterations,
        Some(tokens),
    )
    .await?;
    Ok(RunOutput {
        text: done.text,
        used_tools: done.used_tools,
        artifacts: done.artifacts,
        source_documents: done.sources,
        ..RunOutput::default()
    })
}
