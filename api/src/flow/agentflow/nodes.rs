//! What each kind of agentflow step does when it runs: its input resolved, its
//! model or tool or request called, and what it gives back ([`Done`]) — its
//! `input` and `output` as Flowise records them, the chat messages it adds to
//! the run, the state it writes, and the output a decision node takes. Where
//! the run goes next is the executor's business.

use serde_json::{Map, Value, json};

use super::condition;
use super::step::{
    Ask, ConditionAgent, HttpBody, HttpStep, HumanInput, Llm, Memory, StepKind, Talk, ToolStep,
};
use super::template::{Scope, get, value_text};
use crate::flow::FlowError;
use crate::flow::component::ModelSpec;
use crate::flow::runtime::structured::structured;
use crate::flow::runtime::{FlowEvent, Resume, RunContext, RunError, Tokens, model_step};
use crate::flow::tools::{self, web::HttpCall};
use crate::llm::{ChatMessage, ChatRequest, Role, ToolChoice, ToolDef};

/// What a node gave back.
#[derive(Debug, Default)]
pub struct Done {
    pub input: Value,
    pub output: Map<String, Value>,
    /// The state keys the node wrote, if any.
    pub state: Option<Map<String, Value>>,
    /// Messages the node adds to the run's conversation.
    pub chat: Vec<ChatMessage>,
    /// A model node's answer: when nothing was said in the run yet, the
    /// question goes before it (the first to speak begins the conversation).
    pub opens: bool,
    /// For a decision node: the output taken.
    pub branch: Option<usize>,
    pub used_tools: Vec<Value>,
    pub artifacts: Vec<Value>,
    pub sources: Vec<crate::retrieval::Document>,
    /// The run stops here and waits for a person (human input).
    pub pause: bool,
}

/// What a running node sees of the run.
pub struct Seen<'a> {
    pub scope: Scope<'a>,
    /// The session's earlier turns (empty with ephemeral memory).
    pub past: &'a [ChatMessage],
    /// What earlier nodes of this run said.
    pub runtime: &'a [ChatMessage],
}

/// Runs one step (not start, loop or iteration: the executor does those).
pub async fn run_step<E: From<FlowEvent>>(
    id: &str,
    kind: &StepKind,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
    answered: Option<&Resume>,
) -> Result<Done, RunError> {
    match kind {
        StepKind::Llm(llm) => run_llm(llm, seen, ctx, stream).await,
        StepKind::Agent(agent) => super::agent::run(id, agent, seen, ctx, stream, answered).await,
        StepKind::Tool(tool) => run_tool(tool, seen, ctx, stream).await,
        StepKind::Condition(rows) => {
            let mut resolved = Vec::with_capacity(rows.len() + 1);
            let mut taken = None;
            for row in rows {
                let value1 = resolve_cell(seen, row.get("value1"));
                let value2 = resolve_cell(seen, row.get("value2"));
                let mut out = row.clone();
                if taken.is_none() && condition::holds(row, &value1, &value2) {
                    taken = Some(resolved.len());
                    out.insert("isFulfilled".into(), Value::Bool(true));
                }
                out.insert("value1".into(), value1);
                out.insert("value2".into(), value2);
                resolved.push(Value::Object(out));
            }
            let branch = taken.unwrap_or(rows.len());
            resolved.push(json!({"type": "string", "value1": "", "operation": "equal",
                "value2": "", "isFulfilled": taken.is_none()}));
            let mut output = Map::new();
            output.insert("conditions".into(), Value::Array(resolved));
            Ok(Done {
                input: object([(
                    "conditions",
                    rows.iter().cloned().map(Value::Object).collect(),
                )]),
                output,
                branch: Some(branch),
                ..Done::default()
            })
        }
        StepKind::ConditionAgent(agent) => run_condition_agent(agent, seen, ctx).await,
        StepKind::DirectReply { message } => {
            let text = seen.scope.resolve(message);
            let output = text_output(stream, &text).await?;
            Ok(Done {
                input: json!({}),
                output,
                ..Done::default()
            })
        }
        StepKind::Http(http) => run_http(id, http, seen, ctx).await,
        StepKind::ExecuteFlow(step) => super::subflow::run(id, step, seen, ctx).await,
        StepKind::Retriever(step) => run_retriever(id, step, seen, ctx, stream).await,
        StepKind::CustomFunction(step) => run_custom_function(id, step, seen, ctx, stream).await,
        StepKind::Start(_)
        | StepKind::Loop(_)
        | StepKind::Iteration { .. }
        | StepKind::HumanInput(_) => Err(RunError::Flow(FlowError::failed(format!(
            "node {id} is run by the executor itself"
        )))),
    }
}

/// A human input node reached: what the person is asked — the node's text, or
/// a model's from the conversation — after the conversation's last message,
/// streamed; the run stops here.
pub async fn ask_human<E: From<FlowEvent>>(
    human: &HumanInput,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<Done, RunError> {
    let history: Vec<ChatMessage> = seen.past.iter().chain(seen.runtime).cloned().collect();
    let description = match &human.ask {
        Ask::Fixed(text) => {
            let mut asked = seen.scope.resolve(text);
            if asked.trim().is_empty() {
                asked = "Do you want to proceed?".to_owned();
            }
            let last = history.last().map(|m| m.content.trim()).unwrap_or_default();
            if !last.is_empty() {
                asked = format!("{last}\n\n{asked}");
            }
            tokens.send(asked.clone()).await?;
            asked
        }
        Ask::Model { model, prompt } => {
            let prompt = match seen.scope.resolve(prompt) {
                p if p.trim().is_empty() => HUMAN_INPUT_PROMPT.to_owned(),
                p => p,
            };
            let mut messages = history.clone();
            messages.push(ChatMessage::new(Role::User, prompt));
            let chat = ctx.model(model).await?;
            let request = ChatRequest::text(messages, model.params.clone());
            model_step(model, &*chat, request, Some(tokens), false, &ctx.ledger)
                .await?
                .text
        }
    };
    let mut output = Map::new();
    output.insert("content".into(), Value::from(description.clone()));
    Ok(Done {
        input: object([
            ("messages", Value::Array(plain(&history))),
            ("humanInputEnableFeedback", Value::Bool(human.feedback)),
        ]),
        output,
        chat: vec![ChatMessage::new(Role::Assistant, description)],
        pause: true,
        ..Done::default()
    })
}

const HUMAN_INPUT_PROMPT: &str = "Summarise the conversation so far in a few sentences and ask \
    whether to proceed with the next step.";

/// A human input node answered: proceed takes its first output, reject its
/// second; the feedback is its text and joins the conversation.
pub fn human_answered(human: &HumanInput, resume: &Resume) -> Done {
    let kind = if resume.proceed { "proceed" } else { "reject" };
    let feedback = (human.feedback && !resume.feedback.is_empty()).then(|| resume.feedback.clone());
    let mut output = Map::new();
    let content = if resume.feedback.is_empty() {
        kind.to_owned()
    } else {
        resume.feedback.clone()
    };
    output.insert("content".into(), Value::from(content));
    output.insert(
        "conditions".into(),
        json!([
            {"type": "proceed", "feedback": feedback, "isFulfilled": resume.proceed},
            {"type": "reject", "feedback": feedback, "isFulfilled": !resume.proceed},
        ]),
    );
    Done {
        input: json!({"humanInput": {"type": kind, "startNodeId": resume.node_id,
            "feedback": resume.feedback}}),
        output,
        chat: if resume.feedback.is_empty() {
            Vec::new()
        } else {
            vec![ChatMessage::new(Role::User, resume.feedback.clone())]
        },
        branch: Some(if resume.proceed { 0 } else { 1 }),
        ..Done::default()
    }
}

/// A model node's conversation: its messages (system first), then with memory
/// the session and the run so far (the question when nothing was said yet) —
/// windowed, or summarised by the node's model — and its own user message;
/// without memory, the question unless the node writes its own user message.
pub(super) async fn conversation(
    talk: &Talk,
    seen: &Seen<'_>,
    model: &ModelSpec,
    ctx: &RunContext<'_>,
) -> Result<Vec<ChatMessage>, RunError> {
    let mut messages: Vec<ChatMessage> = talk
        .messages
        .iter()
        .map(|(role, content)| ChatMessage::new(*role, seen.scope.resolve(content)))
        .collect();
    let question = || {
        ChatMessage::user_with_images(seen.scope.question.to_owned(), seen.scope.images.to_vec())
    };
    match talk.memory {
        Memory::Off => {
            if seen.runtime.is_empty() && !talk.messages.iter().any(|(r, _)| *r == Role::User) {
                messages.push(question());
            }
        }
        Memory::All | Memory::Window(_) | Memory::Summary | Memory::SummaryBuffer(_) => {
            let mut history: Vec<ChatMessage> =
                seen.past.iter().chain(seen.runtime).cloned().collect();
            // The question of this turn is said as it is, never summarised away.
            let asking = seen.runtime.is_empty().then(question);
            match talk.memory {
                Memory::Window(n) => {
                    history.extend(asking);
                    let keep = (n as usize).saturating_mul(2);
                    if history.len() > keep {
                        history.drain(..history.len() - keep);
                    }
                }
                Memory::Summary => {
                    if !history.is_empty() {
                        let summary = summarize(&history, model, ctx).await?;
                        history = vec![ChatMessage::new(Role::Assistant, summary)];
                    }
                    history.extend(asking);
                }
                Memory::SummaryBuffer(limit) => {
                    let has_system = messages.iter().any(|m| m.role == Role::System);
                    history = summary_buffer(history, limit, has_system, model, ctx).await?;
                    history.extend(asking);
                }
                Memory::All | Memory::Off => history.extend(asking),
            }
            messages.extend(history);
            if let Some(user) = &talk.user_message {
                messages.push(ChatMessage::new(Role::User, seen.scope.resolve(user)));
            }
        }
    }
    // A model must be asked something: a node of only system messages gets the question.
    if !messages.iter().any(|m| m.role == Role::User) {
        messages.push(question());
    }
    Ok(messages)
}

/// Flowise's summariser prompt (LangChain's progressive summary).
const SUMMARIZER_PROMPT: &str = "Progressively summarize the conversation provided and return a \
new summary.

EXAMPLE:
Human: Why do you think artificial intelligence is a force for good?
AI: Because artificial intelligence will help humans reach their full potential.

New summary:
The human asks what the AI thinks of artificial intelligence. The AI thinks artificial \
intelligence is a force for good because it will help humans reach their full potential.
END OF EXAMPLE

Conversation:
{conversation}

New summary:";

/// A message as a summary reads it: `role: content`.
fn summary_line(message: &ChatMessage) -> String {
    format!("{}: {}", message.role.as_str(), message.content)
}

/// The node's model asked for a summary of `messages`.
async fn summarize(
    messages: &[ChatMessage],
    model: &ModelSpec,
    ctx: &RunContext<'_>,
) -> Result<String, RunError> {
    let lines: Vec<String> = messages.iter().map(summary_line).collect();
    let prompt = SUMMARIZER_PROMPT.replace("{conversation}", &lines.join("\n"));
    let llm = ctx.model(model).await?;
    let request = ChatRequest::text(
        vec![ChatMessage::new(Role::User, prompt)],
        model.params.clone(),
    );
    Ok(
        model_step::<FlowEvent>(model, &*llm, request, None, false, &ctx.ledger)
            .await?
            .text,
    )
}

/// The history within `limit` tokens (cl100k, as Flowise counts with its
/// OpenAI models): the oldest messages over it become one summary, said first
/// (as a user's message when the node already has a system message: some
/// models take one only).
async fn summary_buffer(
    history: Vec<ChatMessage>,
    limit: u32,
    has_system: bool,
    model: &ModelSpec,
    ctx: &RunContext<'_>,
) -> Result<Vec<ChatMessage>, RunError> {
    let sizes: Vec<usize> = history
        .iter()
        .map(|m| crate::retrieval::split::count_tokens(&summary_line(m)) + 1)
        .collect();
    let mut total: usize = sizes.iter().sum();
    let mut cut = 0;
    while total > limit as usize && cut < history.len() {
        total -= sizes[cut];
        cut += 1;
    }
    if cut == 0 {
        return Ok(history);
    }
    let summary = summarize(&history[..cut], model, ctx).await?;
    let role = if has_system { Role::User } else { Role::System };
    let mut kept = Vec::with_capacity(history.len() - cut + 1);
    kept.push(ChatMessage::new(
        role,
        format!("Previous conversation summary: {summary}"),
    ));
    kept.extend(history.into_iter().skip(cut));
    Ok(kept)
}

/// What a model node adds to the run's conversation: its answer, as the
/// assistant's or — Flowise's default — as a user's message.
pub(super) fn answer_chat(talk: &Talk, answer: &str) -> Vec<ChatMessage> {
    let role = if talk.as_assistant {
        Role::Assistant
    } else {
        Role::User
    };
    vec![ChatMessage::new(role, answer.to_owned())]
}

async fn run_llm<E: From<FlowEvent>>(
    llm: &Llm,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
) -> Result<Done, RunError> {
    let messages = conversation(&llm.talk, seen, &llm.model, ctx).await?;
    let input = object([("messages", Value::Array(plain(&messages)))]);
    let model = ctx.model(&llm.model).await?;
    let mut output = Map::new();
    let content = if llm.structured.is_empty() {
        let request = ChatRequest::text(messages, llm.model.params.clone());
        model_step(&llm.model, &*model, request, stream, false, &ctx.ledger)
            .await?
            .text
    } else {
        let answer =
            structured(&llm.model, &*model, messages, &llm.structured, &ctx.ledger).await?;
        let content = serde_json::to_string_pretty(&answer).unwrap_or_default();
        output.extend(answer);
        if let Some(tokens) = stream {
            tokens.send(content.clone()).await?;
        }
        content
    };
    output.insert("content".into(), Value::from(content.clone()));
    Ok(Done {
        input,
        state: update_state(seen, &llm.update_state, &content),
        chat: answer_chat(&llm.talk, &content),
        opens: true,
        output,
        ..Done::default()
    })
}

const SCENARIO_TOOL: &str = "choose_scenario";

const CONDITION_AGENT_PROMPT: &str = "You are an expert at sorting requests. Read the input \
    and decide which of the scenarios it matches; call choose_scenario with that scenario, \
    written exactly as given.";

async fn run_condition_agent(
    agent: &ConditionAgent,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
) -> Result<Done, RunError> {
    let input = match agent.input.trim() {
        "" => seen.scope.question.to_owned(),
        text => seen.scope.resolve(text),
    };
    let mut system = match &agent.system {
        Some(custom) => seen.scope.resolve(custom),
        None => CONDITION_AGENT_PROMPT.to_owned(),
    };
    let instructions = seen.scope.resolve(&agent.instructions);
    if !instructions.trim().is_empty() {
        system.push_str("\n\n");
        system.push_str(instructions.trim());
    }
    let mut messages = vec![ChatMessage::new(Role::System, system)];
    if agent.memory {
        messages.extend(seen.past.iter().chain(seen.runtime).cloned());
    }
    messages.push(ChatMessage::new(Role::User, input.clone()));
    let request = ChatRequest {
        messages: messages.clone(),
        tools: vec![ToolDef {
            name: SCENARIO_TOOL.into(),
            description: "Choose the scenario the input matches.".into(),
            parameters: json!({"type": "object", "properties": {
                "output": {"type": "string", "enum": agent.scenarios}
            }, "required": ["output"]}),
        }],
        tool_choice: ToolChoice::Force(SCENARIO_TOOL.into()),
        params: agent.model.params.clone(),
    };
    let model = ctx.model(&agent.model).await?;
    let step =
        model_step::<FlowEvent>(&agent.model, &*model, request, None, false, &ctx.ledger).await?;
    let said = step
        .calls
        .iter()
        .find(|c| c.name == SCENARIO_TOOL)
        .and_then(|c| {
            c.arguments
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or(step.text);
    let branch = pick_scenario(&agent.scenarios, &said);
    let conditions: Vec<Value> = agent
        .scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"output": s, "isFulfilled": i == branch}))
        .collect();
    let mut output = Map::new();
    output.insert("conditions".into(), Value::Array(conditions));
    output.insert("content".into(), Value::from(said));
    Ok(Done {
        input: object([("messages", Value::Array(plain(&messages)))]),
        output,
        branch: Some(branch),
        ..Done::default()
    })
}

/// The scenario a model named: exactly (any case), by its start, by either
/// holding the other; else the last one, as Flowise falls back.
fn pick_scenario(scenarios: &[String], said: &str) -> usize {
    let said = said.trim().to_lowercase();
    let lower: Vec<String> = scenarios.iter().map(|s| s.to_lowercase()).collect();
    lower
        .iter()
        .position(|s| *s == said)
        .or_else(|| {
            lower
                .iter()
                .position(|s| !said.is_empty() && s.starts_with(&said))
        })
        .or_else(|| {
            lower
                .iter()
                .position(|s| !said.is_empty() && (s.contains(&said) || said.contains(s.as_str())))
        })
        .unwrap_or(scenarios.len().saturating_sub(1))
}

async fn run_tool<E: From<FlowEvent>>(
    step: &ToolStep,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
) -> Result<Done, RunError> {
    let ready = tools::prepare(std::slice::from_ref(&step.tool), &ctx.env, ctx.tools).await?;
    let Some(tool) = ready.first() else {
        return Err(RunError::Flow(FlowError::failed("the tool did not build")));
    };
    let mut args = Map::new();
    for (name, value) in &step.args {
        let text = seen.scope.resolve(value);
        let trimmed = text.trim();
        // Values that look like JSON lists or objects are passed as such.
        let value = if (trimmed.starts_with('[') && trimmed.ends_with(']'))
            || (trimmed.starts_with('{') && trimmed.ends_with('}'))
        {
            serde_json::from_str(trimmed).unwrap_or(Value::String(text))
        } else {
            Value::String(text)
        };
        args.insert(name.clone(), value);
    }
    let args = Value::Object(args);
    let outcome = tool.call(ctx.tools, &ctx.env, &ctx.flow, &args).await;
    if let Some(tokens) = stream {
        tokens.send(outcome.output.clone()).await?;
    }
    let mut output = Map::new();
    output.insert("content".into(), Value::from(outcome.output.clone()));
    let used = tools::used_tool(&tool.def.name, &args, &outcome);
    Ok(Done {
        input: json!({"toolInputArgs": args, "selectedTool": tool.def.name}),
        state: update_state(seen, &step.update_state, &outcome.output),
        output,
        used_tools: vec![used],
        artifacts: outcome.artifacts,
        sources: outcome.sources,
        ..Done::default()
    })
}

async fn run_http(
    id: &str,
    http: &HttpStep,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
) -> Result<Done, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {id} (httpAgentflow) failed: {why}"
        )))
    };
    let url_text = seen.scope.resolve(&http.url);
    let mut url = reqwest::Url::parse(url_text.trim()).map_err(|e| {
        failed(format!(
            "its url '{}' does not resolve to a URL: {e}",
            http.url.trim()
        ))
    })?;
    let resolve_pairs = |pairs: &[(String, String)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), seen.scope.resolve(v)))
            .collect()
    };
    let query = resolve_pairs(&http.query);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(&query);
    }
    let headers = resolve_pairs(&http.headers);
    let body = match &http.body {
        HttpBody::None => None,
        HttpBody::Json(text) => {
            let text = seen.scope.resolve(text);
            let json: Value = serde_json::from_str(text.trim())
                .map_err(|e| failed(format!("its JSON body is not valid JSON: {e}")))?;
            Some(("application/json".to_owned(), json.to_string().into_bytes()))
        }
        HttpBody::Raw(text) => Some((
            "text/plain; charset=utf-8".to_owned(),
            seen.scope.resolve(text).into_bytes(),
        )),
        HttpBody::Form(pairs) => {
            let pairs = resolve_pairs(pairs);
            let encoded = reqwest::Url::parse_with_params("http://form.invalid/", &pairs)
                .ok()
                .and_then(|u| u.query().map(str::to_owned))
                .unwrap_or_default();
            Some((
                "application/x-www-form-urlencoded".to_owned(),
                encoded.into_bytes(),
            ))
        }
    };
    // As written, not resolved: a URL or query value may carry a secret from `$vars`,
    // and the record is shown to callers (answer, events, executions).
    let input = json!({"http": {
        "method": http.method.as_str(), "url": http.url,
        "headers": http.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        "queryParams": http.query.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
    }});
    let reply = ctx
        .tools
        .web
        .send(HttpCall {
            method: http.method.clone(),
            url,
            headers,
            body,
        })
        .await
        .map_err(failed)?;
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    if reply.status >= 400 {
        return Err(failed(format!(
            "HTTP {} {}: {}",
            reply.status,
            reply.status_text,
            text.chars().take(500).collect::<String>()
        )));
    }
    let data = if http.response_json {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    } else {
        Value::String(text)
    };
    let body_text = value_text(&data);
    let mut output = Map::new();
    output.insert(
        "http".into(),
        json!({"data": data, "status": reply.status, "statusText": reply.status_text, "headers": reply.headers}),
    );
    Ok(Done {
        input,
        state: update_state(seen, &http.update_state, &body_text),
        output,
        ..Done::default()
    })
}

/// Searches the node's document stores (one after the other; their chunks
/// together) with its query, or the question.
async fn run_retriever<E: From<FlowEvent>>(
    id: &str,
    step: &super::step::RetrieverStep,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
) -> Result<Done, RunError> {
    let query = match seen.scope.resolve(&step.query).trim() {
        "" => seen.scope.question.to_owned(),
        query => query.to_owned(),
    };
    let mut documents = Vec::new();
    for store in &step.stores {
        let found = ctx
            .tools
            .retriever
            .retrieve_document_store(*store, &ctx.env.workspace_id, &query)
            .await
            .map_err(|e| {
                RunError::Flow(FlowError::failed(format!(
                    "node {id} (retrieverAgentflow) failed: {}",
                    e.message
                )))
            })?;
        documents.extend(found);
    }
    let content = if step.with_metadata {
        serde_json::to_string_pretty(&documents).unwrap_or_default()
    } else {
        documents
            .iter()
            .map(|d| d.page_content.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let output = text_output(stream, &content).await?;
    Ok(Done {
        input: json!({"question": query}),
        state: update_state(seen, &step.update_state, &content),
        output,
        sources: documents,
        ..Done::default()
    })
}

/// `customFunctionAgentflow`: the JavaScript run in the runtime's sandbox with
/// Flowise's globals; a string it returns is the node's text, anything else
/// its JSON (pretty, as Flowise writes it).
async fn run_custom_function<E: From<FlowEvent>>(
    id: &str,
    step: &super::step::CustomFunctionStep,
    seen: &Seen<'_>,
    ctx: &RunContext<'_>,
    stream: Option<&Tokens<'_, E>>,
) -> Result<Done, RunError> {
    let scope = &seen.scope;
    let mut globals = Map::with_capacity(step.variables.len() + 3);
    let mut inputs = Map::with_capacity(step.variables.len());
    for (name, template) in &step.variables {
        let value = Value::from(scope.resolve(template));
        inputs.insert(name.clone(), value.clone());
        globals.insert(format!("${name}"), value);
    }
    globals.insert("$input".into(), Value::from(scope.question));
    globals.insert("$vars".into(), Value::Object(scope.vars.clone()));
    globals.insert(
        "$flow".into(),
        json!({
            "input": scope.question,
            "state": scope.state,
            "chatflowId": scope.chatflow_id,
            "sessionId": scope.session_id,
            "chatId": scope.session_id,
            "chatHistory": scope.chat_history,
            "sourceDocuments": [], "usedTools": [], "artifacts": [], "fileAnnotations": [],
        }),
    );
    let returned = ctx
        .run_javascript(&step.code, globals)
        .await
        .map_err(|why| {
            RunError::Flow(FlowError::failed(format!(
                "node {id} (customFunctionAgentflow) failed: {why}"
            )))
        })?;
    let content = match &returned {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let output = text_output(stream, &content).await?;
    Ok(Done {
        input: json!({"inputVariables": inputs, "code": step.code}),
        state: update_state(seen, &step.update_state, &content),
        output,
        ..Done::default()
    })
}

/// A node's text as its output (`content`), streamed first when the run streams.
async fn text_output<E: From<FlowEvent>>(
    stream: Option<&Tokens<'_, E>>,
    text: &str,
) -> Result<Map<String, Value>, RunError> {
    if let Some(tokens) = stream
        && !text.is_empty()
    {
        tokens.send(text.to_owned()).await?;
    }
    let mut output = Map::new();
    output.insert("content".into(), Value::from(text));
    Ok(output)
}

/// The keys a node's `*UpdateState` rows write: each value resolved, then
/// `{{ output }}` is the node's text and `{{ output.<path> }}` a value of it read
/// as JSON. `None` when the node writes nothing. Only the written keys are
/// returned, so nodes running side by side do not undo each other's writes.
pub fn update_state(
    seen: &Seen<'_>,
    rows: &[(String, String)],
    output: &str,
) -> Option<Map<String, Value>> {
    if rows.is_empty() {
        return None;
    }
    let mut state = Map::new();
    let parsed = std::cell::OnceCell::new();
    for (key, template) in rows {
        let text = seen.scope.resolve(template);
        let trimmed = text.trim();
        let value = if let Some(path) = whole_output_path(trimmed) {
            match path {
                None => Value::from(output),
                Some(path) => {
                    let json = parsed.get_or_init(|| serde_json::from_str::<Value>(output).ok());
                    match json
                        .as_ref()
                        .and_then(Value::as_object)
                        .and_then(|o| get(o, path))
                    {
                        Some(v) => v.clone(),
                        None => Value::from(text.clone()),
                    }
                }
            }
        } else {
            Value::from(
                text.replace("{{ output }}", output)
                    .replace("{{output}}", output),
            )
        };
        state.insert(key.clone(), value);
    }
    Some(state)
}

/// `{{ output }}` → `Some(None)`, `{{ output.a.b }}` → `Some(Some("a.b"))`.
fn whole_output_path(text: &str) -> Option<Option<&str>> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    if inner == "output" {
        return Some(None);
    }
    inner.strip_prefix("output.").map(Some)
}

fn resolve_cell(seen: &Seen<'_>, value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) => Value::String(seen.scope.resolve(s)),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// A JSON object of these entries, the values moved in (`json!` would copy
/// each through a serialiser).
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// Messages as Flowise records a node's input: `{role, content}`.
pub(super) fn plain(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_matched_loosely_then_fall_back_to_the_last() {
        let s: Vec<String> = ["User asks about tea", "User asks about coffee", "Other"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(pick_scenario(&s, "user asks about COFFEE"), 1);
        assert_eq!(pick_scenario(&s, "User asks about tea, clearly"), 0);
        assert_eq!(pick_scenario(&s, "nothing"), 2);
    }
}
