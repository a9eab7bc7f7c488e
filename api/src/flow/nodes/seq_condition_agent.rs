//! `seqConditionAgent`: a model decides which branch a sequential flow takes.
//! Asked with its system prompt, the conversation and its human prompt (and,
//! with `conditionAgentStructuredOutput`, made to answer with those keys), its
//! answer is `$flow.output` for the condition table, whose first row that
//! holds names the branch, else `End` — or for the code tab's JavaScript
//! (run in the Python runtime's sandbox), which returns the branch's name.

use serde_json::{Map, Value};

use crate::flow::FlowError;
use crate::flow::component::output_fields;
use crate::flow::component::{Component, SeqConditionAgent, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct SeqConditionAgentNode;

static SPEC: NodeSpec = NodeSpec {
    name: "seqConditionAgent",
    category: Category::Sequential,
    inputs: &[
        input("conditionAgentName", K::Text),
        input("sequentialNode", K::Anchors(Category::Sequential)),
        input("model", K::Anchor(Category::ChatModel)),
        input("systemMessagePrompt", K::Text),
        input("humanMessagePrompt", K::Text),
        input("promptValues", K::Json),
        input("conversationHistorySelection", K::Ignored),
        input("conditionAgentStructuredOutput", K::Json),
        input("conditionUI", K::Json),
        input("conditionFunction", K::Text),
        input("selectedConditionFunctionTab", K::Ignored),
    ],
};

impl Node for SeqConditionAgentNode {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let rows: Vec<Map<String, Value>> = match node.json("conditionAgentStructuredOutput")? {
            Some(Value::Array(items)) => items
                .into_iter()
                .filter_map(|item| match item {
                    Value::Object(row) => Some(row),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Component::Sequential(SeqStep::ConditionAgent(
            SeqConditionAgent {
                step: super::seq_agent::step(node, "conditionAgentName", "Condition Agent")?,
                structured: output_fields(&rows, |why| node.invalid(why))?,
                routing: super::seq_condition::routing(node)?,
            },
        )))
    }
}
