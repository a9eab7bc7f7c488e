//! What both SQL stores share: the column lists their row readers expect (one
//! order, one place) and the conditions of an executions listing, written once
//! for either placeholder syntax.

use uuid::Uuid;

use crate::domain::time::Timestamp;
use crate::domain::{ExecutionFilter, MessageFilter};

pub const CHATFLOW_COLUMNS: &str = "id, workspace_id, name, flow_data, deployed, is_public, apikeyid, \
     chatbot_config, api_config, category, type, created_at, updated_at, mcp_server_config";

pub const CREDENTIAL_COLUMNS: &str = "id, workspace_id, name, credential_name, key_id, sealed_data, created_at, updated_at, allowed_hosts";

pub const EXECUTION_COLUMNS: &str = "e.id, e.workspace_id, e.agentflow_id, e.session_id, e.state, \
     e.execution_data, e.action, e.is_public, e.created_at, e.updated_at, e.stopped_at";

pub const MESSAGE_COLUMNS: &str = "id, chatflow_id, chat_id, role, content, source_documents, used_tools, \
     created_at, chat_type, execution_id, memory_type, details";

/// [`MESSAGE_COLUMNS`] of the table aliased `m`.
pub const MESSAGE_COLUMNS_OF_M: &str = "m.id, m.chatflow_id, m.chat_id, m.role, m.content, \
     m.source_documents, m.used_tools, m.created_at, m.chat_type, m.execution_id, m.memory_type, m.details";

pub const FEEDBACK_COLUMNS: &str =
    "id, chatflow_id, chat_id, message_id, rating, content, created_at";

pub const RESULT_COLUMNS: &str = "id, trigger_id, executed_at, scheduled_at, input, output, \
     source_documents, used_tools, chat_id, status, error, missed_count";

pub const TOOL_COLUMNS: &str =
    "id, name, description, schema, code, requirements, created_at, updated_at";

pub const TRIGGER_COLUMNS: &str = "id, workspace_id, name, chatflow_id, node_id, type, cron_expression, \
     timezone, enabled, webhook_platform, webhook_secret, webhook_bot_token, trigger_message, \
     execution_count, max_executions, timeout_secs, last_executed, next_execution, \
     notification_email, created_at, updated_at, owned_by_chatflow, ends_at, response_mode, \
     callback_url, callback_secret";

pub const VARIABLE_COLUMNS: &str = "id, name, value, type, created_at, updated_at";

/// How many columns [`EXECUTION_COLUMNS`] selects (a listing's chatflow name follows).
pub const EXECUTION_COLUMN_COUNT: usize = 11;

/// The placeholder syntax of a backend: `?1` (SQLite) or `$1` (PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// A case-blind substring test (`instr`/`strpos`, not LIKE: `%` and `_` in
    /// the needle are plain characters).
    fn contains(self) -> &'static str {
        match self {
            Dialect::Sqlite => "instr(lower(c.name), lower(?)) > 0",
            Dialect::Postgres => "strpos(lower(c.name), lower(?)) > 0",
        }
    }
}

/// A value a shared query binds; each backend converts it to its own type.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Uuid(Uuid),
    Text(String),
    Time(Timestamp),
}

/// A `WHERE` being built: conditions joined by `AND`, each `?` of them numbered
/// in order for the dialect, with its argument.
struct Conditions {
    dialect: Dialect,
    sql: Vec<String>,
    args: Vec<Param>,
}

impl Conditions {
    fn new(dialect: Dialect) -> Self {
        Conditions {
            dialect,
            sql: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Adds `condition`, each of its `?`s taking the next of `values`.
    fn add(&mut self, condition: &str, values: impl IntoIterator<Item = Param>) {
        let mut pieces = condition.split('?');
        let mut numbered = pieces.next().unwrap_or_default().to_owned();
        for (piece, value) in pieces.zip(values) {
            self.args.push(value);
            numbered.push_str(&self.dialect.placeholder(self.args.len()));
            numbered.push_str(piece);
        }
        self.sql.push(numbered);
    }

    fn finish(self) -> (String, Vec<Param>) {
        (self.sql.join(" AND "), self.args)
    }
}

/// The `WHERE` of an executions listing (`e` the execution, `c` its chatflow)
/// and its arguments, numbered from 1: only the filters given, so that each
/// shape of query gets a plan of its own.
pub fn execution_conditions(
    dialect: Dialect,
    workspace: Uuid,
    filter: &ExecutionFilter,
) -> (String, Vec<Param>) {
    let mut conditions = Conditions::new(dialect);
    conditions.add("e.workspace_id = ?", [Param::Uuid(workspace)]);
    let mut add = |condition: &str, value: Param| conditions.add(condition, [value]);
    if let Some(id) = filter.id {
        add("e.id = ?", Param::Uuid(id));
    }
    if let Some(agentflow) = filter.agentflow_id {
        add("e.agentflow_id = ?", Param::Uuid(agentflow));
    }
    if let Some(name) = &filter.agentflow_name {
        add(dialect.contains(), Param::Text(name.clone()));
    }
    if let Some(session) = &filter.session_id {
        add("e.session_id = ?", Param::Text(session.clone()));
    }
    if let Some(state) = filter.state {
        add("e.state = ?", Param::Text(state.as_str().to_owned()));
    }
    if let Some(start) = filter.start_date {
        add("e.created_at >= ?", Param::Time(start));
    }
    if let Some(end) = filter.end_date {
        add("e.created_at <= ?", Param::Time(end));
    }
    conditions.finish()
}

/// The `WHERE` of a messages listing or deletion (`m` the message) and its
/// arguments, numbered from 1. `feedbackType` keeps the rated answers and the
/// question just before each (the latest message of the chat before it).
pub fn message_conditions(
    dialect: Dialect,
    chatflow: Uuid,
    filter: &MessageFilter,
) -> (String, Vec<Param>) {
    let mut conditions = Conditions::new(dialect);
    conditions.add("m.chatflow_id = ?", [Param::Uuid(chatflow)]);
    let mut add = |condition: &str, values: Vec<Param>| conditions.add(condition, values);
    if let Some(chat) = &filter.chat_id {
        add("m.chat_id = ?", vec![Param::Text(chat.clone())]);
    }
    if !filter.chat_types.is_empty() {
        let marks = vec!["?"; filter.chat_types.len()].join(", ");
        add(
            &format!("m.chat_type IN ({marks})"),
            filter
                .chat_types
                .iter()
                .map(|t| Param::Text(t.as_str().to_owned()))
                .collect(),
        );
    }
    if let Some(memory) = &filter.memory_type {
        add("m.memory_type = ?", vec![Param::Text(memory.clone())]);
    }
    if let Some(id) = filter.message_id {
        add("m.id = ?", vec![Param::Uuid(id)]);
    }
    if let Some(start) = filter.start_date {
        add("m.created_at >= ?", vec![Param::Time(start)]);
    }
    if let Some(end) = filter.end_date {
        add("m.created_at <= ?", vec![Param::Time(end)]);
    }
    if !filter.feedback_types.is_empty() {
        let marks = vec!["?"; filter.feedback_types.len()].join(", ");
        let rated = format!("SELECT f.message_id FROM chat_feedback f WHERE f.rating IN ({marks})");
        // The question of a rated answer: the chat's message just before it.
        let question = "m.seq = (SELECT MAX(q.seq) FROM chat_messages q
                 WHERE q.chatflow_id = m.chatflow_id AND q.chat_id = m.chat_id AND q.seq < r.seq)";
        let ratings: Vec<Param> = filter
            .feedback_types
            .iter()
            .map(|r| Param::Text(r.as_str().to_owned()))
            .collect();
        let mut values = ratings.clone();
        values.extend(ratings);
        add(
            &format!(
                "(m.id IN ({rated}) OR EXISTS (SELECT 1 FROM chat_messages r
                   WHERE r.id IN ({rated}) AND r.chatflow_id = m.chatflow_id
                     AND r.chat_id = m.chat_id AND {question}))"
            ),
            values,
        );
    }
    conditions.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_number_their_placeholders_per_dialect() {
        let filter = ExecutionFilter {
            agentflow_name: Some("Bot".into()),
            session_id: Some("s".into()),
            ..ExecutionFilter::default()
        };
        let ws = Uuid::nil();
        let (sql, args) = execution_conditions(Dialect::Postgres, ws, &filter);
        assert_eq!(
            sql,
            "e.workspace_id = $1 AND strpos(lower(c.name), lower($2)) > 0 AND e.session_id = $3"
        );
        assert_eq!(args.len(), 3);
        let (sql, _) = execution_conditions(Dialect::Sqlite, ws, &filter);
        assert_eq!(
            sql,
            "e.workspace_id = ?1 AND instr(lower(c.name), lower(?2)) > 0 AND e.session_id = ?3"
        );
    }
}
