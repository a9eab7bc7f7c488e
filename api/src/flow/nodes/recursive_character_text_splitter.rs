//! `recursiveCharacterTextSplitter`: splits on the first of its separators (paragraphs, lines, words, characters by default) that makes chunks fit `chunkSize`, with `chunkOverlap`; `separators` is a JSON list.

use super::documents;
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};
use crate::retrieval::split::SplitterKind;

pub struct RecursiveCharacterTextSplitter;

static SPEC: NodeSpec = NodeSpec {
    name: "recursiveCharacterTextSplitter",
    category: Category::TextSplitter,
    inputs: &[
        input("chunkSize", K::Integer),
        input("chunkOverlap", K::Integer),
        input("separators", K::Json),
    ],
};

impl Node for RecursiveCharacterTextSplitter {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let separators = match node.json("separators")? {
            None => None,
            Some(serde_json::Value::Array(items)) if items.is_empty() => None,
            Some(serde_json::Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|s| s.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| node.invalid("input 'separators' must be a list of texts"))?,
            ),
            Some(_) => return Err(node.invalid("input 'separators' must be a list of texts")),
        };
        documents::splitter(node, SplitterKind::RecursiveCharacter { separators })
    }
}
