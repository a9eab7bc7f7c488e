//! `cheerioWebScraper`: a web page's text — of the parts `selector` picks
//! (default the body) — one document per page, `metadata.source` its URL. With
//! `relativeLinksMethod: webCrawl` the pages of the same site it links to are
//! read too, breadth first, up to `limit` pages (default 10; 0 = as many as
//! weir allows, 100). Pages are fetched through the SSRF guard of the request
//! tools: public addresses only unless `ALLOW_PRIVATE_REQUESTS` says otherwise.

use super::documents::{self, LOADER_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat, endpoint_url};
use crate::retrieval::load::{LoaderKind, html};

pub struct CheerioWebScraper;

/// Pages one crawl reads at most.
pub const MAX_CRAWL_PAGES: usize = 100;

const INPUTS: [InputSpec; 8] = concat(
    [
        // The server fetches it: a caller may not point it elsewhere.
        endpoint_url("url"),
        input("selector", K::Text),
        input("relativeLinksMethod", K::Text),
        input("limit", K::Integer),
        input("selectedLinks", K::Ignored),
    ],
    LOADER_COMMON,
);

static SPEC: NodeSpec = NodeSpec {
    name: "cheerioWebScraper",
    category: Category::DocumentLoader,
    inputs: &INPUTS,
};

impl Node for CheerioWebScraper {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let url = node
            .text("url")
            .ok_or_else(|| node.invalid("needs its 'url'"))?;
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| node.invalid(format_args!("input 'url' is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(node.invalid("input 'url' must be an http or https URL"));
        }
        let selector = node.text("selector").map(str::to_owned);
        if let Some(s) = &selector {
            html::check_selector(s)
                .map_err(|e| node.invalid(format_args!("input 'selector': {e}")))?;
        }
        let crawl = match node.text("relativeLinksMethod") {
            None => None,
            Some("webCrawl") => Some(match node.integer("limit")? {
                None => 10,
                Some(0) => MAX_CRAWL_PAGES,
                Some(n) => (n as usize).min(MAX_CRAWL_PAGES),
            }),
            Some(other) => {
                return Err(node.invalid(format_args!(
                    "input 'relativeLinksMethod' is '{other}'; weir crawls with webCrawl \
                     (XML sitemaps are not read)"
                )));
            }
        };
        documents::loader(
            node,
            LoaderKind::Web {
                url: parsed.to_string(),
                selector,
                crawl,
            },
        )
        .map(Component::Loader)
    }
}
