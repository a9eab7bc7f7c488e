//! `characterTextSplitter`: splits on one separator (default a blank line) and merges pieces up to `chunkSize`.

use super::documents;
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};
use crate::retrieval::split::SplitterKind;

pub struct CharacterTextSplitter;

static SPEC: NodeSpec = NodeSpec {
    name: "characterTextSplitter",
    category: Category::TextSplitter,
    inputs: &[
        input("chunkSize", K::Integer),
        input("chunkOverlap", K::Integer),
        input("separator", K::Text),
    ],
};

impl Node for CharacterTextSplitter {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        // The separator as written: a space or a line break is a separator too.
        let separator = node
            .value("separator")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("\n\n")
            .to_owned();
        documents::splitter(node, SplitterKind::Character { separator })
    }
}
