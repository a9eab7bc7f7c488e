//! `jsonlinesFile`: one document per line of a JSON Lines file: the value at `pointerName`.

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct JsonlinesFile;

const INPUTS: [InputSpec; 5] = concat(
    [
        input("jsonlinesFile", K::Text),
        input("pointerName", K::Text),
    ],
    LOADER_COMMON,
);

static SPEC: NodeSpec = NodeSpec {
    name: "jsonlinesFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for JsonlinesFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::file_loader(
            node,
            "jsonlinesFile",
            LoaderKind::JsonLines {
                pointer: node.text("pointerName").map(str::to_owned),
            },
        )
    }
}
