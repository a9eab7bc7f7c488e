//! Predictions: asking a chatflow a question.
//!
//! [`start`] resolves the session (`chatId` ?? `sessionId` ?? `overrideConfig.sessionId`
//! ?? a new UUID), builds the flow for this request (overrides applied), loads the
//! conversation memory, records a lead, keeps uploaded files, and spawns the run.
//! The run reports through a channel of [`PredictionEvent`]s; JSON answers fold
//! that channel, SSE answers forward it. The question and the answer are stored
//! when the run completes, so the next question of the session remembers them; a
//! run whose client went away stores nothing.
//!
//! - [`request`]: what a prediction asks (leaf).
//! - [`answer`]: the events of a run and the folded answer (leaf).
//! - [`agentflow`]: what an agentflow's run needs from the store first.
//! - `task`: the spawned run and what it writes when it ends.
//! - [`subflow`]: a flow running another flow, with [`start`] handed to it
//!   (it imports only the leaves above, never this module).

pub mod agentflow;
pub mod answer;
pub mod follow_up;
pub mod request;
pub mod subflow;
mod task;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use uuid::Uuid;

pub use answer::{Prediction, PredictionEvent, PredictionResult, Progress};
pub use request::{
    FiringEndSlot, HistoryItem, HumanAnswer, ImageUpload, PredictionRequest, Upload, image_type,
};

use super::{ServiceError, ServiceResult, Services};
use crate::domain::{Chatflow, MessageRole, NewLead, Variable, VariableType};
use crate::flow::component::ToolSpec;
use crate::flow::plan::Runnable;
use crate::flow::tools::{ToolEnv, stored_ids};
use crate::flow::{FlowError, Overrides, RunInput};
use crate::llm::{ChatMessage, Role};
use follow_up::FollowUpSetting;

/// Events between the run and the answer, buffered at most this many.
const EVENT_BUFFER: usize = 64;
/// [`start`] as the nested-flow caller takes it (boxed: a flow runs a flow).
fn start_nested<'a>(
    state: &'a Services,
    flow: &'a Chatflow,
    request: PredictionRequest,
) -> futures_util::future::BoxFuture<'a, ServiceResult<Prediction>> {
    Box::pin(start(state, flow, request))
}

/// The pictures sent with the question, for the flow's models to see, and what
/// the question's message keeps of them (Flowise's `fileUploads`). They are kept
/// with the chat (within the workspace's quota; `get-upload-file` serves them).
/// A flow whose models do not see pictures refuses them.
async fn pictures(
    state: &Services,
    flow: &Chatflow,
    plan: &crate::flow::Plan,
    session: &str,
    request: &mut PredictionRequest,
) -> ServiceResult<(Vec<crate::llm::Image>, Option<Value>)> {
    use base64::Engine;
    let sent = std::mem::take(&mut request.images);
    if sent.is_empty() {
        return Ok((Vec::new(), None));
    }
    if !plan.takes_images() {
        return Err(FlowError::invalid(
            "this chatflow's chat model does not take pictures (its 'Allow Image Uploads' is \
             off, or it is the embedded model): send the question without images",
        )
        .into());
    }
    let files: Vec<Upload> = sent
        .iter()
        .map(|i| Upload {
            name: i.name.clone(),
            bytes: i.bytes.clone(),
        })
        .collect();
    state
        .uploads
        .keep(flow.workspace_id, flow.id, session, &files)
        .await?;
    let listed = sent
        .iter()
        .map(|i| serde_json::json!({"type": "stored-file", "name": i.name, "mime": i.mime}))
        .collect();
    let images = sent
        .into_iter()
        .map(|i| crate::llm::Image {
            mime: i.mime,
            base64: base64::engine::general_purpose::STANDARD
                .encode(&i.bytes)
                .into(),
        })
        .collect();
    Ok((images, Some(Value::Array(listed))))
}

/// A run slot of the workspace (`WORKSPACE_MAX_PREDICTIONS`), or 429 when it
/// has every slot in use.
pub fn run_slot(
    state: &Services,
    workspace: uuid::Uuid,
) -> ServiceResult<crate::services::in_flight::Permit> {
    state.in_flight.try_acquire(workspace).ok_or_else(|| {
        ServiceError::Busy(format!(
            "the workspace has {} predictions running, the most this server runs at once \
             for one workspace (WORKSPACE_MAX_PREDICTIONS); retry when one has finished",
            state.in_flight.limit()
        ))
    })
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
    if request.depth == 0 {
        super::token_budget::check(state, flow.workspace_id).await?;
    }
    // A flow another flow runs counts as part of its caller's prediction.
    let permit = match (request.permit.take(), request.depth) {
        (Some(taken), _) => Some(taken),
        (None, 0) => Some(run_slot(state, flow.workspace_id)?),
        (None, _) => None,
    };
    // A flow another flow runs answers its caller: nobody sees its suggestions.
    let follow_up = match FollowUpSetting::of(flow.chatbot_config.as_deref()) {
        Ok(setting) => setting.filter(|_| request.depth == 0),
        Err(e) => {
            tracing::warn!(chatflow = %flow.id, error = %e.message, "follow-up prompts are off");
            None
        }
    };
    let follow_up_credential = follow_up.as_ref().and_then(FollowUpSetting::credential);
    let credential_ids = match follow_up_credential {
        Some(id) if !plan.credential_ids().iter().any(|c| c == id) => {
            let mut ids = plan.credential_ids().to_vec();
            ids.push(id.to_owned());
            std::borrow::Cow::Owned(ids)
        }
        _ => std::borrow::Cow::Borrowed(plan.credential_ids()),
    };
    let credentials = super::credentials::open_for_run(
        &*state.store,
        &state.keyring,
        flow.workspace_id,
        &credential_ids,
    )
    .await?;
    let overrides = Overrides {
        values: request.override_config.as_ref(),
        allowed: flow.allowed_overrides(),
        credentials: credentials.as_ref(),
        settings: &state.config.providers,
    };
    let runnable = plan.runnable(&overrides)?;
    let follow_ups = follow_up.and_then(|setting| {
        let chatflow_own = Overrides {
            values: None,
            allowed: crate::domain::api_config::nothing_allowed(),
            credentials: overrides.credentials,
            settings: overrides.settings,
        };
        setting
            .model(&chatflow_own)
            .map_err(|e| {
                tracing::warn!(chatflow = %flow.id, error = %e.message, "follow-up prompts are off");
            })
            .ok()
    });
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
        match serde_json::from_str::<crate::flow::runtime::Checkpoint>(&saved) {
            Ok(saved) => {
                history = saved.messages;
                checkpoint_state = Some(saved.state);
                request.history.clear();
            }
            Err(e) => tracing::warn!(chatflow = %flow.id, error = %e,
                "an agent checkpoint cannot be read; the session starts afresh"),
        }
    }
    if let Some(memory) = &runnable.memory
        && let Some(redis) = &memory.redis
    {
        let last = memory.window.map(|k| k.saturating_mul(2) as usize);
        let kept = redis.read(&session, last).await.map_err(|e| {
            FlowError::failed(format!(
                "memory node {} cannot read the conversation from Redis: {e}",
                memory.node_id
            ))
        })?;
        history.extend(kept.into_iter().map(|m| {
            let role = if m.human { Role::User } else { Role::Assistant };
            ChatMessage::new(role, m.content)
        }));
    } else if let Some(memory) = &runnable.memory {
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
        let lead = NewLead {
            chatflow_id: flow.id,
            chat_id: chat_id.clone(),
            email: Some(email.clone()),
            ..NewLead::default()
        };
        state.store.create_lead(lead).await?;
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
    let (images, image_files) = pictures(state, flow, &plan, &session, &mut request).await?;

    let agentflow = match runnable.agentflow() {
        Some(agentflow) => {
            agentflow::prepare(state, flow, agentflow, &session, &mut request).await?
        }
        None if request.human_input.is_some() => {
            return Err(FlowError::invalid(
                "'humanInput' answers an agentflow that waits for a person; this chatflow is not one",
            )
            .into());
        }
        None => agentflow::Prepared::default(),
    };

    // A client's (or a trigger's) run can be stopped by its chat; a flow
    // another flow runs stops with its caller.
    let stop = (request.depth == 0).then(|| state.aborts.register(flow.id, &chat_id));
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let task = task::RunTask {
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
            images,
        },
        image_files,
        execution: agentflow.execution,
        execution_start: agentflow.start,
        workspace_id: flow.workspace_id,
        depth: request.depth,
        streaming: request.streaming,
        chat_type: request.chat_type,
        lead_email: request.lead_email,
        chat_id: chat_id.clone(),
        session,
        env,
        stop,
        follow_ups,
        firing_end: request.firing_end,
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

/// What the run's tools need from the store: the workspace's stored tools and
/// MCP servers it uses, and — when Python may run — `$vars` (workspace variables, then
/// `overrideConfig.vars` on top).
async fn tool_env(
    state: &Services,
    flow: &Chatflow,
    runnable: &Runnable,
    override_config: Option<&Map<String, Value>>,
) -> ServiceResult<ToolEnv> {
    let reads_vars = runnable.reads_vars();
    let mut env = tools_env(state, flow.workspace_id, runnable.tools(), reads_vars).await?;
    if reads_vars {
        // Allowed by the chatflow (checked with the other overrides).
        if let Some(Value::Object(vars)) = override_config.and_then(|o| o.get("vars")) {
            env.vars
                .extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    Ok(env)
}

/// The environment of these tools of `workspace`: the stored tools and MCP
/// servers they name, and its variables when `vars`.
pub(crate) async fn tools_env<'a>(
    state: &Services,
    workspace: Uuid,
    tools: impl IntoIterator<Item = &'a ToolSpec>,
    vars: bool,
) -> ServiceResult<ToolEnv> {
    let mut env = ToolEnv {
        workspace_id: workspace.to_string(),
        ..ToolEnv::default()
    };
    let (stored_tools, stored_mcp_servers) = stored_ids(tools);
    for id in stored_tools {
        let tool = state.store.get_tool(workspace, id).await?.ok_or_else(|| {
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
                javascript: false,
            }),
        );
    }
    for id in stored_mcp_servers {
        let server = super::mcp_servers::open(state, workspace, id).await?;
        env.mcp_servers.insert(id, server);
    }
    if vars {
        env.vars = workspace_vars(state, workspace).await?;
    }
    Ok(env)
}

/// The workspace's variables as `$vars` reads them (a `runtime` one's value from
/// the server's environment, when `RUNTIME_VARIABLES` allows it).
pub(crate) async fn workspace_vars(
    state: &Services,
    workspace: Uuid,
) -> ServiceResult<Map<String, Value>> {
    let mut vars = Map::new();
    let mut page = crate::domain::Page {
        page: 1,
        limit: crate::domain::Page::MAX_LIMIT,
    };
    loop {
        let listing = state.store.list_variables(workspace, page).await?;
        let done = u64::from(page.page) * u64::from(page.limit) >= listing.total;
        for var in &listing.items {
            vars.insert(
                var.name.clone(),
                Value::from(variable_value(var, &state.config.runtime_variables)),
            );
        }
        if done || listing.items.is_empty() {
            return Ok(vars);
        }
        page.page += 1;
    }
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
}
