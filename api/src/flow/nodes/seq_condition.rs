//! `seqCondition`: picks the branch a sequential flow takes from a table of
//! conditions (`conditionUI`); the first row that holds names the branch, else
//! `End`. Branches are the node's outgoing edges (`…-output-<branch>-…`).
//! Flowise's JavaScript condition function cannot run here (a 400 says so).

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, ConditionRow, SeqStep};
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
            rows: condition_rows(node)?,
        }))
    }
}

/// The condition table's rows (`conditionUI`, a list or its JSON text).
pub(super) fn condition_rows(node: &Build<'_>) -> Result<Vec<ConditionRow>, FlowError> {
    // The code tab counts when it is the one chosen, or when the table is empty.
    let code_chosen = node
        .value(&format!("selectedConditionFunctionTab_{}", node.id()))
        .and_then(Value::as_str)
        .is_some_and(|tab| tab.starts_with("conditionFunction"))
        || node.json("conditionUI")?.is_none();
    if node.text("conditionFunction").is_some() && code_chosen {
        return Err(node.invalid(
            "has a JavaScript condition function, which weir cannot run; use the \
             condition table (conditionUI) instead",
        ));
    }
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
