//! A chatflow's `customFunction` nodes: JavaScript run in the Python runtime's
//! sandbox (never in weir's process) with Flowise's globals — `$input` (the
//! question), `$vars`, `$flow` and one `$<name>` per input variable. Functions
//! other nodes read run before the answer (see [`super::ahead`]) and their
//! results fill those nodes' prompt values; a function that is the ending node
//! answers.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::flow::FlowError;
use crate::flow::component::FunctionSpec;
use crate::flow::graph::fill_references;
use crate::flow::runtime::{FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens};

/// A function other nodes read, run with the `results` of the steps before
/// it: its result as text (a string as returned, anything else as JSON).
pub async fn result(
    function: &FunctionSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    results: &HashMap<String, String>,
) -> Result<String, RunError> {
    Ok(match call(function, input, ctx, results).await? {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A function as the flow's ending node: its result is the answer (an
/// object as pretty JSON), sent as one token when the caller streams.
pub async fn run<E: From<FlowEvent>>(
    function: &FunctionSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let text = match call(function, input, ctx, &HashMap::new()).await? {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => serde_json::to_string_pretty(&other).unwrap_or_default(),
    };
    if !text.is_empty() {
        tokens.send(text.clone()).await?;
    }
    Ok(RunOutput {
        text,
        ..RunOutput::default()
    })
}

/// One run of a function in the sandbox: what it returned.
async fn call(
    function: &FunctionSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    results: &HashMap<String, String>,
) -> Result<Value, RunError> {
    let mut globals = Map::with_capacity(function.variables.len() + 3);
    for (name, value) in &function.variables {
        globals.insert(format!("${name}"), variable(value, input, results));
    }
    globals.insert("$input".into(), Value::from(input.question.as_str()));
    globals.insert("$vars".into(), Value::Object(ctx.env.vars.clone()));
    globals.insert(
        "$flow".into(),
        json!({
            "input": input.question,
            "chatflowId": ctx.flow.chatflow_id,
            "sessionId": ctx.flow.session_id,
            "chatId": ctx.flow.session_id,
            "chatHistory": ctx.flow.chat_history,
        }),
    );
    ctx.run_javascript(&function.code, globals)
        .await
        .map_err(|why| {
            RunError::Flow(FlowError::failed(format!(
                "node {} (customFunction) failed: {why}",
                function.node_id
            )))
        })
}

/// An input variable's value: in text, `{{question}}` is the question,
/// `{{chat_history}}` the conversation and `{{<id>.data.instance}}` an earlier
/// function's result; text that reads as a JSON object is that object, as
/// Flowise passes it.
fn variable(value: &Value, input: &RunInput, results: &HashMap<String, String>) -> Value {
    let Value::String(text) = value else {
        return value.clone();
    };
    let mut text = fill_references(text, results).replace("{{question}}", &input.question);
    if text.contains("{{chat_history}}") {
        text = text.replace("{{chat_history}}", &input.history_text());
    }
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && trimmed.ends_with('}')
        && let Ok(object @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed)
    {
        return object;
    }
    Value::String(text)
}
