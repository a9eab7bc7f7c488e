//! `docxFile`: a Word document's text, one document per file.

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct DocxFile;

const INPUTS: [InputSpec; 4] = concat([input("docxFile", K::Text)], LOADER_COMMON);

static SPEC: NodeSpec = NodeSpec {
    name: "docxFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for DocxFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::file_loader(node, "docxFile", LoaderKind::Docx)
    }
}
