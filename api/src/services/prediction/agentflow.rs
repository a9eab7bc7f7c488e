//! What a prediction on an agentflow needs from the store before it runs: its
//! execution record (a new one, written by the run — see [`Prepared::start`] —
//! or, for a person's answer to a stopped run, the stopped one taken up again),
//! the state a persisting start carries over, the form a session filled
//! before, and a webhook body as the form of a form start.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::request::{HumanAnswer, PredictionRequest};
use crate::domain::{Chatflow, ExecutionState, ExecutionUpdate, NewExecution};
use crate::flow::FlowError;
use crate::flow::agentflow::{AgentflowSpec, template::value_text};
use crate::flow::runtime::Resume;
use crate::services::{ServiceError, ServiceResult, Services};

/// What the run of one agentflow prediction starts from.
#[derive(Debug, Default)]
pub struct Prepared {
    pub execution: Option<Uuid>,
    /// The new execution record of the run, not written yet: the run writes it
    /// with its end, or as `INPROGRESS` once it has run a while.
    pub start: Option<NewExecution>,
    pub persisted_state: Option<Map<String, Value>>,
    pub resume: Option<Resume>,
}

pub async fn prepare(
    state: &Services,
    flow: &Chatflow,
    agentflow: &AgentflowSpec,
    session: &str,
    request: &mut PredictionRequest,
) -> ServiceResult<Prepared> {
    if let Some(answer) = request.human_input.take() {
        let (id, going_on) = take_up(state, flow, agentflow, session, answer).await?;
        if request.question.trim().is_empty() {
            request.question = match going_on.feedback.as_str() {
                "" if going_on.proceed => "proceed".to_owned(),
                "" => "reject".to_owned(),
                feedback => feedback.to_owned(),
            };
        }
        return Ok(Prepared {
            execution: Some(id),
            start: None,
            persisted_state: None,
            resume: Some(going_on),
        });
    }
    let start = agentflow.start();
    let form_start = start.is_some_and(|s| s.form_input);
    // A webhook calling a form-input agentflow fills the form with its body.
    if form_start
        && request.form.is_empty()
        && let Some(Value::Object(body)) = request.flow_vars.get("body")
    {
        request.form = body.clone();
    }
    let persists = start.is_some_and(|s| s.persist_state);
    let last = if persists || (form_start && request.form.is_empty()) {
        state.store.latest_execution(flow.id, session).await?
    } else {
        None
    };
    let mut prepared = Prepared::default();
    if let Some(last) = &last {
        let items: Vec<Value> = serde_json::from_str(&last.execution_data).unwrap_or_default();
        if persists {
            prepared.persisted_state = final_state(&items);
        }
        // Later turns of a session keep the form its first turn filled.
        if form_start && request.form.is_empty() {
            request.form = earlier_form(&items).unwrap_or_default();
        }
    }
    if !request.form.is_empty() && request.question.trim().is_empty() {
        // What the session remembers of a form turn: its fields, a line each.
        request.question = request
            .form
            .iter()
            .map(|(k, v)| format!("{k}: {}", value_text(v)))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let start = NewExecution::starting_now(flow.workspace_id, flow.id, session.to_owned());
    prepared.execution = Some(start.id);
    prepared.start = Some(start);
    Ok(prepared)
}

/// The form a run's start node took.
fn earlier_form(items: &[Value]) -> Option<Map<String, Value>> {
    items.iter().find_map(|item| {
        (item.pointer("/data/name").and_then(Value::as_str) == Some("startAgentflow"))
            .then(|| {
                item.pointer("/data/output/form")
                    .and_then(Value::as_object)
                    .cloned()
            })
            .flatten()
    })
}

/// The session's stopped execution, taken up again with a person's answer:
/// it must be waiting, at the node the answer names.
async fn take_up(
    state: &Services,
    flow: &Chatflow,
    agentflow: &AgentflowSpec,
    session: &str,
    answer: HumanAnswer,
) -> ServiceResult<(Uuid, Resume)> {
    let last = state
        .store
        .latest_execution(flow.id, session)
        .await?
        .ok_or_else(|| {
            FlowError::invalid(format!(
                "nothing in session '{session}' waits for human input: no run of this agentflow \
                 stopped there"
            ))
        })?;
    if last.state != ExecutionState::Stopped {
        return Err(FlowError::invalid(format!(
            "the session's last run (execution {}) is {}; only a run stopped for human input \
             can go on",
            last.id,
            last.state.as_str()
        ))
        .into());
    }
    let executed: Vec<Value> = serde_json::from_str(&last.execution_data).map_err(|e| {
        ServiceError::Internal(format!("execution {} holds unreadable data: {e}", last.id))
    })?;
    let waiting = Resume::waiting_node(&executed)
        .ok_or_else(|| FlowError::invalid(format!("execution {} waits at no node", last.id)))?
        .to_owned();
    let node_id = match answer.start_node_id {
        Some(named) if named != waiting => {
            return Err(FlowError::invalid(format!(
                "the run waits at node {waiting}, not at '{named}' (startNodeId)"
            ))
            .into());
        }
        _ => waiting,
    };
    // The flow may have changed since the run stopped.
    if !agentflow.can_wait_at(&node_id) {
        return Err(FlowError::invalid(format!(
            "the run waits at node {node_id}, which the agentflow no longer has as a human \
             input or an agent; it cannot go on"
        ))
        .into());
    }
    let claimed = state
        .store
        .update_execution(
            last.id,
            ExecutionUpdate {
                state: Some(ExecutionState::InProgress),
                action: Some(None),
                only_from: Some(ExecutionState::Stopped),
                ..ExecutionUpdate::default()
            },
        )
        .await?;
    if claimed.is_none() {
        return Err(ServiceError::Conflict(format!(
            "execution {} was taken up by another answer at the same time",
            last.id
        )));
    }
    Ok((
        last.id,
        Resume {
            executed,
            node_id,
            proceed: answer.proceed,
            feedback: answer.feedback,
        },
    ))
}

/// The flow state an execution ended with: that of its last node that has one.
fn final_state(items: &[Value]) -> Option<Map<String, Value>> {
    items.iter().rev().find_map(|item| {
        item.pointer("/data/state")
            .and_then(Value::as_object)
            .cloned()
    })
}
