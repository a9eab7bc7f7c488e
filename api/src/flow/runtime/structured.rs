//! Structured output: the model's answer as an object of named keys, obtained
//! by forcing a call to a tool whose parameters are the keys' schema (used by
//! agentflow LLM nodes and sequential agents alike).

use serde_json::{Map, Value, json};

use super::{FlowEvent, RunError, model_step};
use crate::flow::FlowError;
use crate::flow::component::{FieldKind, ModelSpec, OutputField};
use crate::llm::{ChatMessage, ChatRequest, Role, ToolChoice, ToolDef};

const STRUCTURED_TOOL: &str = "structured_output";

/// The model's answer as an object of the node's keys: the model must call a
/// tool whose parameters are that schema; an answer that does not fit is sent
/// back once with what was wrong.
pub async fn structured(
    spec: &ModelSpec,
    model: &dyn crate::llm::ChatModel,
    mut messages: Vec<ChatMessage>,
    fields: &[OutputField],
    ledger: &super::ModelLedger,
) -> Result<Map<String, Value>, RunError> {
    let tool = ToolDef {
        name: STRUCTURED_TOOL.into(),
        description: "Give the answer in this structure.".into(),
        parameters: schema(fields),
    };
    let mut problem = String::new();
    for attempt in 0..2 {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: vec![tool.clone()],
            tool_choice: ToolChoice::Force(STRUCTURED_TOOL.into()),
            params: spec.params.clone(),
        };
        let step = model_step::<FlowEvent>(spec, model, request, None, false, ledger).await?;
        let arguments = step
            .calls
            .into_iter()
            .find(|c| c.name == STRUCTURED_TOOL)
            .map(|c| c.arguments);
        match arguments.as_ref().map(|a| check(a, fields)) {
            Some(Ok(answer)) => return Ok(answer),
            Some(Err(why)) => problem = why,
            None => problem = format!("it did not call {STRUCTURED_TOOL}"),
        }
        if attempt == 0 {
            messages.push(ChatMessage::new(
                Role::User,
                format!(
                    "Your structured answer was not valid: {problem}. Call {STRUCTURED_TOOL} \
                     again with every key of the schema."
                ),
            ));
        }
    }
    Err(RunError::Flow(FlowError::failed(format!(
        "node {} ({}) failed: the model's structured output did not match the schema twice: \
         {problem}",
        spec.node_id, spec.node_type
    ))))
}

/// The JSON schema of the node's keys (all required).
fn schema(fields: &[OutputField]) -> Value {
    let mut properties = Map::new();
    for field in fields {
        let mut prop = match &field.kind {
            FieldKind::String => json!({"type": "string"}),
            FieldKind::StringArray => json!({"type": "array", "items": {"type": "string"}}),
            FieldKind::Number => json!({"type": "number"}),
            FieldKind::Boolean => json!({"type": "boolean"}),
            FieldKind::Enum(values) => json!({"type": "string", "enum": values}),
            FieldKind::JsonArray(props) => json!({"type": "array", "items": {
                "type": "object", "properties": props,
            }}),
        };
        if !field.description.is_empty() {
            prop["description"] = Value::from(field.description.as_str());
        }
        properties.insert(field.key.clone(), prop);
    }
    let required: Vec<&str> = fields.iter().map(|f| f.key.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required})
}

/// The arguments, checked against the node's keys.
fn check(arguments: &Value, fields: &[OutputField]) -> Result<Map<String, Value>, String> {
    let Value::Object(given) = arguments else {
        return Err("the arguments are not a JSON object".into());
    };
    let mut answer = Map::new();
    for field in fields {
        let Some(value) = given.get(&field.key).filter(|v| !v.is_null()) else {
            return Err(format!("'{}' is missing", field.key));
        };
        let fits = match &field.kind {
            FieldKind::String => value.is_string(),
            FieldKind::StringArray => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
            FieldKind::Number => value.is_number(),
            FieldKind::Boolean => value.is_boolean(),
            FieldKind::Enum(values) => value
                .as_str()
                .is_some_and(|v| values.iter().any(|e| e == v)),
            FieldKind::JsonArray(_) => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_object)),
        };
        if !fits {
            return Err(format!("'{}' is not {}", field.key, describe(&field.kind)));
        }
        answer.insert(field.key.clone(), value.clone());
    }
    Ok(answer)
}

fn describe(kind: &FieldKind) -> String {
    match kind {
        FieldKind::String => "a string".into(),
        FieldKind::StringArray => "an array of strings".into(),
        FieldKind::Number => "a number".into(),
        FieldKind::Boolean => "true or false".into(),
        FieldKind::Enum(values) => format!("one of {}", values.join(", ")),
        FieldKind::JsonArray(_) => "an array of objects".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_answers_are_checked() {
        let fields = vec![
            OutputField {
                key: "sentiment".into(),
                kind: FieldKind::Enum(vec!["good".into(), "bad".into()]),
                description: String::new(),
            },
            OutputField {
                key: "score".into(),
                kind: FieldKind::Number,
                description: String::new(),
            },
        ];
        assert!(check(&json!({"sentiment": "good", "score": 3}), &fields).is_ok());
        let e = check(&json!({"sentiment": "meh", "score": 3}), &fields).unwrap_err();
        assert!(e.contains("one of good, bad"), "{e}");
        assert!(
            check(&json!({"score": 3}), &fields)
                .unwrap_err()
                .contains("missing")
        );
        let schema = schema(&fields);
        assert_eq!(schema["required"], json!(["sentiment", "score"]));
    }
}
