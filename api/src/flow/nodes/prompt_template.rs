//! `promptTemplate`: one user message from a template and its `promptValues`.

use crate::flow::FlowError;
use crate::flow::component::{Component, PromptSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct PromptTemplate;

static SPEC: NodeSpec = NodeSpec {
    name: "promptTemplate",
    category: Category::Prompt,
    inputs: &[
        required("template", K::Text),
        input("promptValues", K::Json),
    ],
};

impl Node for PromptTemplate {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Prompt(PromptSpec::Text {
            template: node.text("template").unwrap_or_default().to_owned(),
            values: node.json_object("promptValues")?,
        }))
    }
}
