//! `chatPromptTemplate`: a system and a human message, with `promptValues`.

use crate::flow::FlowError;
use crate::flow::component::{Component, PromptSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct ChatPromptTemplate;

static SPEC: NodeSpec = NodeSpec {
    name: "chatPromptTemplate",
    category: Category::Prompt,
    inputs: &[
        input("systemMessagePrompt", K::Text),
        required("humanMessagePrompt", K::Text),
        input("promptValues", K::Json),
        input("messageHistory", K::Ignored),
    ],
};

impl Node for ChatPromptTemplate {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Prompt(PromptSpec::Chat {
            system: node
                .text("systemMessagePrompt")
                .unwrap_or_default()
                .to_owned(),
            human: node
                .text("humanMessagePrompt")
                .unwrap_or("{input}")
                .to_owned(),
            values: node.json_object("promptValues")?,
        }))
    }
}
