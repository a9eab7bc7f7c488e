//! `openAPIToolkit`: an OpenAPI 3 description (JSON or YAML, uploaded as the
//! node's file) whose operations become tools, one each (see
//! [`crate::flow::tools::openapi`]). Flowise 2.0's `yamlFile` and 2.1's
//! `openApiFile` are read; a description only linked (`openApiLink`) is a 400:
//! weir reads no URL when a flow is built.

use serde_json::Value;

use super::K;
use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec, input, sensitive};
use crate::flow::tools::openapi::{Toolkit, operations};
use crate::retrieval::load::{decode_file_input, is_flowise_storage};

pub struct OpenApiToolkit;

static SPEC: NodeSpec = NodeSpec {
    name: "openAPIToolkit",
    category: Category::Tool,
    inputs: &[
        // Where its calls go, and what they run: never from a request.
        sensitive("yamlFile", K::Text),
        input("inputType", K::Text),
        sensitive("openApiFile", K::Text),
        sensitive("openApiLink", K::Text),
        sensitive("selectedServer", K::Text),
        input("selectedEndpoints", K::Json),
        input("returnDirect", K::Boolean),
        sensitive("headers", K::Json),
        input("removeNulls", K::Boolean),
        sensitive("customCode", K::Text),
    ],
};

/// Flowise's default `customCode`: `fetch($url, $options)` and the answer's JSON,
/// which weir does itself, through the request tools' guard.
const DEFAULT_CODE: &str = "const fetch = require('node-fetch');\nconst url = $url;\nconst \
    options = $options;\n\ntry {\n\tconst response = await fetch(url, options);\n\tconst resp = \
    await response.json();\n\treturn JSON.stringify(resp);\n} catch (error) {\n\t\
    console.error(error);\n\treturn '';\n}";

impl Node for OpenApiToolkit {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        if node.text("inputType") == Some("link")
            || node.text("openApiFile").is_none()
                && node.text("yamlFile").is_none()
                && node.text("openApiLink").is_some()
        {
            return Err(node.invalid(
                "reads its OpenAPI description from a link (openApiLink); weir reads it from \
                 the node's file (openApiFile): upload the description",
            ));
        }
        let text = description(node)?;
        let text = text.as_str();
        let endpoints: Vec<String> = match node.json("selectedEndpoints")? {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(one)) if !one.is_empty() => vec![one],
            _ => Vec::new(),
        };
        let custom_code = node
            .text("customCode")
            .filter(|code| squeezed(code) != squeezed(DEFAULT_CODE))
            .map(without_node_fetch);
        let kit = Toolkit {
            server: node.text("selectedServer").filter(|s| *s != "error"),
            endpoints: &endpoints,
            headers: node.json_object("headers")?,
            remove_nulls: node.boolean("removeNulls")?,
            return_direct: node.boolean("returnDirect")?,
            custom_code,
        };
        let tools = operations(text, kit).map_err(|e| node.invalid(e))?;
        Ok(Component::Toolkit(
            tools
                .into_iter()
                .map(|operation| ToolSpec {
                    node_id: node.id().to_owned(),
                    kind: ToolKind::OpenApi(Box::new(operation)),
                })
                .collect(),
        ))
    }
}

/// The node's OpenAPI description: the text of its uploaded file (`openApiFile`,
/// or Flowise 2.0's `yamlFile`).
pub fn description(node: &Build<'_>) -> Result<String, FlowError> {
    let written = node
        .text("openApiFile")
        .or_else(|| node.text("yamlFile"))
        .ok_or_else(|| node.invalid("needs its OpenAPI description (openApiFile)"))?;
    if is_flowise_storage(written) {
        return Err(node.invalid(
            "names a file kept in a Flowise server's storage; upload the description \
             itself (a data URL)",
        ));
    }
    let files = decode_file_input(written).map_err(|e| node.invalid(e))?;
    let [file] = files.as_slice() else {
        return Err(node.invalid("needs exactly one OpenAPI description file"));
    };
    String::from_utf8(file.bytes.to_vec())
        .map_err(|_| node.invalid("has an OpenAPI description that is not UTF-8 text"))
}

/// Code without its whitespace, to tell Flowise's default from code of one's own.
fn squeezed(code: &str) -> String {
    code.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The code without its `require('node-fetch')` lines: the sandbox's own
/// `fetch` serves (as Flowise's E2B sandbox drops them too).
fn without_node_fetch(code: &str) -> String {
    code.lines()
        .filter(|line| {
            !(line.contains("require('node-fetch')") || line.contains("require(\"node-fetch\")"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
