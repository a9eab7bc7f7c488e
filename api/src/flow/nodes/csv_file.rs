//! `csvFile`: one document per CSV row (`column: value` lines), or only `columnName`'s value.

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct CsvFile;

const INPUTS: [InputSpec; 5] = concat(
    [input("csvFile", K::Text), input("columnName", K::Text)],
    LOADER_COMMON,
);

static SPEC: NodeSpec = NodeSpec {
    name: "csvFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for CsvFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::file_loader(
            node,
            "csvFile",
            LoaderKind::Csv {
                column: node.text("columnName").map(str::to_owned),
            },
        )
    }
}
