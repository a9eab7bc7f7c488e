//! Flowise's search-API tools — `braveSearchAPI`, `serpAPI`, `serper`,
//! `googleCustomSearch` — under LangChain's tool names and descriptions. The
//! key comes from the node's credential (Flowise's credential types and
//! fields), else from the server's environment, which sends it only to the
//! service's own host or `PROVIDER_KEY_HOSTS`. `basePath` (weir's) points a
//! tool at another address speaking the same API (a proxy, a test double);
//! every call goes through the request tools' address guard.

use super::{K, ProviderEndpoint, endpoint, input, setting};
use crate::flow::FlowError;
use crate::flow::component::{Component, SearchEngine, ToolKind, ToolSpec, WebSearchTool};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, endpoint_url, sensitive};
use crate::llm::endpoints;

/// One search API: its wire, where it lives, and the tool a model sees.
struct SearchApi {
    engine: SearchEngine,
    place: ProviderEndpoint,
    /// Flowise's credential type, named when the key is missing.
    credential: &'static str,
    tool_name: &'static str,
    description: &'static str,
}

const CURRENT_EVENTS: &str = "a search engine. useful for when you need to answer questions about current events. input should be a search query.";

/// A search API at `provider`'s home and default base, its key in the node's
/// (or its credential's) `key_input`, else the server's `key_env`, its base in
/// `basePath`, else the server's `base_env`.
const fn search_api(
    engine: SearchEngine,
    provider: endpoints::ProviderEndpoint,
    (key_input, key_env, base_env): (&'static [&'static str], &'static str, &'static str),
    (tool_name, description): (&'static str, &'static str),
) -> SearchApi {
    SearchApi {
        engine,
        place: ProviderEndpoint {
            base_inputs: &["basePath"],
            base_env: Some(base_env),
            default_base: super::default_base(provider),
            key_inputs: key_input,
            key_env,
            home: provider.home,
        },
        credential: provider.credential,
        tool_name,
        description,
    }
}

const BRAVE: SearchApi = search_api(
    SearchEngine::Brave,
    endpoints::BRAVE_SEARCH,
    (
        &["braveApiKey"],
        "BRAVE_SEARCH_API_KEY",
        "BRAVE_SEARCH_BASE_URL",
    ),
    ("brave-search", CURRENT_EVENTS),
);

const SERPAPI: SearchApi = search_api(
    SearchEngine::SerpApi,
    endpoints::SERPAPI,
    (&["serpApiKey"], "SERPAPI_API_KEY", "SERPAPI_BASE_URL"),
    ("search", CURRENT_EVENTS),
);

const SERPER: SearchApi = search_api(
    SearchEngine::Serper,
    endpoints::SERPER,
    (&["serperApiKey"], "SERPER_API_KEY", "SERPER_BASE_URL"),
    ("search", CURRENT_EVENTS),
);

const GOOGLE: SearchApi = search_api(
    SearchEngine::GoogleCustomSearch,
    endpoints::GOOGLE_CUSTOM_SEARCH,
    (
        &["googleCustomSearchApiKey"],
        "GOOGLE_CUSTOM_SEARCH_API_KEY",
        "GOOGLE_CUSTOM_SEARCH_BASE_URL",
    ),
    (
        "google-custom-search",
        "a custom search engine. useful for when you need to answer questions about current events. input should be a search query. outputs a JSON array of results.",
    ),
);

/// Results given to the model at most (Brave answers 20 by default, Google 10).
const MAX_RESULTS: usize = 20;

fn build(node: &Build<'_>, api: &SearchApi) -> Result<Component, FlowError> {
    let (base, key) = endpoint(node, &api.place)?;
    let unopened = node.credential_unopened();
    let key = match key {
        Some(key) => key,
        None if unopened => String::new(),
        None => {
            return Err(node.invalid(format_args!(
                "needs a key: a '{}' credential, or the server's {}",
                api.credential, api.place.key_env
            )));
        }
    };
    let mut params = Vec::new();
    let mut headers = serde_json::Map::new();
    match api.engine {
        SearchEngine::Brave => {
            headers.insert("X-Subscription-Token".into(), key.into());
        }
        SearchEngine::SerpApi => params.push(("api_key".to_owned(), key)),
        SearchEngine::Serper => {
            headers.insert("X-API-KEY".into(), key.into());
        }
        SearchEngine::GoogleCustomSearch => {
            let engine_id = setting(
                node,
                &["googleCustomSearchApiId"],
                "GOOGLE_CUSTOM_SEARCH_ENGINE_ID",
            )
            .or_else(|| unopened.then(String::new))
            .ok_or_else(|| {
                node.invalid(format_args!(
                    "needs the search engine's id (cx): the '{}' credential's \
                     googleCustomSearchApiId, or the server's GOOGLE_CUSTOM_SEARCH_ENGINE_ID",
                    api.credential
                ))
            })?;
            params.push(("key".to_owned(), key));
            params.push(("cx".to_owned(), engine_id));
        }
        SearchEngine::SearXng => {}
    }
    Ok(Component::Tool(ToolSpec {
        node_id: node.id().to_owned(),
        kind: ToolKind::WebSearch(WebSearchTool {
            name: api.tool_name.to_owned(),
            description: api.description.to_owned(),
            engine: api.engine,
            base,
            params,
            headers,
            max_results: MAX_RESULTS,
        }),
    }))
}

macro_rules! search_api {
    ($type:ident, $name:literal, $api:ident, [$($extra:expr),* $(,)?]) => {
        pub struct $type;

        const _: () = {
            const INPUTS: &[InputSpec] = &[endpoint_url("basePath"), $($extra,)*];
            static SPEC: NodeSpec = NodeSpec {
                name: $name,
                category: Category::Tool,
                inputs: INPUTS,
            };

            impl Node for $type {
                fn spec(&self) -> &'static NodeSpec {
                    &SPEC
                }

                fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
                    build(node, &$api)
                }
            }
        };
    };
}

search_api!(
    BraveSearchApi,
    "braveSearchAPI",
    BRAVE,
    [sensitive("braveApiKey", K::Text)]
);
search_api!(
    SerpApi,
    "serpAPI",
    SERPAPI,
    [sensitive("serpApiKey", K::Text)]
);
search_api!(
    Serper,
    "serper",
    SERPER,
    [sensitive("serperApiKey", K::Text)]
);
search_api!(
    GoogleCustomSearch,
    "googleCustomSearch",
    GOOGLE,
    [
        sensitive("googleCustomSearchApiKey", K::Text),
        input("googleCustomSearchApiId", K::Text),
    ]
);
