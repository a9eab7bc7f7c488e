//! `executeFlowAgentflow`: another chatflow of the same workspace run as one
//! node. The engine asks through [`crate::flow::runtime::FlowCaller`], which
//! the services floor implements (finding the chatflow in the workspace,
//! running it as a prediction on the same chat, refusing past the run's depth
//! limit); the node turns the answer into its output, its message in the
//! run's conversation and its state writes.

use serde_json::{Map, Value, json};

use super::nodes::{Done, Seen, update_state};
use super::step::ExecuteFlowStep;
use crate::flow::FlowError;
use crate::flow::runtime::nested::FlowCall;
use crate::flow::runtime::{RunContext, RunError};
use crate::llm::{ChatMessage, Role};

/// `executeFlowOverrideConfig`: a JSON object whose string values may hold
/// variables, resolved inside those strings only (a question holding a quote
/// cannot add keys); text that is JSON only once resolved (`{"n": {{ x }}}`) is
/// resolved first.
fn override_config(written: &str, seen: &Seen<'_>) -> Result<Option<Map<String, Value>>, String> {
    fn resolve_strings(value: &mut Value, seen: &Seen<'_>) {
        match value {
            Value::String(text) => *text = seen.scope.resolve(text),
            Value::Array(items) => items.iter_mut().for_each(|v| resolve_strings(v, seen)),
            Value::Object(map) => map.values_mut().for_each(|v| resolve_strings(v, seen)),
            _ => {}
        }
    }
    let written = written.trim();
    if written.is_empty() {
        return Ok(None);
    }
    let parsed = match serde_json::from_str::<Value>(written) {
        Ok(mut value) => {
            resolve_strings(&mut value, seen);
            Some(value)
        }
        Err(_) => serde_json::from_str::<Value>(seen.scope.resolve(written).trim()).ok(),
    };
    match parsed {
        Some(Value::Object(map)) => Ok(Some(map)),
        _ => Err("its 'executeFlowOverrideConfig' is not a JSON object".into()),
    }
}

pub async fn run(
    id: &str,
    step: &ExecuteFlowStep,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
) -> Result<Done, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {id} (executeFlowAgentflow) failed: {why}"
        )))
    };
    if step.flow == ctx.flow.chatflow_id {
        return Err(failed("it cannot run the flow it is part of".into()));
    }
    let Some(caller) = ctx.flows else {
        return Err(failed("flows cannot run other flows here".into()));
    };
    let question = seen.scope.resolve(&step.input);
    let override_config = override_config(&step.override_config, seen).map_err(&failed)?;
    let answer = caller
        .call_flow(FlowCall {
            flow: step.flow,
            question: question.clone(),
            chat_id: ctx.flow.session_id.clone(),
            override_config,
        })
        .await
        .map_err(failed)?;
    let role = if step.as_assistant {
        Role::Assistant
    } else {
        Role::User
    };
    let mut output = Map::new();
    output.insert("content".into(), Value::from(answer.text.as_str()));
    if !answer.used_tools.is_empty() {
        output.insert("usedTools".into(), Value::from(answer.used_tools.clone()));
    }
    if !answer.sources.is_empty() {
        output.insert(
            "sourceDocuments".into(),
            serde_json::to_value(&answer.sources).unwrap_or(Value::Null),
        );
    }
    Ok(Done {
        input: json!({"messages": [{"role": "user", "content": question}]}),
        state: update_state(seen, &step.update_state, &answer.text),
        chat: vec![ChatMessage::new(role, answer.text)],
        opens: true,
        output,
        used_tools: answer.used_tools,
        artifacts: answer.artifacts,
        sources: answer.sources,
        ..Done::default()
    })
}
