//! `seqCondition`: picks the branch a sequential flow takes — from a table of
//! conditions (`conditionUI`), whose first row that holds names the branch,
//! else `End`; or, with the code tab chosen, from the name its JavaScript
//! `conditionFunction` returns (run in the Python runtime's sandbox). Branches
//! are the node's outgoing edges (`…-output-<branch>-…`).

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, ConditionRow, Routing, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct SeqCondition;

/// The operations a row may use.
pub const OPERATIONS: &[&str] = &[
    "Contains",
    "Not Contains",
    "Start With",
    "End With",
    "Is",
    "Is Not",
    "Is Empty",
    "Not Empty",
    "Is Not Empty",
    "Greater Than",
    "Less Than",
    "Equal To",
    "Not Equal To",
    "Greater Than or Equal To",
    "Less Than or Equal To",
];

static SPEC: NodeSpec = NodeSpec {
    name: "seqCondition",
    category: Category::Sequential,
    inputs: &[
        input("conditionName", K::Text),
        input("sequentialNode", K::Anchors(Category::Sequential)),
        input("conditionUI", K::Json),
        input("conditionFunction", K::Text),
        input("selectedConditionFunctionTab", K::Ignored),
    ],
};

impl Node for SeqCondition {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Sequential(SeqStep::Condition {
            name: node.text("conditionName").unwrap_or("Condition").to_owned(),
            routing: routing(node)?,
        }))
    }
}

/// The condition's way of routing: its JavaScript function when that tab is
/// the one chosen (or the table is empty), else the table's rows
/// (`conditionUI`, a list or its JSON text).
pub(super) fn routing(node: &Build<'_>) -> Result<Routing, FlowError> {
    let code_chosen = node
        .value(&format!("selectedConditionFunctionTab_{}", node.id()))
        .and_then(Value::as_str)
        .is_some_and(|tab| tab.starts_with("conditionFunction"))
        || node.json("conditionUI")?.is_none();
    if let Some(code) = node.text("conditionFunction")
        && code_chosen
    {
        super::javascript::refuse_node_modules(node, "conditionFunction", code)?;
        return Ok(Routing::Code(code.to_owned()));
    }
    condition_rows(node).map(Routing::Rows)
}

fn condition_rows(node: &Build<'_>) -> Result<Vec<ConditionRow>, FlowError> {
    match node.json("conditionUI")? {
        None => Ok(Vec::new()),
        Some(Value::Array(rows)) => rows
            .iter()
            .enumerate()
            .map(|(i, row)| condition_row(node, i, row))
            .collect(),
        Some(_) => Err(node.invalid("input 'conditionUI' must be a list of conditions")),
    }
}

fn condition_row(node: &Build<'_>, index: usize, row: &Value) -> Result<ConditionRow, FlowError> {
    let field = |name: &str| super::seq_agent::row_text(row, &[name]);
    let operation = field("operation");
    if !OPERATIONS
        .iter()
        .any(|o| o.eq_ignore_ascii_case(&operation))
    {
        return Err(node.invalid(format_args!(
            "condition {} has operation '{operation}'; known: {}",
            index + 1,
            OPERATIONS.join(", ")
        )));
    }
    let variable = field("variable");
    let known = matches!(variable.as_str(), "" | "$flow.output" | "$flow.input")
        || variable.starts_with("$flow.output.")
        || variable.starts_with("$flow.state.");
    if !known {
        return Err(node.invalid(format_args!(
            "condition {} compares '{variable}'; weir knows $flow.output.content (or another \
             key of the output), $flow.input and $flow.state.<key>",
            index + 1
        )));
    }
    let output = field("output");
    if output.is_empty() {
        return Err(node.invalid(format_args!("condition {} names no output", index + 1)));
    }
    Ok(ConditionRow {
        variable,
        operation,
        value: field("value"),
        output,
    })
}
