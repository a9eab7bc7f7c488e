//! `requestsPut`: lets an agent PUT JSON to a URL (public addresses only, see
//! `tools::web`), with a fixed body and Flowise 3's body schema.

use super::requests_post::RequestInputs;
use crate::flow::FlowError;
use crate::flow::component::{Component, HttpMethod, ToolKind, ToolSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};

pub struct RequestsPut;

const DESCRIPTION: &str =
    "Use this when you want to execute a PUT request to update or replace a resource.";

static SPEC: NodeSpec = NodeSpec {
    name: "requestsPut",
    category: Category::Tool,
    inputs: &[
        endpoint_url("requestsPutUrl"),
        input("requestsPutName", K::Text),
        input("requestsPutDescription", K::Text),
        sensitive("requestsPutHeaders", K::Json),
        sensitive("requestsPutBody", K::Json),
        input("requestsPutBodySchema", K::Json),
        input("requestsPutMaxOutputLength", K::Integer),
    ],
};

impl Node for RequestsPut {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let mut tool = super::requests_post::request_tool(
            node,
            HttpMethod::Put,
            &RequestInputs {
                url: &["requestsPutUrl"],
                name: ("requestsPutName", "requests_put"),
                description: (&["requestsPutDescription"], DESCRIPTION),
                headers: &["requestsPutHeaders"],
                max_output: "requestsPutMaxOutputLength",
                schema: "requestsPutBodySchema",
            },
        )?;
        tool.body = node.json("requestsPutBody")?;
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Request(tool),
        }))
    }
}
