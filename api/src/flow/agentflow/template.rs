//! The variables of an agentflow node's text inputs, as Flowise resolves them:
//! `{{ question }}`, `{{ chat_history }}`, `{{ current_date_time }}`,
//! `{{ loop_count }}`, `{{ $flow.state.<key> }}` (and `$flow.sessionId`,
//! `chatId`, `chatflowId`), `{{ $form.<field> }}`, `{{ $vars.<name> }}`,
//! `{{ $webhook.body.<path> }}` (and `.headers`, `.query`: a Flowise webhook call),
//! `{{ $iteration }}` / `{{ $iteration.<path> }}`, `{{ <nodeId> }}` (that node's
//! text — an HTTP node's response body) and `{{ <nodeId>.output.<path> }}`.
//! A variable nobody knows stays as written. Objects and arrays are written as
//! JSON.
//!
//! Flowise's editor stores rich text as HTML (`<p>…<span class="variable">{{ x }}</span></p>`);
//! such a value is turned into plain text first.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// What a node's variables can see.
pub struct Scope<'a> {
    pub question: &'a str,
    /// Pictures the question came with (the user's turn carries them).
    pub images: &'a [crate::llm::Image],
    /// `Human: …` / `Assistant: …` lines of the session and the run so far.
    pub chat_history: &'a str,
    pub form: &'a Map<String, Value>,
    pub vars: &'a Map<String, Value>,
    pub state: &'a Map<String, Value>,
    /// Other `$flow` values of the request (a webhook's `body` and `headers`).
    pub flow_vars: &'a Map<String, Value>,
    pub session_id: &'a str,
    pub chatflow_id: &'a str,
    /// The latest output of each node that ran.
    pub outputs: &'a HashMap<String, Value>,
    pub iteration: Option<&'a Value>,
    pub loop_count: u32,
}

impl Scope<'_> {
    /// `text` with every known variable replaced.
    pub fn resolve(&self, text: &str) -> String {
        let plain;
        let text = if starts_with_block_tag(text) {
            plain = html_to_text(text);
            plain.as_str()
        } else {
            text
        };
        if !text.contains("{{") {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let Some(len) = rest[open + 2..].find("}}") else {
                break;
            };
            out.push_str(&rest[..open]);
            let whole = &rest[open..open + 2 + len + 2];
            let name = rest[open + 2..open + 2 + len].trim();
            match self.lookup(name) {
                Some(value) => push_value(&mut out, &value),
                None => out.push_str(whole),
            }
            rest = &rest[open + 2 + len + 2..];
        }
        out.push_str(rest);
        out
    }

    /// The value of one variable, or `None` to leave it as written.
    pub fn lookup(&self, name: &str) -> Option<Value> {
        // The editor's markdown escapes underscores in node ids (`llmAgentflow\_0`).
        let unescaped;
        let name = if name.contains('\\') {
            unescaped = name.replace('\\', "");
            unescaped.as_str()
        } else {
            name
        };
        match name {
            "question" => return Some(Value::from(self.question)),
            "chat_history" => return Some(Value::from(self.chat_history)),
            "current_date_time" => {
                return Some(Value::from(
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ));
            }
            "loop_count" => return Some(Value::from(self.loop_count)),
            "file_attachment" => return Some(Value::from("")),
            _ => {}
        }
        if let Some(path) = name.strip_prefix("$form.") {
            return get(self.form, path).cloned();
        }
        if let Some(path) = name.strip_prefix("$vars.") {
            return get(self.vars, path).cloned();
        }
        // A Flowise webhook call: `$webhook.body.x`, `.headers.x`, `.query.x`.
        if let Some(path) = name.strip_prefix("$webhook.") {
            return match self.flow_vars.get("webhook") {
                Some(Value::Object(call)) => get(call, path).cloned(),
                _ => None,
            };
        }
        if let Some(path) = name.strip_prefix("$flow.") {
            return match path {
                "sessionId" | "chatId" => Some(Value::from(self.session_id)),
                "chatflowId" | "chatflowid" => Some(Value::from(self.chatflow_id)),
                "input" => Some(Value::from(self.question)),
                "chatHistory" => Some(Value::from(self.chat_history)),
                "state" => Some(Value::Object(self.state.clone())),
                _ => match path.strip_prefix("state.") {
                    Some(key) => get(self.state, key).cloned(),
                    None => get(self.flow_vars, path).cloned(),
                },
            };
        }
        if name == "$iteration" {
            return self.iteration.cloned();
        }
        if let Some(path) = name.strip_prefix("$iteration.") {
            return match self.iteration? {
                Value::String(s) => Some(Value::from(s.as_str())),
                Value::Object(o) => get(o, path).cloned(),
                _ => None,
            };
        }
        if let Some((node, path)) = name.split_once(".output.") {
            return match self.outputs.get(node)? {
                Value::Object(o) => get(o, path).cloned(),
                _ => None,
            };
        }
        let output = self.outputs.get(name)?;
        output
            .get("content")
            .filter(|c| !c.is_null())
            .or_else(|| output.pointer("/http/data"))
            .cloned()
    }
}

/// A value as text: strings as they are, everything else as JSON.
pub fn push_value(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => out.push_str(s),
        Value::Null => {}
        other => out.push_str(&other.to_string()),
    }
}

pub fn value_text(value: &Value) -> String {
    let mut out = String::new();
    push_value(&mut out, value);
    out
}

/// `a.b[0].c` in a JSON object (lodash's `get`).
pub fn get<'v>(root: &'v Map<String, Value>, path: &str) -> Option<&'v Value> {
    let mut parts = path_parts(path);
    let first = parts.next()?;
    let mut at = root.get(first)?;
    for part in parts {
        at = match at {
            Value::Object(o) => o.get(part)?,
            Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

fn path_parts(path: &str) -> impl Iterator<Item = &str> {
    path.split(['.', '[', ']']).filter(|p| !p.is_empty())
}

fn starts_with_block_tag(text: &str) -> bool {
    let t = text.trim_start();
    let Some(rest) = t.strip_prefix('<') else {
        return false;
    };
    let tag: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        tag.as_str(),
        "p" | "div"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "blockquote"
            | "pre"
            | "table"
    )
}

/// The editor's rich text as plain text: block ends and `<br>` become line
/// breaks, list items get a dash, tags go, entities are decoded.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..open]));
        let Some(close) = rest[open..].find('>') else {
            out.push_str(&decode_entities(&rest[open..]));
            rest = "";
            break;
        };
        let tag = rest[open + 1..open + close].trim().to_ascii_lowercase();
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let closing = tag.starts_with('/');
        match name.as_str() {
            "br" => out.push('\n'),
            "li" if !closing => out.push_str("- "),
            "p" | "div" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "li" | "pre" | "blockquote"
            | "tr" | "ul" | "ol"
                if closing && !out.ends_with('\n') =>
            {
                out.push('\n');
            }
            _ => {}
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&decode_entities(rest));
    out.trim_end_matches('\n').to_owned()
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    text.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with<'a>(
        outputs: &'a HashMap<String, Value>,
        state: &'a Map<String, Value>,
        form: &'a Map<String, Value>,
    ) -> Scope<'a> {
        Scope {
            question: "What is up?",
            images: &[],
            chat_history: "Human: hi\nAssistant: hello",
            form,
            vars: form,
            state,
            flow_vars: form,
            session_id: "s1",
            chatflow_id: "f1",
            outputs,
            iteration: None,
            loop_count: 2,
        }
    }

    #[test]
    fn resolves_every_group_and_leaves_unknowns() {
        let mut outputs = HashMap::new();
        outputs.insert(
            "llm_0".to_owned(),
            json!({"content": "Bonjour", "score": 7, "tags": ["a"]}),
        );
        outputs.insert("http_0".to_owned(), json!({"http": {"data": {"ok": true}}}));
        let state = json!({"topic": "tea", "n": 3})
            .as_object()
            .cloned()
            .unwrap();
        let form = json!({"name": "Ada"}).as_object().cloned().unwrap();
        let s = with(&outputs, &state, &form);
        assert_eq!(s.resolve("Q: {{ question }}"), "Q: What is up?");
        assert_eq!(
            s.resolve("{{llm_0}} / {{ llm_0.output.score }}"),
            "Bonjour / 7"
        );
        assert_eq!(s.resolve("{{ llm_0.output.tags }}"), r#"["a"]"#);
        assert_eq!(s.resolve("{{ http_0 }}"), r#"{"ok":true}"#);
        assert_eq!(
            s.resolve("{{ $flow.state.topic }}-{{ $flow.state.n }}"),
            "tea-3"
        );
        assert_eq!(
            s.resolve("{{ $form.name }} {{ $flow.sessionId }}"),
            "Ada s1"
        );
        assert_eq!(s.resolve("{{ loop_count }} {{ nobody }}"), "2 {{ nobody }}");
        assert_eq!(
            s.resolve("{{ llmAgentflow\\_9 }} {{ llm\\_0 }}"),
            "{{ llmAgentflow\\_9 }} Bonjour"
        );
        assert_eq!(s.resolve("open {{ end"), "open {{ end");
    }

    #[test]
    fn rich_text_becomes_plain_text() {
        let html = r#"<p>Translate to <strong>French</strong>:</p><p><span class="variable" data-type="mention">{{ question }}</span> &amp; more</p>"#;
        let outputs = HashMap::new();
        let empty = Map::new();
        let s = with(&outputs, &empty, &empty);
        assert_eq!(s.resolve(html), "Translate to French:\nWhat is up? & more");
        assert_eq!(html_to_text("<ul><li>a</li><li>b</li></ul>"), "- a\n- b");
        assert_eq!(s.resolve("a <b> c"), "a <b> c");
    }

    #[test]
    fn paths_read_arrays_and_objects() {
        let root = json!({"a": {"b": [{"c": 1}]}})
            .as_object()
            .cloned()
            .unwrap();
        assert_eq!(get(&root, "a.b[0].c"), Some(&json!(1)));
        assert_eq!(get(&root, "a.x"), None);
    }
}
