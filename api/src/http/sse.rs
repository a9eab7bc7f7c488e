//! Server-sent events in Flowise's framing: each event is `event: NAME` and one
//! line of JSON `{"event": NAME, "data": VALUE}`, in the order Flowise's
//! clients read — `start` (with the first token, or empty before what comes
//! ahead of the tokens: calls, steps, thinking), `token`*, an agentflow's
//! progress events, the extras (`sourceDocuments`, `usedTools`,
//! `agentReasoning`, `artifacts`, `action`), `metadata`, `end` — with a
//! `heartbeat` comment while the run is quiet.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Serialize;
use serde_json::json;

use super::error::{ApiError, ApiResult};
use crate::services::prediction::{PredictionEvent, Progress};

/// SSE comment sent when nothing else was, so proxies keep the stream open.
const HEARTBEAT: Duration = Duration::from_secs(30);

/// One SSE event in Flowise's framing: `event: NAME` and one line of JSON
/// `{"event": NAME, "data": VALUE}` (serialised straight from borrowed parts: this
/// runs for every token).
fn sse<T: Serialize + ?Sized>(name: &str, data: &T) -> Event {
    #[derive(Serialize)]
    struct Frame<'a, T: ?Sized> {
        event: &'a str,
        data: &'a T,
    }
    let line = serde_json::to_string(&Frame { event: name, data })
        .unwrap_or_else(|_| format!(r#"{{"event":"{name}","data":null}}"#));
    Event::default().event(name).data(line)
}

/// An agentflow's progress as Flowise's SSE events.
fn progress_event(progress: &Progress) -> Event {
    match progress {
        Progress::Flow(status) => sse("agentFlowEvent", status.as_str()),
        Progress::Node {
            node_id,
            node_label,
            status,
            error,
        } => {
            let mut data =
                json!({"nodeId": node_id, "nodeLabel": node_label, "status": status.as_str()});
            if let Some(error) = error {
                data["error"] = json!(error);
            }
            sse("nextAgentFlow", &data)
        }
        Progress::Executed(items) => sse("agentFlowExecutedData", items),
        Progress::CalledTools(calls) => sse("calledTools", calls),
        Progress::NextAgent(agent) => sse("nextAgent", agent),
        Progress::AgentReasoning(steps) => sse("agentReasoning", steps),
        Progress::Thinking(piece) => sse("thinking", piece),
        Progress::Thought { seconds } => thought_for(*seconds),
    }
}

/// The end of a model's reasoning as Flowise frames it: empty `data` and the
/// `duration` in seconds beside it (`{"event":"thinking","data":"","duration":3}`).
fn thought_for(seconds: u64) -> Event {
    let line = json!({"event": "thinking", "data": "", "duration": seconds}).to_string();
    Event::default().event("thinking").data(line)
}

/// The SSE answer. A failure before the first token is still a plain JSON error
/// with its status; after that it is an `error` event.
pub async fn stream_answer(
    mut events: tokio::sync::mpsc::Receiver<PredictionEvent>,
) -> ApiResult<Response> {
    let first = match events.recv().await {
        Some(PredictionEvent::Error(message)) => return Err(ApiError::FlowFailed(message)),
        Some(event) => event,
        None => return Err(ApiError::Internal("the run ended without an answer".into())),
    };
    let stream = sse_events(first, events);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// `start` (with the first token) → `token`* → extras → `metadata` → `end`.
fn sse_events(
    first: PredictionEvent,
    rest: tokio::sync::mpsc::Receiver<PredictionEvent>,
) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    struct S {
        pending: Option<PredictionEvent>,
        rest: tokio::sync::mpsc::Receiver<PredictionEvent>,
        started: bool,
        queue: std::collections::VecDeque<Event>,
        finished: bool,
    }
    let state = S {
        pending: Some(first),
        rest,
        started: false,
        queue: Default::default(),
        finished: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.queue.pop_front() {
                return Some((Ok(event), s));
            }
            if s.finished {
                return None;
            }
            let next = match s.pending.take() {
                Some(e) => Some(e),
                None => s.rest.recv().await,
            };
            match next {
                Some(PredictionEvent::Progress(progress)) => {
                    // An agentflow streams its own events and no `start`. What
                    // comes before an answer's tokens (an agent's calls, a team's
                    // steps, the model's thinking) goes to the answer the widget
                    // opens at `start`, so `start` (empty) comes first.
                    if !s.started
                        && matches!(
                            progress,
                            Progress::CalledTools(_)
                                | Progress::NextAgent(_)
                                | Progress::AgentReasoning(_)
                                | Progress::Thinking(_)
                                | Progress::Thought { .. }
                        )
                    {
                        s.queue.push_back(sse("start", ""));
                    }
                    s.started = true;
                    s.queue.push_back(progress_event(&progress));
                }
                Some(PredictionEvent::Token(token)) => {
                    if !s.started {
                        s.started = true;
                        s.queue.push_back(sse("start", &token));
                    }
                    s.queue.push_back(sse("token", &token));
                }
                Some(PredictionEvent::Done(result)) => {
                    let extras = [
                        ("sourceDocuments", &result.source_documents),
                        ("usedTools", &result.used_tools),
                        ("agentReasoning", &result.agent_reasoning),
                        ("artifacts", &result.artifacts),
                    ];
                    for (name, items) in extras {
                        if !items.is_empty() {
                            s.queue.push_back(sse(name, items));
                        }
                    }
                    let mut metadata = json!({
                        "chatId": result.chat_id,
                        "chatMessageId": result.chat_message_id,
                        "question": result.question,
                        "sessionId": result.session_id,
                        "sourceDocuments": result.source_documents,
                        "usedTools": result.used_tools,
                    });
                    if !result.agent_reasoning.is_empty() {
                        metadata["agentReasoning"] = json!(result.agent_reasoning);
                    }
                    if !result.artifacts.is_empty() {
                        metadata["artifacts"] = json!(result.artifacts);
                    }
                    if let Some(id) = result.execution_id {
                        metadata["executionId"] = json!(id);
                    }
                    if let Some(memory) = &result.memory_type {
                        metadata["memoryType"] = json!(memory);
                    }
                    if let Some(action) = &result.action {
                        s.queue.push_back(sse("action", action));
                        metadata["action"] = action.clone();
                    }
                    if let Some(flow_variables) = &result.flow_variables {
                        metadata["flowVariables"] = json!(flow_variables);
                    }
                    if let Some(prompts) = &result.follow_up_prompts {
                        metadata["followUpPrompts"] = json!(prompts);
                    }
                    if let Some(usage) = &result.usage_metadata {
                        s.queue.push_back(sse("usageMetadata", usage));
                    }
                    s.queue.push_back(sse("metadata", &metadata));
                    if result.aborted {
                        s.queue.push_back(sse("abort", "[DONE]"));
                    }
                    s.queue.push_back(sse("end", "[DONE]"));
                    s.finished = true;
                }
                Some(PredictionEvent::Error(message)) => {
                    s.queue.push_back(sse("error", &message));
                    s.queue.push_back(sse("end", "[DONE]"));
                    s.finished = true;
                }
                None => {
                    s.queue
                        .push_back(sse("error", "the run ended without an answer"));
                    s.queue.push_back(sse("end", "[DONE]"));
                    s.finished = true;
                }
            }
        }
    })
}
