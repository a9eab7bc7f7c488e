//! Prompt templates: `{variable}` placeholders filled from `promptValues`
//! (`{{question}}` in a value stands for the user's input, `{{chat_history}}` for
//! the conversation so far, `{{$flow.<key>}}` for a value of the run's `$flow`,
//! such as a webhook's `body` and `headers`). `{{` and `}}` write literal braces.
//! A variable without a value takes the question, as Flowise does.

use serde_json::{Map, Value};

/// LangChain's QA prompt ("stuff" chain).
pub const QA_PROMPT: &str = "Use the following pieces of context to answer the question at the end. If you don't know the answer, just say that you don't know, don't try to make up an answer.\n\n{context}\n\nQuestion: {question}\nHelpful Answer:";

/// Flowise's default `rephrasePrompt`.
pub const REPHRASE_PROMPT: &str = "Given the following conversation and a follow up question, rephrase the follow up question to be a standalone question.\n\nChat History:\n{chat_history}\nFollow Up Input: {question}\nStandalone Question:";

/// Flowise's default `responsePrompt`.
pub const RESPONSE_PROMPT: &str = "I want you to act as a document that I am having a conversation with. Your name is \"AI Assistant\". Using the provided context, answer the user's question to the best of your ability using the resources provided.\nIf there is nothing in the context relevant to the question at hand, just say \"Hmm, I'm not sure\" and stop after that. Refuse to answer any question not about the info. Never break character.\n------------\n{context}\n------------\nREMEMBER: If there is no relevant information within the context, just say \"Hmm, I'm not sure\". Don't try to make up an answer. Never break character.";

/// Fills `template`.
pub fn format(
    template: &str,
    values: &Map<String, Value>,
    question: &str,
    history: &str,
    flow: &Map<String, Value>,
) -> String {
    let mut out = String::with_capacity(template.len() + question.len());
    let mut rest = template;
    while let Some(pos) = rest.find(['{', '}']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('{') {
            match after.find('}') {
                Some(end) if is_variable(&after[..end]) => {
                    out.push_str(&value_of(&after[..end], values, question, history, flow));
                    rest = &after[end + 1..];
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        } else {
            out.push('}');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn is_variable(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
}

fn value_of(
    name: &str,
    values: &Map<String, Value>,
    question: &str,
    history: &str,
    flow: &Map<String, Value>,
) -> String {
    match values.get(name) {
        Some(Value::String(s)) => flow_values(
            &s.replace("{{question}}", question)
                .replace("{{chat_history}}", history),
            flow,
        ),
        Some(Value::Null) | None => question.to_owned(),
        Some(other) => other.to_string(),
    }
}

/// Replaces each `{{$flow.<key>}}` with that value (text as is, anything else as
/// compact JSON; an unknown key as nothing).
fn flow_values(text: &str, flow: &Map<String, Value>) -> String {
    const OPEN: &str = "{{$flow.";
    if !text.contains(OPEN) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(OPEN) {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + OPEN.len()..];
        match after.find("}}") {
            Some(end) => {
                match flow.get(after[..end].trim()) {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(other) => out.push_str(&other.to_string()),
                    None => {}
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[pos..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn fills_variables_from_values_and_question() {
        let v = values(json!({"topic": "{{question}}", "style": "short", "n": 3}));
        assert_eq!(
            format(
                "Tell me about {topic}, {style}, {n} points.",
                &v,
                "rust",
                "",
                &Map::new()
            ),
            "Tell me about rust, short, 3 points."
        );
        assert_eq!(
            format("Q: {input}", &Map::new(), "why?", "", &Map::new()),
            "Q: why?"
        );
        assert_eq!(
            format("{{literal}} {x", &Map::new(), "q", "", &Map::new()),
            "{literal} {x"
        );
        let h = values(json!({"history": "{{chat_history}}"}));
        assert_eq!(
            format("{history}|{question}", &h, "q", "H", &Map::new()),
            "H|q"
        );
    }

    #[test]
    fn json_in_templates_survives() {
        let t = r#"Answer as {{"answer": "..."}} about {topic}"#;
        assert_eq!(
            format(t, &Map::new(), "cats", "", &Map::new()),
            r#"Answer as {"answer": "..."} about cats"#
        );
    }

    #[test]
    fn flow_values_fill_prompt_values() {
        let v =
            values(json!({"event": "Event {{$flow.body}} from {{$flow.source}}{{$flow.none}}"}));
        let flow = values(json!({"body": {"a": 1}, "source": "github"}));
        assert_eq!(
            format("{event}", &v, "q", "", &flow),
            r#"Event {"a":1} from github"#
        );
    }
}
