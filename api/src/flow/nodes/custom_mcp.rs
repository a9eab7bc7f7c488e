//! `customMCP` ("Custom MCP"): the tools of an MCP server, for any agent that
//! takes tools. Its `mcpServerConfig` is `{"url", "headers"}` (Streamable HTTP)
//! or `{"command", "args", "env"}` (stdio: run by the Python runtime in its
//! sandbox, never in weir's process), `{{$vars.<name>}}` filled from the
//! workspace's variables when a run starts; `mcpActions` picks tools by name
//! (all when none is picked). The tools are listed when a run starts
//! ([`crate::flow::tools::mcp`]).
//!
//! Flowise's built-in nodes whose servers are npm packages (`slackMCP`,
//! `braveSearchMCP`, `postgreSQLMCP`, `sequentialThinkingMCP`,
//! `supergatewayMCP`) are stdio servers run with `npx` and their credential's
//! fields in the environment (or, for PostgreSQL, as the server's argument).
//!
//! `customMcpServerTool` is the same with a server the workspace keeps
//! (`/api/v1/custom-mcp-servers`), named by its id; `teradataMCP`, Flowise's
//! built-in node for a Teradata MCP server, is one at its `mcpUrl` with a Bearer
//! or Basic `Authorization` made of its inputs or its credential's fields;
//! `githubMCP` and `browserlessMCP` are the hosted servers of GitHub and
//! Browserless with the credential's token as a Bearer.

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::McpEndpoint;
use crate::flow::component::{Component, McpSource, McpTools, ToolKind, ToolSpec};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};
use crate::flow::tools::mcp::read_config;

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
        if let Err(why) = read_config(config, &serde_json::Map::new()) {
            return Err(node.invalid(format_args!("input 'mcpServerConfig': {why}")));
        }
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Mcp(McpTools {
                source: McpSource::Config(config.to_owned()),
                actions: actions(node)?,
            }),
        }))
    }
}

/// `mcpActions`: the tool names picked (a JSON list, or its text).
fn actions(node: &Build<'_>) -> Result<Vec<String>, FlowError> {
    let bad = || node.invalid("input 'mcpActions' must be a list of tool names");
    match node.json("mcpActions")? {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// `customMcpServerTool` ("Custom MCP Server"): the tools of a server the
/// workspace keeps (`/api/v1/custom-mcp-servers`, authorized), by its id.
pub struct CustomMcpServerTool;

static STORED_SPEC: NodeSpec = NodeSpec {
    name: "customMcpServerTool",
    category: Category::Tool,
    inputs: &[
        sensitive("mcpServerId", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for CustomMcpServerTool {
    fn spec(&self) -> &'static NodeSpec {
        &STORED_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let id = node.text("mcpServerId").ok_or_else(|| {
            node.invalid("needs its 'mcpServerId' (a server of /custom-mcp-servers)")
        })?;
        let id = uuid::Uuid::parse_str(id)
            .map_err(|_| node.invalid("input 'mcpServerId' must be a server's id (a UUID)"))?;
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Mcp(McpTools {
                source: McpSource::Stored(id),
                actions: actions(node)?,
            }),
        }))
    }
}

/// `teradataMCP` ("Teradata MCP"): a Teradata MCP server at `mcpUrl`, with a
/// Bearer token (`bearerToken`, or the credential's `token`) or else Basic
/// authentication (`username`/`password`, or `tdUsername`/`tdPassword`).
pub struct TeradataMcp;

static TERADATA_SPEC: NodeSpec = NodeSpec {
    name: "teradataMCP",
    category: Category::Tool,
    inputs: &[
        endpoint_url("mcpUrl"),
        sensitive("username", K::Text),
        sensitive("password", K::Text),
        sensitive("bearerToken", K::Text),
        // Filled from a teradataBearerToken or teradataTD2Auth credential.
        sensitive("token", K::Text),
        sensitive("tdUsername", K::Text),
        sensitive("tdPassword", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for TeradataMcp {
    fn spec(&self) -> &'static NodeSpec {
        &TERADATA_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        use base64::Engine;
        let url = node
            .text("mcpUrl")
            .ok_or_else(|| node.invalid("needs its 'mcpUrl' (the Teradata MCP server's URL)"))?;
        let authorization = if let Some(token) = node.text_of(&["bearerToken", "token"]) {
            format!("Bearer {token}")
        } else if let (Some(user), Some(password)) = (
            node.text_of(&["username", "tdUsername"]),
            node.text_of(&["password", "tdPassword"]),
        ) {
            let pair =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {pair}")
        } else {
            return Err(node.invalid(
                "needs credentials: a Bearer token, or Basic authentication (username and password)",
            ));
        };
        let config = serde_json::json!({"url": url, "headers": {"Authorization": authorization}});
        match read_config(&config.to_string(), &serde_json::Map::new()) {
            Ok(McpEndpoint::Remote(_)) => {}
            Ok(McpEndpoint::Stdio(_)) | Err(_) => {
                return Err(node.invalid("input 'mcpUrl' must be an http or https URL"));
            }
        }
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Mcp(McpTools {
                source: McpSource::Config(config.to_string()),
                actions: actions(node)?,
            }),
        }))
    }
}

/// A remote built-in node's server, with its token as a Bearer.
fn hosted(node: &Build<'_>, url: &str, token: Option<&str>) -> Result<Component, FlowError> {
    let Some(token) = token else {
        return Err(node.invalid("needs its credential's token"));
    };
    let config =
        serde_json::json!({"url": url, "headers": {"Authorization": format!("Bearer {token}")}});
    Ok(Component::Tool(ToolSpec {
        node_id: node.id().to_owned(),
        kind: ToolKind::Mcp(McpTools {
            source: McpSource::Config(config.to_string()),
            actions: actions(node)?,
        }),
    }))
}

/// `githubMCP` ("Github MCP", Flowise 3.1): GitHub's hosted MCP server with the
/// `githubApi` credential's `accessToken`; a GitHub Enterprise Cloud address
/// (`https://<name>.ghe.com`, `githubEnterpriseUrl`) reaches that tenant's.
pub struct GithubMcp;

static GITHUB_SPEC: NodeSpec = NodeSpec {
    name: "githubMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("accessToken", K::Text),
        endpoint_url("githubEnterpriseUrl"),
        input("mcpActions", K::Json),
    ],
};

impl Node for GithubMcp {
    fn spec(&self) -> &'static NodeSpec {
        &GITHUB_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let url = match node.text("githubEnterpriseUrl") {
            None => "https://api.githubcopilot.com/mcp/".to_owned(),
            Some(address) => {
                let host = reqwest::Url::parse(address)
                    .ok()
                    .filter(|u| u.scheme() == "https")
                    .and_then(|u| u.host_str().map(str::to_owned))
                    .filter(|h| h.ends_with(".ghe.com"))
                    .ok_or_else(|| {
                        node.invalid("input 'githubEnterpriseUrl' must be https://<name>.ghe.com")
                    })?;
                format!("https://copilot-api.{host}/mcp")
            }
        };
        hosted(node, &url, node.text("accessToken"))
    }
}

/// `browserlessMCP` ("Browserless MCP"): Browserless's hosted MCP server with
/// the `browserlessApi` credential's `browserlessApiToken`.
pub struct BrowserlessMcp;

static BROWSERLESS_SPEC: NodeSpec = NodeSpec {
    name: "browserlessMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("browserlessApiToken", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for BrowserlessMcp {
    fn spec(&self) -> &'static NodeSpec {
        &BROWSERLESS_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        hosted(
            node,
            "https://mcp.browserless.io/mcp",
            node.text("browserlessApiToken"),
        )
    }
}

/// A built-in node's npm-package server: `npx -y <package> <args…>` with `env`,
/// run by the Python runtime in its sandbox.
fn npm_server(
    node: &Build<'_>,
    package: &str,
    args: Vec<String>,
    env: serde_json::Map<String, Value>,
) -> Result<Component, FlowError> {
    let mut command_args = vec!["-y".to_owned(), package.to_owned()];
    command_args.extend(args);
    let config = serde_json::json!({"command": "npx", "args": command_args, "env": env});
    Ok(Component::Tool(ToolSpec {
        node_id: node.id().to_owned(),
        kind: ToolKind::Mcp(McpTools {
            source: McpSource::Config(config.to_string()),
            actions: actions(node)?,
        }),
    }))
}

/// The credential fields a built-in node needs, as its server's environment:
/// (field, variable) pairs; a missing one is a 400 naming the credential.
fn credential_env(
    node: &Build<'_>,
    credential: &str,
    fields: &[(&str, &str)],
) -> Result<serde_json::Map<String, Value>, FlowError> {
    let mut env = serde_json::Map::new();
    for (field, variable) in fields {
        let value = node.text(field).ok_or_else(|| {
            node.invalid(format_args!(
                "needs its {credential} credential's '{field}'"
            ))
        })?;
        env.insert((*variable).to_owned(), Value::String(value.to_owned()));
    }
    Ok(env)
}

/// `slackMCP` ("Slack MCP"): `@modelcontextprotocol/server-slack` with the
/// `slackApi` credential's `botToken` and `teamId`.
pub struct SlackMcp;

static SLACK_SPEC: NodeSpec = NodeSpec {
    name: "slackMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("botToken", K::Text),
        sensitive("teamId", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for SlackMcp {
    fn spec(&self) -> &'static NodeSpec {
        &SLACK_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let env = credential_env(
            node,
            "slackApi",
            &[("botToken", "SLACK_BOT_TOKEN"), ("teamId", "SLACK_TEAM_ID")],
        )?;
        npm_server(node, "@modelcontextprotocol/server-slack", Vec::new(), env)
    }
}

/// `braveSearchMCP` ("Brave Search MCP"): `@modelcontextprotocol/server-brave-search`
/// with the `braveSearchApi` credential's `braveApiKey`.
pub struct BraveSearchMcp;

static BRAVE_SPEC: NodeSpec = NodeSpec {
    name: "braveSearchMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("braveApiKey", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for BraveSearchMcp {
    fn spec(&self) -> &'static NodeSpec {
        &BRAVE_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let env = credential_env(node, "braveSearchApi", &[("braveApiKey", "BRAVE_API_KEY")])?;
        npm_server(
            node,
            "@modelcontextprotocol/server-brave-search",
            Vec::new(),
            env,
        )
    }
}

/// `postgreSQLMCP` ("PostgreSQL MCP"): `@modelcontextprotocol/server-postgres`,
/// read-only access to the database of the `PostgresUrl` credential's
/// `postgresUrl` (the server's argument, as Flowise passes it).
pub struct PostgreSqlMcp;

static POSTGRES_SPEC: NodeSpec = NodeSpec {
    name: "postgreSQLMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("postgresUrl", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for PostgreSqlMcp {
    fn spec(&self) -> &'static NodeSpec {
        &POSTGRES_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let url = node
            .text("postgresUrl")
            .ok_or_else(|| node.invalid("needs its PostgresUrl credential's 'postgresUrl'"))?;
        npm_server(
            node,
            "@modelcontextprotocol/server-postgres",
            vec![url.to_owned()],
            serde_json::Map::new(),
        )
    }
}

/// `sequentialThinkingMCP` ("Sequential Thinking MCP"):
/// `@modelcontextprotocol/server-sequential-thinking`, no credential.
pub struct SequentialThinkingMcp;

static SEQUENTIAL_SPEC: NodeSpec = NodeSpec {
    name: "sequentialThinkingMCP",
    category: Category::Tool,
    inputs: &[input("mcpActions", K::Json)],
};

impl Node for SequentialThinkingMcp {
    fn spec(&self) -> &'static NodeSpec {
        &SEQUENTIAL_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        npm_server(
            node,
            "@modelcontextprotocol/server-sequential-thinking",
            Vec::new(),
            serde_json::Map::new(),
        )
    }
}

/// `supergatewayMCP` ("Supergateway MCP"): `@latitude-data/supergateway` with
/// the node's `arguments` (split on whitespace, surrounding quotes removed, as
/// Flowise does): a remote SSE or WebSocket server seen as a stdio one, reached
/// from the sandbox under its network policy.
pub struct SupergatewayMcp;

static SUPERGATEWAY_SPEC: NodeSpec = NodeSpec {
    name: "supergatewayMCP",
    category: Category::Tool,
    inputs: &[
        // Names the address the server reaches: never from a request.
        sensitive("arguments", K::Text),
        input("mcpActions", K::Json),
    ],
};

impl Node for SupergatewayMcp {
    fn spec(&self) -> &'static NodeSpec {
        &SUPERGATEWAY_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let arguments = node
            .text("arguments")
            .ok_or_else(|| node.invalid("needs its 'arguments' (such as --sse <url>)"))?;
        let args = arguments
            .split_whitespace()
            .map(|arg| {
                let quoted = arg.len() >= 2
                    && ((arg.starts_with('"') && arg.ends_with('"'))
                        || (arg.starts_with('\'') && arg.ends_with('\'')));
                if quoted { &arg[1..arg.len() - 1] } else { arg }.to_owned()
            })
            .collect();
        npm_server(
            node,
            "@latitude-data/supergateway",
            args,
            serde_json::Map::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::ProviderSettings;
    use crate::flow::graph::{FlowGraph, FlowNode};
    use crate::flow::overrides::Overrides;

    /// The server config a built-in MCP node builds.
    fn config_of(name: &str, inputs: Value) -> serde_json::Value {
        let node = FlowNode {
            id: format!("{name}_0"),
            name: name.into(),
            label: name.into(),
            inputs: inputs.as_object().cloned().unwrap_or_default(),
            credential: None,
            parent: None,
        };
        let settings = ProviderSettings::default();
        let built = crate::flow::registry::build_node(
            &FlowGraph::default(),
            &node,
            &Overrides::new(&settings),
        );
        match built {
            Ok(Component::Tool(ToolSpec {
                kind:
                    ToolKind::Mcp(McpTools {
                        source: McpSource::Config(config),
                        ..
                    }),
                ..
            })) => serde_json::from_str(&config).unwrap_or_default(),
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn built_in_nodes_reach_their_servers() {
        assert_eq!(
            config_of("githubMCP", json!({"accessToken": "ghp"})),
            json!({"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ghp"}})
        );
        assert_eq!(
            config_of(
                "githubMCP",
                json!({"accessToken": "ghp", "githubEnterpriseUrl": "https://acme.ghe.com"})
            )["url"],
            "https://copilot-api.acme.ghe.com/mcp"
        );
        assert_eq!(
            config_of("browserlessMCP", json!({"browserlessApiToken": "b"})),
            json!({"url": "https://mcp.browserless.io/mcp", "headers": {"Authorization": "Bearer b"}})
        );
        assert_eq!(
            config_of("slackMCP", json!({"botToken": "xoxb", "teamId": "T1"})),
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-slack"],
                   "env": {"SLACK_BOT_TOKEN": "xoxb", "SLACK_TEAM_ID": "T1"}})
        );
        assert_eq!(
            config_of("postgreSQLMCP", json!({"postgresUrl": "postgres://db/x"}))["args"],
            json!([
                "-y",
                "@modelcontextprotocol/server-postgres",
                "postgres://db/x"
            ])
        );
        assert_eq!(
            config_of(
                "supergatewayMCP",
                json!({"arguments": " --sse \"https://mcp.example/sse\"  'x' "})
            )["args"],
            json!([
                "-y",
                "@latitude-data/supergateway",
                "--sse",
                "https://mcp.example/sse",
                "x"
            ])
        );
        assert_eq!(
            config_of("sequentialThinkingMCP", json!({}))["args"][1],
            "@modelcontextprotocol/server-sequential-thinking"
        );
        assert_eq!(
            config_of(
                "teradataMCP",
                json!({"mcpUrl": "https://td.example/mcp/", "tdUsername": "u", "tdPassword": "p"})
            )["headers"]["Authorization"],
            "Basic dTpw"
        );
    }
}
