//! `searXNG`: a SearXNG instance (self-hosted metasearch, `apiBase`) as an
//! agent's search tool, through the request tools' address guard.

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, SearchEngine, ToolKind, ToolSpec, WebSearchTool};
use crate::flow::node::{
    Build, Category, InputKind as K, Node, NodeSpec, endpoint_url, input, sensitive,
};

pub struct Searxng;

const DEFAULT_NAME: &str = "searxng-search";
const DESCRIPTION: &str = "A meta search engine. Useful for when you need to answer questions about current events. Input should be a search query. Output is a JSON array of the query results";
/// Results a search gives the model (Flowise's `numResults`).
const MAX_RESULTS: usize = 10;

static SPEC: NodeSpec = NodeSpec {
    name: "searXNG",
    category: Category::Tool,
    inputs: &[
        endpoint_url("apiBase"),
        input("toolName", K::Text),
        input("toolDescription", K::Text),
        sensitive("headers", K::Json),
        input("categories", K::Text),
        input("engines", K::Text),
        input("language", K::Text),
        input("pageno", K::Integer),
        input("time_range", K::Text),
        input("safesearch", K::Integer),
        input("format", K::Ignored),
    ],
};

impl Node for Searxng {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let base = node
            .text("apiBase")
            .ok_or_else(|| node.invalid("needs the SearXNG instance's 'apiBase'"))?
            .to_owned();
        let name = node.text("toolName").unwrap_or(DEFAULT_NAME).to_owned();
        crate::domain::tool::validate_tool_name(&name)
            .map_err(|e| node.invalid(format_args!("input 'toolName': {e}")))?;
        let mut params = Vec::new();
        for key in ["categories", "engines", "language", "time_range"] {
            if let Some(value) = node.text(key) {
                params.push((key.to_owned(), value.to_owned()));
            }
        }
        if let Some(page) = node.integer("pageno")? {
            params.push(("pageno".to_owned(), page.to_string()));
        }
        match node.integer("safesearch")? {
            None => {}
            Some(level @ 0..=2) => params.push(("safesearch".to_owned(), level.to_string())),
            Some(_) => return Err(node.invalid("input 'safesearch' must be 0, 1 or 2")),
        }
        let headers = node.json_object("headers")?;
        if headers.values().any(Value::is_null) {
            return Err(node.invalid("input 'headers' has a header without a value"));
        }
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::WebSearch(WebSearchTool {
                name,
                description: node
                    .text("toolDescription")
                    .unwrap_or(DESCRIPTION)
                    .to_owned(),
                engine: SearchEngine::SearXng,
                base,
                params,
                headers,
                max_results: MAX_RESULTS,
            }),
        }))
    }
}
