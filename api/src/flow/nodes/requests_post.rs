//! `requestsPost`: lets an agent POST JSON to a URL (public addresses only, see
//! `tools::web`), and what both request tools read from their node.

use serde_json::Map;

use crate::flow::FlowError;
use crate::flow::component::{Component, HttpMethod, RequestTool, ToolKind, ToolSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};

pub struct RequestsPost;

const DESCRIPTION: &str = "Use this when you want to POST to a website. Input should be a json string with two keys: \"url\" and \"data\". The value of \"url\" should be a string, and the value of \"data\" should be a dictionary of key-value pairs you want to POST to the url as a JSON body. The output will be the text response of the POST request.";

/// Answers longer than this are cut (characters), unless the node says otherwise.
const DEFAULT_MAX_OUTPUT: usize = 2000;

static SPEC: NodeSpec = NodeSpec {
    name: "requestsPost",
    category: Category::Tool,
    inputs: &[
        endpoint_url("url"),
        sensitive("body", K::Json),
        input("description", K::Text),
        sensitive("headers", K::Json),
        endpoint_url("requestsPostUrl"),
        input("requestsPostName", K::Text),
        input("requestsPostDescription", K::Text),
        sensitive("requestsPostHeaders", K::Json),
        sensitive("requestsPostBody", K::Json),
        input("requestsPostBodySchema", K::Ignored),
        input("requestsPostMaxOutputLength", K::Integer),
    ],
};

impl Node for RequestsPost {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let mut tool = request_tool(
            node,
            HttpMethod::Post,
            ["url", "requestsPostUrl"],
            ("requestsPostName", "requests_post"),
            (["description", "requestsPostDescription"], DESCRIPTION),
            ["headers", "requestsPostHeaders"],
            "requestsPostMaxOutputLength",
        )?;
        tool.body = match node.json("requestsPostBody")? {
            Some(body) => Some(body),
            None => node.json("body")?,
        };
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Request(tool),
        }))
    }
}

/// A request tool from its node's inputs (each under its old and new name).
pub(super) fn request_tool(
    node: &Build<'_>,
    method: HttpMethod,
    url: [&str; 2],
    (name_input, default_name): (&str, &str),
    (description, default_description): ([&str; 2], &str),
    headers: [&str; 2],
    max_output: &str,
) -> Result<RequestTool, FlowError> {
    let name = node.text(name_input).unwrap_or(default_name).to_owned();
    crate::domain::tool::validate_tool_name(&name)
        .map_err(|e| node.invalid(format_args!("input '{name_input}': {e}")))?;
    let mut header_map = Map::new();
    for input in headers {
        header_map.extend(node.json_object(input)?);
    }
    Ok(RequestTool {
        method,
        name,
        description: node
            .text_of(&description)
            .unwrap_or(default_description)
            .to_owned(),
        url: node.text_of(&url).map(str::to_owned),
        headers: header_map,
        body: None,
        max_output: node
            .integer(max_output)?
            .map_or(DEFAULT_MAX_OUTPUT, |n| n as usize),
    })
}
