//! `requestsDelete`: lets an agent DELETE a URL (public addresses only, see
//! `tools::web`), its path and query parameters from Flowise 3's schema.

use super::requests_post::RequestInputs;
use crate::flow::FlowError;
use crate::flow::component::{Component, HttpMethod, ToolKind, ToolSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};

pub struct RequestsDelete;

const DESCRIPTION: &str =
    "Use this when you need to execute a DELETE request to remove data from a website.";

static SPEC: NodeSpec = NodeSpec {
    name: "requestsDelete",
    category: Category::Tool,
    inputs: &[
        endpoint_url("requestsDeleteUrl"),
        input("requestsDeleteName", K::Text),
        input("requestsDeleteDescription", K::Text),
        sensitive("requestsDeleteHeaders", K::Json),
        input("requestsDeleteQueryParamsSchema", K::Json),
        input("requestsDeleteMaxOutputLength", K::Integer),
    ],
};

impl Node for RequestsDelete {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let tool = super::requests_post::request_tool(
            node,
            HttpMethod::Delete,
            &RequestInputs {
                url: &["requestsDeleteUrl"],
                name: ("requestsDeleteName", "requests_delete"),
                description: (&["requestsDeleteDescription"], DESCRIPTION),
                headers: &["requestsDeleteHeaders"],
                max_output: "requestsDeleteMaxOutputLength",
                schema: "requestsDeleteQueryParamsSchema",
            },
        )?;
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Request(tool),
        }))
    }
}
