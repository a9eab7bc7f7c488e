//! Sequential-agent flows, run as Flowise runs them on LangGraph: in steps.
//! From `seqStart`, every node whose turn has come runs — several at once when
//! the flow branches out, each seeing the state as the step began — and their
//! results (messages, state writes) are applied in the flow's order. A node
//! after two or more nodes waits for all of them ("merge in"). An agent step
//! runs the agent loop; an LLM step makes one model call, and when a tool node
//! serves it and the model called tools, the tool node runs them next;
//! conditions (`seqCondition`, and `seqConditionAgent`, which asks a model
//! first) choose a branch from `$flow.output` (the step before), `$flow.state`
//! and `$flow.input`; `seqLoop` goes back to a named node; `seqEnd`, or a
//! step with nothing after it, ends a branch. The state (`seqState`) holds
//! `Replace` and `Append` keys that steps' `Update State` rows write. Each
//! agent, LLM and tool step is an `agentReasoning` item; the answer is the
//! last text said. Steps are bounded, so a loop ends. With agent memory the
//! run begins at the session's checkpoint (its state, and its conversation as
//! the history) and ends with a new one.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use crate::flow::FlowError;
use crate::flow::component::{
    ConditionRow, ModelSpec, Routing, SeqAgent, SeqConditionAgent, SeqStep, StateChannel,
};
use crate::flow::plan::SequentialSpec;
use crate::flow::runtime::tool_loop::{call_tools, run_loop};
use crate::flow::runtime::{
    FlowEvent, Progress, RunContext, RunError, RunInput, RunOutput, Tokens, model_step,
};
use crate::flow::{prompt, tools};
use crate::llm::{ChatMessage, ChatRequest, Role, ToolCall};

/// Messages a checkpoint keeps at most (the newest): a long session's
/// conversation must not grow without end.
const CHECKPOINT_MESSAGES: usize = 200;

/// Steps a run takes at most (nodes running together count once).
const MAX_STEPS: usize = 100;
/// Conditions and loops one step's routing passes through at most.
const MAX_HOPS: usize = 64;

/// A node to run in the next step (a tool node with the calls it runs).
struct Task {
    id: String,
    calls: Vec<ToolCall>,
}

/// What one node did.
#[derive(Default)]
struct StepDone {
    messages: Vec<ChatMessage>,
    /// What it said, when it speaks (the answer so far).
    text: Option<String>,
    /// `$flow.output`: what its state updates and the conditions after it read.
    output: Value,
    /// Tool calls an LLM step made (for its tool node).
    calls: Vec<ToolCall>,
    writes: Map<String, Value>,
    reasoning: Option<Value>,
    used_tools: Vec<Value>,
    artifacts: Vec<Value>,
    sources: Vec<crate::retrieval::Document>,
}

/// What the nodes of one step see.
struct View<'a> {
    spec: &'a SequentialSpec,
    input: &'a RunInput,
    ctx: &'a RunContext<'a>,
    conversation: &'a [ChatMessage],
    /// The state's keys (`$flow.state.messages` is read from the conversation).
    state: &'a Map<String, Value>,
}

pub async fn run<E: From<FlowEvent>>(
    spec: &SequentialSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let from_code;
    let channels: &[StateChannel] = match spec.steps.iter().find_map(|(id, s)| match s {
        SeqStep::State(channels) => Some(Ok(channels.as_slice())),
        SeqStep::StateCode(code) => Some(Err((id, code))),
        _ => None,
    }) {
        Some(Ok(channels)) => channels,
        Some(Err((node_id, code))) => {
            from_code = state_from_code(code, node_id, input, ctx).await?;
            &from_code
        }
        None => &[],
    };
    let mut state: Map<String, Value> = channels
        .iter()
        .map(|c| (c.key.clone(), c.default.clone()))
        .collect();
    // A session's checkpoint carries its keys on (agent memory).
    if let Some(saved) = &input.persisted_state {
        for (key, value) in saved {
            if state.contains_key(key) {
                state.insert(key.clone(), value.clone());
            }
        }
    }
    let mut conversation = input.history.clone();
    conversation.push(input.question_turn());
    let mut out = RunOutput::default();
    let mut last_output = String::new();
    let mut arrived: HashMap<String, HashSet<String>> = HashMap::new();
    let mut frontier = Vec::new();
    {
        let view = view(spec, input, ctx, &conversation, &state);
        let start = StepDone::default();
        route(
            &view,
            &spec.graph.start,
            &start,
            &mut arrived,
            &mut frontier,
            &mut out,
        )
        .await?;
    }
    let mut steps = 0;
    while !frontier.is_empty() {
        steps += 1;
        if steps > MAX_STEPS {
            last_output = format!(
                "Stopped after {MAX_STEPS} steps without reaching the end of the flow.\n\n{last_output}"
            );
            break;
        }
        // A live caller hears which agents take the conversation now.
        if ctx.progress {
            for task in &frontier {
                if let Some(SeqStep::Agent(agent) | SeqStep::Llm(agent)) = spec.steps.get(&task.id)
                {
                    tokens
                        .progress(Progress::NextAgent(agent.name.clone()))
                        .await?;
                }
            }
        }
        let reasoned = out.agent_reasoning.len();
        let results = {
            let view = view(spec, input, ctx, &conversation, &state);
            futures_util::future::join_all(frontier.iter().map(|task| run_node::<E>(&view, task)))
                .await
        };
        let mut finished = Vec::with_capacity(frontier.len());
        for (task, result) in frontier.iter().zip(results) {
            let mut done = result?;
            conversation.extend(std::mem::take(&mut done.messages));
            apply(&mut state, channels, &done.writes);
            if let Some(text) = &done.text {
                last_output.clone_from(text);
            }
            out.agent_reasoning.extend(done.reasoning.take());
            out.used_tools.append(&mut done.used_tools);
            out.artifacts.append(&mut done.artifacts);
            out.source_documents.append(&mut done.sources);
            finished.push((task.id.clone(), done));
        }
        // ...and the steps so far, after each round that took any.
        if ctx.progress && out.agent_reasoning.len() > reasoned {
            tokens
                .progress(Progress::AgentReasoning(Value::from(
                    out.agent_reasoning.clone(),
                )))
                .await?;
        }
        let mut next = Vec::new();
        {
            let view = view(spec, input, ctx, &conversation, &state);
            for (id, done) in &finished {
                route(&view, id, done, &mut arrived, &mut next, &mut out).await?;
            }
        }
        // Each node once, in the flow's order.
        let mut seen = HashSet::new();
        next.retain(|t: &Task| seen.insert(t.id.clone()));
        next.sort_by_key(|t| spec.graph.order.get(&t.id).copied().unwrap_or(usize::MAX));
        frontier = next;
    }
    if !last_output.is_empty() {
        tokens.send(last_output.clone()).await?;
    }
    if spec.checkpoints {
        out.checkpoint = Some(crate::flow::runtime::Checkpoint {
            state,
            messages: checkpointed(conversation),
        });
    }
    out.text = last_output;
    Ok(out)
}

/// The conversation a checkpoint keeps: the newest messages, not beginning
/// with a tool's result (its call would be gone) and not ending with calls no
/// tool answered (providers refuse such a conversation).
fn checkpointed(mut conversation: Vec<ChatMessage>) -> Vec<ChatMessage> {
    while conversation
        .last()
        .is_some_and(|m| !m.tool_calls.is_empty())
    {
        conversation.pop();
    }
    if conversation.len() > CHECKPOINT_MESSAGES {
        conversation.drain(..conversation.len() - CHECKPOINT_MESSAGES);
    }
    let orphans = conversation
        .iter()
        .take_while(|m| m.role == Role::Tool)
        .count();
    conversation.drain(..orphans);
    conversation
}

fn view<'a>(
    spec: &'a SequentialSpec,
    input: &'a RunInput,
    ctx: &'a RunContext<'a>,
    conversation: &'a [ChatMessage],
    state: &'a Map<String, Value>,
) -> View<'a> {
    View {
        spec,
        input,
        ctx,
        conversation,
        state,
    }
}

impl View<'_> {
    /// `$flow.state.messages`: the conversation as `{role, content}` objects,
    /// built only when a reference reads it.
    fn messages(&self) -> Value {
        self.conversation
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect()
    }

    /// A path into the state (`plan[0]`, `messages[-1].content`), or the whole state.
    fn read_state(&self, path: &str) -> Option<Value> {
        let (key, rest) = first_name(path);
        if key.is_empty() {
            let mut whole = self.state.clone();
            whole.insert("messages".into(), self.messages());
            return lookup(&Value::Object(whole), rest);
        }
        if key == "messages" {
            return lookup(&self.messages(), rest);
        }
        lookup(self.state.get(key)?, rest)
    }
}

/// A path's first name, and the rest (starting at its `.` or `[`).
fn first_name(path: &str) -> (&str, &str) {
    let path = path.trim_start_matches('.');
    let end = path.find(['.', '[']).unwrap_or(path.len());
    (&path[..end], &path[end..])
}

/// Writes into the state: an `Append` key takes a list's items (or one value),
/// any other key the value (a null keeps the old one).
fn apply(state: &mut Map<String, Value>, channels: &[StateChannel], writes: &Map<String, Value>) {
    for (key, value) in writes {
        let append = channels.iter().any(|c| c.append && &c.key == key);
        if append {
            let list = state
                .entry(key.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(vec![list.take()]);
            }
            if let Value::Array(items) = list {
                match value {
                    Value::Array(more) => items.extend(more.iter().cloned()),
                    Value::Null => {}
                    one => items.push(one.clone()),
                }
            }
        } else if !value.is_null() {
            state.insert(key.clone(), value.clone());
        }
    }
}

/// Where the flow goes after `from`: its tool node (an LLM step that called
/// tools), else its next nodes — through conditions, loops and merges.
async fn route(
    view: &View<'_>,
    from: &str,
    done: &StepDone,
    arrived: &mut HashMap<String, HashSet<String>>,
    next: &mut Vec<Task>,
    out: &mut RunOutput,
) -> Result<(), RunError> {
    let graph = &view.spec.graph;
    if !done.calls.is_empty()
        && let Some(tool_node) = graph.tool_node_of.get(from)
    {
        next.push(Task {
            id: tool_node.clone(),
            calls: done.calls.clone(),
        });
        return Ok(());
    }
    let successors = |id: &str, branch: Option<&str>| -> Vec<(String, String)> {
        graph
            .next
            .get(id)
            .map(|targets| {
                targets
                    .iter()
                    .filter(|(b, _)| match (branch, b) {
                        (None, None) => true,
                        (Some(want), Some(have)) => same_branch(want, have),
                        _ => false,
                    })
                    .map(|(_, target)| (target.clone(), id.to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut pending: VecDeque<(String, String)> = successors(from, None).into();
    let mut hops = 0;
    while let Some((target, via)) = pending.pop_front() {
        hops += 1;
        if hops > MAX_HOPS {
            return Err(FlowError::failed(format!(
                "node {from}'s next step passes through more than {MAX_HOPS} conditions and loops"
            ))
            .into());
        }
        let joined = |arrived: &mut HashMap<String, HashSet<String>>| match graph.joins.get(&target)
        {
            Some(waits_for) if waits_for.contains(&via) => {
                let seen = arrived.entry(target.clone()).or_default();
                seen.insert(via.clone());
                if waits_for.iter().all(|w| seen.contains(w)) {
                    seen.clear();
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        match view.spec.steps.get(&target) {
            Some(SeqStep::Condition { routing, .. }) => {
                let branch = choose_branch(routing, &target, &done.output, view).await?;
                pending.extend(successors(&target, Some(&branch)));
            }
            Some(SeqStep::ConditionAgent(agent)) => {
                let output = decide(agent, view).await?;
                let branch = choose_branch(&agent.routing, &target, &output, view).await?;
                out.agent_reasoning.push(json!({
                    "agentName": agent.step.name,
                    "messages": [branch],
                    "next": branch,
                    "instructions": Value::Null,
                    "usedTools": [],
                    "sourceDocuments": [],
                    "state": {},
                }));
                pending.extend(successors(&target, Some(&branch)));
            }
            Some(SeqStep::Loop) => {
                if joined(arrived)
                    && let Some(back_to) = graph.loop_target.get(&target)
                {
                    pending.push_back((back_to.clone(), target.clone()));
                }
            }
            Some(SeqStep::Agent(_) | SeqStep::Llm(_) | SeqStep::ToolNode { .. }) => {
                if joined(arrived) {
                    next.push(Task {
                        id: target,
                        calls: Vec::new(),
                    });
                }
            }
            Some(
                SeqStep::End | SeqStep::Start { .. } | SeqStep::State(_) | SeqStep::StateCode(_),
            )
            | None => {}
        }
    }
    Ok(())
}

/// A condition's output names its branch as Flowise's anchors do, in any
/// case, with spaces, `_` or `-`.
fn same_branch(a: &str, b: &str) -> bool {
    let plain = |s: &str| {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    plain(a) == plain(b)
}

/// Runs one node of a step.
async fn run_node<E: From<FlowEvent>>(view: &View<'_>, task: &Task) -> Result<StepDone, RunError> {
    let spec = view.spec;
    let ctx = view.ctx;
    let step = spec
        .steps
        .get(&task.id)
        .ok_or_else(|| FlowError::invalid(format!("node {} is not a sequential step", task.id)))?;
    let mut done = match step {
        SeqStep::Agent(agent) => {
            let tools = tools::prepare(&agent.tools, &ctx.env, ctx.tools).await?;
            let result = run_loop::<E>(
                ctx,
                model_of(agent, spec),
                &tools,
                step_messages(agent, view),
                agent.max_iterations,
                None,
            )
            .await?;
            StepDone {
                messages: vec![ChatMessage::new(Role::Assistant, result.text.clone())],
                output: json!({"content": result.text, "usedTools": result.used_tools,
                    "sourceDocuments": result.sources}),
                text: Some(result.text),
                used_tools: result.used_tools,
                artifacts: result.artifacts,
                sources: result.sources,
                ..StepDone::default()
            }
        }
        SeqStep::Llm(llm) => {
            let tool_specs = match spec
                .graph
                .tool_node_of
                .get(&task.id)
                .and_then(|t| spec.steps.get(t))
            {
                Some(SeqStep::ToolNode { tools, .. }) => tools.as_slice(),
                _ => &[],
            };
            let offered = tools::prepare(tool_specs, &ctx.env, ctx.tools).await?;
            let model_spec = model_of(llm, spec);
            let request = ChatRequest {
                messages: step_messages(llm, view),
                tools: offered.iter().map(|t| t.def.clone()).collect(),
                params: model_spec.params.clone(),
                ..ChatRequest::default()
            };
            let model = ctx.model(model_spec).await?;
            let said =
                model_step::<E>(model_spec, &*model, request, None, false, &ctx.ledger).await?;
            let has_tool_node =
                !tool_specs.is_empty() || spec.graph.tool_node_of.contains_key(&task.id);
            if has_tool_node && !said.calls.is_empty() {
                StepDone {
                    messages: vec![said.calls_turn()],
                    output: json!({"content": said.text}),
                    calls: said.calls,
                    ..StepDone::default()
                }
            } else {
                StepDone {
                    messages: vec![ChatMessage::new(Role::Assistant, said.text.clone())],
                    output: json!({"content": said.text}),
                    text: Some(said.text),
                    ..StepDone::default()
                }
            }
        }
        SeqStep::ToolNode { tools, .. } => {
            let ready = tools::prepare(tools, &ctx.env, ctx.tools).await?;
            let outcomes = call_tools(ctx, &ready, &task.calls).await;
            let mut done = StepDone::default();
            let mut results = Vec::with_capacity(task.calls.len());
            for (call, outcome) in task.calls.iter().zip(outcomes) {
                done.used_tools
                    .push(tools::used_tool(&call.name, &call.arguments, &outcome));
                done.artifacts.extend(outcome.artifacts.iter().cloned());
                done.sources.extend(outcome.sources.iter().cloned());
                results.push(json!({"tool": call.name, "toolInput": call.arguments,
                    "toolOutput": outcome.output}));
                done.messages
                    .push(ChatMessage::tool_result(call, outcome.output));
            }
            done.output = Value::Array(results);
            done
        }
        _ => return Ok(StepDone::default()),
    };
    let (name, rows, code) = match step {
        SeqStep::Agent(a) | SeqStep::Llm(a) => (
            a.name.as_str(),
            a.update_state.as_slice(),
            a.update_code.as_deref(),
        ),
        SeqStep::ToolNode {
            name,
            update_state,
            update_code,
            ..
        } => (
            name.as_str(),
            update_state.as_slice(),
            update_code.as_deref(),
        ),
        _ => ("", &[][..], None),
    };
    done.writes = match code {
        Some(code) => update_state_code(code, &task.id, &done.output, view).await?,
        None => update_state(rows, &done.output, view),
    };
    let said: Vec<&str> = done.messages.iter().map(|m| m.content.as_str()).collect();
    done.reasoning = Some(json!({
        "agentName": name,
        "messages": said,
        "next": Value::Null,
        "instructions": Value::Null,
        "usedTools": done.used_tools,
        "sourceDocuments": [],
        "state": done.writes,
        "nodeId": task.id,
    }));
    Ok(done)
}

/// A step's `Update State` rows: a value starting `$flow.` is read from the
/// step's output, the state, the question or the session (`$flow.output.content`,
/// `$flow.state.plan`, `$flow.input`); `$vars.<name>` a workspace variable;
/// anything else is the text as written.
fn update_state(rows: &[(String, String)], output: &Value, view: &View<'_>) -> Map<String, Value> {
    rows.iter()
        .map(|(key, value)| (key.clone(), read(value, output, view)))
        .collect()
}

/// A step's `updateStateMemoryCode`: JavaScript run in the Python runtime's
/// sandbox with Flowise's globals (`$input`, `$vars`, `$flow` with the step's
/// `output` and the `state`); the object it returns is the keys written.
async fn update_state_code(
    code: &str,
    node_id: &str,
    output: &Value,
    view: &View<'_>,
) -> Result<Map<String, Value>, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {node_id} could not update the state (updateStateMemoryCode): {why}"
        )))
    };
    match run_code(code, output, view).await.map_err(failed)? {
        Value::Object(writes) => Ok(writes),
        // Flowise's words.
        _ => Err(failed("Return output must be an object".into())),
    }
}

/// Reads `seqState`'s JavaScript channels in the sandbox: each key's start
/// (`default()`) and whether its reducer appends or replaces, found by trying
/// it on sample values (weir applies writes itself; the reducer is not kept).
const STATE_HARNESS: &str = r#"
const channels = (__STATE__);
if (channels === null || typeof channels !== 'object' || Array.isArray(channels)) {
  throw new Error('State must be an object');
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const read = {};
for (const [key, channel] of Object.entries(channels)) {
  const c = channel === null || typeof channel !== 'object' ? {} : channel;
  const start = typeof c.default === 'function' ? await c.default() : c.default;
  let append = false;
  if (typeof c.value === 'function') {
    if (same(c.value(['\u0001a'], ['\u0001b']), ['\u0001a', '\u0001b'])) {
      append = true;
    } else if (!same(c.value('\u0001a', '\u0001b'), '\u0001b')) {
      throw new Error(`state key '${key}': its reducer (value) neither replaces nor appends`);
    }
  }
  read[key] = { start: start === undefined ? null : start, append };
}
return read;
"#;

async fn state_from_code(
    code: &str,
    node_id: &str,
    input: &RunInput,
    ctx: &RunContext<'_>,
) -> Result<Vec<StateChannel>, RunError> {
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {node_id} could not read its state (stateMemoryCode): {why}"
        )))
    };
    // Flowise runs it as `return <code>`: an expression, maybe with a `;`.
    let expression = code.trim().trim_end_matches(';');
    let harness = STATE_HARNESS.replace("__STATE__", expression);
    let mut globals = Map::with_capacity(2);
    globals.insert("$vars".into(), Value::Object(ctx.env.vars.clone()));
    globals.insert(
        "$flow".into(),
        json!({
            "chatflowId": ctx.flow.chatflow_id,
            "sessionId": ctx.flow.session_id,
            "chatId": ctx.flow.session_id,
            "input": input.question,
        }),
    );
    let read = ctx
        .run_javascript(&harness, globals)
        .await
        .map_err(failed)?;
    let Value::Object(keys) = read else {
        return Err(failed("State must be an object".into()));
    };
    Ok(keys
        .into_iter()
        .filter(|(key, _)| key != "messages")
        .map(|(key, channel)| {
            let append = channel.get("append").and_then(Value::as_bool) == Some(true);
            let start = channel.get("start").cloned().unwrap_or(Value::Null);
            let default = match (append, start) {
                (true, Value::Array(items)) => Value::Array(items),
                (true, Value::Null) => Value::Array(Vec::new()),
                (true, other) => Value::Array(vec![other]),
                (false, start) => start,
            };
            StateChannel {
                key,
                append,
                default,
            }
        })
        .collect())
}

/// The branch a condition takes: its table's first row that holds (else
/// `End`), or the name its `conditionFunction` returns.
async fn choose_branch(
    routing: &Routing,
    node_id: &str,
    output: &Value,
    view: &View<'_>,
) -> Result<String, RunError> {
    let code = match routing {
        Routing::Rows(rows) => return Ok(pick(rows, output, view).to_owned()),
        Routing::Code(code) => code,
    };
    let failed = |why: String| {
        RunError::Flow(FlowError::failed(format!(
            "node {node_id} could not choose a branch (conditionFunction): {why}"
        )))
    };
    match run_code(code, output, view).await.map_err(failed)? {
        Value::String(branch) => Ok(branch),
        // Flowise's words.
        _ => Err(failed("Condition function must return a string".into())),
    }
}

/// A step's JavaScript (the body of an async function) run in the Python
/// runtime's sandbox with Flowise's globals: `$input`, `$vars`, and `$flow`
/// with the step's `output` and the `state` (its `messages` included).
async fn run_code(code: &str, output: &Value, view: &View<'_>) -> Result<Value, String> {
    let flow = &view.ctx.flow;
    let mut state = view.state.clone();
    state.insert("messages".into(), view.messages());
    let mut globals = Map::with_capacity(3);
    globals.insert("$input".into(), Value::from(view.input.question.as_str()));
    globals.insert("$vars".into(), Value::Object(view.ctx.env.vars.clone()));
    globals.insert(
        "$flow".into(),
        json!({
            "chatflowId": flow.chatflow_id,
            "sessionId": flow.session_id,
            "chatId": flow.session_id,
            "input": view.input.question,
            "output": output,
            "state": state,
            "vars": view.ctx.env.vars,
        }),
    );
    view.ctx.run_javascript(code, globals).await
}

/// A `$flow.…` or `$vars.…` reference, or the text as written.
fn read(reference: &str, output: &Value, view: &View<'_>) -> Value {
    let reference = reference.trim();
    if let Some(path) = reference.strip_prefix("$flow.") {
        let (head, rest) = first_name(path);
        let found = match head {
            "output" => lookup(output, rest),
            "state" => view.read_state(rest),
            "input" => lookup(&Value::from(view.input.question.as_str()), rest),
            "sessionId" | "chatId" => lookup(&Value::from(view.ctx.flow.session_id.as_str()), rest),
            "chatflowId" => lookup(&Value::from(view.ctx.flow.chatflow_id.to_string()), rest),
            _ => None,
        };
        return found.unwrap_or(Value::Null);
    }
    if let Some(path) = reference.strip_prefix("$vars.") {
        let (name, rest) = first_name(path);
        return view
            .ctx
            .env
            .vars
            .get(name)
            .and_then(|v| lookup(v, rest))
            .unwrap_or(Value::Null);
    }
    Value::from(reference)
}

/// `a.b[0].c`, `messages[-1].content` (from the end), `list.length`; only
/// the value found is copied.
fn lookup(root: &Value, path: &str) -> Option<Value> {
    let mut current = root;
    let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, mut indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (*part, ""),
        };
        let last = i + 1 == parts.len() && indexes.is_empty();
        if !name.is_empty() {
            current = match (current, name) {
                (Value::Array(items), "length") if last => return Some(Value::from(items.len())),
                (Value::String(s), "length") if last => {
                    return Some(Value::from(s.chars().count()));
                }
                (Value::Object(map), _) => map.get(name)?,
                _ => return None,
            };
        }
        while let Some(rest) = indexes.strip_prefix('[') {
            let end = rest.find(']')?;
            let index: i64 = rest[..end].trim().parse().ok()?;
            let Value::Array(items) = &current else {
                return None;
            };
            let at = if index < 0 {
                items.len().checked_sub(index.unsigned_abs() as usize)?
            } else {
                index as usize
            };
            current = items.get(at)?;
            indexes = &rest[end + 1..];
        }
    }
    Some(current.clone())
}

/// The branch a condition table takes: the first row that holds, else `End`.
fn pick<'r>(rows: &'r [ConditionRow], output: &Value, view: &View<'_>) -> &'r str {
    rows.iter()
        .find(|row| {
            let subject = match row.variable.trim() {
                "" | "$flow.output" => read("$flow.output.content", output, view),
                variable => read(variable, output, view),
            };
            holds(row, &as_text(&subject))
        })
        .map_or("End", |row| row.output.as_str())
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A condition agent's answer: its words (`content`), or with structured
/// output the keys it was made to give.
async fn decide(agent: &SeqConditionAgent, view: &View<'_>) -> Result<Value, RunError> {
    let model_spec = model_of(&agent.step, view.spec);
    let messages = step_messages(&agent.step, view);
    let model = view.ctx.model(model_spec).await?;
    if agent.structured.is_empty() {
        let request = ChatRequest::text(messages, model_spec.params.clone());
        let said =
            model_step::<FlowEvent>(model_spec, &*model, request, None, false, &view.ctx.ledger)
                .await?;
        return Ok(json!({"content": said.text}));
    }
    let answer = crate::flow::runtime::structured::structured(
        model_spec,
        &*model,
        messages,
        &agent.structured,
        &view.ctx.ledger,
    )
    .await?;
    Ok(Value::Object(answer))
}

fn model_of<'a>(step: &'a SeqAgent, spec: &'a SequentialSpec) -> &'a ModelSpec {
    step.model.as_ref().unwrap_or(&spec.model)
}

/// The step's system prompt, the conversation, and its human prompt; prompt
/// values that read the state (`$flow.state.plan`) are read first (objects
/// and lists as JSON).
fn step_messages(step: &SeqAgent, view: &View<'_>) -> Vec<ChatMessage> {
    let (system, human) = (step.system.as_str(), step.human.as_str());
    let resolved: Map<String, Value> = step
        .values
        .iter()
        .map(|(k, v)| match v.as_str() {
            Some(text)
                if text.trim().starts_with("$flow.") || text.trim().starts_with("$vars.") =>
            {
                (
                    k.clone(),
                    Value::from(as_text(&read(text, &Value::Null, view))),
                )
            }
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let input = view.input;
    let fill = |template: &str| {
        prompt::format(
            template,
            &resolved,
            &input.question,
            &input.history_text(),
            &input.flow_vars,
        )
    };
    let mut messages = Vec::with_capacity(view.conversation.len() + 2);
    if !system.is_empty() {
        messages.push(ChatMessage::new(Role::System, fill(system)));
    }
    messages.extend(view.conversation.iter().cloned());
    if !human.is_empty() {
        messages.push(ChatMessage::new(Role::User, fill(human)));
    }
    messages
}

/// Whether a condition row holds for its subject.
fn holds(row: &ConditionRow, subject: &str) -> bool {
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

    fn row(operation: &str, value: &str) -> ConditionRow {
        ConditionRow {
            variable: "$flow.output.content".into(),
            operation: operation.into(),
            value: value.into(),
            output: "x".into(),
        }
    }

    #[test]
    fn conditions_compare_text_and_numbers() {
        assert!(holds(&row("Contains", "yes"), "oh yes"));
        assert!(!holds(&row("Contains", "yes"), "no"));
        assert!(holds(&row("Start With", "is"), "is it"));
        assert!(holds(&row("Greater Than", "3"), "4.5"));
        assert!(!holds(&row("Greater Than", "3"), "many"));
        assert!(holds(&row("Is Empty", ""), " "));
    }

    #[test]
    fn lookups_read_paths_indexes_and_lengths() {
        let state = json!({"plan": ["a", "b"], "messages": [{"content": "hi"}, {"content": "yo"}],
                           "deep": {"x": [1, {"y": 2}]}});
        assert_eq!(lookup(&state, "plan[0]"), Some(json!("a")));
        assert_eq!(lookup(&state, "messages[-1].content"), Some(json!("yo")));
        assert_eq!(lookup(&state, "messages.length"), Some(json!(2)));
        assert_eq!(lookup(&state, "deep.x[1].y"), Some(json!(2)));
        assert_eq!(lookup(&state, "plan[5]"), None);
        assert_eq!(lookup(&state, "plan[-3]"), None);
    }

    #[test]
    fn writes_replace_or_append() {
        let channels = vec![
            StateChannel {
                key: "steps".into(),
                append: true,
                default: json!([]),
            },
            StateChannel {
                key: "plan".into(),
                append: false,
                default: json!(""),
            },
        ];
        let mut state = Map::new();
        state.insert("steps".into(), json!([]));
        state.insert("plan".into(), json!(""));
        let writes = |v: Value| v.as_object().cloned().unwrap_or_default();
        apply(
            &mut state,
            &channels,
            &writes(json!({"steps": "one", "plan": "p1"})),
        );
        apply(
            &mut state,
            &channels,
            &writes(json!({"steps": ["two", "three"], "plan": null})),
        );
        assert_eq!(
            Value::Object(state),
            json!({"steps": ["one", "two", "three"], "plan": "p1"})
        );
    }

    #[test]
    fn checkpoints_keep_the_newest_whole_exchanges() {
        let call = crate::llm::ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: json!({}),
        };
        let mut conversation = vec![ChatMessage::new(Role::User, "q")];
        conversation.push(ChatMessage::tool_calls(String::new(), vec![call.clone()]));
        let kept = checkpointed(conversation.clone());
        assert_eq!(kept.len(), 1, "calls no tool answered are not kept");
        let mut long = Vec::new();
        for i in 0..CHECKPOINT_MESSAGES {
            long.push(ChatMessage::new(Role::User, format!("q{i}")));
        }
        long.insert(
            1,
            ChatMessage::tool_calls(String::new(), vec![call.clone()]),
        );
        long.insert(2, ChatMessage::tool_result(&call, "r"));
        let kept = checkpointed(long);
        assert!(kept.len() < CHECKPOINT_MESSAGES && kept[0].role != Role::Tool);
        assert_eq!(kept.last().map(|m| m.content.as_str()), Some("q199"));
    }

    #[test]
    fn branches_match_in_any_case_and_spelling() {
        assert!(same_branch("Needs Review", "needs_review"));
        assert!(same_branch("End", "end"));
        assert!(!same_branch("Yes", "No"));
    }
}
