//! Chatflows as MCP tools: which flows a caller sees ([`Catalog`]), what each
//! looks like as a tool ([`FlowTool`]: name, description, input schema), and a
//! call run as a prediction of chat type `MCP` whose answer becomes the tool's
//! result (text, its sources and artifacts as embedded resources).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::domain::{ChatType, Chatflow};
use crate::flow::graph::FlowNode;
use crate::services::prediction::{
    self, PredictionEvent, PredictionRequest, PredictionResult, Progress,
};
use crate::services::{ServiceError, ServiceResult, Services};

/// What Flowise answers for any failure; weir says what failed when the
/// cause is the caller's or the flow's, and this when it is the server's.
const GENERIC_FAILURE: &str = "An error occurred while executing the tool. Please try again later.";

/// Which flows a caller sees as tools, and how their arguments look.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// Flowise's endpoint: the one flow, taking `{question}` or `{form: {...}}`.
    Flow(Arc<Chatflow>),
    /// The workspace server: every enabled publication the key may run, a form
    /// agentflow's fields as the tool's own arguments.
    Workspace { workspace: Uuid, key_id: Uuid },
}

/// A published flow as a tool.
#[derive(Debug, Clone)]
pub struct FlowTool {
    pub name: String,
    pub description: String,
    pub flow: Arc<Chatflow>,
    /// A form agentflow's fields; `None` for a flow asked a question.
    pub form: Option<Vec<FormField>>,
    /// Whether the form is the tool's arguments themselves (the workspace
    /// server) rather than its `form` argument (Flowise's endpoint).
    flat: bool,
}

/// One field of a form agentflow's start (`formInputTypes`).
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    pub name: String,
    pub label: String,
    /// JSON Schema of the value: `{"type": ...}` or an `enum`.
    pub schema: Value,
}

impl Catalog {
    /// The tools this caller sees, in a stable order, names unique.
    pub async fn tools(&self, services: &Services) -> ServiceResult<Vec<FlowTool>> {
        match self {
            Catalog::Flow(flow) => {
                let config = flow.mcp_server.as_ref();
                Ok(vec![FlowTool {
                    name: config.map_or_else(
                        || crate::domain::mcp::default_tool_name(&flow.name),
                        |c| c.tool_name_for(&flow.name),
                    ),
                    description: config.map_or_else(
                        || crate::domain::mcp::default_description(&flow.name),
                        |c| c.description_for(&flow.name),
                    ),
                    form: form_of(services, flow)?,
                    flow: Arc::clone(flow),
                    flat: false,
                }])
            }
            Catalog::Workspace { workspace, key_id } => {
                let key = key_id.to_string();
                let mut taken = HashSet::new();
                let mut tools = Vec::new();
                for flow in services.store.list_mcp_chatflows(*workspace).await? {
                    let Some(config) = flow.mcp_server.as_ref().filter(|c| c.enabled) else {
                        continue;
                    };
                    // A flow bound to another key is not this caller's to run.
                    if flow.apikeyid.as_deref().is_some_and(|only| only != key) {
                        continue;
                    }
                    let mut name = config.tool_name_for(&flow.name);
                    if !taken.insert(name.clone()) {
                        // Two flows of one name: the later one is told apart by its id.
                        name = format!("{}_{}", cut(&name, 55), &flow.id.simple().to_string()[..8]);
                        taken.insert(name.clone());
                    }
                    // A flow whose form no tool can take is left out, not the others.
                    let form = match form_of(services, &flow) {
                        Ok(form) => form,
                        Err(e) => {
                            tracing::warn!(chatflow = %flow.id, error = %e, "an MCP tool is left out");
                            continue;
                        }
                    };
                    tools.push(FlowTool {
                        name,
                        description: config.description_for(&flow.name),
                        form,
                        flow,
                        flat: true,
                    });
                }
                Ok(tools)
            }
        }
    }
}

fn cut(text: &str, chars: usize) -> &str {
    text.char_indices()
        .nth(chars)
        .map_or(text, |(at, _)| &text[..at])
}

/// A form agentflow's fields; `None` for any other flow (and for one that does
/// not build: its calls answer why).
fn form_of(services: &Services, flow: &Chatflow) -> ServiceResult<Option<Vec<FormField>>> {
    let Ok(plan) = services
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)
    else {
        return Ok(None);
    };
    match plan.agentflow_start() {
        Some(start) if start.input_text("startInputType") == "formInput" => {
            form_fields(start).map(Some).map_err(ServiceError::Invalid)
        }
        _ => Ok(None),
    }
}

/// The fields of a form start (Flowise's rules: `string`, `number` and
/// `boolean` as themselves, `options` as an enum of its options).
fn form_fields(start: &FlowNode) -> Result<Vec<FormField>, String> {
    let mut fields = Vec::new();
    for row in start.input_rows("formInputTypes")? {
        let text = |key: &str| row.get(key).and_then(Value::as_str).unwrap_or_default();
        let name = text("name");
        if name.is_empty() {
            continue;
        }
        let label = text("label");
        let schema = match text("type") {
            kind @ ("string" | "number" | "boolean") => json!({"type": kind}),
            "options" => {
                let options: Vec<&str> = row
                    .get("addOptions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o.get("option").and_then(Value::as_str))
                    .collect();
                if options.is_empty() {
                    continue;
                }
                json!({"type": "string", "enum": options})
            }
            other => {
                return Err(format!(
                    "the form field '{name}' is of type '{other}', which an MCP tool cannot take \
                     (string, number, boolean or options)"
                ));
            }
        };
        fields.push(FormField {
            name: name.to_owned(),
            label: if label.is_empty() { name } else { label }.to_owned(),
            schema,
        });
    }
    Ok(fields)
}

impl FlowTool {
    /// The tool's JSON Schema of its arguments.
    pub fn input_schema(&self) -> Value {
        let Some(fields) = &self.form else {
            return json!({
                "type": "object",
                "properties": {"question": {
                    "type": "string",
                    "description": "The question or prompt to send to the chatflow"
                }},
                "required": ["question"],
            });
        };
        let mut properties = Map::new();
        for field in fields {
            let mut schema = field.schema.clone();
            if let Value::Object(schema) = &mut schema {
                schema.insert("description".into(), Value::String(field.label.clone()));
            }
            properties.insert(field.name.clone(), schema);
        }
        let required: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        let form = json!({"type": "object", "properties": properties, "required": required});
        if self.flat {
            form
        } else {
            json!({
                "type": "object",
                "properties": {"form": form},
                "required": ["form"],
            })
        }
    }

    /// The prediction a call asks for, or what is wrong with its arguments.
    fn request(&self, arguments: &Map<String, Value>) -> Result<PredictionRequest, String> {
        let mut request = PredictionRequest {
            chat_type: ChatType::Mcp,
            ..Default::default()
        };
        match &self.form {
            None => match arguments.get("question") {
                Some(Value::String(q)) if !q.trim().is_empty() => request.question = q.clone(),
                _ => return Err("'question' must be a non-empty string".into()),
            },
            Some(fields) => {
                let form = if self.flat {
                    arguments
                } else {
                    match arguments.get("form") {
                        Some(Value::Object(form)) => form,
                        _ => return Err("'form' must be an object of the form's fields".into()),
                    }
                };
                for field in fields {
                    let Some(value) = form.get(&field.name) else {
                        return Err(format!("the form field '{}' is required", field.name));
                    };
                    if !fits(&field.schema, value) {
                        return Err(format!(
                            "the form field '{}' must match {}",
                            field.name, field.schema
                        ));
                    }
                    request.form.insert(field.name.clone(), value.clone());
                }
            }
        }
        Ok(request)
    }
}

/// Whether a value fits a form field's schema.
fn fits(schema: &Value, value: &Value) -> bool {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.contains(value);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    }
}

/// Where a call's progress goes: the client's `progressToken` and the stream
/// its notifications are written to.
pub struct ProgressSink {
    pub token: Value,
    pub notifications: mpsc::Sender<Value>,
    sent: u64,
}

impl ProgressSink {
    pub fn new(token: Value, notifications: mpsc::Sender<Value>) -> Self {
        ProgressSink {
            token,
            notifications,
            sent: 0,
        }
    }

    /// Sends one progress notification; `false` when the client has gone.
    async fn send(&mut self, message: String) -> bool {
        self.sent += 1;
        let notification = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": self.token, "progress": self.sent, "message": message},
        });
        self.notifications.send(notification).await.is_ok()
    }
}

/// What an agentflow's progress says to a person, if anything.
fn progress_message(progress: &Progress) -> Option<String> {
    match progress {
        Progress::Node {
            node_label,
            status,
            error,
            ..
        } => Some(match error {
            Some(error) => format!("{node_label}: {} ({error})", status.as_str()),
            None => format!("{node_label}: {}", status.as_str()),
        }),
        _ => None,
    }
}

/// Who answers a flow's questions during a call: the session's client, asked
/// over the call's stream.
pub struct Asker<'a> {
    pub elicitations: &'a super::elicitation::Elicitations,
    pub session: &'a str,
    pub stream: mpsc::Sender<Value>,
}

/// What a call does when its flow stops for a person's answer.
pub enum Questions<'a> {
    /// Asks the session's client over the call's stream, and goes on.
    Ask(Asker<'a>),
    /// Answers an `InputRequiredResult` (2026-07-28): the question as an
    /// elicitation, and a sealed `requestState` the client sends back with
    /// the person's answer to go on.
    Return,
    /// Answers an `isError` naming the resume path.
    Hint,
}

/// A person's answer a call goes on with: the chat its run stopped in, and
/// the decision.
pub struct Resumed {
    pub chat_id: String,
    pub answer: crate::services::prediction::HumanAnswer,
}

/// The key of the one question in an `InputRequiredResult`.
const QUESTION_KEY: &str = "decision";

fn request_state_context(flow: &Chatflow) -> String {
    format!("mcp/requestState/{}", flow.id)
}

/// A call that stopped, as an `InputRequiredResult` (its `resultType` and
/// server stamp added by the protocol).
fn input_required(
    services: &Services,
    flow: &Chatflow,
    result: &PredictionResult,
    question: &str,
) -> ServiceResult<Value> {
    let node_id = result
        .action
        .as_ref()
        .and_then(|action| action.pointer("/data/nodeId"))
        .and_then(Value::as_str);
    let plain = json!({"chatId": result.chat_id, "nodeId": node_id}).to_string();
    let state = crate::services::sealed::seal_text(
        &services.keyring,
        &request_state_context(flow),
        &plain,
    )?;
    Ok(json!({
        "resultType": "input_required",
        "inputRequests": {QUESTION_KEY: super::elicitation::question(question)},
        "requestState": state,
    }))
}

/// The person's answer a retried call brings (`inputResponses` and the
/// `requestState` weir gave): `Ok(None)` for a first call, `Err` with the
/// result to answer (an `isError`) when it cannot go on.
pub fn resumed(
    services: &Services,
    tool: &FlowTool,
    params: &Map<String, Value>,
) -> Result<Option<Resumed>, Value> {
    let Some(state) = params.get("requestState") else {
        return Ok(None);
    };
    let opened = state.as_str().and_then(|state| {
        let plain = crate::services::sealed::open_text(
            &services.keyring,
            &request_state_context(&tool.flow),
            state,
        )
        .ok()?;
        serde_json::from_str::<Value>(&plain).ok()
    });
    let Some(opened) = opened else {
        return Err(failure(
            "'requestState' is not one this tool gave: call the tool anew".into(),
        ));
    };
    let chat_id = opened
        .get("chatId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let response = params
        .get("inputResponses")
        .and_then(|responses| responses.get(QUESTION_KEY))
        .cloned();
    let Some(response) = response else {
        return Err(failure(format!(
            "'inputResponses.{QUESTION_KEY}' is missing: answer the question the tool asked"
        )));
    };
    let mut wrapped = Map::new();
    wrapped.insert("result".into(), response);
    match super::elicitation::decision_of(wrapped) {
        Ok(decision) => Ok(Some(Resumed {
            chat_id,
            answer: human_answer(decision, opened.get("nodeId")),
        })),
        Err(super::elicitation::Unanswered::Cancelled) => Err(failure(format!(
            "The person dismissed the flow's question; it waits for an answer. {}",
            resume_hint_of(&tool.flow, &chat_id)
        ))),
        Err(super::elicitation::Unanswered::Missing(why)) => {
            Err(failure(format!("The answer cannot be used: {why}")))
        }
    }
}

/// Questions one call may ask before it gives up (a flow that loops on them).
const MAX_QUESTIONS: usize = 20;

/// Runs a call of `tool` and answers MCP's `CallToolResult`. Bad arguments and
/// failed runs are results with `isError` (what the calling model reads and
/// can correct), never protocol errors. A run that stops for a person's answer
/// asks `asker`'s client (elicitation) and goes on with it.
pub async fn call(
    services: &Services,
    tool: &FlowTool,
    arguments: &Map<String, Value>,
    chat_id: Option<String>,
    mut progress: Option<ProgressSink>,
    questions: Questions<'_>,
    resume: Option<Resumed>,
) -> Value {
    let mut request = match tool.request(arguments) {
        Ok(request) => request,
        Err(message) => return failure(message),
    };
    request.chat_id = chat_id;
    if let Some(resume) = resume {
        request.chat_id = Some(resume.chat_id);
        request.human_input = Some(resume.answer);
    }
    request.streaming = progress.is_some();
    let mut asked = 0;
    loop {
        let result = match run(services, tool, request, &mut progress).await {
            Ok(result) => result,
            Err(e @ (ServiceError::Internal(_) | ServiceError::Store(_))) => {
                tracing::error!(chatflow = %tool.flow.id, error = %e, "an MCP tool call failed");
                return failure(GENERIC_FAILURE.into());
            }
            Err(e) => return failure(e.to_string()),
        };
        let Some(action) = &result.action else {
            return success(&tool.flow, &result);
        };
        let question = match result.text.trim() {
            "" => "The flow asks whether to go on.",
            text => text,
        };
        let asker = match &questions {
            Questions::Ask(asker) => asker,
            Questions::Return => {
                return input_required(services, &tool.flow, &result, question).unwrap_or_else(
                    |e| {
                        tracing::error!(chatflow = %tool.flow.id, error = %e, "cannot seal an MCP request state");
                        failure(GENERIC_FAILURE.into())
                    },
                );
            }
            Questions::Hint => return success(&tool.flow, &result),
        };
        asked += 1;
        if asked > MAX_QUESTIONS {
            return success(&tool.flow, &result);
        }
        let decision = asker
            .elicitations
            .ask(asker.session, &asker.stream, question)
            .await;
        let decision = match decision {
            Ok(decision) => decision,
            Err(super::elicitation::Unanswered::Cancelled) => {
                return failure(format!(
                    "The person dismissed the flow's question; it waits for an answer. {}",
                    resume_hint(&tool.flow, &result)
                ));
            }
            Err(super::elicitation::Unanswered::Missing(why)) => {
                tracing::info!(chatflow = %tool.flow.id, why, "an MCP client did not answer a flow's question");
                return success(&tool.flow, &result);
            }
        };
        request = match tool.request(arguments) {
            Ok(request) => request,
            Err(message) => return failure(message),
        };
        request.chat_id = Some(result.chat_id.clone());
        request.streaming = progress.is_some();
        request.human_input = Some(human_answer(decision, action.pointer("/data/nodeId")));
    }
}

/// A person's decision as the answer a stopped run goes on with, at the node
/// that asked.
fn human_answer(
    decision: super::elicitation::Decision,
    node_id: Option<&Value>,
) -> crate::services::prediction::HumanAnswer {
    crate::services::prediction::HumanAnswer {
        proceed: decision.proceed,
        start_node_id: node_id.and_then(Value::as_str).map(str::to_owned),
        feedback: decision.feedback,
    }
}

/// One prediction of a call, its tokens and progress sent to `progress`.
async fn run(
    services: &Services,
    tool: &FlowTool,
    request: crate::services::prediction::PredictionRequest,
    progress: &mut Option<ProgressSink>,
) -> Result<PredictionResult, ServiceError> {
    match prediction::start(services, &tool.flow, request).await {
        Ok(mut run) => {
            let mut answer = None;
            while let Some(event) = run.events.recv().await {
                match event {
                    PredictionEvent::Token(token) => {
                        if let Some(sink) = progress
                            && !sink.send(token).await
                        {
                            *progress = None;
                        }
                    }
                    PredictionEvent::Progress(step) => {
                        if let (Some(sink), Some(message)) =
                            (&mut *progress, progress_message(&step))
                            && !sink.send(message).await
                        {
                            *progress = None;
                        }
                    }
                    PredictionEvent::Done(result) => {
                        answer = Some(Ok(*result));
                        break;
                    }
                    PredictionEvent::Error(message) => {
                        answer = Some(Err(ServiceError::Flow(crate::flow::FlowError::failed(
                            message,
                        ))));
                        break;
                    }
                }
            }
            answer.unwrap_or_else(|| {
                Err(ServiceError::Internal(
                    "the run ended without an answer".into(),
                ))
            })
        }
        Err(e) => Err(e),
    }
}

/// How to answer a stopped run's question outside MCP.
fn resume_hint(flow: &Chatflow, result: &PredictionResult) -> String {
    resume_hint_of(flow, &result.chat_id)
}

fn resume_hint_of(flow: &Chatflow, chat_id: &str) -> String {
    let resume = json!({
        "chatId": chat_id,
        "humanInput": {"type": "proceed | reject", "startNodeId": "<the node that asked>", "feedback": "…"},
    });
    format!(
        "Answer it with POST /api/v1/prediction/{} and the body {resume}",
        flow.id
    )
}

fn failure(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// The answer as a tool result: its text (Flowise's choice: the text, else the
/// parsed JSON), then each source document and artifact as an embedded
/// resource. A run that stopped for a person's answer is an error naming how
/// to go on, as MCP clients here cannot answer it.
fn success(flow: &Chatflow, result: &PredictionResult) -> Value {
    if let Some(action) = &result.action {
        return failure(format!(
            "The flow stopped for a person's answer: {action}. {}",
            resume_hint(flow, result)
        ));
    }
    let text = match (&result.json, result.text.is_empty()) {
        (Some(json), true) => json.to_string(),
        _ => result.text.clone(),
    };
    let mut content = vec![json!({"type": "text", "text": text})];
    let base = format!(
        "weir://chatflows/{}/messages/{}",
        flow.id, result.chat_message_id
    );
    for (i, document) in result.source_documents.iter().enumerate() {
        content.push(json!({"type": "resource", "resource": {
            "uri": format!("{base}/sources/{i}"),
            "mimeType": "application/json",
            "text": document.to_string(),
        }}));
    }
    for (i, artifact) in result.artifacts.iter().enumerate() {
        let uri = artifact
            .get("url")
            .and_then(Value::as_str)
            .map_or_else(|| format!("{base}/artifacts/{i}"), str::to_owned);
        content.push(json!({"type": "resource", "resource": {
            "uri": uri,
            "mimeType": "application/json",
            "text": artifact.to_string(),
        }}));
    }
    json!({"content": content, "isError": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(rows: Value) -> FlowNode {
        let mut inputs = Map::new();
        inputs.insert("startInputType".into(), json!("formInput"));
        inputs.insert("formInputTypes".into(), rows);
        FlowNode {
            id: "startAgentflow_0".into(),
            name: "startAgentflow".into(),
            label: "Start".into(),
            inputs,
            credential: None,
            parent: None,
        }
    }

    #[test]
    fn form_fields_follow_flowise() {
        let fields = form_fields(&start(json!([
            {"type": "string", "label": "Your name", "name": "name"},
            {"type": "number", "label": "Age", "name": "age"},
            {"type": "options", "label": "Plan", "name": "plan",
             "addOptions": [{"option": "free"}, {"option": "pro"}]},
            {"type": "options", "label": "Empty", "name": "empty", "addOptions": []},
        ])))
        .unwrap();
        let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "age", "plan"]);
        assert_eq!(
            fields[2].schema,
            json!({"type": "string", "enum": ["free", "pro"]})
        );
        assert!(form_fields(&start(json!([{"type": "date", "name": "d"}]))).is_err());
    }

    #[test]
    fn values_fit_their_fields() {
        assert!(fits(&json!({"type": "number"}), &json!(3)));
        assert!(!fits(&json!({"type": "number"}), &json!("3")));
        assert!(fits(&json!({"type": "string", "enum": ["a"]}), &json!("a")));
        assert!(!fits(
            &json!({"type": "string", "enum": ["a"]}),
            &json!("b")
        ));
    }
}
