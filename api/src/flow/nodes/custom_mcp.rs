//! `customMCP` ("Custom MCP"): the tools of an MCP server, for any agent that
//! takes tools. Its `mcpServerConfig` is `{"url", "headers"}` (Streamable HTTP)
//! or `{"command", "args", "env"}` (stdio: run by the Python runtime in its
//! sandbox, never in weir's process), `{{$vars.<name>}}` filled from the
//! workspace's variables when a run starts; `mcpActions` picks tools by name
//! (all when none is picked). The tools are listed when a run starts
//! ([`crate::flow::tools::mcp`]).
//!
//! Flowise's built-in nodes whose servers are npm packages ([`NpmMcp`]:
//! `slackMCP`, `braveSearchMCP`, `sequentialThinkingMCP`, `youtubeMCP`,
//! `sfdcMCP`, `contentfulMCP`; and `postgreSQLMCP`, `supergatewayMCP`) are stdio
//! servers run with `npx -y <package>`, their credential's fields in the
//! environment or as arguments, as Flowise passes them.
//!
//! `customMcpServerTool` is the same with a server the workspace keeps
//! (`/api/v1/custom-mcp-servers`), named by its id; `teradataMCP`, Flowise's
//! built-in node for a Teradata MCP server, is one at its `mcpUrl` with a Bearer
//! or Basic `Authorization` made of its inputs or its credential's fields;
//! `githubMCP` reaches GitHub's hosted server (or an Enterprise tenant's), and
//! the other hosted servers ([`HostedMcp`]: `githubV2MCP`, `browserlessMCP`,
//! `unstructuredMCP`, `xpozMCP`, `outageDeckMCP`) take the credential's token as
//! a Bearer; `pipedreamMCP` reaches Pipedream Connect's server with a token of
//! its credential's OAuth client.

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
    mcp_tool(
        node,
        serde_json::json!({"url": url, "headers": {"Authorization": format!("Bearer {token}")}}),
    )
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

/// A built-in node of a hosted server: its URL, and the credential field whose
/// value is sent as a Bearer token (none for a server that takes no key).
pub struct HostedMcp {
    spec: &'static NodeSpec,
    url: &'static str,
    token: Option<&'static str>,
}

impl Node for HostedMcp {
    fn spec(&self) -> &'static NodeSpec {
        self.spec
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        match self.token {
            Some(field) => hosted(node, self.url, node.text(field)),
            None => mcp_tool(node, serde_json::json!({"url": self.url})),
        }
    }
}

/// `browserlessMCP` ("Browserless MCP"): Browserless's hosted server with the
/// `browserlessApi` credential's `browserlessApiToken`.
pub static BROWSERLESS_MCP: HostedMcp = HostedMcp {
    spec: &NodeSpec {
        name: "browserlessMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("browserlessApiToken", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    url: "https://mcp.browserless.io/mcp",
    token: Some("browserlessApiToken"),
};

/// `githubV2MCP`: GitHub's hosted server (as `githubMCP`, without an
/// Enterprise address) with the `githubApi` credential's `accessToken`.
pub static GITHUB_V2_MCP: HostedMcp = HostedMcp {
    spec: &NodeSpec {
        name: "githubV2MCP",
        category: Category::Tool,
        inputs: &[
            sensitive("accessToken", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    url: "https://api.githubcopilot.com/mcp/",
    token: Some("accessToken"),
};

/// `unstructuredMCP`: Unstructured's hosted transform server with the
/// `unstructuredTransformApi` credential's `unstructuredTransformAPIKey`.
pub static UNSTRUCTURED_MCP: HostedMcp = HostedMcp {
    spec: &NodeSpec {
        name: "unstructuredMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("unstructuredTransformAPIKey", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    url: "https://mcp.transform.unstructured.io/",
    token: Some("unstructuredTransformAPIKey"),
};

/// `xpozMCP`: Xpoz's hosted server with the `xpozApi` credential's `xpozApiKey`.
pub static XPOZ_MCP: HostedMcp = HostedMcp {
    spec: &NodeSpec {
        name: "xpozMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("xpozApiKey", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    url: "https://mcp.xpoz.ai/mcp",
    token: Some("xpozApiKey"),
};

/// `outageDeckMCP`: OutageDeck's public server (no credential).
pub static OUTAGE_DECK_MCP: HostedMcp = HostedMcp {
    spec: &NodeSpec {
        name: "outageDeckMCP",
        category: Category::Tool,
        inputs: &[input("mcpActions", K::Json)],
    },
    url: "https://outagedeck.com/api/mcp",
    token: None,
};

/// A built-in node's MCP tools at `config` (a server config, as `customMCP`'s).
fn mcp_tool(node: &Build<'_>, config: Value) -> Result<Component, FlowError> {
    Ok(Component::Tool(ToolSpec {
        node_id: node.id().to_owned(),
        kind: ToolKind::Mcp(McpTools {
            source: McpSource::Config(config.to_string()),
            actions: actions(node)?,
        }),
    }))
}

/// A built-in node whose server is an npm package, run as a stdio server with
/// `npx -y <package>` by the Python runtime in its sandbox: the credential's
/// fields become environment variables (or, `Args`, arguments).
pub struct NpmMcp {
    spec: &'static NodeSpec,
    package: &'static str,
    /// The credential Flowise names, for the error when a field is missing.
    credential: &'static str,
    /// Fixed variables, then (field, variable) pairs of the credential's fields.
    fixed: &'static [(&'static str, &'static str)],
    fields: Fields,
}

enum Fields {
    /// Each field as an environment variable.
    Env(&'static [(&'static str, &'static str)]),
    /// Each field after its flag, as the server's arguments.
    Args(&'static [(&'static str, &'static str)]),
}

impl Node for NpmMcp {
    fn spec(&self) -> &'static NodeSpec {
        self.spec
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let field = |name: &str| {
            node.text(name).ok_or_else(|| {
                node.invalid(format_args!(
                    "needs its {} credential's '{name}'",
                    self.credential
                ))
            })
        };
        let mut env = serde_json::Map::new();
        for (variable, value) in self.fixed {
            env.insert((*variable).to_owned(), Value::from(*value));
        }
        let mut args = vec!["-y".to_owned(), self.package.to_owned()];
        match self.fields {
            Fields::Env(pairs) => {
                for (name, variable) in pairs {
                    env.insert((*variable).to_owned(), Value::from(field(name)?));
                }
            }
            Fields::Args(pairs) => {
                for (name, flag) in pairs {
                    args.push((*flag).to_owned());
                    args.push(field(name)?.to_owned());
                }
            }
        }
        mcp_tool(
            node,
            serde_json::json!({"command": "npx", "args": args, "env": env}),
        )
    }
}

/// `slackMCP` ("Slack MCP"): `@modelcontextprotocol/server-slack` with the
/// `slackApi` credential's `botToken` and `teamId`.
pub static SLACK_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "slackMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("botToken", K::Text),
            sensitive("teamId", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    package: "@modelcontextprotocol/server-slack",
    credential: "slackApi",
    fixed: &[],
    fields: Fields::Env(&[("botToken", "SLACK_BOT_TOKEN"), ("teamId", "SLACK_TEAM_ID")]),
};

/// `braveSearchMCP` ("Brave Search MCP"): `@modelcontextprotocol/server-brave-search`
/// with the `braveSearchApi` credential's `braveApiKey`.
pub static BRAVE_SEARCH_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "braveSearchMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("braveApiKey", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    package: "@modelcontextprotocol/server-brave-search",
    credential: "braveSearchApi",
    fixed: &[],
    fields: Fields::Env(&[("braveApiKey", "BRAVE_API_KEY")]),
};

/// `sequentialThinkingMCP` ("Sequential Thinking MCP"):
/// `@modelcontextprotocol/server-sequential-thinking`, no credential.
pub static SEQUENTIAL_THINKING_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "sequentialThinkingMCP",
        category: Category::Tool,
        inputs: &[input("mcpActions", K::Json)],
    },
    package: "@modelcontextprotocol/server-sequential-thinking",
    credential: "",
    fixed: &[],
    fields: Fields::Env(&[]),
};

/// `youtubeMCP`: `youtube-data-mcp-server` with the `youtubeApi` credential's
/// `apiKey`.
pub static YOUTUBE_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "youtubeMCP",
        category: Category::Tool,
        inputs: &[sensitive("apiKey", K::Text), input("mcpActions", K::Json)],
    },
    package: "youtube-data-mcp-server",
    credential: "youtubeApi",
    fixed: &[],
    fields: Fields::Env(&[("apiKey", "YOUTUBE_API_KEY")]),
};

/// `sfdcMCP`: `@tsmztech/mcp-server-salesforce` with the `salesforceApi`
/// credential's client id, secret and instance (OAuth client credentials).
pub static SFDC_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "sfdcMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("salesforceClientId", K::Text),
            sensitive("salesforceClientSecret", K::Text),
            sensitive("salesforceInstance", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    package: "@tsmztech/mcp-server-salesforce",
    credential: "salesforceApi",
    fixed: &[("SALESFORCE_CONNECTION_TYPE", "OAuth_2.0_Client_Credentials")],
    fields: Fields::Env(&[
        ("salesforceClientId", "SALESFORCE_CLIENT_ID"),
        ("salesforceClientSecret", "SALESFORCE_CLIENT_SECRET"),
        ("salesforceInstance", "SALESFORCE_INSTANCE_URL"),
    ]),
};

/// `contentfulMCP`: `@last-rev/contentful-mcp-server` with the
/// `contentfulManagementApi` credential's `managementToken` and `spaceId` and
/// the node's `environmentId`, as its arguments (as Flowise passes them).
pub static CONTENTFUL_MCP: NpmMcp = NpmMcp {
    spec: &NodeSpec {
        name: "contentfulMCP",
        category: Category::Tool,
        inputs: &[
            sensitive("managementToken", K::Text),
            sensitive("spaceId", K::Text),
            input("environmentId", K::Text),
            input("mcpActions", K::Json),
        ],
    },
    package: "@last-rev/contentful-mcp-server",
    credential: "contentfulManagementApi",
    fixed: &[],
    fields: Fields::Args(&[
        ("managementToken", "--management-token"),
        ("spaceId", "--space-id"),
        ("environmentId", "--environment-id"),
    ]),
};

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
        let args = ["-y", "@modelcontextprotocol/server-postgres", url];
        mcp_tool(node, serde_json::json!({"command": "npx", "args": args}))
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
        let mut args = vec!["-y".to_owned(), "@latitude-data/supergateway".to_owned()];
        args.extend(arguments.split_whitespace().map(|arg| {
            let quoted = arg.len() >= 2
                && ((arg.starts_with('"') && arg.ends_with('"'))
                    || (arg.starts_with('\'') && arg.ends_with('\'')));
            if quoted { &arg[1..arg.len() - 1] } else { arg }.to_owned()
        }));
        mcp_tool(node, serde_json::json!({"command": "npx", "args": args}))
    }
}

/// `pipedreamMCP` ("Pipedream MCP"): Pipedream Connect's remote server
/// (`PIPEDREAM_MCP_URL`, default `https://remote.mcp.pipedream.net`) for one
/// app and one end user, with a token of the `pipedreamOAuthApi` credential's
/// client (the client-credentials grant at `PIPEDREAM_API_URL`'s
/// `/v1/oauth/token`, JSON as Pipedream documents it; kept until a minute
/// before it ends) and Flowise's `x-pd-*` headers.
pub struct PipedreamMcp;

static PIPEDREAM_SPEC: NodeSpec = NodeSpec {
    name: "pipedreamMCP",
    category: Category::Tool,
    inputs: &[
        sensitive("clientId", K::Text),
        sensitive("clientSecret", K::Text),
        sensitive("projectId", K::Text),
        sensitive("oauthScopes", K::Text),
        input("environment", K::Text),
        input("appSlug", K::Text),
        input("externalUserId", K::Text),
        input("toolMode", K::Text),
        input("mcpActions", K::Json),
    ],
};

/// Flowise's rules for an app slug (one, or several comma-separated) and a user id.
fn pipedream_slug_ok(slug: &str) -> bool {
    slug.split(',').map(str::trim).all(|one| {
        let bytes = one.as_bytes();
        (1..=100).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
            && bytes.first().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.last().is_some_and(|b| b.is_ascii_alphanumeric())
    })
}

fn pipedream_user_ok(user: &str) -> bool {
    (1..=250).contains(&user.len())
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@+-".contains(&b))
}

impl Node for PipedreamMcp {
    fn spec(&self) -> &'static NodeSpec {
        &PIPEDREAM_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let app = node
            .text("appSlug")
            .ok_or_else(|| node.invalid("needs its 'appSlug' (a Pipedream app, such as slack)"))?;
        if !pipedream_slug_ok(app) {
            return Err(node.invalid(
                "input 'appSlug' must be lowercase letters, digits, hyphens and underscores \
                 (several apps comma-separated)",
            ));
        }
        let user = node
            .text("externalUserId")
            .ok_or_else(|| node.invalid("needs its 'externalUserId' (the end user's id)"))?;
        // A workspace variable is filled when a run starts.
        if !user.contains("{{$vars.") && !pipedream_user_ok(user) {
            return Err(node.invalid(
                "input 'externalUserId' may hold only letters, digits and . _ @ + - (at most 250)",
            ));
        }
        let environment = node.text("environment").unwrap_or("development");
        if !matches!(environment, "development" | "production") {
            return Err(node.invalid("input 'environment' is development or production"));
        }
        let field = |name: &str| match node.text(name) {
            Some(value) => Ok(value),
            // The plan's first build opens no credential: the run's build checks.
            None if node.credential_unopened() => Ok(""),
            None => Err(node.invalid(format_args!(
                "needs its pipedreamOAuthApi credential's '{name}'"
            ))),
        };
        let (client_id, client_secret, project) = (
            field("clientId")?,
            field("clientSecret")?,
            field("projectId")?,
        );
        let api = node
            .settings()
            .get("PIPEDREAM_API_URL")
            .unwrap_or("https://api.pipedream.com")
            .trim_end_matches('/');
        let url = node
            .settings()
            .get("PIPEDREAM_MCP_URL")
            .unwrap_or("https://remote.mcp.pipedream.net");
        mcp_tool(
            node,
            serde_json::json!({
                "url": url,
                "headers": {
                    "x-pd-project-id": project,
                    "x-pd-environment": environment,
                    "x-pd-external-user-id": user,
                    "x-pd-app-slug": app,
                    "x-pd-tool-mode": node.text("toolMode").unwrap_or("tools-only"),
                },
                "oauth": {
                    "tokenUrl": format!("{api}/v1/oauth/token"),
                    "clientId": client_id,
                    "clientSecret": client_secret,
                    "scope": node.text("oauthScopes"),
                    "tokenBody": "json",
                },
            }),
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
                "contentfulMCP",
                json!({"managementToken": "m", "spaceId": "s", "environmentId": "master"})
            )["args"],
            json!([
                "-y",
                "@last-rev/contentful-mcp-server",
                "--management-token",
                "m",
                "--space-id",
                "s",
                "--environment-id",
                "master"
            ])
        );
        assert_eq!(
            config_of(
                "sfdcMCP",
                json!({"salesforceClientId": "i", "salesforceClientSecret": "s", "salesforceInstance": "https://x.my.salesforce.com"})
            )["env"],
            json!({"SALESFORCE_CONNECTION_TYPE": "OAuth_2.0_Client_Credentials", "SALESFORCE_CLIENT_ID": "i",
                   "SALESFORCE_CLIENT_SECRET": "s", "SALESFORCE_INSTANCE_URL": "https://x.my.salesforce.com"})
        );
        assert_eq!(
            config_of("youtubeMCP", json!({"apiKey": "k"}))["env"],
            json!({"YOUTUBE_API_KEY": "k"})
        );
        assert_eq!(
            config_of("outageDeckMCP", json!({})),
            json!({"url": "https://outagedeck.com/api/mcp"})
        );
        assert_eq!(
            config_of("xpozMCP", json!({"xpozApiKey": "x"}))["headers"]["Authorization"],
            "Bearer x"
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
