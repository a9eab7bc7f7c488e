//! Agentflow executions: the record of one run of an agentflow in a session, as
//! Flowise keeps it (`execution` entity, COMPAT.md).
//!
//! An [`Execution`] is created `INPROGRESS` with an empty `executionData` (`"[]"`)
//! when a run starts; the engine rewrites its state and data as nodes finish, and
//! the newest execution of a (chatflow, session) is where a paused run resumes.
//! `executionData` and `action` are JSON *text*, stored and returned exactly as the
//! engine wrote them. Nothing here performs I/O.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

/// Where a run stands. Serialised as Flowise's upper-case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum ExecutionState {
    #[serde(rename = "INPROGRESS")]
    InProgress,
    #[serde(rename = "FINISHED")]
    Finished,
    #[serde(rename = "ERROR")]
    Error,
    #[serde(rename = "TERMINATED")]
    Terminated,
    #[serde(rename = "TIMEOUT")]
    Timeout,
    #[serde(rename = "STOPPED")]
    Stopped,
}

impl ExecutionState {
    pub const ALL: [ExecutionState; 6] = [
        ExecutionState::InProgress,
        ExecutionState::Finished,
        ExecutionState::Error,
        ExecutionState::Terminated,
        ExecutionState::Timeout,
        ExecutionState::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::InProgress => "INPROGRESS",
            ExecutionState::Finished => "FINISHED",
            ExecutionState::Error => "ERROR",
            ExecutionState::Terminated => "TERMINATED",
            ExecutionState::Timeout => "TIMEOUT",
            ExecutionState::Stopped => "STOPPED",
        }
    }
}

impl fmt::Display for ExecutionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExecutionState {
    type Err = String;

    /// Exact (upper-case) names only; the error lists the accepted ones.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExecutionState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ExecutionState::ALL.iter().map(|st| st.as_str()).collect();
                format!("unknown state '{s}' (one of: {})", names.join(", "))
            })
    }
}

/// A stored execution, serialised with Flowise's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    pub id: Uuid,
    pub workspace_id: Uuid,
    /// The chatflow (agentflow) that ran.
    pub agentflow_id: Uuid,
    pub session_id: String,
    pub state: ExecutionState,
    /// JSON text of the executed nodes (an array), as the engine wrote it.
    pub execution_data: String,
    /// JSON text of the action a paused run waits for (human input), if any.
    pub action: Option<String>,
    pub is_public: bool,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
    /// When the run was stopped (state `STOPPED`).
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub stopped_date: Option<Timestamp>,
}

/// The key Flowise's node data uses to name a stored credential: never shown on
/// the public (key-less) view of an execution.
pub const CREDENTIAL_KEY: &str = "FLOWISE_CREDENTIAL_ID";

impl Execution {
    /// The execution as `GET /public-executions/:id` shows it: every
    /// [`CREDENTIAL_KEY`] entry removed from `executionData`, at any depth.
    /// Data that is not JSON is shown as an empty array rather than unchecked.
    pub fn public_view(mut self) -> Self {
        self.execution_data = match serde_json::from_str::<serde_json::Value>(&self.execution_data)
        {
            Ok(mut data) => {
                strip_key(&mut data, CREDENTIAL_KEY);
                data.to_string()
            }
            Err(_) => "[]".to_owned(),
        };
        self
    }
}

fn strip_key(value: &mut serde_json::Value, key: &str) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove(key);
            map.values_mut().for_each(|v| strip_key(v, key));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| strip_key(v, key)),
        _ => {}
    }
}

/// What it takes to start an execution: it begins `INPROGRESS`, with data `"[]"`.
#[derive(Debug, Clone)]
pub struct NewExecution {
    /// Chosen when the run starts (time-ordered), so that the record of a short
    /// run can be written once, when it ends.
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub agentflow_id: Uuid,
    pub session_id: String,
    /// When the run started.
    pub created_date: Timestamp,
}

/// The `executionData` of an execution that has not run a node yet.
pub const EMPTY_DATA: &str = "[]";

/// The conflict message when an execution names a chatflow that is not (or no
/// longer) in its workspace.
pub fn chatflow_missing(agentflow: Uuid) -> String {
    format!("no chatflow {agentflow} in the execution's workspace")
}

impl NewExecution {
    /// A run of `agentflow` in `session` starting now.
    pub fn starting_now(workspace_id: Uuid, agentflow_id: Uuid, session_id: String) -> Self {
        NewExecution {
            id: Uuid::now_v7(),
            workspace_id,
            agentflow_id,
            session_id,
            created_date: time::now(),
        }
    }

    /// The execution as first written. When `update` is of it (a run whose
    /// start and end are written together) and applies, it is applied here
    /// and taken, so that the record is inserted once, as the run ended; the
    /// flag says so.
    pub fn start(
        self,
        update: &mut Option<(Uuid, ExecutionUpdate)>,
        now: Timestamp,
    ) -> (Execution, bool) {
        let mut execution = self.into_execution();
        let ended =
            update.take_if(|(id, update)| *id == execution.id && update.applies_to(&execution));
        if let Some((_, update)) = ended {
            update.apply(&mut execution, now);
            return (execution, true);
        }
        (execution, false)
    }

    pub fn into_execution(self) -> Execution {
        Execution {
            id: self.id,
            workspace_id: self.workspace_id,
            agentflow_id: self.agentflow_id,
            session_id: self.session_id,
            state: ExecutionState::InProgress,
            execution_data: EMPTY_DATA.to_owned(),
            action: None,
            is_public: false,
            created_date: self.created_date,
            updated_date: self.created_date,
            stopped_date: None,
        }
    }
}

/// What the engine changes as a run goes on: `None` leaves a field alone,
/// `action: Some(None)` clears the action. Every update moves `updatedDate` on.
#[derive(Debug, Clone, Default)]
pub struct ExecutionUpdate {
    pub state: Option<ExecutionState>,
    pub execution_data: Option<String>,
    pub action: Option<Option<String>>,
    /// When the run was stopped; defaults to the update's time when the state
    /// becomes `STOPPED` and none is recorded yet.
    pub stopped_date: Option<Timestamp>,
    /// Change the execution only while it is in this state (a claim: two
    /// answers to one stopped run cannot both take it up).
    pub only_from: Option<ExecutionState>,
}

impl ExecutionUpdate {
    /// Whether the update may change `execution` (see `only_from`).
    pub fn applies_to(&self, execution: &Execution) -> bool {
        self.only_from.is_none_or(|state| state == execution.state)
    }

    pub fn apply(self, execution: &mut Execution, now: Timestamp) {
        if let Some(state) = self.state {
            execution.state = state;
        }
        if let Some(data) = self.execution_data {
            execution.execution_data = data;
        }
        if let Some(action) = self.action {
            execution.action = action;
        }
        if let Some(at) = self.stopped_date {
            execution.stopped_date = Some(at);
        } else if self.state == Some(ExecutionState::Stopped) {
            execution.stopped_date = Some(now);
        }
        execution.updated_date = now;
    }
}

/// Which executions of a workspace a listing shows; every given field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionFilter {
    pub id: Option<Uuid>,
    pub agentflow_id: Option<Uuid>,
    /// A case-insensitive substring of the chatflow's name (ASCII letters only
    /// fold on SQLite; PostgreSQL folds all of Unicode).
    pub agentflow_name: Option<String>,
    pub session_id: Option<String>,
    pub state: Option<ExecutionState>,
    /// Created at or after (inclusive).
    pub start_date: Option<Timestamp>,
    /// Created at or before (inclusive).
    pub end_date: Option<Timestamp>,
}

/// The chatflow an execution belongs to, as a listing names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct AgentflowRef {
    pub id: Uuid,
    pub name: String,
}

/// An execution in a listing, with its chatflow's id and name (Flowise embeds the
/// whole chatflow; weir only what a list shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ListedExecution {
    #[serde(flatten)]
    pub execution: Execution,
    pub agentflow: AgentflowRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Execution {
        NewExecution {
            id: Uuid::nil(),
            workspace_id: Uuid::nil(),
            agentflow_id: Uuid::nil(),
            session_id: "s".into(),
            created_date: time::from_millis(1_700_000_000_000),
        }
        .into_execution()
    }

    #[test]
    fn states_use_flowise_names() {
        for state in ExecutionState::ALL {
            let json = serde_json::to_value(state).ok();
            assert_eq!(json, Some(serde_json::Value::from(state.as_str())));
            assert_eq!(state.as_str().parse(), Ok(state));
        }
        let err = "finished"
            .parse::<ExecutionState>()
            .err()
            .unwrap_or_default();
        assert!(err.contains("INPROGRESS, FINISHED, ERROR, TERMINATED, TIMEOUT, STOPPED"));
    }

    #[test]
    fn serialises_camel_case_with_data_as_text() {
        let json = serde_json::to_value(sample()).unwrap_or_default();
        assert_eq!(json["executionData"], "[]");
        assert_eq!(json["state"], "INPROGRESS");
        assert_eq!(json["sessionId"], "s");
        assert_eq!(json["isPublic"], false);
        assert_eq!(json["stoppedDate"], serde_json::Value::Null);
        assert_eq!(json["createdDate"], "2023-11-14T22:13:20.000Z");
        for key in ["agentflowId", "workspaceId", "updatedDate", "action"] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
    }

    #[test]
    fn stopping_records_when() {
        let mut e = sample();
        let later = time::from_millis(1_700_000_001_000);
        ExecutionUpdate {
            state: Some(ExecutionState::Stopped),
            action: Some(Some("{}".into())),
            ..Default::default()
        }
        .apply(&mut e, later);
        assert_eq!(
            (e.state, e.stopped_date, e.updated_date),
            (ExecutionState::Stopped, Some(later), later)
        );
        assert_eq!(e.action.as_deref(), Some("{}"));
        ExecutionUpdate {
            action: Some(None),
            ..Default::default()
        }
        .apply(&mut e, time::from_millis(1_700_000_002_000));
        assert_eq!((e.action, e.stopped_date), (None, Some(later)));
    }

    #[test]
    fn public_view_drops_credentials_everywhere() {
        let mut e = sample();
        e.execution_data = r#"[{"nodeId":"a","data":{"FLOWISE_CREDENTIAL_ID":"c1",
            "inputs":[{"FLOWISE_CREDENTIAL_ID":"c2","k":1}]}}]"#
            .into();
        let shown = e.clone().public_view().execution_data;
        assert!(!shown.contains("FLOWISE_CREDENTIAL_ID") && shown.contains(r#""k":1"#));
        e.execution_data = "not json".into();
        assert_eq!(e.public_view().execution_data, "[]");
    }
}
