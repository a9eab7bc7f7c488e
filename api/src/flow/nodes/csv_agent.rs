//! `csvAgent`: answers questions about the CSV in its `csvFile` (Flowise's CSV
//! agent). The node only reads its inputs; `chatflow::csv_agent` does the work.

use crate::flow::FlowError;
use crate::flow::component::{Component, CsvAgentSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, input, required, sensitive,
};
use crate::retrieval::load::{decode_file_input, is_flowise_storage};

pub struct CsvAgent;

static SPEC: NodeSpec = NodeSpec {
    name: "csvAgent",
    category: Category::Agent,
    inputs: &[
        required("csvFile", K::Text),
        required("model", K::Anchor(Category::ChatModel)),
        input("systemMessagePrompt", K::Text),
        input("inputModeration", K::Anchors(Category::Moderation)),
        // Python code (a pandas call): not a caller's to change.
        sensitive("customReadCSV", K::Text),
    ],
};

impl Node for CsvAgent {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let file = node.text("csvFile").unwrap_or_default();
        if is_flowise_storage(file) {
            return Err(node.invalid(
                "names its CSV in a Flowise server's storage (FILE-STORAGE::…); put the file \
                 itself in 'csvFile' (a data URL, as Flowise exports uploaded files)",
            ));
        }
        let files = decode_file_input(file)
            .map_err(|why| node.invalid(format_args!("input 'csvFile' {why}")))?;
        if files.is_empty() {
            return Err(node.invalid("needs a CSV file in 'csvFile'"));
        }
        let mut csv = Vec::new();
        for f in &files {
            csv.extend_from_slice(&f.bytes);
        }
        let read_csv = node
            .text("customReadCSV")
            .unwrap_or("read_csv(csv_data)")
            .trim()
            .to_owned();
        Ok(Component::CsvAgent(CsvAgentSpec {
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            csv: csv.into(),
            system_message: node
                .text("systemMessagePrompt")
                .unwrap_or_default()
                .to_owned(),
            read_csv,
        }))
    }
}
