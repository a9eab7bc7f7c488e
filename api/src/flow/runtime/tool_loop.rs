//! The agent loop: ask the model with the tools offered; run the calls it makes
//! (at once, when it makes several) and give it their results; repeat until it
//! answers in text or `maxIterations` model steps have been taken — then the
//! answer says the agent stopped, it is not an error. Chatflow agents, workers,
//! sequential agents and agentflow agent nodes all use this loop.

use futures_util::StreamExt;
use serde_json::Value;

use super::{FlowEvent, RunContext, RunError, Tokens, model_step};
use crate::flow::component::ModelSpec;
use crate::flow::tools::{self, ReadyTool, ToolOutcome};
use crate::llm::{ChatMessage, ChatRequest, ToolCall, ToolChoice};

/// What a loop ended with.
#[derive(Debug, Default)]
pub struct LoopOutput {
    pub text: String,
    pub used_tools: Vec<Value>,
    pub artifacts: Vec<Value>,
    pub sources: Vec<crate::retrieval::Document>,
    /// The loop stopped before calls that need a person's approval: the
    /// conversation so far, its last message the model's calls.
    pub waiting: Option<Vec<ChatMessage>>,
}

impl LoopOutput {
    /// Records one call's outcome (the answer's `usedTools`, artifacts, sources).
    pub fn record(&mut self, call: &ToolCall, outcome: &ToolOutcome) {
        self.used_tools
            .push(tools::used_tool(&call.name, &call.arguments, outcome));
        self.artifacts.extend(outcome.artifacts.iter().cloned());
        self.sources.extend(outcome.sources.iter().cloned());
    }
}

/// The loop. With `tokens`, text is streamed as it comes (text a step writes
/// before calling tools included, steps separated by a blank line); without,
/// the output is the last step's text.
pub async fn run_loop<E: From<FlowEvent>>(
    ctx: &RunContext<'_>,
    spec: &ModelSpec,
    tools: &[ReadyTool],
    messages: Vec<ChatMessage>,
    max_iterations: u32,
    tokens: Option<&Tokens<'_, E>>,
) -> Result<LoopOutput, RunError> {
    run_guarded_loop(
        ctx,
        spec,
        tools,
        messages,
        max_iterations,
        tokens,
        &[],
        LoopOutput::default(),
    )
    .await
}

/// The loop, stopping (with `waiting` set) before it would run a call to one of
/// the `guarded` tools; `out` holds what an earlier part of the loop recorded.
#[allow(clippy::too_many_arguments)]
pub async fn run_guarded_loop<E: From<FlowEvent>>(
    ctx: &RunContext<'_>,
    spec: &ModelSpec,
    tools: &[ReadyTool],
    mut messages: Vec<ChatMessage>,
    max_iterations: u32,
    tokens: Option<&Tokens<'_, E>>,
    guarded: &[String],
    mut out: LoopOutput,
) -> Result<LoopOutput, RunError> {
    let model = ctx.model(spec).await?;
    let defs: Vec<_> = tools.iter().map(|t| t.def.clone()).collect();
    for _ in 0..max_iterations {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: defs.clone(),
            tool_choice: ToolChoice::Auto,
            params: spec.params.clone(),
        };
        let step = model_step(
            spec,
            &*model,
            request,
            tokens,
            !out.text.is_empty(),
            &ctx.ledger,
        )
        .await?;
        match tokens {
            Some(_) => {
                if step.separated {
                    out.text.push_str("\n\n");
                }
                out.text.push_str(&step.text);
            }
            None => out.text.clone_from(&step.text),
        }
        if step.calls.is_empty() {
            return Ok(out);
        }
        if step.calls.iter().any(|c| guarded.contains(&c.name)) {
            messages.push(step.calls_turn());
            out.waiting = Some(messages);
            return Ok(out);
        }
        // A live caller hears of the calls before they run (they may take a while).
        if let Some(tokens) = tokens.filter(|_| ctx.progress) {
            let called = step
                .calls
                .iter()
                .map(|c| serde_json::json!({"tool": c.name, "toolInput": c.arguments, "toolOutput": ""}))
                .collect();
            tokens
                .progress(super::Progress::CalledTools(Value::Array(called)))
                .await?;
        }
        let outcomes = call_tools(ctx, tools, &step.calls).await;
        messages.push(step.calls_turn());
        let mut direct = None;
        for (call, outcome) in step.calls.iter().zip(outcomes) {
            out.record(call, &outcome);
            if tools
                .iter()
                .any(|t| t.def.name == call.name && t.return_direct)
            {
                direct = Some(outcome.output.clone());
            }
            messages.push(ChatMessage::tool_result(call, outcome.output));
        }
        if let Some(answer) = direct {
            return finish(out, answer, tokens).await;
        }
    }
    let stopped = format!(
        "Agent stopped after reaching the maximum number of iterations ({max_iterations})."
    );
    finish(out, stopped, tokens).await
}

/// Ends the loop with a text of weir's own (a direct tool output, the
/// iteration limit), streamed like the model's.
async fn finish<E: From<FlowEvent>>(
    mut out: LoopOutput,
    text: String,
    tokens: Option<&Tokens<'_, E>>,
) -> Result<LoopOutput, RunError> {
    match tokens {
        Some(tokens) => {
            let piece = if out.text.is_empty() {
                text
            } else {
                format!("\n\n{text}")
            };
            out.text.push_str(&piece);
            tokens.send(piece).await?;
        }
        None => out.text = text,
    }
    Ok(out)
}

/// Calls of one step that run at the same time (a model asking for hundreds
/// gets them in waves).
const PARALLEL_CALLS: usize = 8;

/// Runs a step's calls, several at once; results in the calls' order.
pub async fn call_tools(
    ctx: &RunContext<'_>,
    tools: &[ReadyTool],
    calls: &[ToolCall],
) -> Vec<ToolOutcome> {
    let pending: Vec<_> = calls
        .iter()
        .map(|call| call_tool(ctx, tools, call))
        .collect();
    futures_util::stream::iter(pending)
        .buffered(PARALLEL_CALLS)
        .collect()
        .await
}

async fn call_tool(ctx: &RunContext<'_>, tools: &[ReadyTool], call: &ToolCall) -> ToolOutcome {
    match tools.iter().find(|t| t.def.name == call.name) {
        Some(tool) => {
            tool.call(ctx.tools, &ctx.env, &ctx.flow, &call.arguments)
                .await
        }
        None => {
            let names: Vec<&str> = tools.iter().map(|t| t.def.name.as_str()).collect();
            ToolOutcome::error(format!(
                "there is no tool named '{}'; the tools are: {}",
                call.name,
                names.join(", ")
            ))
        }
    }
}
