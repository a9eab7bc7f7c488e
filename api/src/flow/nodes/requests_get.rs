//! `requestsGet`: lets an agent GET a URL (public addresses only, see
//! `tools::web`). Inputs under both of Flowise's names (`url`, `requestsGetUrl`…).

use super::requests_post::RequestInputs;
use crate::flow::FlowError;
use crate::flow::component::{Component, HttpMethod, RequestTool, ToolKind, ToolSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};

pub struct RequestsGet;

const DESCRIPTION: &str = "A portal to the internet. Use this when you need to get specific content from a website. Input should be a url (i.e. https://www.example.com). The output will be the text response of the GET request.";

static SPEC: NodeSpec = NodeSpec {
    name: "requestsGet",
    category: Category::Tool,
    inputs: &[
        endpoint_url("url"),
        input("description", K::Text),
        sensitive("headers", K::Json),
        endpoint_url("requestsGetUrl"),
        input("requestsGetName", K::Text),
        input("requestsGetDescription", K::Text),
        sensitive("requestsGetHeaders", K::Json),
        input("requestsGetQueryParamsSchema", K::Json),
        input("requestsGetMaxOutputLength", K::Integer),
    ],
};

impl Node for RequestsGet {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        super::requests_post::request_tool(
            node,
            HttpMethod::Get,
            &RequestInputs {
                url: &["url", "requestsGetUrl"],
                name: ("requestsGetName", "requests_get"),
                description: (&["description", "requestsGetDescription"], DESCRIPTION),
                headers: &["headers", "requestsGetHeaders"],
                max_output: "requestsGetMaxOutputLength",
                schema: "requestsGetQueryParamsSchema",
            },
        )
        .map(|tool: RequestTool| {
            Component::Tool(ToolSpec {
                node_id: node.id().to_owned(),
                kind: ToolKind::Request(tool),
            })
        })
    }
}
