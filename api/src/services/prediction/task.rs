//! The spawned run of one prediction: the engine run with its context, then
//! what it writes when it ends — the question and answer (so the session's
//! next question remembers them), the agentflow execution record, the agent
//! checkpoint — and the folded answer sent last.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::answer::{PredictionEvent, PredictionResult, ReasonContent, UsageMetadata};
use super::request::EndState;
use crate::config::Config;
use crate::domain::trigger::non_empty;
use crate::domain::{
    ChatType, ExecutionState, ExecutionUpdate, MessageRole, NewChatMessage, NewExecution,
};
use crate::flow::engine;
use crate::flow::plan::Runnable;
use crate::flow::runtime::{Limits, ModelLedger, RunError};
use crate::flow::tools::{FlowContext, ToolEnv};
use crate::flow::{RunContext, RunInput, RunOutput};
use crate::services::Services;
use crate::store::RunWrites;

/// How long an agentflow run goes before its execution is written as
/// `INPROGRESS` (so the executions list shows it running); a run that ends
/// sooner writes its record once, with its end.
const RECORD_RUNNING_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

pub(super) struct RunTask {
    pub(super) state: Services,
    pub(super) chatflow_id: Uuid,
    pub(super) runnable: Runnable,
    pub(super) input: RunInput,
    pub(super) chat_id: String,
    pub(super) session: String,
    pub(super) env: ToolEnv,
    pub(super) streaming: bool,
    pub(super) chat_type: ChatType,
    /// The address the question came with (kept on the question's message).
    pub(super) lead_email: Option<String>,
    /// The pictures the question came with, as its message keeps them (`fileUploads`).
    pub(super) image_files: Option<Value>,
    /// The agentflow run's execution record.
    pub(super) execution: Option<Uuid>,
    /// That record when it is a new one, not written yet.
    pub(super) execution_start: Option<NewExecution>,
    pub(super) workspace_id: Uuid,
    pub(super) depth: u32,
    /// Where a stop of the chat's prediction reaches the run (`PUT
    /// /chatmessage/abort`); none for a flow another flow runs.
    pub(super) stop: Option<crate::services::aborts::Registration>,
    /// The model that suggests the next questions, when the chatflow asks for them.
    pub(super) follow_ups: Option<super::follow_up::FollowUps>,
    /// The trigger firing the run's answer ends, in the answer's own write.
    pub(super) firing_end: Option<super::FiringEndSlot>,
    /// Counts the run against its workspace's bound until the task ends.
    pub(super) _permit: Option<crate::services::in_flight::Permit>,
}

impl RunTask {
    pub(super) async fn run(mut self, out: mpsc::Sender<PredictionEvent>) {
        let flows = super::subflow::SubflowCaller {
            start: super::start_nested,
            state: self.state.clone(),
            workspace: self.workspace_id,
            depth: self.depth,
        };
        // The streamed text, kept for the partial answer of a stopped run.
        let transcript = std::sync::Mutex::new(String::new());
        let ctx = RunContext {
            models: &self.state.models,
            tools: &self.state.tools,
            env: std::mem::take(&mut self.env),
            flow: FlowContext {
                input: self.input.question.clone(),
                chat_history: self.input.history_text(),
                session_id: self.session.clone(),
                chatflow_id: self.chatflow_id,
                workspace_id: self.workspace_id.to_string(),
            },
            progress: self.streaming,
            flows: Some(&flows),
            limits: agentflow_limits(&self.state.config),
            transcript: self.stop.is_some().then_some(&transcript),
            ledger: ModelLedger::default(),
        };
        let mut start = self.execution_start.take();
        let stop = self.stop.take();
        let running = async {
            let running = engine::run(&self.runnable, &self.input, &ctx, &out);
            match &stop {
                None => Some(running.await),
                Some(stop) => tokio::select! {
                    result = running => Some(result),
                    () = stop.stopped() => None,
                },
            }
        };
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
        let Some(mut result) = result else {
            let partial = std::mem::take(
                &mut *transcript
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            return self
                .stopped(start, partial, ctx.ledger.take_usage(), &out)
                .await;
        };
        let follow_ups = match &mut result {
            Ok(output) => self.suggest(output, &ctx.ledger).await,
            Err(_) => None,
        };
        let chatflow = self.chatflow_id.to_string();
        let metrics = crate::metrics::metrics();
        // What the models used counts, also for a run that failed midway.
        let left_in_ledger = ctx.ledger.take_usage();
        let spent = match &result {
            Ok(output) => &output.usage,
            Err(_) => &left_in_ledger,
        };
        self.spend(spent).await;
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
            Ok(output) => {
                self.answer(output, follow_ups, record, executed, false, &out)
                    .await
            }
            Err(RunError::Flow(e)) => {
                tracing::warn!(chatflow = %self.chatflow_id, error = %e.message, "chatflow run failed");
                let _ = out.send(PredictionEvent::Error(e.message)).await;
            }
            Err(RunError::Cancelled) => {
                tracing::info!(chatflow = %self.chatflow_id, "client went away; run cancelled");
            }
        }
    }

    /// Ends a run stopped by its chat (`PUT /chatmessage/abort`): the question
    /// and the answer so far are stored (marked aborted), an agentflow's
    /// execution ends `STOPPED`, and the caller gets the partial answer.
    async fn stopped(
        &self,
        start: Option<NewExecution>,
        partial: String,
        usage: Vec<crate::flow::runtime::NodeUsage>,
        out: &mpsc::Sender<PredictionEvent>,
    ) {
        self.spend(&usage).await;
        tracing::info!(chatflow = %self.chatflow_id, chat = %self.chat_id, "prediction stopped by its chat");
        crate::metrics::metrics().prediction(&self.chatflow_id.to_string(), "aborted", 0);
        let record = RunWrites {
            start_execution: start,
            update_execution: self.execution.map(|id| {
                let update = ExecutionUpdate {
                    state: Some(ExecutionState::Stopped),
                    ..ExecutionUpdate::default()
                };
                (id, update)
            }),
            ..RunWrites::default()
        };
        let output = RunOutput {
            text: partial,
            usage,
            ..RunOutput::default()
        };
        self.answer(output, None, record, None, true, out).await;
    }

    /// The questions the chatflow's follow-up model suggests after a finished
    /// answer (none for a failed or waiting agentflow run); what it used
    /// counts with the run's usage. A failure leaves the answer without them,
    /// said in the log.
    async fn suggest(&self, output: &mut RunOutput, ledger: &ModelLedger) -> Option<String> {
        let follow_ups = self.follow_ups.as_ref()?;
        if output
            .agentflow
            .as_ref()
            .is_some_and(|a| a.error.is_some() || a.action.is_some())
            || output.text.trim().is_empty()
        {
            return None;
        }
        let mut conversation = self.input.history_text();
        if !conversation.is_empty() {
            conversation.push('\n');
        }
        conversation.push_str(&format!(
            "Human: {}\nAI: {}",
            self.input.question, output.text
        ));
        let suggested = follow_ups
            .suggest(&self.state.models, &conversation, ledger)
            .await;
        output.usage.extend(ledger.take_usage());
        match suggested {
            Ok(prompts) => Some(prompts),
            Err(why) => {
                tracing::warn!(chatflow = %self.chatflow_id, error = %why,
                    "no follow-up prompts: the follow-up model failed");
                None
            }
        }
    }

    /// Stores the question and the answer with the run's execution `record`
    /// (`remember`), then sends the caller the answer, or why it is lost.
    async fn answer(
        &self,
        output: RunOutput,
        follow_up_prompts: Option<String>,
        record: RunWrites,
        executed: Option<Box<RawValue>>,
        aborted: bool,
        out: &mpsc::Sender<PredictionEvent>,
    ) {
        let usage = UsageMetadata::of(&output.usage);
        let reason_content = output.thinking.as_ref().map(ReasonContent::of);
        let extras = AnswerExtras {
            aborted,
            usage: usage.as_ref(),
            reason_content: reason_content.as_ref(),
            follow_up_prompts: follow_up_prompts.as_deref(),
        };
        let source_documents: Vec<Value> = output
            .source_documents
            .iter()
            .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
            .collect();
        let remembered = self
            .remember(&output, &source_documents, record, extras)
            .await;
        let event = match remembered {
            Ok(message_id) => PredictionEvent::Done(Box::new(PredictionResult {
                question: self.input.question.clone(),
                chat_id: self.chat_id.clone(),
                chat_message_id: message_id,
                session_id: self.chat_id.clone(),
                source_documents,
                execution_id: self.execution,
                action: output.agentflow.as_ref().and_then(|a| a.action.clone()),
                usage_metadata: usage,
                memory_type: self.memory_type(),
                flow_variables: flow_variables(&output),
                reason_content,
                follow_up_prompts,
                aborted,
                agent_flow_executed_data: output.agentflow.and_then(|a| {
                    executed.or_else(|| serde_json::value::to_raw_value(&a.executed).ok())
                }),
                text: output.text,
                json: output.json,
                used_tools: output.used_tools,
                agent_reasoning: output.agent_reasoning,
                artifacts: output.artifacts,
            })),
            Err(e) => {
                tracing::error!(error = %e, "cannot store the conversation");
                PredictionEvent::Error("the answer could not be stored; try again".into())
            }
        };
        let _ = out.send(event).await;
    }

    /// Counts what a run's models used: in `/metrics` by model, and to the
    /// workspace's token budget.
    async fn spend(&self, usage: &[crate::flow::runtime::NodeUsage]) {
        let chatflow = self.chatflow_id.to_string();
        let metrics = crate::metrics::metrics();
        for node in usage {
            metrics.model_tokens(
                &chatflow,
                &node.model,
                node.usage.input_tokens,
                node.usage.output_tokens,
            );
        }
        let total = usage.iter().map(|n| n.usage.total()).sum();
        crate::services::token_budget::record(&self.state, self.workspace_id, total).await;
    }

    /// The label of the flow's memory node, when it has one (`memoryType`).
    fn memory_type(&self) -> Option<String> {
        self.runnable
            .memory
            .as_ref()
            .and_then(|m| m.label)
            .map(str::to_owned)
    }

    /// Adds the exchange to the conversation a Redis memory node keeps (the
    /// store has it already; a failure here is logged, the answer stands).
    async fn keep_in_redis(&self, answer: &str) {
        let Some(memory) = &self.runnable.memory else {
            return;
        };
        let Some(redis) = &memory.redis else {
            return;
        };
        if let Err(e) = redis
            .append(&self.session, &self.input.question, answer)
            .await
        {
            tracing::error!(chatflow = %self.chatflow_id, node = %memory.node_id, error = %e,
                "cannot keep the exchange in the memory's Redis");
        }
    }

    /// Keeps where the session's next run begins (agent memory).
    async fn keep_checkpoint(
        &self,
        checkpoint: &crate::flow::runtime::Checkpoint,
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
    /// and the end of the trigger firing it answers (all in one write);
    /// returns the answer's message id.
    async fn remember(
        &self,
        output: &RunOutput,
        source_documents: &[Value],
        mut record: RunWrites,
        extras: AnswerExtras<'_>,
    ) -> Result<Uuid, crate::store::StoreError> {
        let message = |role, content: &str| NewChatMessage {
            chatflow_id: self.chatflow_id,
            chat_id: self.session.clone(),
            role,
            content: content.to_owned(),
            source_documents: None,
            used_tools: None,
            chat_type: self.chat_type,
            execution_id: self.execution,
            memory_type: self.memory_type(),
            details: None,
        };
        let answer = NewChatMessage {
            used_tools: (!output.used_tools.is_empty())
                .then(|| Value::from(output.used_tools.clone()).to_string()),
            source_documents: (!output.source_documents.is_empty())
                .then(|| serde_json::to_string(&output.source_documents).unwrap_or_default()),
            details: answer_details(output, extras),
            ..message(MessageRole::Api, &output.text)
        };
        let ending = record.update_execution.as_ref().map(|(id, _)| *id);
        // The record alone, should the messages be refused with it.
        let record_alone = ending.map(|_| RunWrites {
            start_execution: record.start_execution.clone(),
            update_execution: record.update_execution.clone(),
            messages: Vec::new(),
            end_firing: None,
        });
        let mut asked = serde_json::Map::new();
        if let Some(email) = &self.lead_email {
            asked.insert("leadEmail".into(), email.as_str().into());
        }
        if let Some(files) = &self.image_files {
            asked.insert("fileUploads".into(), files.clone());
        }
        let question = NewChatMessage {
            details: (!asked.is_empty()).then(|| Value::Object(asked).to_string()),
            ..message(MessageRole::User, &self.input.question)
        };
        record.messages = vec![question, answer];
        // Held until the write is over: a trigger giving up on the run waits
        // for it, then ends the firing itself only if this did not.
        let mut firing_end = match &self.firing_end {
            Some(slot) => Some((slot, slot.hold().await)),
            None => None,
        };
        record.end_firing = firing_end
            .as_ref()
            .filter(|(_, state)| **state == EndState::Open)
            .map(|(slot, _)| {
                let mut end = slot.answered.clone();
                end.result.output = Some(output.text.clone());
                end.result.source_documents = non_empty(source_documents);
                end.result.used_tools = non_empty(&output.used_tools);
                end
            });
        let ends_firing = record.end_firing.is_some();
        let stored = self.state.store.write_run(record).await;
        if let Some((_, state)) = &mut firing_end
            && ends_firing
            && stored.is_ok()
        {
            **state = EndState::StoredByRun;
        }
        drop(firing_end);
        let stored = match stored {
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
        self.keep_in_redis(&output.text).await;
        Ok(stored
            .messages
            .last()
            .map(|m| m.id)
            .unwrap_or_else(Uuid::new_v4))
    }
}

/// What an answer carries beside the run's output.
#[derive(Clone, Copy)]
struct AnswerExtras<'a> {
    aborted: bool,
    usage: Option<&'a UsageMetadata>,
    reason_content: Option<&'a ReasonContent>,
    follow_up_prompts: Option<&'a str>,
}

/// The state an agentflow or a sequential flow ended with (`flowVariables`),
/// when it has any.
fn flow_variables(output: &RunOutput) -> Option<serde_json::Map<String, Value>> {
    let state = match (&output.agentflow, &output.checkpoint) {
        (Some(run), _) => &run.state,
        (None, Some(checkpoint)) => &checkpoint.state,
        (None, None) => return None,
    };
    (!state.is_empty()).then(|| state.clone())
}

/// What an answer's message keeps beside its text (Flowise's message fields,
/// each only when the run produced it), as JSON text.
fn answer_details(output: &RunOutput, extras: AnswerExtras<'_>) -> Option<String> {
    let mut details = serde_json::Map::new();
    if let Some(usage) = extras.usage
        && let Ok(usage) = serde_json::to_value(usage)
    {
        details.insert("usageMetadata".into(), usage);
    }
    if let Some(reason) = extras.reason_content
        && let Ok(reason) = serde_json::to_value(reason)
    {
        details.insert("reasonContent".into(), reason);
    }
    if let Some(prompts) = extras.follow_up_prompts {
        details.insert("followUpPrompts".into(), prompts.into());
    }
    if extras.aborted {
        details.insert("aborted".into(), true.into());
    }
    if !output.agent_reasoning.is_empty() {
        details.insert(
            "agentReasoning".into(),
            output.agent_reasoning.clone().into(),
        );
    }
    if !output.artifacts.is_empty() {
        details.insert("artifacts".into(), output.artifacts.clone().into());
    }
    if let Some(action) = output.agentflow.as_ref().and_then(|a| a.action.clone()) {
        details.insert("action".into(), action);
    }
    (!details.is_empty()).then(|| Value::Object(details).to_string())
}

/// The executed items a run's record holds, as the answer's JSON.
fn executed_text(record: &RunWrites) -> Option<Box<RawValue>> {
    let (_, update) = record.update_execution.as_ref()?;
    RawValue::from_string(update.execution_data.clone()?).ok()
}

/// The agentflow executor's limits, as configured.
fn agentflow_limits(config: &Config) -> Limits {
    Limits {
        max_node_runs: config.agentflow_max_node_runs as usize,
        max_iteration_items: config.agentflow_max_iteration_items as usize,
        max_flow_depth: config.agentflow_max_flow_depth,
        run_timeout: std::time::Duration::from_secs(config.agentflow_timeout_secs),
        code_timeout: std::time::Duration::from_millis(config.sandbox_timeout_ms),
    }
}
