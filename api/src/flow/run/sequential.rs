//! Sequential-agent flows: from `seqStart`, one step at a time along the plan's
//! wiring over one shared conversation. An agent step runs the agent loop; an
//! LLM step makes one model call, and when a tool node serves it and the model
//! called tools, the tool node runs them next; a condition picks its branch from
//! the last output; `seqEnd` (or a step with nothing after it) ends the run.
//! Each agent, LLM and tool step is an `agentReasoning` item; the answer is the
//! last output. Steps are bounded, so a loop in the graph ends.

use serde_json::{Value, json};

use super::agent::{call_tools, run_loop};
use super::{FlowEvent, RunContext, RunError, RunInput, RunOutput, Tokens, model_step};
use crate::flow::FlowError;
use crate::flow::component::{ConditionRow, ModelSpec, SeqAgent, SeqStep};
use crate::flow::plan::SequentialSpec;
use crate::flow::{prompt, tools};
use crate::llm::{ChatMessage, ChatRequest, Role, ToolCall};

/// Steps a run takes at most (a graph may loop through a condition).
const MAX_STEPS: usize = 100;

pub async fn run<E: From<FlowEvent>>(
    spec: &SequentialSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let mut conversation = input.history.clone();
    conversation.push(ChatMessage::new(Role::User, input.question.clone()));
    let mut out = RunOutput::default();
    let mut last_output = String::new();
    let mut pending_calls: Vec<ToolCall> = Vec::new();
    let mut current = next_of(spec, &spec.graph.start, None);
    let mut steps = 0;
    while let Some(id) = current.take() {
        steps += 1;
        if steps > MAX_STEPS {
            last_output = format!(
                "Stopped after {MAX_STEPS} steps without reaching the end of the flow.\n\n{last_output}"
            );
            break;
        }
        let step = spec
            .steps
            .get(&id)
            .ok_or_else(|| FlowError::invalid(format!("node {id} is not a sequential step")))?;
        match step {
            SeqStep::Start { .. } => current = next_of(spec, &id, None),
            SeqStep::End => break,
            SeqStep::Agent(agent) => {
                let tools = tools::prepare(&agent.tools, &ctx.env)?;
                let messages = step_messages(agent, &conversation, input);
                let done = run_loop::<E>(
                    ctx,
                    model_of(agent, spec),
                    &tools,
                    messages,
                    agent.max_iterations,
                    None,
                )
                .await?;
                out.agent_reasoning
                    .push(reasoning(&agent.name, &done.text, &done.used_tools));
                out.used_tools.extend(done.used_tools);
                out.artifacts.extend(done.artifacts);
                out.source_documents.extend(done.sources);
                conversation.push(ChatMessage::new(Role::Assistant, done.text.clone()));
                last_output = done.text;
                current = next_of(spec, &id, None);
            }
            SeqStep::Llm(llm) => {
                let tool_node = spec.graph.tool_node_of.get(&id);
                let tool_specs = match tool_node.and_then(|t| spec.steps.get(t)) {
                    Some(SeqStep::ToolNode { tools, .. }) => tools.as_slice(),
                    _ => &[],
                };
                let offered = tools::prepare(tool_specs, &ctx.env)?;
                let model_spec = model_of(llm, spec);
                let request = ChatRequest {
                    messages: step_messages(llm, &conversation, input),
                    tools: offered.iter().map(|t| t.def.clone()).collect(),
                    params: model_spec.params.clone(),
                    ..ChatRequest::default()
                };
                let model = ctx.model(model_spec).await?;
                let step = model_step::<E>(model_spec, &*model, request, None, false).await?;
                let (text, calls) = (step.text, step.calls);
                out.agent_reasoning.push(reasoning(&llm.name, &text, &[]));
                match tool_node {
                    Some(tool_node) if !calls.is_empty() => {
                        conversation.push(ChatMessage::tool_calls(text, calls.clone()));
                        pending_calls = calls;
                        current = Some(tool_node.clone());
                    }
                    _ => {
                        conversation.push(ChatMessage::new(Role::Assistant, text.clone()));
                        last_output = text;
                        current = next_of(spec, &id, None);
                    }
                }
            }
            SeqStep::ToolNode { name, tools, .. } => {
                let ready = tools::prepare(tools, &ctx.env)?;
                let calls = std::mem::take(&mut pending_calls);
                let outcomes = call_tools(ctx, &ready, &calls).await;
                let mut used = Vec::with_capacity(calls.len());
                let mut outputs = Vec::with_capacity(calls.len());
                for (call, outcome) in calls.iter().zip(outcomes) {
                    used.push(tools::used_tool(&call.name, &call.arguments, &outcome));
                    out.artifacts.extend(outcome.artifacts.iter().cloned());
                    out.source_documents.extend(outcome.sources.iter().cloned());
                    outputs.push(outcome.output.clone());
                    conversation.push(ChatMessage::tool_result(call, outcome.output));
                }
                out.agent_reasoning
                    .push(reasoning(name, &outputs.join("\n"), &used));
                out.used_tools.extend(used);
                current = next_of(spec, &id, None);
            }
            SeqStep::Condition { rows, .. } => {
                let branch = rows
                    .iter()
                    .find(|row| holds(row, &last_output, input))
                    .map_or("End", |row| row.output.as_str());
                current = next_of(spec, &id, Some(branch));
            }
        }
    }
    if !last_output.is_empty() {
        tokens.send(last_output.clone()).await?;
    }
    out.text = last_output;
    Ok(out)
}

/// The node after `id` (on `branch`, for a condition).
fn next_of(spec: &SequentialSpec, id: &str, branch: Option<&str>) -> Option<String> {
    let next = spec.graph.next.get(id)?;
    next.iter()
        .find(|(b, _)| match (branch, b) {
            (None, _) => true,
            (Some(want), Some(have)) => want.eq_ignore_ascii_case(have),
            (Some(_), None) => false,
        })
        .map(|(_, target)| target.clone())
}

fn model_of<'a>(step: &'a SeqAgent, spec: &'a SequentialSpec) -> &'a ModelSpec {
    step.model.as_ref().unwrap_or(&spec.model)
}

/// The step's system prompt, the conversation, and its human prompt.
fn step_messages(
    step: &SeqAgent,
    conversation: &[ChatMessage],
    input: &RunInput,
) -> Vec<ChatMessage> {
    let fill = |template: &str| {
        prompt::format(
            template,
            &step.values,
            &input.question,
            &input.history_text(),
            &input.flow_vars,
        )
    };
    let mut messages = Vec::with_capacity(conversation.len() + 2);
    if !step.system.is_empty() {
        messages.push(ChatMessage::new(Role::System, fill(&step.system)));
    }
    messages.extend(conversation.iter().cloned());
    if !step.human.is_empty() {
        messages.push(ChatMessage::new(Role::User, fill(&step.human)));
    }
    messages
}

fn reasoning(name: &str, text: &str, used_tools: &[Value]) -> Value {
    json!({
        "agentName": name,
        "messages": [text],
        "next": Value::Null,
        "instructions": Value::Null,
        "usedTools": used_tools,
        "sourceDocuments": [],
    })
}

/// Whether a condition row holds for the last output.
fn holds(row: &ConditionRow, last_output: &str, input: &RunInput) -> bool {
    let variable = row.variable.trim();
    let subject = match variable {
        "$flow.output.content" | "$flow.output" | "" => last_output,
        "$flow.input" => input.question.as_str(),
        // Flow state (seqState) is not supported yet: every key is empty. Other
        // variables are refused when the plan is built.
        _ => "",
    };
    let value = row.value.as_str();
    let numbers = || {
        Some((
            subject.trim().parse::<f64>().ok()?,
            value.trim().parse::<f64>().ok()?,
        ))
    };
    match row.operation.to_ascii_lowercase().as_str() {
        "contains" => subject.contains(value),
        "not contains" => !subject.contains(value),
        "start with" => subject.starts_with(value),
        "end with" => subject.ends_with(value),
        "is" => subject == value,
        "is not" => subject != value,
        "is empty" => subject.trim().is_empty(),
        "not empty" | "is not empty" => !subject.trim().is_empty(),
        "greater than" => numbers().is_some_and(|(a, b)| a > b),
        "less than" => numbers().is_some_and(|(a, b)| a < b),
        "equal to" => numbers().is_some_and(|(a, b)| a == b),
        "not equal to" => numbers().is_some_and(|(a, b)| a != b),
        "greater than or equal to" => numbers().is_some_and(|(a, b)| a >= b),
        "less than or equal to" => numbers().is_some_and(|(a, b)| a <= b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variable: &str, operation: &str, value: &str) -> ConditionRow {
        ConditionRow {
            variable: variable.into(),
            operation: operation.into(),
            value: value.into(),
            output: "x".into(),
        }
    }

    #[test]
    fn conditions_compare_text_and_numbers() {
        let input = RunInput {
            question: "is it yes?".into(),
            ..RunInput::default()
        };
        assert!(holds(
            &row("$flow.output.content", "Contains", "yes"),
            "oh yes",
            &input
        ));
        assert!(!holds(
            &row("$flow.output.content", "Contains", "yes"),
            "no",
            &input
        ));
        assert!(holds(&row("$flow.input", "Start With", "is"), "", &input));
        assert!(holds(
            &row("$flow.output.content", "Greater Than", "3"),
            "4.5",
            &input
        ));
        assert!(!holds(
            &row("$flow.output.content", "Greater Than", "3"),
            "many",
            &input
        ));
        assert!(holds(
            &row("$flow.output.content", "Is Empty", ""),
            " ",
            &input
        ));
        assert!(holds(&row("$flow.state.x", "Is Empty", ""), "full", &input));
    }
}
