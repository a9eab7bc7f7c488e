//! Multi-agent flows: a supervisor routes between workers until it answers
//! FINISH. Each turn, the supervisor's model must call the `route` tool
//! (`{reasoning, next, instructions}`); the chosen worker runs its own agent loop
//! over the conversation plus the instructions, and its answer joins the
//! conversation. Every worker turn is an `agentReasoning` item; the answer is
//! the last worker's output, sent when the supervisor finishes. The recursion
//! limit bounds the turns and ends the run with a clear answer, not an error.

use serde_json::{Value, json};

use crate::flow::FlowError;
use crate::flow::component::{SupervisorSpec, WorkerSpec};
use crate::flow::runtime::tool_loop::run_loop;
use crate::flow::runtime::{
    FlowEvent, Progress, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::flow::{prompt, tools};
use crate::llm::{ChatMessage, ChatRequest, Role, ToolChoice, ToolDef};

const FINISH: &str = "FINISH";

pub async fn run<E: From<FlowEvent>>(
    supervisor: &SupervisorSpec,
    workers: &[WorkerSpec],
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let names: Vec<&str> = workers.iter().map(|w| w.name.as_str()).collect();
    let system = supervisor
        .prompt
        .replace("{team_members}", &names.join(", "));
    let route = route_tool(&names);
    let model = ctx.model(&supervisor.model).await?;
    let mut toolboxes = Vec::with_capacity(workers.len());
    for worker in workers {
        toolboxes.push(tools::prepare(&worker.tools, &ctx.env, ctx.tools).await?);
    }

    let mut conversation = input.history.clone();
    conversation.push(input.question_turn());
    let mut out = RunOutput::default();
    let mut last_answer: Option<String> = None;
    let mut finished = false;
    for _ in 0..supervisor.recursion_limit {
        let mut messages = Vec::with_capacity(conversation.len() + 2);
        messages.push(ChatMessage::new(Role::System, system.clone()));
        messages.extend(conversation.iter().cloned());
        messages.push(ChatMessage::new(
            Role::User,
            format!(
                "Given the conversation above, who should act next? Or should we FINISH? \
                 Select one of: {FINISH}, {}. Answer by calling the route tool.",
                names.join(", ")
            ),
        ));
        let request = ChatRequest {
            messages,
            tools: vec![route.clone()],
            tool_choice: ToolChoice::Force("route".into()),
            params: supervisor.model.params.clone(),
        };
        let decision = decide::<E>(&*model, request, supervisor, &names, &ctx.ledger).await?;
        if let Some(previous) = out.agent_reasoning.last_mut() {
            previous["next"] = Value::from(decision.next.as_str());
        }
        // A live caller follows the team: who acts next, then each step.
        if ctx.progress && decision.next != FINISH {
            tokens
                .progress(Progress::NextAgent(decision.next.clone()))
                .await?;
        }
        if decision.next == FINISH {
            finished = true;
            if last_answer.is_none() && !decision.reasoning.is_empty() {
                last_answer = Some(decision.reasoning);
            }
            break;
        }
        let Some(index) = workers.iter().position(|w| w.name == decision.next) else {
            return Err(RunError::Flow(FlowError::failed(format!(
                "supervisor {} chose '{}', which is none of its workers",
                supervisor.node_id, decision.next
            ))));
        };
        let worker = &workers[index];
        let mut messages = Vec::with_capacity(conversation.len() + 2);
        messages.push(ChatMessage::new(Role::System, worker_prompt(worker, input)));
        messages.extend(conversation.iter().cloned());
        if !decision.instructions.is_empty() {
            messages.push(ChatMessage::new(Role::User, decision.instructions.clone()));
        }
        let done = run_loop::<E>(
            ctx,
            worker.model.as_ref().unwrap_or(&supervisor.model),
            &toolboxes[index],
            messages,
            worker.max_iterations,
            None,
        )
        .await?;
        out.agent_reasoning.push(json!({
            "agentName": worker.name,
            "messages": [done.text],
            "next": Value::Null,
            "instructions": decision.instructions,
            "usedTools": done.used_tools,
            "sourceDocuments": [],
        }));
        if ctx.progress {
            tokens
                .progress(Progress::AgentReasoning(Value::from(
                    out.agent_reasoning.clone(),
                )))
                .await?;
        }
        out.used_tools.extend(done.used_tools);
        out.artifacts.extend(done.artifacts);
        out.source_documents.extend(done.sources);
        // Flowise hands a worker's answer back as a human turn named after it.
        conversation.push(ChatMessage::new(Role::User, done.text.clone()));
        last_answer = Some(done.text);
    }
    let text = match (finished, last_answer) {
        (true, Some(answer)) => answer,
        (true, None) => String::new(),
        (false, last) => {
            let mut text = format!(
                "Stopped: the supervisor did not finish within its recursion limit of {} steps.",
                supervisor.recursion_limit
            );
            if let Some(last) = last {
                text.push_str("\n\n");
                text.push_str(&last);
            }
            text
        }
    };
    if !text.is_empty() {
        tokens.send(text.clone()).await?;
    }
    out.text = text;
    Ok(out)
}

/// A worker's system prompt: its `promptValues` filled in, if it has any.
fn worker_prompt(worker: &WorkerSpec, input: &RunInput) -> String {
    if worker.values.is_empty() {
        return worker.prompt.clone();
    }
    prompt::format(
        &worker.prompt,
        &worker.values,
        &input.question,
        &input.history_text(),
        &input.flow_vars,
    )
}

fn route_tool(names: &[&str]) -> ToolDef {
    let mut options = vec![FINISH];
    options.extend_from_slice(names);
    ToolDef {
        name: "route".into(),
        description: "Select the next role.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "description": "Why this choice."},
                "next": {"type": "string", "enum": options},
                "instructions": {"type": "string", "description": "The specific instructions of the sub-task the next role should accomplish."}
            },
            "required": ["reasoning", "next", "instructions"]
        }),
    }
}

struct Decision {
    next: String,
    instructions: String,
    reasoning: String,
}

/// The supervisor's choice: its `route` call, or (a model that answered in text)
/// the one option its text names.
async fn decide<E: From<FlowEvent>>(
    model: &dyn crate::llm::ChatModel,
    request: ChatRequest,
    supervisor: &SupervisorSpec,
    names: &[&str],
    ledger: &crate::flow::runtime::ModelLedger,
) -> Result<Decision, RunError> {
    let step = model_step::<E>(&supervisor.model, model, request, None, false, ledger).await?;
    let route = step
        .calls
        .into_iter()
        .find(|call| call.name == "route")
        .map(|call| call.arguments);
    let text = step.text;
    let field = |args: &Value, name: &str| {
        args.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let chosen = |candidate: &str| -> Option<String> {
        let candidate = candidate.trim();
        if candidate.eq_ignore_ascii_case(FINISH) {
            return Some(FINISH.to_owned());
        }
        names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(candidate))
            .map(|n| (*n).to_owned())
    };
    if let Some(args) = route {
        let next = field(&args, "next");
        let next = chosen(&next).ok_or_else(|| {
            RunError::Flow(FlowError::failed(format!(
                "supervisor {} chose '{next}', which is none of {FINISH}, {}",
                supervisor.node_id,
                names.join(", ")
            )))
        })?;
        return Ok(Decision {
            next,
            instructions: field(&args, "instructions"),
            reasoning: field(&args, "reasoning"),
        });
    }
    let mentioned: Vec<String> = std::iter::once(FINISH)
        .chain(names.iter().copied())
        .filter(|n| {
            text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .any(|word| word == *n)
        })
        .map(str::to_owned)
        .collect();
    match mentioned.as_slice() {
        [one] => Ok(Decision {
            next: one.clone(),
            instructions: String::new(),
            reasoning: text,
        }),
        _ => Err(RunError::Flow(FlowError::failed(format!(
            "supervisor {} did not choose who acts next (its model neither called the route \
             tool nor named one of {FINISH}, {})",
            supervisor.node_id,
            names.join(", ")
        )))),
    }
}
