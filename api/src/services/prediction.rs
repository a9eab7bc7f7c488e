//! Predictions: asking a chatflow a question.
//!
//! [`start`] resolves the session (`chatId` ?? `sessionId` ?? `overrideConfig.sessionId`
//! ?? a new UUID), builds the flow for this request (overrides applied), loads the
//! conversation memory, records a lead, keeps uploaded files, and spawns the run.
//! The run reports through a channel of [`PredictionEvent`]s; JSON answers fold
//! that channel, SSE answers forward it. The question and the answer are stored
//! when the run completes, so the next question of the session remembers them; a
//! run whose client went away stores nothing.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services};
use crate::domain::{
    Chatflow, ExecutionState, ExecutionUpdate, MessageRole, NewChatMessage, NewExecution,
};
use crate::domain::{Variable, VariableType};
use crate::flow::plan::Runnable;
pub use crate::flow::run::Progress;
use crate::flow::run::{self, RunError};
use crate::flow::tools::{FlowContext, ToolEnv};
use crate::flow::{FlowError, FlowEvent, Overrides, RunContext, RunInput, RunOutput};
use crate::llm::{ChatMessage, Role};
use crate::store::RunWrites;

/// Events between the run and the answer, buffered at most this many.
const EVENT_BUFFER: usize = 64;
/// How long an agentflow run goes before its execution is written as
/// `INPROGRESS` (so the executions list shows it running); a run that ends
/// sooner writes its record once, with its end.
const RECORD_RUNNING_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// A prior turn sent with the request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct HistoryItem {
    pub message: String,
    /// `userMessage` or `apiMessage`.
    #[serde(rename = "type")]
    pub role: MessageRole,
}

/// A file attached to a prediction: what document loaders read.
pub use crate::retrieval::load::FileData as Upload;

/// A validated prediction request.
#[derive(Debug, Default)]
pub struct PredictionRequest {
    pub question: String,
    pub chat_id: Option<String>,
    pub history: Vec<HistoryItem>,
    pub override_config: Option<Map<String, Value>>,
    pub lead_email: Option<String>,
    pub uploads: Vec<Upload>,
    /// `$flow` values prompts may use (`{{$flow.body}}` of a webhook call).
    pub flow_vars: Map<String, Value>,
    /// An agentflow's form values (`$form`).
    pub form: Map<String, Value>,
    /// Whether the caller follows the run live (agentflow progress events).
    pub streaming: bool,
    /// A person's answer to an agentflow run that stopped for it.
    pub human_input: Option<HumanAnswer>,
    /// How many flows deep this run is (0: a client's or a trigger's; more when
    /// an agentflow's `executeFlowAgentflow` runs it).
    pub depth: u32,
}

/// `humanInput` of a prediction: go on with (or reject) a stopped agentflow run.
#[derive(Debug, Clone, Default)]
pub struct HumanAnswer {
    pub proceed: bool,
    /// The node the run waits at; the stopped run's own when absent.
    pub start_node_id: Option<String>,
    pub feedback: String,
}

/// The folded answer (the JSON response body, and the SSE `metadata`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PredictionResult {
    pub text: String,
    /// The answer as JSON when an output parser read it (Flowise's `json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    pub question: String,
    pub chat_id: String,
    pub chat_message_id: Uuid,
    pub session_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_documents: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub used_tools: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_reasoning: Vec<Value>,
    /// Files tools wrote, served by weir at their `url` (with a key of the workspace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Value>,
    /// An agentflow run's execution record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<Uuid>,
    /// What each node of an agentflow did: the JSON text of the execution
    /// record, serialised once for both.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub agent_flow_executed_data: Option<Box<RawValue>>,
    /// What a stopped agentflow run waits for (answer it with `humanInput`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Value>,
}

#[derive(Debug)]
pub enum PredictionEvent {
    Token(String),
    /// An agentflow's progress (only when streaming).
    Progress(Progress),
    Done(Box<PredictionResult>),
    /// The run failed; the message names the node and the cause.
    Error(String),
}

impl From<FlowEvent> for PredictionEvent {
    fn from(event: FlowEvent) -> Self {
        match event {
            FlowEvent::Token(t) => PredictionEvent::Token(t),
            FlowEvent::Progress(p) => PredictionEvent::Progress(p),
        }
    }
}

/// A started run: its events, and what is already known of the answer.
pub struct Prediction {
    pub events: mpsc::Receiver<PredictionEvent>,
    pub chat_id: String,
    /// Whether the flow's answer can stream (not with an output parser: a
    /// streaming request is answered with JSON, as Flowise does).
    pub streamable: bool,
    /// The run's task (a caller that gives up on the answer may stop it at once).
    pub task: tokio::task::AbortHandle,
}

impl Prediction {
    /// Folds the events into the whole answer (the JSON response, a trigger's result).
    pub async fn answer(mut self) -> ServiceResult<PredictionResult> {
        while let Some(event) = self.events.recv().await {
            match event {
                PredictionEvent::Token(_) | PredictionEvent::Progress(_) => {}
                PredictionEvent::Done(result) => return Ok(*result),
                PredictionEvent::Error(message) => {
                    return Err(ServiceError::Flow(crate::flow::FlowError::failed(message)));
                }
            }
        }
        Err(ServiceError::Internal(
            "the run ended without an answer".into(),
        ))
    }
}

/// Prepares and spawns a prediction. Errors here happen before anything ran
/// (invalid flow, forbidden override, bad input) and map to their status.
pub async fn start(
    state: &Services,
    flow: &Chatflow,
    mut request: PredictionRequest,
) -> ServiceResult<Prediction> {
    let plan = state
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)?;
    // A flow another flow runs counts as part of its caller's prediction.
    let permit = match request.depth {
        0 => Some(state.in_flight.try_acquire(flow.workspace_id).ok_or_else(|| {
            ServiceError::Busy(format!(
                "the workspace has {} predictions running, the most this server runs at once \
                 for one workspace (WORKSPACE_MAX_PREDICTIONS); retry when one has finished",
                state.in_flight.limit()
            ))
        })?),
        _ => None,
    };
    let credentials = super::credentials::open_for_run(
        &*state.store,
        &state.keyring,
        flow.workspace_id,
        plan.credential_ids(),
    )
    .await?;
    let overrides = Overrides {
        values: request.override_config.as_ref(),
        allowed: allowed_overrides(flow.api_config.as_deref()),
        credentials: credentials.as_ref(),
    };
    let runnable = plan.runnable(&overrides)?;
    let chat_id = request
        .chat_id
        .clone()
        .or_else(|| {
            request
                .override_config
                .as_ref()
                .and_then(|o| o.get("sessionId"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| Uuid::new_v4().to_string());
    // Memory may pin its own session; messages are stored where memory reads them.
    let session = runnable
        .memory
        .as_ref()
        .and_then(|m| m.session_id.clone())
        .unwrap_or_else(|| chat_id.clone());

    let mut history = Vec::new();
    // Agent memory: the session's last checkpoint (its state and whole conversation).
    let mut checkpoint_state = None;
    if runnable.checkpoints()
        && let Some(saved) = state.store.get_agent_checkpoint(flow.id, &session).await?
    {
        match serde_json::from_str::<crate::flow::run::Checkpoint>(&saved) {
            Ok(saved) => {
                history = saved.messages;
                checkpoint_state = Some(saved.state);
                request.history.clear();
            }
            Err(e) => tracing::warn!(chatflow = %flow.id, error = %e,
                "an agent checkpoint cannot be read; the session starts afresh"),
        }
    }
    if let Some(memory) = &runnable.memory {
        let last = memory.window.map(|k| k.saturating_mul(2));
        let stored = state
            .store
            .list_chat_messages(flow.id, Some(&session), last)
            .await?;
        history.extend(
            stored
                .into_iter()
                .map(|m| ChatMessage::new(speaker(m.role), m.content)),
        );
    }
    history.extend(
        std::mem::take(&mut request.history)
            .into_iter()
            .map(|h| ChatMessage::new(speaker(h.role), h.message)),
    );

    let env = if !runnable.needs_tool_env() {
        ToolEnv::default()
    } else {
        tool_env(state, flow, &runnable, request.override_config.as_ref()).await?
    };

    if let Some(email) = &request.lead_email {
        state.store.create_lead(flow.id, &chat_id, email).await?;
    }
    if !request.uploads.is_empty()
        && let Some(store) = runnable.upload_store()
    {
        // Kept (within the workspace's quota) before anything is indexed, so a
        // question over the quota leaves nothing behind.
        let kept = state
            .uploads
            .keep(flow.workspace_id, flow.id, &session, &request.uploads)
            .await?;
        // The chat's files are searchable from its first question on.
        let files = std::mem::take(&mut request.uploads);
        let indexed = super::vectors::upsert(
            state,
            flow,
            super::vectors::UpsertRequest {
                stop_node_id: Some(store.node_id.clone()),
                override_config: request.override_config.clone(),
                cleanup: super::vectors::Cleanup::None,
                files,
                chat_id: Some(session.clone()),
            },
        )
        .await;
        if let Err(e) = indexed {
            state.uploads.discard(&kept).await;
            return Err(e);
        }
    }
    // A flow that takes no files reads nothing of them and keeps nothing.
    request.uploads.clear();

    let agentflow = match runnable.agentflow() {
        Some(agentflow) => {
            super::agentflow::prepare(state, flow, agentflow, &session, &mut request).await?
        }
        None if request.human_input.is_some() => {
            return Err(FlowError::invalid(
                "'humanInput' answers an agentflow that waits for a person; this chatflow is not one",
            )
            .into());
        }
        None => super::agentflow::Prepared::default(),
    };

    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let task = RunTask {
        state: state.clone(),
        chatflow_id: flow.id,
        runnable,
        input: RunInput {
            question: request.question,
            history,
            flow_vars: request.flow_vars,
            form: request.form,
            persisted_state: agentflow.persisted_state.or(checkpoint_state),
            resume: agentflow.resume,
        },
        execution: agentflow.execution,
        execution_start: agentflow.start,
        workspace_id: flow.workspace_id,
        depth: request.depth,
        streaming: request.streaming,
        chat_id: chat_id.clone(),
        session,
        env,
        _permit: permit,
    };
    let task = tokio::spawn(task.run(tx)).abort_handle();
    Ok(Prediction {
        events: rx,
        chat_id,
        streamable: plan.is_streamable(),
        task,
    })
}

struct RunTask {
    state: Services,
    chatflow_id: Uuid,
    runnable: Runnable,
    input: RunInput,
    chat_id: String,
    session: String,
    env: ToolEnv,
    streaming: bool,
    /// The agentflow run's execution record.
    execution: Option<Uuid>,
    /// That record when it is a new one, not written yet.
    execution_start: Option<NewExecution>,
    workspace_id: Uuid,
    depth: u32,
    /// Counts the run against its workspace's bound until the task ends.
    _permit: Option<super::in_flight::Permit>,
}

impl RunTask {
    async fn run(mut self, out: mpsc::Sender<PredictionEvent>) {
        let flows = super::subflow::SubflowCaller {
            state: self.state.clone(),
            workspace: self.workspace_id,
            depth: self.depth,
        };
        let ctx = RunContext {
            models: &self.state.models,
            tools: &self.state.tools,
            env: std::mem::take(&mut self.env),
            flow: FlowContext {
                input: self.input.question.clone(),
                chat_history: self.input.history_text(),
                session_id: self.session.clone(),
                chatflow_id: self.chatflow_id,
            },
            progress: self.streaming,
            flows: Some(&flows),
            limits: self.state.config.agentflow_limits(),
        };
        let mut start = self.execution_start.take();
        let running = run::run(&self.runnable, &self.input, &ctx, &out);
        let result = match &start {
            None => running.await,
            Some(new) => {
                // A short run's record is written once, with its end; a longer
                // one is listed as `INPROGRESS` meanwhile.
                tokio::pin!(running);
                tokio::select! {
                    result = &mut running => result,
                    () = tokio::time::sleep(RECORD_RUNNING_AFTER) => {
                        // Written beside the run, which goes on meanwhile; its end
                        // is written after this.
                        let store = Arc::clone(&self.state.store);
                        let (id, new) = (new.id, new.clone());
                        let recording =
                            tokio::spawn(async move { store.create_execution(&new).await });
                        let result = running.await;
                        match recording.await {
                            Ok(Ok(_)) => start = None,
                            Ok(Err(e)) => tracing::error!(execution = %id, error = %e,
                                "cannot record the agentflow's execution as running"),
                            Err(e) => tracing::error!(execution = %id, error = %e,
                                "the task recording the agentflow's execution as running failed"),
                        }
                        result
                    }
                }
            }
        };
        let chatflow = self.chatflow_id.to_string();
        let metrics = crate::metrics::metrics();
        match &result {
            Ok(output) if output.agentflow.as_ref().is_some_and(|a| a.error.is_some()) => {
                metrics.prediction(&chatflow, "error", output.tokens_streamed);
            }
            Ok(output) => metrics.prediction(&chatflow, "success", output.tokens_streamed),
            Err(RunError::Flow(_)) => metrics.prediction(&chatflow, "error", 0),
            Err(RunError::Cancelled) => metrics.prediction(&chatflow, "cancelled", 0),
        }
        // The run's execution record (its start when not written yet, its end).
        let mut record = RunWrites {
            start_execution: start,
            update_execution: self.execution_end(&result),
            ..RunWrites::default()
        };
        let failed = match &result {
            Ok(output) => output.agentflow.as_ref().and_then(|a| a.error.clone()),
            Err(_) => None,
        };
        // A finished run's record is written with its messages (`remember`).
        if failed.is_some() || result.is_err() {
            self.write_record(std::mem::take(&mut record)).await;
        }
        if let Some(error) = failed {
            tracing::warn!(chatflow = %self.chatflow_id, error = %error, "agentflow run failed");
            let _ = out.send(PredictionEvent::Error(error)).await;
            return;
        }
        if let Ok(RunOutput {
            checkpoint: Some(checkpoint),
            ..
        }) = &result
            && let Err(e) = self.keep_checkpoint(checkpoint).await
        {
            tracing::error!(chatflow = %self.chatflow_id, error = %e, "cannot keep the agent checkpoint");
        }
        let executed = executed_text(&record);
        match result {
            Ok(output) => match self.remember(&output, record).await {
                Ok(message_id) => {
                    let result = PredictionResult {
                        text: output.text,
                        json: output.json,
                        question: self.input.question.clone(),
                        chat_id: self.chat_id.clone(),
                        chat_message_id: message_id,
                        session_id: self.chat_id.clone(),
                        source_documents: output
                            .source_documents
                            .iter()
                            .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
                            .collect(),
                        used_tools: output.used_tools,
                        agent_reasoning: output.agent_reasoning,
                        artifacts: output.artifacts,
                        execution_id: self.execution,
                        action: output.agentflow.as_ref().and_then(|a| a.action.clone()),
                        agent_flow_executed_data: output.agentflow.and_then(|a| {
                            executed.or_else(|| serde_json::value::to_raw_value(&a.executed).ok())
                        }),
                    };
                    let _ = out.send(PredictionEvent::Done(Box::new(result))).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot store the conversation");
                    let _ = out
                        .send(PredictionEvent::Error(
                            "the answer could not be stored; try again".into(),
                        ))
                        .await;
                }
            },
            Err(RunError::Flow(e)) => {
                tracing::warn!(chatflow = %self.chatflow_id, error = %e.message, "chatflow run failed");
                let _ = out.send(PredictionEvent::Error(e.message)).await;
            }
            Err(RunError::Cancelled) => {
                tracing::info!(chatflow = %self.chatflow_id, "client went away; run cancelled");
            }
        }
    }

    /// Keeps where the session's next run begins (agent memory).
    async fn keep_checkpoint(
        &self,
        checkpoint: &crate::flow::run::Checkpoint,
    ) -> Result<(), String> {
        let text = serde_json::to_string(checkpoint).map_err(|e| e.to_string())?;
        self.state
            .store
            .put_agent_checkpoint(self.chatflow_id, &self.session, &text)
            .await
            .map_err(|e| e.to_string())
    }

    /// How the run's execution record ends, for an agentflow run: its items,
    /// state and pending action, or `TERMINATED` when the run did not finish.
    fn execution_end(
        &self,
        result: &Result<RunOutput, RunError>,
    ) -> Option<(Uuid, ExecutionUpdate)> {
        let id = self.execution?;
        let update = match result {
            Ok(output) => output.agentflow.as_ref().map(|a| ExecutionUpdate {
                state: Some(a.status),
                // Serialised in place (the items also go into the answer).
                execution_data: serde_json::to_string(&a.executed)
                    .map_err(|e| {
                        tracing::error!(execution = %id, error = %e,
                            "cannot serialise the agentflow's executed items");
                    })
                    .ok(),
                action: Some(a.action.as_ref().map(Value::to_string)),
                ..ExecutionUpdate::default()
            }),
            Err(_) => Some(ExecutionUpdate {
                state: Some(ExecutionState::Terminated),
                ..ExecutionUpdate::default()
            }),
        };
        update.map(|update| (id, update))
    }

    /// Writes the run's execution `record` without messages; whether it was
    /// written. A failure is logged, naming the execution: no one else sees it.
    async fn write_record(&self, record: RunWrites) -> bool {
        let Some((id, _)) = record.update_execution else {
            return false;
        };
        match self.state.store.write_run(record).await {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(execution = %id, error = %e, "cannot record the agentflow's execution");
                false
            }
        }
    }

    /// Stores the question and the answer with the run's execution `record`
    /// (all in one write); returns the answer's message id.
    async fn remember(
        &self,
        output: &RunOutput,
        mut record: RunWrites,
    ) -> Result<Uuid, crate::store::StoreError> {
        let message = |role, content: &str| NewChatMessage {
            chatflow_id: self.chatflow_id,
            chat_id: self.session.clone(),
            role,
            content: content.to_owned(),
            source_documents: None,
            used_tools: None,
        };
        let answer = NewChatMessage {
            used_tools: (!output.used_tools.is_empty())
                .then(|| Value::from(output.used_tools.clone()).to_string()),
            source_documents: (!output.source_documents.is_empty())
                .then(|| serde_json::to_string(&output.source_documents).unwrap_or_default()),
            ..message(MessageRole::Api, &output.text)
        };
        let ending = record.update_execution.as_ref().map(|(id, _)| *id);
        // The record alone, should the messages be refused with it.
        let record_alone = ending.map(|_| RunWrites {
            start_execution: record.start_execution.clone(),
            update_execution: record.update_execution.clone(),
            messages: Vec::new(),
        });
        record.messages = vec![message(MessageRole::User, &self.input.question), answer];
        let stored = match self.state.store.write_run(record).await {
            Ok(stored) => stored,
            Err(e) => {
                if let (Some(id), Some(alone)) = (ending, record_alone)
                    && self.write_record(alone).await
                {
                    tracing::warn!(execution = %id, error = %e,
                        "the run's messages could not be stored; its execution is recorded");
                }
                return Err(e);
            }
        };
        if let Some(id) = ending
            && stored.updated.is_none()
        {
            tracing::warn!(execution = %id, "the agentflow's execution record was gone when its run ended");
        }
        Ok(stored
            .messages
            .last()
            .map(|m| m.id)
            .unwrap_or_else(Uuid::new_v4))
    }
}

/// The executed items a run's record holds, as the answer's JSON.
fn executed_text(record: &RunWrites) -> Option<Box<RawValue>> {
    let (_, update) = record.update_execution.as_ref()?;
    RawValue::from_string(update.execution_data.clone()?).ok()
}

/// What the run's tools need from the store: the workspace's stored tools it
/// uses, and — when Python may run — `$vars` (workspace variables, then
/// `overrideConfig.vars` on top).
async fn tool_env(
    state: &Services,
    flow: &Chatflow,
    runnable: &Runnable,
    override_config: Option<&Map<String, Value>>,
) -> ServiceResult<ToolEnv> {
    let mut env = ToolEnv {
        workspace_id: flow.workspace_id.to_string(),
        ..ToolEnv::default()
    };
    for id in runnable.stored_tools() {
        let tool = state
            .store
            .get_tool(flow.workspace_id, id)
            .await?
            .ok_or_else(|| {
                FlowError::invalid(format!(
                    "the flow uses tool {id}, which is not a tool of this workspace"
                ))
            })?;
        env.stored.insert(
            id,
            std::sync::Arc::new(crate::flow::component::PythonDefinition {
                name: tool.name,
                description: tool.description,
                schema: tool.schema,
                code: tool.code,
                requirements: tool.requirements,
            }),
        );
    }
    if runnable.reads_vars() {
        let mut page = crate::domain::Page {
            page: 1,
            limit: crate::domain::Page::MAX_LIMIT,
        };
        loop {
            let listing = state.store.list_variables(flow.workspace_id, page).await?;
            let done = u64::from(page.page) * u64::from(page.limit) >= listing.total;
            for var in &listing.items {
                env.vars.insert(
                    var.name.clone(),
                    Value::from(variable_value(var, &state.config.runtime_variables)),
                );
            }
            if done || listing.items.is_empty() {
                break;
            }
            page.page += 1;
        }
        // Allowed by the chatflow (checked with the other overrides).
        if let Some(Value::Object(vars)) = override_config.and_then(|o| o.get("vars")) {
            env.vars
                .extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    Ok(env)
}

/// Environment variables tool code never reads through a `runtime` variable,
/// whatever `RUNTIME_VARIABLES` allows: weir's own secrets.
const PRIVATE_ENV: &[&str] = &[
    "DATABASE_URL",
    "DATABASE_SCHEMA",
    "PY_TOOL_API_KEY",
    "SMTP_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "MISTRAL_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "WEIR_SECRET_KEY",
    "WEIR_SECRET_KEY_PREVIOUS",
    "METRICS_TOKEN",
];

/// A variable's value: a `static` one as stored; a `runtime` one from the
/// server's environment variable its value names (its own name when the value
/// is empty, as in Flowise) — empty unless `RUNTIME_VARIABLES` allows that name.
fn variable_value(var: &Variable, readable: &str) -> String {
    match var.var_type {
        VariableType::Static => var.value.clone(),
        VariableType::Runtime => {
            let name = match var.value.trim() {
                "" => var.name.as_str(),
                named => named,
            };
            if env_readable(name, readable) {
                std::env::var(name).unwrap_or_default()
            } else {
                String::new()
            }
        }
    }
}

/// Whether `RUNTIME_VARIABLES` (names, `PREFIX*`, or `*`) lets tools read `name`.
fn env_readable(name: &str, readable: &str) -> bool {
    !PRIVATE_ENV.contains(&name)
        && readable
            .split(',')
            .map(str::trim)
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => !pattern.is_empty() && name.starts_with(prefix),
                None => !pattern.is_empty() && pattern == name,
            })
}

/// Who said a stored or sent message, as the models see it.
fn speaker(role: MessageRole) -> Role {
    match role {
        MessageRole::User => Role::User,
        MessageRole::Api => Role::Assistant,
    }
}

/// `apiConfig.overrideConfig.allow`: sensitive inputs a request may override.
pub(crate) fn allowed_overrides(api_config: Option<&str>) -> std::collections::HashSet<String> {
    api_config
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| v.pointer("/overrideConfig/allow").cloned())
        .and_then(|v| v.as_array().cloned())
        .map(|names| {
            names
                .into_iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_variables_read_only_what_the_server_allows() {
        assert!(env_readable("TOOL_REGION", "TOOL_*"));
        assert!(env_readable("REGION", "A, REGION"));
        assert!(!env_readable("HOME", "TOOL_*"));
        assert!(!env_readable("HOME", ""));
        assert!(env_readable("HOME", "*"));
        assert!(!env_readable("DATABASE_URL", "*"));
        assert!(!env_readable("PY_TOOL_API_KEY", "PY_*"));
        assert!(!env_readable("WEIR_SECRET_KEY", "*"));
    }

    #[test]
    fn allow_list_is_read_from_api_config() {
        let allowed = allowed_overrides(Some(r#"{"overrideConfig":{"allow":["basePath"]}}"#));
        assert!(allowed.contains("basePath"));
        assert!(allowed_overrides(Some("{}")).is_empty());
        assert!(allowed_overrides(None).is_empty());
    }
}
