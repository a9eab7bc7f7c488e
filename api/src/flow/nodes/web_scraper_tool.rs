//! `webScraperTool`: lets an agent scrape pages from a URL it gives —
//! following links (`maxDepth`) or the site's sitemap — through the request
//! tools' address guard.

use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec, WebScraperTool};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct WebScraper;

/// weir's bounds on what one call may fetch.
const MAX_DEPTH: u64 = 5;
const MAX_PAGES: u32 = 50;
const MAX_TIMEOUT_SECS: f64 = 60.0;

static SPEC: NodeSpec = NodeSpec {
    name: "webScraperTool",
    category: Category::Tool,
    inputs: &[
        input("scrapeMode", K::Text),
        input("maxDepth", K::Integer),
        input("maxPages", K::Integer),
        input("timeoutS", K::Number),
        input("description", K::Text),
    ],
};

impl Node for WebScraper {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let sitemap = match node.text("scrapeMode") {
            None | Some("recursive") => false,
            Some("sitemap") => true,
            Some(other) => {
                return Err(node.invalid(format_args!(
                    "input 'scrapeMode' must be recursive or sitemap, not '{other}'"
                )));
            }
        };
        let max_depth = node.integer("maxDepth")?.unwrap_or(1).clamp(1, MAX_DEPTH) as u32;
        let max_pages = node.count("maxPages", 10, MAX_PAGES)?.max(1) as usize;
        let timeout = match node.number("timeoutS")? {
            None => MAX_TIMEOUT_SECS,
            Some(s) if s > 0.0 => s.min(MAX_TIMEOUT_SECS),
            Some(_) => return Err(node.invalid("input 'timeoutS' must be above 0")),
        };
        let description = match node.text("description") {
            Some(own) => own.to_owned(),
            None => describe(sitemap, max_depth, max_pages, timeout),
        };
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::WebScraper(WebScraperTool {
                description,
                max_depth,
                max_pages,
                timeout: std::time::Duration::from_secs_f64(timeout),
                sitemap,
            }),
        }))
    }
}

/// The tool's description as Flowise writes it from its settings.
fn describe(sitemap: bool, max_depth: u32, max_pages: usize, timeout: f64) -> String {
    let how = if sitemap {
        format!(
            "Scrapes URLs listed in the detected default sitemap (/sitemap.xml) up to {max_pages} \
             pages, with a {timeout}-second timeout per page. Falls back to Recursive Link \
             Following if sitemap is not found or empty."
        )
    } else {
        format!(
            "Recursively scrapes web pages starting from a given URL up to {max_depth} level(s) \
             deep or until {max_pages} pages are scraped, with a {timeout}-second timeout per \
             page, whichever comes first."
        )
    };
    format!(
        "{how} Extracts title, description, and paragraph text. Input should be a single URL \
         string. Returns a JSON string array of scraped page data."
    )
}
