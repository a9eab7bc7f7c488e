//! `tokenTextSplitter`: chunks of `chunkSize` tokens of a tiktoken encoding (`encodingName`, default gpt2), overlapping by `chunkOverlap` tokens.

use super::documents;
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};
use crate::retrieval::split::SplitterKind;

pub struct TokenTextSplitter;

static SPEC: NodeSpec = NodeSpec {
    name: "tokenTextSplitter",
    category: Category::TextSplitter,
    inputs: &[
        input("chunkSize", K::Integer),
        input("chunkOverlap", K::Integer),
        input("encodingName", K::Text),
    ],
};

impl Node for TokenTextSplitter {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let encoding = node.text("encodingName").unwrap_or("gpt2").to_owned();
        documents::splitter(node, SplitterKind::Token { encoding })
    }
}
