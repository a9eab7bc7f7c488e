//! Rerank retrievers — `cohereRerankRetriever`, `JinaRerankRetriever`,
//! `voyageAIRerankRetriever`: the `baseRetriever`'s vector store, its chunks
//! reordered (and cut to `topK`/`topN`) by a rerank service. Each is taken
//! wherever a vector store's retriever is (retrieval chains, `retrieverTool`).
//! `basePath` (weir's) points Cohere's wire at a self-hosted rerank server
//! (vLLM, Infinity).

use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, endpoint_url, sensitive};
use crate::retrieval::rerank::{RerankService, RerankSpec};

/// Where each service lives and what Flowise names its settings.
struct Service {
    service: RerankService,
    default_base: &'static str,
    key_inputs: &'static [&'static str],
    default_model: &'static str,
    top_input: &'static str,
}

const COHERE: Service = Service {
    service: RerankService::Cohere,
    default_base: "https://api.cohere.com",
    key_inputs: &["cohereApiKey"],
    default_model: "rerank-v3.5",
    top_input: "topK",
};

const JINA: Service = Service {
    service: RerankService::Jina,
    default_base: "https://api.jina.ai",
    key_inputs: &["jinaAIAPIKey"],
    default_model: "jina-reranker-v2-base-multilingual",
    top_input: "topN",
};

const VOYAGE: Service = Service {
    service: RerankService::Voyage,
    default_base: "https://api.voyageai.com",
    key_inputs: &["apiKey", "voyageAIApiKey"],
    default_model: "rerank-lite-1",
    top_input: "topK",
};

/// Chunks a reranker keeps at most.
const MAX_TOP: u32 = 100;

fn build(node: &Build<'_>, service: &Service) -> Result<Component, FlowError> {
    let mut store = node.vector_store("baseRetriever")?;
    if store.rerank.is_some() {
        return Err(node.invalid("cannot rerank what another reranker already reranks"));
    }
    let top_n = match node.integer(service.top_input)? {
        None => None,
        Some(0) => None,
        Some(n) => Some(n.min(u64::from(MAX_TOP)) as usize),
    };
    store.rerank = Some(Box::new(RerankSpec {
        service: service.service,
        base: node
            .text("basePath")
            .unwrap_or(service.default_base)
            .trim_end_matches('/')
            .to_owned(),
        api_key: node.text_of(service.key_inputs).map(str::to_owned),
        model: node
            .text("model")
            .unwrap_or(service.default_model)
            .to_owned(),
        top_n,
        query: node.text("query").map(str::to_owned),
    }));
    Ok(Component::VectorStore(store))
}

macro_rules! reranker {
    ($type:ident, $name:literal, $service:ident, [$($extra:expr),* $(,)?]) => {
        pub struct $type;

        const _: () = {
            const INPUTS: &[InputSpec] = &[
                input("baseRetriever", K::Anchor(Category::VectorStore)),
                input("model", K::Text),
                input("query", K::Text),
                endpoint_url("basePath"),
                $($extra,)*
            ];
            static SPEC: NodeSpec = NodeSpec {
                name: $name,
                category: Category::Retriever,
                inputs: INPUTS,
            };

            impl Node for $type {
                fn spec(&self) -> &'static NodeSpec {
                    &SPEC
                }

                fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
                    build(node, &$service)
                }
            }
        };
    };
}

reranker!(
    CohereRerankRetriever,
    "cohereRerankRetriever",
    COHERE,
    [
        input("topK", K::Integer),
        input("maxChunksPerDoc", K::Ignored),
        sensitive("cohereApiKey", K::Text),
    ]
);
reranker!(
    JinaRerankRetriever,
    "JinaRerankRetriever",
    JINA,
    [
        input("topN", K::Integer),
        sensitive("jinaAIAPIKey", K::Text),
    ]
);
reranker!(
    VoyageAiRerankRetriever,
    "voyageAIRerankRetriever",
    VOYAGE,
    [
        input("topK", K::Integer),
        sensitive("apiKey", K::Text),
        sensitive("voyageAIApiKey", K::Text),
    ]
);
