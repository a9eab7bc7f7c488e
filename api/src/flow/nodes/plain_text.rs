//! `plainText`: the node's own text as one document.

use super::K;
use super::documents::{self, LOADER_COMMON};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::required;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct PlainText;

const INPUTS: [InputSpec; 4] = concat([required("text", K::Text)], LOADER_COMMON);

static SPEC: NodeSpec = NodeSpec {
    name: "plainText",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for PlainText {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        // The text as written: leading and trailing lines count for `loc.lines`.
        let text = node
            .value("text")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        documents::loader(node, LoaderKind::PlainText { text }).map(Component::Loader)
    }
}
