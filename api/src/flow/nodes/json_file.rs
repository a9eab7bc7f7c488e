//! `jsonFile`: one document per string value of a JSON file, or only those under `pointersName` (comma-separated keys).

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct JsonFile;

const INPUTS: [InputSpec; 6] = concat(
    [
        input("jsonFile", K::Text),
        input("pointersName", K::Text),
        input("separateByObject", K::Ignored),
    ],
    LOADER_COMMON,
);

static SPEC: NodeSpec = NodeSpec {
    name: "jsonFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for JsonFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::file_loader(
            node,
            "jsonFile",
            LoaderKind::Json {
                pointers: node
                    .text("pointersName")
                    .map(|p| {
                        p.split(',')
                            .map(|k| k.trim().to_owned())
                            .filter(|k| !k.is_empty())
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        )
    }
}
