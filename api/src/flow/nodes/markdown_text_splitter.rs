//! `markdownTextSplitter`: the recursive splitter with Markdown's separators (headings, code fences, rules, paragraphs).

use super::documents;
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};
use crate::retrieval::split::SplitterKind;

pub struct MarkdownTextSplitter;

static SPEC: NodeSpec = NodeSpec {
    name: "markdownTextSplitter",
    category: Category::TextSplitter,
    inputs: &[
        input("chunkSize", K::Integer),
        input("chunkOverlap", K::Integer),
    ],
};

impl Node for MarkdownTextSplitter {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::splitter(node, SplitterKind::Markdown)
    }
}
