//! The agent node: weir's tool loop, with a person's approval before the
//! tools flagged `agentSelectedToolRequiresHumanInput`. When the model calls
//! such a tool the node stops before running anything; the stopped item keeps
//! the conversation so far (its last message the model's calls), and the answer
//! to the pause goes on from there — proceed runs the calls, reject takes the
//! refused tools away and asks the model again. With `agentStructuredOutput`
//! the final answer is converted to those keys by one more call (as Flowise
//! does), and only that JSON streams.

use serde_json::{Map, Value, json};

use super::nodes::{Done, Seen, answer_chat, conversation, plain, update_state};
use super::step::Agent;
use crate::flow::FlowError;
use crate::flow::runtime::structured::structured;
use crate::flow::runtime::tool_loop::{LoopOutput, call_tools, run_guarded_loop};
use crate::flow::runtime::{FlowEvent, Resume, RunContext, RunError, Tokens};
use crate::flow::tools;
use crate::llm::{ChatMessage, Role};

pub async fn run<E: From<FlowEvent>>(
    id: &str,
    agent: &Agent,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
    answered: Option<&Resume>,
) -> Result<Done, RunError> {
    let mut ready = tools::prepare(&agent.tools, &ctx.env, ctx.tools).await?;
    let guarded: Vec<String> = ready
        .iter()
        .zip(&agent.approval)
        .filter(|(_, needs)| **needs)
        .map(|(t, _)| t.def.name.clone())
        .collect();
    let started = conversation(&agent.talk, seen, &agent.model, ctx).await?;
    let mut messages = started.clone();
    let mut out = LoopOutput::default();
    if let Some(resume) = answered {
        messages = waiting_messages(id, resume)?;
        let Some(pending) = messages
            .last()
            .filter(|m| !m.tool_calls.is_empty())
            .cloned()
        else {
            return Err(RunError::Flow(FlowError::invalid(format!(
                "node {id} waits for no tool call"
            ))));
        };
        if resume.proceed {
            let outcomes = call_tools(ctx, &ready, &pending.tool_calls).await;
            for (call, outcome) in pending.tool_calls.iter().zip(outcomes) {
                out.record(call, &outcome);
                messages.push(ChatMessage::tool_result(call, outcome.output));
            }
        } else {
            messages.pop();
            let refused: Vec<&str> = pending.tool_calls.iter().map(|c| c.name.as_str()).collect();
            ready.retain(|t| !refused.contains(&t.def.name.as_str()));
            if !resume.feedback.is_empty() {
                messages.push(ChatMessage::new(Role::User, resume.feedback.clone()));
            }
        }
    }
    // A structured answer is whole JSON: the agent's own words do not stream.
    let loop_stream = if agent.structured.is_empty() {
        stream
    } else {
        None
    };
    let mut done = run_guarded_loop(
        ctx,
        &agent.model,
        &ready,
        messages,
        super::AGENT_MAX_ITERATIONS,
        loop_stream,
        &guarded,
        out,
    )
    .await?;
    if let Some(waiting) = done.waiting.take() {
        return pause(done.text, &waiting, stream).await;
    }
    let mut output = Map::new();
    // What `*UpdateState` reads as `{{ output }}`: the answer, or the structured JSON.
    let mut written = done.text.clone();
    if !agent.structured.is_empty() {
        let model = ctx.model(&agent.model).await?;
        let convert = vec![ChatMessage::new(
            Role::User,
            format!(
                "Convert the following response to the structured output format: {}",
                done.text
            ),
        )];
        let answer = structured(
            &agent.model,
            &*model,
            convert,
            &agent.structured,
            &ctx.ledger,
        )
        .await?;
        written = serde_json::to_string_pretty(&answer).unwrap_or_default();
        done.text = format!("```json\n{written}\n```");
        output.extend(answer);
        if let Some(tokens) = stream {
            tokens.send(done.text.clone()).await?;
        }
    }
    output.insert("content".into(), Value::from(done.text.clone()));
    if !done.used_tools.is_empty() {
        output.insert("usedTools".into(), Value::from(done.used_tools.clone()));
    }
    Ok(Done {
        input: json!({"messages": plain(&started)}),
        state: update_state(seen, &agent.update_state, &written),
        chat: answer_chat(&agent.talk, &done.text),
        opens: true,
        output,
        used_tools: done.used_tools,
        artifacts: done.artifacts,
        sources: done.sources,
        ..Done::default()
    })
}

/// The node stops before a guarded call: its text says which call waits, and
/// the conversation (ending with the calls) is kept in the stopped item.
async fn pause<E: From<FlowEvent>>(
    text: String,
    messages: &[ChatMessage],
    stream: Option<&Tokens<'_, E>>,
) -> Result<Done, RunError> {
    let calls = messages
        .last()
        .map(|m| m.tool_calls.clone())
        .unwrap_or_default();
    let shown = serde_json::to_string_pretty(&calls).unwrap_or_default();
    let note = format!("\nAttempting to use tool:\n```json\n{shown}\n```");
    if let Some(tokens) = stream {
        tokens.send(note.clone()).await?;
    }
    let mut output = Map::new();
    output.insert("content".into(), Value::from(format!("{text}{note}")));
    output.insert("isWaitingForHumanInput".into(), Value::Bool(true));
    Ok(Done {
        input: json!({"messages": messages}),
        output,
        pause: true,
        ..Done::default()
    })
}

/// The conversation a stopped agent node kept, from the stopped run's items.
fn waiting_messages(id: &str, resume: &Resume) -> Result<Vec<ChatMessage>, RunError> {
    let kept = resume
        .executed
        .iter()
        .rev()
        .find(|item| item.get("nodeId").and_then(Value::as_str) == Some(id))
        .and_then(|item| item.pointer("/data/output/humanInputAction/data/input/messages"))
        .cloned()
        .ok_or_else(|| {
            RunError::Flow(FlowError::failed(format!(
                "node {id} has no conversation kept from before its pause"
            )))
        })?;
    serde_json::from_value(kept).map_err(|e| {
        RunError::Flow(FlowError::failed(format!(
            "node {id}'s kept conversation cannot be read: {e}"
        )))
    })
}
