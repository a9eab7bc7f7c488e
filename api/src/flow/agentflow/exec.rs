//! The executor. From the start node, every node whose inputs are ready runs;
//! nodes ready at the same time run together (each sees the run as it was when
//! they started) and their results are applied in order: the state they
//! write, the messages they add, what follows them. A decision node sends the
//! run down the output it took only; a loop node sends it back to its target
//! until its count is reached; an iteration node runs its block once per item.
//! Every node run is an item of `agentFlowExecutedData`; the answer is the last
//! item's `output.content`.
//!
//! A run takes at most its limits' node runs, and runs for at most their time
//! ([`crate::flow::runtime::Limits`]): past either it stops and says so (a 200 answer, status
//! `TERMINATED` or `TIMEOUT`).

use std::collections::{HashMap, HashSet, VecDeque};

use futures_util::future::{BoxFuture, join_all};
use serde_json::{Map, Value, json};

use super::AgentflowSpec;
use super::nodes::{Done, Seen, ask_human, human_answered, run_step, update_state};
use super::step::StepKind;
use super::template::{Scope, value_text};
use crate::domain::ExecutionState;
use crate::flow::FlowError;
use crate::flow::runtime::{
    FlowEvent, Outcome, Progress, Resume, RunContext, RunError, RunInput, RunOutput, Tokens,
};
use crate::llm::{ChatMessage, Role};

pub async fn run<E: From<FlowEvent> + Send>(
    spec: &AgentflowSpec,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    let mut run = Run {
        spec,
        input,
        ctx,
        tokens,
        chatflow_id: ctx.flow.chatflow_id.to_string(),
        state: Map::new(),
        past: input.history.clone(),
        runtime: Vec::new(),
        outputs: HashMap::new(),
        loop_counts: HashMap::new(),
        usage_recorded: HashMap::new(),
        last_loop: 0,
        executed: Vec::new(),
        runs: 0,
        out: RunOutput::default(),
        stopped: None,
        stop_status: ExecutionState::Terminated,
        deadline: tokio::time::Instant::now() + ctx.limits.run_timeout,
        taken: HashMap::new(),
        action: None,
        answered: None,
    };
    if ctx.progress {
        tokens
            .progress(Progress::Flow(ExecutionState::InProgress))
            .await?;
    }
    let first = match &input.resume {
        Some(resume) => run.resume_from(resume),
        None => spec.wiring.start.clone(),
    };
    let result = run.block(vec![first], None).await;
    let (status, error) = match (result, &run.stopped) {
        (Err(RunError::Cancelled), _) => return Err(RunError::Cancelled),
        (Err(RunError::Flow(e)), _) => (ExecutionState::Error, Some(e.message)),
        (Ok(()), _) if run.action.is_some() => (ExecutionState::Stopped, None),
        (Ok(()), Some(_)) => (run.stop_status, None),
        (Ok(()), None) => (ExecutionState::Finished, None),
    };
    if ctx.progress {
        tokens.progress(Progress::Flow(status)).await?;
    }
    let mut out = std::mem::take(&mut run.out);
    if let Some(error) = error {
        // The caller records the run and answers with the error.
        out.agentflow = Some(Outcome {
            executed: run.executed,
            status,
            state: run.state,
            error: Some(error),
            action: None,
        });
        return Ok(out);
    }
    out.text = match run.stopped.take() {
        Some(limit) => {
            tokens.send(limit.clone()).await?;
            limit
        }
        None => run
            .executed
            .last()
            .and_then(|item| item.pointer("/data/output/content"))
            .map(value_text)
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| " ".to_owned()),
    };
    out.agentflow = Some(Outcome {
        executed: run.executed,
        status,
        state: run.state,
        error: None,
        action: run.action,
    });
    Ok(out)
}

struct Run<'r, 'c, E> {
    spec: &'r AgentflowSpec,
    input: &'r RunInput,
    ctx: &'r RunContext<'c>,
    tokens: &'r Tokens<'r, E>,
    chatflow_id: String,
    state: Map<String, Value>,
    /// The session's earlier turns (dropped by an ephemeral-memory start).
    past: Vec<ChatMessage>,
    /// What the run's nodes said so far.
    runtime: Vec<ChatMessage>,
    /// The latest output of each node.
    outputs: HashMap<String, Value>,
    loop_counts: HashMap<String, u32>,
    /// What each node's model calls had used when its last run was recorded
    /// (a node run again records only its new use).
    usage_recorded: HashMap<String, crate::llm::Usage>,
    /// The count of the loop node that ran last (`{{ loop_count }}`).
    last_loop: u32,
    executed: Vec<Value>,
    runs: usize,
    out: RunOutput,
    /// Why the run stopped early (a limit), as the answer says it.
    stopped: Option<String>,
    /// `TERMINATED` (the node runs) or `TIMEOUT` (the time).
    stop_status: ExecutionState,
    /// When the run's time is up.
    deadline: tokio::time::Instant,
    /// The output each decision node took last.
    taken: HashMap<String, usize>,
    /// What the run stopped to wait for.
    action: Option<Value>,
    /// A person's answer to the human input node the run goes on from.
    answered: Option<&'r Resume>,
}

impl<'r, 'c, E: From<FlowEvent> + Send> Run<'r, 'c, E> {
    /// Takes up a stopped run: its items (but the waiting node's), its state
    /// and its nodes' outputs; returns the node to go on from.
    fn resume_from(&mut self, resume: &'r Resume) -> String {
        self.executed = resume
            .executed
            .iter()
            .filter(|item| item.get("nodeId").and_then(Value::as_str) != Some(&resume.node_id))
            .cloned()
            .collect();
        for item in &self.executed {
            if let (Some(id), Some(output)) = (
                item.get("nodeId").and_then(Value::as_str),
                item.pointer("/data/output"),
            ) {
                self.outputs.insert(id.to_owned(), output.clone());
            }
        }
        if let Some(state) = self
            .executed
            .iter()
            .rev()
            .find_map(|item| item.pointer("/data/state").and_then(Value::as_object))
        {
            self.state = state.clone();
        }
        self.answered = Some(resume);
        resume.node_id.clone()
    }

    /// Runs from `starts` until nothing is ready; `iteration` is the item of an
    /// iteration block (whose nodes never stream).
    fn block<'s>(
        &'s mut self,
        starts: Vec<String>,
        iteration: Option<&'s Value>,
    ) -> BoxFuture<'s, Result<(), RunError>>
    where
        'r: 's,
    {
        Box::pin(async move {
            let mut queue: VecDeque<String> = starts.into();
            let mut arrived: HashMap<String, HashSet<String>> = HashMap::new();
            while !queue.is_empty() {
                // A client gone stops the run between nodes, streaming or not.
                if self.tokens.is_closed() {
                    return Err(RunError::Cancelled);
                }
                if self.stopped.is_some() {
                    return Ok(());
                }
                if tokio::time::Instant::now() >= self.deadline {
                    self.stop_for_time();
                    return Ok(());
                }
                let wave: Vec<String> = queue.drain(..).collect();
                let max_runs = self.ctx.limits.max_node_runs;
                if self.runs + wave.len() > max_runs {
                    self.stopped = Some(format!(
                        "The agentflow stopped after {max_runs} node runs, the most one run \
                         may take; check its loops."
                    ));
                    return Ok(());
                }
                self.runs += wave.len();
                if let Some(unknown) = wave.iter().find(|id| !self.spec.steps.contains_key(*id)) {
                    return Err(RunError::Flow(FlowError::failed(format!(
                        "node {unknown} is not in the agentflow"
                    ))));
                }
                for id in &wave {
                    self.node_event(id, ExecutionState::InProgress, None)
                        .await?;
                }
                // Model, tool and request nodes of one wave run together; the
                // executor's own nodes (start, loop, iteration) run in turn.
                let together: Vec<&String> = wave.iter().filter(|id| !self.is_own(id)).collect();
                let ran = {
                    let history = self.history_text();
                    // Every node of the wave sees the run as it was when the wave began.
                    let seen = Seen {
                        scope: self.scope(&history, iteration),
                        past: &self.past,
                        runtime: &self.runtime,
                    };
                    let seen = &seen;
                    let (ctx, spec, tokens) = (self.ctx, self.spec, self.tokens);
                    let answered = self.answered;
                    let wave = join_all(together.iter().map(|id| {
                        let answered = answered.filter(|r| r.node_id == **id);
                        let stream =
                            (iteration.is_none() && spec.wiring.is_last(id)).then_some(tokens);
                        run_step(
                            id,
                            &spec.steps[id.as_str()].kind,
                            seen,
                            ctx,
                            stream,
                            answered,
                        )
                    }));
                    // A node still waiting when the time is up is dropped (its
                    // model or tool call with it).
                    tokio::time::timeout_at(self.deadline, wave).await
                };
                let Ok(ran) = ran else {
                    for id in &together {
                        self.node_event(id, ExecutionState::Timeout, None).await?;
                    }
                    self.stop_for_time();
                    return Ok(());
                };
                if self
                    .answered
                    .is_some_and(|r| together.iter().any(|id| **id == r.node_id))
                {
                    self.answered = None;
                }
                let mut results: HashMap<String, Result<Done, RunError>> =
                    together.into_iter().cloned().zip(ran).collect();
                for id in &wave {
                    let done = match results.remove(id) {
                        Some(done) => done,
                        // Nodes of the executor's own not yet run stay unrun after a pause.
                        None if self.action.is_some() => continue,
                        None => self.own_step(id, iteration).await,
                    };
                    let done = match done {
                        Ok(done) => done,
                        Err(RunError::Flow(e)) => {
                            self.failed(id, &e).await?;
                            return Err(RunError::Flow(e));
                        }
                        Err(cancelled) => return Err(cancelled),
                    };
                    let jump = self.finish(id, done, iteration).await?;
                    if self.action.is_some() {
                        // Waiting for a person: the wave's other results are still
                        // recorded, but nothing goes on from them.
                        continue;
                    }
                    match jump {
                        Some(target) if !queue.contains(&target) => queue.push_back(target),
                        Some(_) => {}
                        None => self.follow(id, &mut arrived, &mut queue),
                    }
                }
                if self.action.is_some() {
                    return Ok(());
                }
            }
            Ok(())
        })
    }

    fn stop_for_time(&mut self) {
        self.stop_status = ExecutionState::Timeout;
        self.stopped = Some(format!(
            "The agentflow stopped after running for {} s, the longest one run may take.",
            self.ctx.limits.run_timeout.as_secs()
        ));
    }

    /// Start, loop, iteration and human input nodes: the executor's own.
    async fn own_step(&mut self, id: &str, iteration: Option<&Value>) -> Result<Done, RunError> {
        let history = self.history_text();
        match &self.spec.steps[id].kind {
            StepKind::Start(start) => {
                let mut state: Map<String, Value> = start
                    .state
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect();
                if start.persist_state
                    && let Some(saved) = &self.input.persisted_state
                {
                    state.extend(saved.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                if start.ephemeral_memory {
                    self.past.clear();
                }
                let mut output = Map::new();
                let input = if start.form_input {
                    output.insert("form".into(), Value::Object(self.input.form.clone()));
                    json!({"form": self.input.form})
                } else {
                    output.insert("question".into(), Value::from(self.input.question.as_str()));
                    json!({"question": self.input.question})
                };
                if start.ephemeral_memory {
                    output.insert("ephemeralMemory".into(), Value::Bool(true));
                }
                if start.persist_state {
                    output.insert("persistState".into(), Value::Bool(true));
                }
                Ok(Done {
                    input,
                    output,
                    state: Some(state),
                    ..Done::default()
                })
            }
            StepKind::Loop(step) => {
                let label = self.spec.wiring.label(&step.target).to_owned();
                let content = format!("Loop back to {label} ({})", step.target);
                let seen = Seen {
                    scope: self.scope(&history, iteration),
                    past: &self.past,
                    runtime: &self.runtime,
                };
                let state = update_state(&seen, &step.update_state, &content);
                let mut output = Map::new();
                output.insert("content".into(), Value::from(content));
                output.insert("nodeID".into(), Value::from(step.target.as_str()));
                output.insert("maxLoopCount".into(), Value::from(step.max));
                if let Some(fallback) = &step.fallback {
                    output.insert(
                        "fallbackMessage".into(),
                        Value::from(seen.scope.resolve(fallback)),
                    );
                }
                Ok(Done {
                    input: json!({"nodeID": step.target, "maxLoopCount": step.max}),
                    output,
                    state,
                    ..Done::default()
                })
            }
            StepKind::Iteration { input } => {
                let text = self.scope(&history, iteration).resolve(input);
                let items = parse_items(&text).map_err(|why| {
                    RunError::Flow(FlowError::failed(format!(
                        "node {id} (iterationAgentflow) failed: {why}"
                    )))
                })?;
                let max_items = self.ctx.limits.max_iteration_items;
                if items.len() > max_items {
                    return Err(RunError::Flow(FlowError::failed(format!(
                        "node {id} (iterationAgentflow) failed: {} items, more than the \
                         {max_items} one iteration may run",
                        items.len()
                    ))));
                }
                let block = self.spec.wiring.blocks.get(id).cloned().unwrap_or_default();
                let mut results = Vec::with_capacity(items.len());
                // Each item's loops count from zero, as each item is a run of its own.
                let outer_loops = std::mem::take(&mut self.loop_counts);
                for (index, item) in items.iter().enumerate() {
                    self.loop_counts.clear();
                    let before = self.executed.len();
                    let runtime_len = self.runtime.len();
                    let outcome = self.block(block.starts.clone(), Some(item)).await;
                    for entry in &mut self.executed[before..] {
                        if let Some(data) = entry.get_mut("data").and_then(Value::as_object_mut) {
                            data.insert("iterationIndex".into(), Value::from(index));
                            data.insert("parentNodeId".into(), Value::from(id));
                        }
                    }
                    match outcome {
                        Ok(()) => {
                            let text = self.executed[before..]
                                .last()
                                .and_then(|e| e.pointer("/data/output/content"))
                                .map(value_text)
                                .unwrap_or_default();
                            if !text.is_empty() {
                                results.push(text);
                            }
                        }
                        Err(RunError::Flow(e)) => {
                            results.push(format!("Error in iteration {}: {}", index + 1, e.message))
                        }
                        Err(cancelled) => return Err(cancelled),
                    }
                    // What one item's nodes said stays with that item.
                    self.runtime.truncate(runtime_len);
                    if self.stopped.is_some() {
                        break;
                    }
                }
                self.loop_counts = outer_loops;
                let mut output = Map::new();
                output.insert("iterationResults".into(), json!(results));
                output.insert("content".into(), Value::from(results.join("\n")));
                Ok(Done {
                    input: json!({"iterationInput": items}),
                    output,
                    ..Done::default()
                })
            }
            StepKind::HumanInput(human) => match self.answered.take() {
                Some(resume) if resume.node_id == id => Ok(human_answered(human, resume)),
                _ => {
                    let seen = Seen {
                        scope: self.scope(&history, iteration),
                        past: &self.past,
                        runtime: &self.runtime,
                    };
                    ask_human(human, &seen, self.ctx, self.tokens).await
                }
            },
            _ => Err(RunError::Flow(FlowError::failed(format!(
                "node {id} is not run by the executor"
            )))),
        }
    }

    /// Applies a node's result; returns where a loop sends the run, if anywhere.
    async fn finish(
        &mut self,
        id: &str,
        mut done: Done,
        iteration: Option<&Value>,
    ) -> Result<Option<String>, RunError> {
        let mut jump = None;
        if let Some(StepKind::Loop(step)) = self.spec.steps.get(id).map(|s| &s.kind) {
            let count = self.loop_counts.get(id).copied().unwrap_or(0) + 1;
            self.last_loop = count;
            if count < step.max {
                self.loop_counts.insert(id.to_owned(), count);
                jump = Some(step.target.clone());
            } else {
                let fallback = done
                    .output
                    .get("fallbackMessage")
                    .map(value_text)
                    .unwrap_or_else(|| {
                        format!(
                            "Loop completed after reaching maximum iteration count of {}.",
                            step.max
                        )
                    });
                if iteration.is_none() {
                    self.tokens.send(fallback.clone()).await?;
                }
                done.output.insert("content".into(), Value::from(fallback));
            }
        }
        if let Some(written) = done.state.take() {
            self.state.extend(written);
        }
        if done.opens && self.runtime.is_empty() {
            self.runtime.push(self.input.question_turn());
        }
        self.runtime.append(&mut done.chat);
        self.out.used_tools.append(&mut done.used_tools);
        self.out.artifacts.append(&mut done.artifacts);
        self.out.source_documents.append(&mut done.sources);
        let status = if done.pause {
            let action = json!({
                "id": uuid::Uuid::new_v4(),
                "mapping": {"approve": "Proceed", "reject": "Reject"},
                "elements": [
                    {"type": "agentflowv2-approve-button", "label": "Proceed"},
                    {"type": "agentflowv2-reject-button", "label": "Reject"},
                ],
                "data": {"nodeId": id, "nodeLabel": self.spec.wiring.label(id), "input": done.input},
            });
            done.output
                .insert("humanInputAction".into(), action.clone());
            self.action = Some(action);
            ExecutionState::Stopped
        } else {
            ExecutionState::Finished
        };
        if let Some(used) = self.usage_of_this_run(id) {
            done.output.insert("usageMetadata".into(), used);
        }
        let output = Value::Object(done.output);
        self.outputs.insert(id.to_owned(), output.clone());
        // Built by moving the parts in (`json!` would copy each through a serialiser).
        let wiring = &self.spec.wiring;
        let mut data = Map::new();
        data.insert("id".into(), Value::from(id));
        data.insert("name".into(), Value::from(wiring.name(id)));
        data.insert("input".into(), done.input);
        data.insert("output".into(), output);
        data.insert("state".into(), Value::Object(self.state.clone()));
        let mut item = Map::new();
        item.insert("nodeId".into(), Value::from(id));
        item.insert("nodeLabel".into(), Value::from(wiring.label(id)));
        item.insert("data".into(), Value::Object(data));
        item.insert(
            "previousNodeIds".into(),
            wiring.previous(id).iter().map(String::as_str).collect(),
        );
        item.insert("status".into(), Value::from(status.as_str()));
        self.executed.push(Value::Object(item));
        self.node_event(id, status, None).await?;
        self.executed_event().await?;
        if let Some(branch) = done.branch {
            self.taken.insert(id.to_owned(), branch);
        } else {
            self.taken.remove(id);
        }
        Ok(jump)
    }

    /// The tokens this run of node `id` used (`usageMetadata` of its executed
    /// item's output, as Flowise's model nodes report), when it called a model.
    fn usage_of_this_run(&mut self, id: &str) -> Option<Value> {
        let total = self.ctx.ledger.node_usage(id);
        let before = self
            .usage_recorded
            .insert(id.to_owned(), total)
            .unwrap_or_default();
        let input_tokens = total.input_tokens.saturating_sub(before.input_tokens);
        let output_tokens = total.output_tokens.saturating_sub(before.output_tokens);
        (input_tokens + output_tokens > 0).then(|| {
            json!({"input_tokens": input_tokens, "output_tokens": output_tokens,
                   "total_tokens": input_tokens + output_tokens})
        })
    }

    /// Queues what follows `id` once its inputs are ready.
    fn follow(
        &mut self,
        id: &str,
        arrived: &mut HashMap<String, HashSet<String>>,
        queue: &mut VecDeque<String>,
    ) {
        let taken = self.taken.get(id).copied();
        for next in self.spec.wiring.next(id) {
            if let (Some(taken), Some(branch)) = (taken, next.branch)
                && taken != branch
            {
                continue;
            }
            let got = arrived.entry(next.target.clone()).or_default();
            got.insert(id.to_owned());
            let Some(waits) = self.spec.wiring.waits.get(&next.target) else {
                continue;
            };
            let ready = waits.all.iter().all(|s| got.contains(s))
                && waits
                    .any
                    .iter()
                    .all(|group| group.iter().any(|s| got.contains(s)));
            if ready {
                arrived.remove(&next.target);
                if !queue.contains(&next.target) {
                    queue.push_back(next.target.clone());
                }
            }
        }
    }

    /// Records a failed node and says so.
    async fn failed(&mut self, id: &str, error: &FlowError) -> Result<(), RunError> {
        let name = self.spec.wiring.name(id).to_owned();
        self.executed.push(json!({
            "nodeId": id,
            "nodeLabel": self.spec.wiring.label(id),
            "data": {"id": id, "name": name, "error": error.message},
            "previousNodeIds": self.spec.wiring.previous(id),
            "status": ExecutionState::Error.as_str(),
        }));
        self.node_event(id, ExecutionState::Error, Some(error.message.clone()))
            .await?;
        self.executed_event().await
    }

    async fn node_event(
        &self,
        id: &str,
        status: ExecutionState,
        error: Option<String>,
    ) -> Result<(), RunError> {
        if !self.ctx.progress {
            return Ok(());
        }
        self.tokens
            .progress(Progress::Node {
                node_id: id.to_owned(),
                node_label: self.spec.wiring.label(id).to_owned(),
                status,
                error,
            })
            .await
    }

    async fn executed_event(&self) -> Result<(), RunError> {
        if !self.ctx.progress {
            return Ok(());
        }
        self.tokens
            .progress(Progress::Executed(Value::from(self.executed.clone())))
            .await
    }

    /// The session and the run so far as `Human:` / `Assistant:` lines.
    fn history_text(&self) -> String {
        let mut text = String::new();
        for m in self.past.iter().chain(&self.runtime) {
            if m.content.is_empty() {
                continue;
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(if m.role == Role::User {
                "Human: "
            } else {
                "Assistant: "
            });
            text.push_str(&m.content);
        }
        text
    }

    fn is_own(&self, id: &str) -> bool {
        matches!(
            self.spec.steps.get(id).map(|s| &s.kind),
            Some(
                StepKind::Start(_)
                    | StepKind::Loop(_)
                    | StepKind::Iteration { .. }
                    | StepKind::HumanInput(_)
            )
        )
    }

    fn scope<'a>(&'a self, history: &'a str, iteration: Option<&'a Value>) -> Scope<'a> {
        Scope {
            question: &self.input.question,
            images: &self.input.images,
            chat_history: history,
            form: &self.input.form,
            vars: &self.ctx.env.vars,
            state: &self.state,
            flow_vars: &self.input.flow_vars,
            session_id: &self.ctx.flow.session_id,
            chatflow_id: &self.chatflow_id,
            outputs: &self.outputs,
            iteration,
            loop_count: self.last_loop,
        }
    }
}

/// An iteration's input: a JSON array (a single value is a list of one).
fn parse_items(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) | Err(_) => Err(format!(
            "its input is not a JSON array: {}",
            trimmed.chars().take(200).collect::<String>()
        )),
    }
}
