//! The output parser nodes an `llmChain` takes (`outputParser`):
//! `csvOutputParser` (a list of values), `structuredOutputParser` (an object
//! of the `jsonStructure` rows' keys) and `advancedStructuredOutputParser` (a
//! value of the Zod schema in `exampleJson`). Each has `autofixParser`: one
//! more call to the model when the answer does not parse.

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};
use crate::flow::output_parser::{OutputParserSpec, ParserKind, schema_from_rows, zod};

pub struct CsvOutputParser;
pub struct StructuredOutputParser;
pub struct AdvancedStructuredOutputParser;

static CSV: NodeSpec = NodeSpec {
    name: "csvOutputParser",
    category: Category::OutputParser,
    inputs: &[input("autofixParser", K::Boolean)],
};

static STRUCTURED: NodeSpec = NodeSpec {
    name: "structuredOutputParser",
    category: Category::OutputParser,
    inputs: &[
        input("autofixParser", K::Boolean),
        input("jsonStructure", K::Json),
    ],
};

static ADVANCED: NodeSpec = NodeSpec {
    name: "advancedStructuredOutputParser",
    category: Category::OutputParser,
    inputs: &[
        input("autofixParser", K::Boolean),
        input("exampleJson", K::Text),
    ],
};

/// Flowise's default `jsonStructure` rows.
fn default_rows() -> Value {
    serde_json::json!([
        {"property": "answer", "type": "string", "description": "answer to the user's question"},
        {"property": "source", "type": "string",
         "description": "sources used to answer the question, should be websites"},
    ])
}

fn parser(
    node: &Build<'_>,
    spec: &'static NodeSpec,
    kind: ParserKind,
) -> Result<Component, FlowError> {
    Ok(Component::OutputParser(OutputParserSpec {
        node_id: node.id().to_owned(),
        node_type: spec.name,
        kind,
        autofix: node.boolean("autofixParser")?,
    }))
}

impl Node for CsvOutputParser {
    fn spec(&self) -> &'static NodeSpec {
        &CSV
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        parser(node, &CSV, ParserKind::CommaList)
    }
}

impl Node for StructuredOutputParser {
    fn spec(&self) -> &'static NodeSpec {
        &STRUCTURED
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let rows = node.json("jsonStructure")?.unwrap_or_else(default_rows);
        let schema = schema_from_rows(&rows)
            .map_err(|why| node.invalid(format_args!("input 'jsonStructure' {why}")))?;
        parser(node, &STRUCTURED, ParserKind::Json(schema))
    }
}

impl Node for AdvancedStructuredOutputParser {
    fn spec(&self) -> &'static NodeSpec {
        &ADVANCED
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let Some(text) = node.text("exampleJson") else {
            return Err(node.invalid("needs a Zod schema in 'exampleJson'"));
        };
        let schema = zod::to_json_schema(text).map_err(|why| {
            node.invalid(format_args!(
                "input 'exampleJson' is not a Zod schema weir reads: {why}"
            ))
        })?;
        parser(node, &ADVANCED, ParserKind::Json(schema))
    }
}
