//! `requestsPost`: lets an agent POST JSON to a URL (public addresses only, see
//! `tools::web`), and what both request tools read from their node.

use serde_json::{Map, Value};

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
        input("requestsPostBodySchema", K::Json),
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
            &RequestInputs {
                url: &["url", "requestsPostUrl"],
                name: ("requestsPostName", "requests_post"),
                description: (&["description", "requestsPostDescription"], DESCRIPTION),
                headers: &["headers", "requestsPostHeaders"],
                max_output: "requestsPostMaxOutputLength",
                schema: "requestsPostBodySchema",
            },
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

/// Where a request node keeps each setting (some under an old and a new name).
pub(super) struct RequestInputs<'a> {
    pub url: &'a [&'a str],
    /// The input naming the tool, and the name without it.
    pub name: (&'a str, &'a str),
    /// The inputs describing the tool, and the description without them.
    pub description: (&'a [&'a str], &'a str),
    pub headers: &'a [&'a str],
    pub max_output: &'a str,
    /// Flowise 3's schema of the parameters the model fills in.
    pub schema: &'a str,
}

/// A request tool from its node's inputs.
pub(super) fn request_tool(
    node: &Build<'_>,
    method: HttpMethod,
    inputs: &RequestInputs<'_>,
) -> Result<RequestTool, FlowError> {
    let (name_input, default_name) = inputs.name;
    let (description, default_description) = inputs.description;
    let name = node.text(name_input).unwrap_or(default_name).to_owned();
    crate::domain::tool::validate_tool_name(&name)
        .map_err(|e| node.invalid(format_args!("input '{name_input}': {e}")))?;
    let mut header_map = Map::new();
    for input in inputs.headers {
        header_map.extend(node.json_object(input)?);
    }
    Ok(RequestTool {
        method,
        name,
        description: node
            .text_of(description)
            .unwrap_or(default_description)
            .to_owned(),
        url: node.text_of(inputs.url).map(str::to_owned),
        headers: header_map,
        body: None,
        schema: param_schema(node, inputs.schema)?,
        max_output: node
            .integer(inputs.max_output)?
            .map_or(DEFAULT_MAX_OUTPUT, |n| n as usize),
    })
}

/// Flowise 3's parameter schema of a request tool (`{name: {type, required,
/// in, description}}`), when the node has one: an object of objects.
fn param_schema(node: &Build<'_>, input: &str) -> Result<Option<Map<String, Value>>, FlowError> {
    let schema = node.json_object(input)?;
    if schema.values().any(|config| !config.is_object()) {
        return Err(node.invalid(format_args!(
            "input '{input}' must map each parameter to {{type, required, description}}"
        )));
    }
    Ok((!schema.is_empty()).then_some(schema))
}
