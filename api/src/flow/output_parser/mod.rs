//! Output parsers on an `llmChain` (Flowise's `csvOutputParser`,
//! `structuredOutputParser` and `advancedStructuredOutputParser`): the format
//! instructions appended to the chain's prompt, the model's text turned into
//! JSON (a list of values, or a value checked against a JSON schema), and the
//! prompt of the one fix-up call `autofixParser` allows.
//!
//! The texts are LangChain's, as Flowise sends them, so prompts written for
//! Flowise behave the same. Parsing is lenient where models are sloppy (a
//! fenced block, trailing commas, raw newlines inside strings) and strict
//! where the answer's reader relies on it (the schema's types, required keys,
//! enums and lengths); keys the schema does not name are dropped, as zod does.

mod schema;
pub mod zod;

use serde_json::Value;

pub use schema::{conform, schema_from_rows};

/// One output parser node.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputParserSpec {
    pub node_id: String,
    pub node_type: &'static str,
    pub kind: ParserKind,
    /// One more call to the model with the error when the answer does not parse.
    pub autofix: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ParserKind {
    /// `a, b, c` → `["a", "b", "c"]`.
    CommaList,
    /// A JSON value matching this JSON schema.
    Json(Value),
}

const CSV_INSTRUCTIONS: &str =
    "Your response should be a list of comma separated values, eg: `foo, bar, baz`";

/// LangChain's StructuredOutputParser instructions, around the schema. The
/// doubled braces reach the model as written, as in Flowise.
const JSON_INSTRUCTIONS_HEAD: &str = r#"You must format your output as a JSON value that adheres to a given "JSON Schema" instance.

"JSON Schema" is a declarative language that allows you to annotate and validate JSON documents.

For example, the example "JSON Schema" instance {{"properties": {{"foo": {{"description": "a list of test words", "type": "array", "items": {{"type": "string"}}}}}}, "required": ["foo"]}}
would match an object with one required property, "foo". The "type" property specifies "foo" must be an "array", and the "description" property semantically describes it as "a list of test words". The items within "foo" must be strings.
Thus, the object {{"foo": ["bar", "baz"]}} is a well-formatted instance of this example "JSON Schema". The object {{"properties": {{"foo": ["bar", "baz"]}}}} is not well-formatted.

Your output will be parsed and type-checked according to the provided schema instance, so make sure all fields in your output match the schema exactly and there are no trailing commas!

Here is the JSON Schema instance your output must adhere to. Include the enclosing markdown codeblock:
```json
"#;

impl OutputParserSpec {
    /// What the chain's prompt gains (after a newline) so the model answers
    /// in the parser's format.
    pub fn format_instructions(&self) -> String {
        match &self.kind {
            ParserKind::CommaList => CSV_INSTRUCTIONS.to_owned(),
            ParserKind::Json(schema) => {
                let mut shown = schema.clone();
                if let Value::Object(map) = &mut shown {
                    map.insert(
                        "$schema".into(),
                        Value::from("http://json-schema.org/draft-07/schema#"),
                    );
                }
                format!("{JSON_INSTRUCTIONS_HEAD}{shown}\n```\n")
            }
        }
    }

    /// The model's text as JSON, or why it is not what the parser wants.
    pub fn parse(&self, text: &str) -> Result<Value, String> {
        match &self.kind {
            ParserKind::CommaList => Ok(Value::Array(
                text.trim()
                    .split(',')
                    .map(|item| Value::from(item.trim()))
                    .collect(),
            )),
            ParserKind::Json(schema) => {
                let body = repair(fenced(text));
                let value: Value = serde_json::from_str(&body)
                    .map_err(|e| format!("the answer is not JSON ({e})"))?;
                conform(&value, schema)
            }
        }
    }

    /// The fix-up request (LangChain's OutputFixingParser prompt, with the
    /// error in words rather than as an object).
    pub fn fix_request(&self, completion: &str, error: &str) -> String {
        format!(
            "Instructions:\n--------------\n{}\n--------------\nCompletion:\n--------------\n\
             {completion}\n--------------\n\nAbove, the Completion did not satisfy the \
             constraints given in the Instructions.\nError:\n--------------\n{error}\n\
             --------------\n\nPlease try again. Please only respond with an answer that \
             satisfies the constraints laid out in the Instructions:",
            self.format_instructions()
        )
    }
}

/// The inside of the first fenced block (```` ``` ```` or ```` ```json ````), or
/// the whole text when there is none.
fn fenced(text: &str) -> &str {
    let Some(start) = text.find("```") else {
        return text.trim();
    };
    let rest = &text[start + 3..];
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    match rest.find("```") {
        Some(end) => rest[..end].trim(),
        None => rest.trim(),
    }
}

/// Mends what models often get wrong in JSON: a comma before a closing bracket,
/// and raw newlines or tabs inside strings.
fn repair(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            match c {
                _ if escaped => {
                    escaped = false;
                    out.push(c);
                }
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => out.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            ',' if chars[i + 1..]
                .iter()
                .find(|c| !c.is_whitespace())
                .is_some_and(|next| matches!(next, '}' | ']')) => {}
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_parser(schema: Value) -> OutputParserSpec {
        OutputParserSpec {
            node_id: "p".into(),
            node_type: "structuredOutputParser",
            kind: ParserKind::Json(schema),
            autofix: false,
        }
    }

    #[test]
    fn a_comma_list_is_split_and_trimmed() {
        let csv = OutputParserSpec {
            kind: ParserKind::CommaList,
            ..json_parser(Value::Null)
        };
        assert_eq!(
            csv.parse(" red, green ,blue ").unwrap(),
            json!(["red", "green", "blue"])
        );
        assert_eq!(csv.format_instructions(), CSV_INSTRUCTIONS);
    }

    #[test]
    fn json_is_read_from_a_fence_and_mended() {
        let p = json_parser(json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["answer"],
        }));
        let text =
            "Sure!\n```json\n{\"answer\": \"two\nlines\", \"n\": 3, \"extra\": 1,}\n```\nbye";
        assert_eq!(
            p.parse(text).unwrap(),
            json!({"answer": "two\nlines", "n": 3})
        );
        assert!(
            p.parse("{\"n\": 3}")
                .unwrap_err()
                .contains("'answer' is missing")
        );
        assert!(p.parse("{\"answer\": 1}").unwrap_err().contains("'answer'"));
        assert!(p.parse("no json here").unwrap_err().contains("not JSON"));
        let instructions = p.format_instructions();
        assert!(instructions.starts_with("You must format your output as a JSON value"));
        assert!(instructions.contains("\"$schema\":\"http://json-schema.org/draft-07/schema#\""));
        assert!(instructions.ends_with("}\n```\n"));
    }

    #[test]
    fn the_fix_request_holds_the_completion_and_the_error() {
        let p = json_parser(json!({"type": "object", "properties": {}}));
        let fix = p.fix_request("oops", "'answer' is missing");
        assert!(fix.starts_with("Instructions:\n--------------\nYou must format"));
        assert!(fix.contains("Completion:\n--------------\noops\n"));
        assert!(fix.contains("Error:\n--------------\n'answer' is missing\n"));
    }
}
