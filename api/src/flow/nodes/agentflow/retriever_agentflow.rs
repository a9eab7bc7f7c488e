//! `retrieverAgentflow`: document stores (in weir, chatflows holding a vector
//! store) searched with a query.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{RetrieverStep, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct RetrieverAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "retrieverAgentflow",
    category: Category::Step,
    inputs: &[
        required("retrieverKnowledgeDocumentStores", InputKind::Json),
        input("retrieverQuery", InputKind::Text),
        input("outputFormat", InputKind::Text),
        input("retrieverUpdateState", InputKind::Json),
    ],
};

impl Node for RetrieverAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let mut stores = Vec::new();
        for row in read.rows("retrieverKnowledgeDocumentStores")? {
            stores.push(read.document_store(&row)?.0);
        }
        if stores.is_empty() {
            return Err(read.invalid("names no document store to search"));
        }
        step(StepKind::Retriever(RetrieverStep {
            stores,
            query: read.text("retrieverQuery"),
            with_metadata: read.text("outputFormat") == "textWithMetadata",
            update_state: read.update_state("retriever")?,
        }))
    }
}
