//! `inputModerationSimple`: a deny list checked against the question before the
//! flow runs. A question holding an entry (any case) is answered with the
//! node's error message and reaches no model. With a chat model connected, the
//! model is asked instead whether the question is like each entry.

use crate::flow::FlowError;
use crate::flow::component::{Component, ModerationSpec};
use crate::flow::node::{Build, Category, InputKind as K, InputSpec, Node, NodeSpec, input};

pub struct InputModerationSimple;

/// Flowise's default answer to a denied question.
pub const DEFAULT_MESSAGE: &str = "Cannot Process! Input violates content moderation policies.";

const INPUTS: [InputSpec; 3] = [
    input("denyList", K::Text),
    input("model", K::Anchor(Category::ChatModel)),
    input("moderationErrorMessage", K::Text),
];

static SPEC: NodeSpec = NodeSpec {
    name: "inputModerationSimple",
    category: Category::Moderation,
    inputs: &INPUTS,
};

impl Node for InputModerationSimple {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let deny = node
            .text("denyList")
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Component::Moderation(ModerationSpec {
            node_id: node.id().to_owned(),
            deny,
            message: node
                .text("moderationErrorMessage")
                .unwrap_or(DEFAULT_MESSAGE)
                .to_owned(),
            model: node.model("model")?,
        }))
    }
}
