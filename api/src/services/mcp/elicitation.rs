//! Elicitation on weir's workspace MCP server: a flow that stops for a person's
//! answer (an agentflow's human input) asks the MCP client for it
//! (`elicitation/create`, form mode) when the session's client declared the
//! capability at `initialize`, over the call's own event stream, and goes on
//! with the answer: `accept` with `decision: proceed | reject` and `feedback`,
//! `decline` as a rejection, `cancel` leaves the flow waiting.
//!
//! The client answers by POSTing a JSON-RPC response in the same session; the
//! call waiting for it lives in this process, so with replicas that POST must
//! reach the same one (sticky sessions), or the call ends after [`WAIT`] with
//! the `isError` that names the resume path.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

/// How long a call waits for a person's answer.
pub const WAIT: Duration = Duration::from_secs(300);
/// Sessions remembered as able to answer (beyond it, older ones are dropped).
const MAX_SESSIONS: usize = 100_000;
/// How long a session is remembered after its `initialize`.
const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The sessions whose clients answer elicitations, and the questions waiting.
#[derive(Default)]
pub struct Elicitations {
    sessions: Mutex<HashMap<String, Instant>>,
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    session: String,
    answer: oneshot::Sender<Map<String, Value>>,
}

/// What a person decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub proceed: bool,
    pub feedback: String,
}

/// Why there is no decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswered {
    /// The person dismissed the question (`cancel`).
    Cancelled,
    /// No answer came (the client went, erred, or took longer than [`WAIT`]).
    Missing(String),
}

impl Elicitations {
    /// Remembers that `session`'s client answers elicitations.
    pub fn remember(&self, session: &str) {
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= MAX_SESSIONS {
            sessions.retain(|_, since| since.elapsed() < SESSION_TTL);
            if sessions.len() >= MAX_SESSIONS {
                // The oldest half goes; their clients get the resume path instead.
                let mut ages: Vec<Instant> = sessions.values().copied().collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                sessions.retain(|_, since| *since > cut);
            }
        }
        sessions.insert(session.to_owned(), Instant::now());
    }

    /// Whether `session`'s client said it answers elicitations.
    pub fn supports(&self, session: &str) -> bool {
        lock(&self.sessions)
            .get(session)
            .is_some_and(|since| since.elapsed() < SESSION_TTL)
    }

    /// Forgets a session that ended.
    pub fn forget(&self, session: &str) {
        lock(&self.sessions).remove(session);
    }

    /// A response the client POSTed: `true` when it answers a question of its
    /// session that waits here.
    pub fn deliver(&self, session: Option<&str>, id: &Value, response: Map<String, Value>) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        let mut waiting = lock(&self.waiting);
        match waiting.get(id) {
            Some(w) if Some(w.session.as_str()) == session => {}
            _ => return false,
        }
        waiting
            .remove(id)
            .is_some_and(|w| w.answer.send(response).is_ok())
    }

    /// Asks `session`'s client `question` over `stream` and waits for the answer.
    pub async fn ask(
        &self,
        session: &str,
        stream: &mpsc::Sender<Value>,
        question: &str,
    ) -> Result<Decision, Unanswered> {
        let id = format!("weir-elicitation-{}", uuid::Uuid::new_v4());
        let (answer_tx, answer_rx) = oneshot::channel();
        lock(&self.waiting).insert(
            id.clone(),
            Waiting {
                session: session.to_owned(),
                answer: answer_tx,
            },
        );
        let _forget = Forget {
            waiting: &self.waiting,
            id: &id,
        };
        let mut request = self::question(question);
        request["jsonrpc"] = json!("2.0");
        request["id"] = json!(id);
        if stream.send(request).await.is_err() {
            return Err(Unanswered::Missing("the client has gone".into()));
        }
        let response = match tokio::time::timeout(WAIT, answer_rx).await {
            Ok(Ok(response)) => response,
            Ok(Err(_)) => return Err(Unanswered::Missing("the question was dropped".into())),
            Err(_) => {
                return Err(Unanswered::Missing(format!(
                    "no answer came within {} s",
                    WAIT.as_secs()
                )));
            }
        };
        decision_of(response)
    }
}

/// The question as an `elicitation/create` request (form mode), without the
/// JSON-RPC envelope: what an `InputRequiredResult` carries as it is.
pub fn question(question: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": question, "requestedSchema": requested_schema()},
    })
}

/// What a person is asked for: the decision, and words for the flow.
fn requested_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": ["proceed", "reject"],
                "enumNames": ["Proceed", "Reject"],
            },
            "feedback": {
                "type": "string",
                "title": "Feedback",
                "description": "Optional words for the flow",
            },
        },
        "required": ["decision"],
    })
}

/// A client's response to `elicitation/create`, as a decision.
pub fn decision_of(mut response: Map<String, Value>) -> Result<Decision, Unanswered> {
    if let Some(error) = response.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        return Err(Unanswered::Missing(format!(
            "the client refused: {message}"
        )));
    }
    let result = match response.remove("result") {
        Some(Value::Object(result)) => result,
        _ => {
            return Err(Unanswered::Missing(
                "the client's answer has no result".into(),
            ));
        }
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let content = result.get("content");
            let text = |key: &str| {
                content
                    .and_then(|c| c.get(key))
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .unwrap_or_default()
                    .to_owned()
            };
            let decision = text("decision");
            if !matches!(decision.as_str(), "proceed" | "reject") {
                return Err(Unanswered::Missing(
                    "the answer's decision is neither proceed nor reject".into(),
                ));
            }
            Ok(Decision {
                proceed: decision == "proceed",
                feedback: text("feedback"),
            })
        }
        Some("decline") => Ok(Decision {
            proceed: false,
            feedback: String::new(),
        }),
        Some("cancel") => Err(Unanswered::Cancelled),
        _ => Err(Unanswered::Missing(
            "the answer's action is not accept, decline or cancel".into(),
        )),
    }
}

/// Removes a question from the waiting ones when its call ends, answered or not.
struct Forget<'a> {
    waiting: &'a Mutex<HashMap<String, Waiting>>,
    id: &'a str,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.waiting).remove(self.id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(result: Value) -> Map<String, Value> {
        let Value::Object(map) = json!({"jsonrpc": "2.0", "id": "x", "result": result}) else {
            unreachable!()
        };
        map
    }

    #[test]
    fn answers_become_decisions() {
        assert_eq!(
            decision_of(answer(
                json!({"action": "accept", "content": {"decision": "reject", "feedback": " too pricey "}})
            )),
            Ok(Decision {
                proceed: false,
                feedback: "too pricey".into()
            })
        );
        assert_eq!(
            decision_of(answer(
                json!({"action": "accept", "content": {"decision": "proceed"}})
            )),
            Ok(Decision {
                proceed: true,
                feedback: String::new()
            })
        );
        assert!(matches!(
            decision_of(answer(json!({"action": "decline"}))),
            Ok(Decision { proceed: false, .. })
        ));
        assert_eq!(
            decision_of(answer(json!({"action": "cancel"}))),
            Err(Unanswered::Cancelled)
        );
        assert!(decision_of(answer(json!({"action": "accept", "content": {}}))).is_err());
    }

    #[tokio::test]
    async fn a_response_reaches_only_its_sessions_question() {
        let elicitations = Elicitations::default();
        let (stream, mut sent) = mpsc::channel(4);
        let asking = elicitations.ask("s1", &stream, "Go on?");
        let answering = async {
            let request = sent.recv().await.unwrap_or_default();
            let id = request["id"].clone();
            assert_eq!(request["method"], "elicitation/create");
            let reply = answer(json!({"action": "accept", "content": {"decision": "proceed"}}));
            assert!(!elicitations.deliver(Some("other"), &id, reply.clone()));
            assert!(elicitations.deliver(Some("s1"), &id, reply.clone()));
            assert!(!elicitations.deliver(Some("s1"), &id, reply));
        };
        let (decision, ()) = tokio::join!(asking, answering);
        assert!(decision.is_ok_and(|d| d.proceed));
        assert!(lock(&elicitations.waiting).is_empty());
    }
}
