//! `textFile`: a text file (or several), one document each.

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct TextFile;

const INPUTS: [InputSpec; 4] = concat([input("txtFile", K::Text)], LOADER_COMMON);

static SPEC: NodeSpec = NodeSpec {
    name: "textFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for TextFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::file_loader(node, "txtFile", LoaderKind::Text)
    }
}
