//! `customMCP` ("Custom MCP"): the tools of an MCP server, for any agent that
//! takes tools. Its `mcpServerConfig` is `{"url", "headers"}` (Streamable HTTP;
//! `{{$vars.<name>}}` filled from the workspace's variables when a run starts);
//! `mcpActions` picks tools by name (all when none is picked). The tools are
//! listed when a run starts ([`crate::flow::tools::mcp`]).
//!
//! A stdio server (`{"command", "args", "env"}`) is a 400 for now: weir will run
//! those only inside the Python runtime's sandbox, never in its own process.

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, McpTools, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, sensitive};
use crate::flow::tools::mcp::{ServerConfig, read_config};

pub struct CustomMcp;

static SPEC: NodeSpec = NodeSpec {
    name: "customMCP",
    category: Category::Tool,
    inputs: &[
        // Where its calls go, with which credentials: never from a request.
        sensitive("mcpServerConfig", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for CustomMcp {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let config = node
            .text("mcpServerConfig")
            .ok_or_else(|| node.invalid("needs its 'mcpServerConfig' ({\"url\": …})"))?;
        // Checked as written; variables are filled when a run starts.
        match read_config(config, &serde_json::Map::new()) {
            Ok(ServerConfig::Remote(_)) => {}
            Ok(ServerConfig::Stdio { command }) => {
                return Err(node.invalid(format_args!(
                    "runs a stdio MCP server ('{command}'); weir reaches MCP servers by \
                     their URL (Streamable HTTP) so far: give {{\"url\": …}}"
                )));
            }
            Err(why) => return Err(node.invalid(format_args!("input 'mcpServerConfig': {why}"))),
        }
        let actions = match node.json("mcpActions")? {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_owned).ok_or_else(|| {
                        node.invalid("input 'mcpActions' must be a list of tool names")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(node.invalid("input 'mcpActions' must be a list of tool names"));
            }
        };
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Mcp(McpTools {
                config: config.to_owned(),
                actions,
            }),
        }))
    }
}
