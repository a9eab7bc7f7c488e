//! `pythonTool`: a Python function an agent calls, run by the Python tool
//! runtime. Either a tool of the workspace (`toolId`, read when the run starts)
//! or a definition written in the node (`toolName`, `toolDescription`,
//! `schema`, `code`, `requirements`), validated like `/api/v1/tools`.

use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use crate::domain::tool::{parse_schema, validate_requirement, validate_tool_name};
use crate::flow::FlowError;
use crate::flow::component::{
    Component, PythonDefinition, PythonSource, PythonTool, ToolKind, ToolSpec,
};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, sensitive};

pub struct PythonToolNode;

static SPEC: NodeSpec = NodeSpec {
    name: "pythonTool",
    category: Category::Tool,
    inputs: &[
        sensitive("toolId", K::Text),
        sensitive("toolName", K::Text),
        input("toolDescription", K::Text),
        sensitive("schema", K::Json),
        sensitive("code", K::Text),
        sensitive("requirements", K::Json),
        input("timeout", K::Number),
        input("returnDirect", K::Boolean),
    ],
};

impl Node for PythonToolNode {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let source = match node.text("toolId") {
            Some(id) => PythonSource::Stored(stored_id(node, "toolId", id)?),
            None => {
                let name = node.text("toolName").ok_or_else(|| {
                    node.invalid("needs 'toolId' or an inline 'toolName' and 'code'")
                })?;
                let code = node
                    .value("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                PythonSource::Inline(Arc::new(definition(
                    node,
                    ("toolName", name),
                    node.text("toolDescription").unwrap_or_default(),
                    "schema",
                    code,
                    requirements(node, "requirements")?,
                )?))
            }
        };
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Python(PythonTool {
                source,
                timeout: timeout(node)?,
                return_direct: node.boolean("returnDirect")?,
            }),
        }))
    }
}

/// A stored tool's id.
pub(super) fn stored_id(node: &Build<'_>, input: &str, text: &str) -> Result<Uuid, FlowError> {
    Uuid::parse_str(text)
        .map_err(|_| node.invalid(format_args!("input '{input}' must be a tool id (a UUID)")))
}

fn timeout(node: &Build<'_>) -> Result<Option<f64>, FlowError> {
    match node.number("timeout")? {
        Some(t) if !(t > 0.0 && t <= 3600.0) => {
            Err(node.invalid("input 'timeout' must be seconds between 0 and 3600"))
        }
        t => Ok(t),
    }
}

/// An inline definition, checked like a stored one.
pub(super) fn definition(
    node: &Build<'_>,
    (name_input, name): (&str, &str),
    description: &str,
    schema_input: &str,
    code: &str,
    requirements: Vec<String>,
) -> Result<PythonDefinition, FlowError> {
    validate_tool_name(name)
        .map_err(|e| node.invalid(format_args!("input '{name_input}': {e}")))?;
    if code.trim().is_empty() {
        return Err(node.invalid("needs its function's code"));
    }
    let schema = parse_schema(node.value(schema_input).unwrap_or(&Value::Null))
        .map_err(|e| node.invalid(format_args!("input '{schema_input}': {e}")))?;
    Ok(PythonDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        schema,
        code: code.to_owned(),
        requirements,
        javascript: false,
    })
}

/// Requirements as a list, or as text with one per line or comma.
fn requirements(node: &Build<'_>, input: &str) -> Result<Vec<String>, FlowError> {
    let items: Vec<String> = match node.value(input) {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.trim().to_owned()),
                _ => Err(node.invalid(format_args!("input '{input}' must list strings"))),
            })
            .collect::<Result<_, _>>()?,
        Some(Value::String(text)) => text
            .split(['\n', ','])
            .map(|s| s.trim().to_owned())
            .collect(),
        Some(_) => return Err(node.invalid(format_args!("input '{input}' must list strings"))),
    };
    let items: Vec<String> = items.into_iter().filter(|s| !s.is_empty()).collect();
    for item in &items {
        validate_requirement(item)
            .map_err(|e| node.invalid(format_args!("input '{input}': {e}")))?;
    }
    Ok(items)
}
