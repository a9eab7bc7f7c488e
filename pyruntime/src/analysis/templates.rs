//! Template substitution in tool code: `{{$param}}`, `{{$vars.key}}`, `{{$flow.key}}`,
//! `{{$form.field}}`, `{{question}}`, `{{chat_history}}`, `{{current_date_time}}`.
//!
//! This module owns the template grammar, the shape of the `variables` object and the
//! resolution of a template to a JSON value (unknown ones resolve to `null` and produce a
//! warning). It does not decide how a value is written into the code: `substitute` hands
//! the resolved values to `py::substitute`, which asks CPython's tokenizer where each
//! template stands (inside a string literal, a comment or plain code) so a value can never
//! become code. Other `{{...}}` text (f-string braces, Jinja) is left untouched.

use std::sync::LazyLock;

use chrono::{DateTime, SecondsFormat, Utc};
use regex::Regex;
use serde_json::{Map, Value};

use crate::analysis::py;

/// `{{ name }}` where name is `$ident(.key)*` or one of the special names.
static TEMPLATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\{\{\s*(\$[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*|question|chat_history|current_date_time)\s*\}\}",
    )
    .unwrap_or_else(|err| unreachable!("template regex is valid: {err}"))
});

/// The `variables` of an execution request, split into its groups.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Variables {
    /// Direct tool input parameters (`{{$name}}`), also passed to the entry function.
    pub params: Map<String, Value>,
    pub vars: Map<String, Value>,
    pub flow: Map<String, Value>,
    pub form: Map<String, Value>,
}

impl Variables {
    /// Reads the request's `variables`: an object whose `$vars`, `$flow` and `$form` keys
    /// are objects, every other key (with or without a leading `$`) a tool parameter.
    pub fn from_json(value: Option<Value>) -> Result<Self, String> {
        let object = match value {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(object)) => object,
            Some(_) => return Err("`variables` must be an object".to_owned()),
        };
        let mut variables = Self::default();
        for (key, value) in object {
            let group = match key.as_str() {
                "$vars" => &mut variables.vars,
                "$flow" => &mut variables.flow,
                "$form" => &mut variables.form,
                _ => {
                    let name = key.strip_prefix('$').unwrap_or(&key).to_owned();
                    variables.params.insert(name, value);
                    continue;
                }
            };
            match value {
                Value::Object(map) => *group = map,
                Value::Null => {}
                _ => return Err(format!("`variables.{key}` must be an object")),
            }
        }
        Ok(variables)
    }

    /// Resolves one template name (without braces) to its value; `None` if unknown.
    pub fn resolve(&self, name: &str, now: DateTime<Utc>) -> Option<Value> {
        match name {
            "question" => self
                .params
                .get("question")
                .or_else(|| self.flow.get("input"))
                .cloned(),
            "chat_history" => self
                .params
                .get("chat_history")
                .or_else(|| self.flow.get("chatHistory"))
                .cloned(),
            "current_date_time" => Some(Value::String(
                now.to_rfc3339_opts(SecondsFormat::Millis, true),
            )),
            _ => {
                let path = name.strip_prefix('$')?;
                let mut parts = path.split('.');
                let head = parts.next()?;
                let mut current = match head {
                    "vars" => Value::Object(self.vars.clone()),
                    "flow" => Value::Object(self.flow.clone()),
                    "form" => Value::Object(self.form.clone()),
                    _ => self.params.get(head)?.clone(),
                };
                for key in parts {
                    current = current.get(key)?.clone();
                }
                Some(current)
            }
        }
    }
}

/// One template occurrence to replace, in character offsets of the code.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Replacement {
    pub start: usize,
    pub end: usize,
    /// The value as text, for string literals and comments.
    pub text: String,
    /// The value as JSON, turned into a Python literal outside strings.
    pub json: String,
}

/// Code after substitution and the warnings it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Substituted {
    pub code: String,
    pub warnings: Vec<String>,
}

/// Finds every template in `code` and resolves it. Pure: no interpreter involved.
pub fn plan(
    code: &str,
    variables: &Variables,
    now: DateTime<Utc>,
) -> (Vec<Replacement>, Vec<String>) {
    let mut replacements = Vec::new();
    let mut warnings = Vec::new();
    // Character offsets, computed incrementally from the byte offsets the regex gives.
    let mut chars_before = 0;
    let mut bytes_seen = 0;
    for found in TEMPLATE.captures_iter(code) {
        let (Some(whole), Some(name)) = (found.get(0), found.get(1)) else {
            continue;
        };
        chars_before += code[bytes_seen..whole.start()].chars().count();
        let start = chars_before;
        let end = start + whole.as_str().chars().count();
        chars_before = end;
        bytes_seen = whole.end();

        let value = variables.resolve(name.as_str(), now).unwrap_or_else(|| {
            let warning = format!(
                "unknown template {{{{{}}}}} replaced by None",
                name.as_str()
            );
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
            Value::Null
        });
        replacements.push(Replacement {
            start,
            end,
            text: text_form(&value),
            json: value.to_string(),
        });
    }
    (replacements, warnings)
}

/// Applies `replacements` (from `plan`, with its `warnings`) where CPython's tokenizer
/// says each one stands. Blocking, and in an analyser only (see `analysts`).
pub fn apply(
    code: &str,
    replacements: &[Replacement],
    mut warnings: Vec<String>,
) -> Result<Substituted, py::PyFailure> {
    if replacements.is_empty() {
        return Ok(Substituted {
            code: code.to_owned(),
            warnings,
        });
    }
    let items = replacements
        .iter()
        .map(|r| (r.start, r.end, r.text.as_str(), r.json.as_str()))
        .collect();
    match py::substitute(code, items)? {
        Some((code, more)) => {
            warnings.extend(more);
            Ok(Substituted { code, warnings })
        }
        None => {
            warnings
                .push("templates were not substituted: the code could not be tokenized".to_owned());
            Ok(Substituted {
                code: code.to_owned(),
                warnings,
            })
        }
    }
}

/// The text a value contributes inside a string: strings as they are, `null` as nothing,
/// anything else as JSON.
pub fn text_form(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn variables() -> Variables {
        Variables::from_json(Some(json!({
            "$city": "Paris",
            "count": 3,
            "$vars": {"greeting": "hi", "nested": {"deep": [1, 2]}},
            "$flow": {"input": "what time is it?", "chatHistory": [{"type": "userMessage", "message": "hello"}], "sessionId": "s1"},
            "$form": {"email": "a@b.c"},
        })))
        .unwrap_or_default()
    }

    #[test]
    fn variables_split_into_groups_and_params() {
        let v = variables();
        assert_eq!(v.params.get("city"), Some(&json!("Paris")));
        assert_eq!(v.params.get("count"), Some(&json!(3)));
        assert_eq!(v.vars.get("greeting"), Some(&json!("hi")));
        assert_eq!(v.form.get("email"), Some(&json!("a@b.c")));
        assert!(Variables::from_json(Some(json!([1]))).is_err());
        assert!(Variables::from_json(Some(json!({"$vars": 3}))).is_err());
        assert_eq!(Variables::from_json(None), Ok(Variables::default()));
    }

    #[test]
    fn every_group_resolves() {
        let v = variables();
        let r = |name: &str| v.resolve(name, now());
        assert_eq!(r("$city"), Some(json!("Paris")));
        assert_eq!(r("$vars.greeting"), Some(json!("hi")));
        assert_eq!(r("$vars.nested.deep"), Some(json!([1, 2])));
        assert_eq!(r("$flow.sessionId"), Some(json!("s1")));
        assert_eq!(r("$form.email"), Some(json!("a@b.c")));
        assert_eq!(r("question"), Some(json!("what time is it?")));
        assert_eq!(
            r("chat_history"),
            Some(json!([{"type": "userMessage", "message": "hello"}]))
        );
        assert_eq!(
            r("current_date_time"),
            Some(json!("2026-01-02T03:04:05.678Z"))
        );
        assert_eq!(r("$missing"), None);
        assert_eq!(r("$vars.missing"), None);
        assert_eq!(r("$city.length"), None);
    }

    #[test]
    fn plan_finds_templates_with_char_offsets() {
        let code = "é = '{{$city}}'\nn = {{ $count }}\nx = {{$nope}}\ny = f'{{z}}'\n";
        let (reps, warnings) = plan(code, &variables(), now());
        assert_eq!(reps.len(), 3, "f-string braces are not templates");
        let chars: Vec<char> = code.chars().collect();
        let slice = |r: &Replacement| chars[r.start..r.end].iter().collect::<String>();
        assert_eq!(slice(&reps[0]), "{{$city}}");
        assert_eq!(slice(&reps[1]), "{{ $count }}");
        assert_eq!(reps[0].text, "Paris");
        assert_eq!(reps[0].json, "\"Paris\"");
        assert_eq!(reps[1].text, "3");
        assert_eq!(reps[2].json, "null");
        assert_eq!(
            warnings,
            vec!["unknown template {{$nope}} replaced by None".to_owned()]
        );
    }

    #[test]
    fn text_form_of_values() {
        assert_eq!(text_form(&json!("a\"b")), "a\"b");
        assert_eq!(text_form(&json!(null)), "");
        assert_eq!(text_form(&json!(true)), "true");
        assert_eq!(text_form(&json!({"a": [1]})), "{\"a\":[1]}");
    }
}
