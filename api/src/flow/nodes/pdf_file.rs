//! `pdfFile`: a PDF's text, one document per page (`usage: perPage`, with
//! `metadata.loc.pageNumber`) or per file (`perFile`); `metadata.pdf.totalPages`
//! either way. Parsing runs in a child process (see `retrieval::load::pdf`).

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};
use crate::retrieval::load::LoaderKind;

pub struct PdfFile;

const INPUTS: [InputSpec; 6] = concat(
    [
        input("pdfFile", K::Text),
        input("usage", K::Text),
        input("legacyBuild", K::Ignored),
    ],
    LOADER_COMMON,
);

static SPEC: NodeSpec = NodeSpec {
    name: "pdfFile",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for PdfFile {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let per_page = match node.text("usage").unwrap_or("perPage") {
            "perPage" => true,
            "perFile" => false,
            other => {
                return Err(node.invalid(format_args!(
                    "input 'usage' is '{other}'; it must be perPage or perFile"
                )));
            }
        };
        documents::file_loader(node, "pdfFile", LoaderKind::Pdf { per_page })
    }
}
