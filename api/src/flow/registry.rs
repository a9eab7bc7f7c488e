//! The node types weir runs: every [`Node`] in one list, chatflow and
//! agentflow nodes alike. Adding a node type is adding its module under
//! `nodes/` (`nodes/agentflow/` for an agentflow node) and a line here.
//!
//! Flowise exports carry inputs that have no effect here (caching, image uploads,
//! proxy settings); those are declared [`InputKind::Ignored`](super::node::InputKind)
//! so real exports load, while an input nobody declared is a 400 naming node and input.

use super::FlowError;
use super::component::Component;
use super::graph::{FlowGraph, FlowNode};
use super::node::{Build, InputKind, Node, NodeSpec, unknown};
use super::nodes::*;
use super::overrides::Overrides;

pub static NODES: &[&dyn Node] = &[
    // Chat models
    &chat_openai::ChatOpenAI,
    &azure_chat_openai::AzureChatOpenAI,
    &chat_anthropic::ChatAnthropic,
    &chat_mistral_ai::ChatMistralAI,
    &chat_ollama::ChatOllama,
    &chat_google_generative_ai::ChatGoogleGenerativeAi,
    &groq_chat::GroqChat,
    &google_generative_ai_embedding::GoogleGenerativeAiEmbedding,
    &chat_local::ChatLocal,
    // Prompts
    &prompt_template::PromptTemplate,
    &chat_prompt_template::ChatPromptTemplate,
    // Chains
    &llm_chain::LlmChain,
    &conversation_chain::ConversationChain,
    &retrieval_qa_chain::RetrievalQaChain,
    &conversational_retrieval_qa_chain::ConversationalRetrievalQaChain,
    &sql_database_chain::SqlDatabaseChain,
    &llama_index_engines::QueryEngine,
    // Memory
    &buffer_memory::BufferMemory,
    &buffer_window_memory::BufferWindowMemory,
    // Tools
    &openapi_toolkit::OpenApiToolkit,
    &custom_mcp::CustomMcp,
    &custom_mcp::CustomMcpServerTool,
    &custom_mcp::SLACK_MCP,
    &custom_mcp::BRAVE_SEARCH_MCP,
    &custom_mcp::SEQUENTIAL_THINKING_MCP,
    &custom_mcp::YOUTUBE_MCP,
    &custom_mcp::SFDC_MCP,
    &custom_mcp::CONTENTFUL_MCP,
    &custom_mcp::PostgreSqlMcp,
    &custom_mcp::SupergatewayMcp,
    &custom_mcp::TeradataMcp,
    &custom_mcp::GithubMcp,
    &custom_mcp::GITHUB_V2_MCP,
    &custom_mcp::BROWSERLESS_MCP,
    &custom_mcp::UNSTRUCTURED_MCP,
    &custom_mcp::XPOZ_MCP,
    &custom_mcp::OUTAGE_DECK_MCP,
    &custom_mcp::PipedreamMcp,
    &calculator::Calculator,
    &current_date_time::CurrentDateTime,
    &requests_get::RequestsGet,
    &requests_post::RequestsPost,
    &requests_put::RequestsPut,
    &requests_delete::RequestsDelete,
    &searxng::Searxng,
    &search_apis::BraveSearchApi,
    &search_apis::SerpApi,
    &search_apis::Serper,
    &search_apis::GoogleCustomSearch,
    &redis_backed_chat_memory::RedisBackedChatMemory,
    &redis_backed_chat_memory::UpstashRedisBackedChatMemory,
    &llama_index_engines::SimpleChatEngine,
    &llama_index_engines::ContextChatEngine,
    &chat_openai::ChatOpenAiLlamaIndex,
    &azure_chat_openai::AzureChatOpenAiLlamaIndex,
    &open_ai_embeddings::OpenAiEmbeddingLlamaIndex,
    &rerank_retrievers::CohereRerankRetriever,
    &rerank_retrievers::JinaRerankRetriever,
    &rerank_retrievers::VoyageAiRerankRetriever,
    &rrf_retriever::RrfRetriever,
    &web_scraper_tool::WebScraper,
    &python_tool::PythonToolNode,
    &custom_tool::CustomTool,
    &retriever_tool::RetrieverTool,
    // Retrieval: embeddings, loaders, splitters, vector stores
    &open_ai_embeddings::OpenAiEmbeddings,
    &azure_open_ai_embeddings::AzureOpenAiEmbeddings,
    &local_ai_embeddings::LocalAiEmbeddings,
    &ollama_embedding::OllamaEmbedding,
    &local_embeddings::LocalEmbeddings,
    &plain_text::PlainText,
    &text_file::TextFile,
    &csv_file::CsvFile,
    &json_file::JsonFile,
    &jsonlines_file::JsonlinesFile,
    &pdf_file::PdfFile,
    &docx_file::DocxFile,
    &cheerio_web_scraper::CheerioWebScraper,
    &recursive_character_text_splitter::RecursiveCharacterTextSplitter,
    &character_text_splitter::CharacterTextSplitter,
    &markdown_text_splitter::MarkdownTextSplitter,
    &token_text_splitter::TokenTextSplitter,
    &memory_vector_store::MemoryVectorStore,
    &document_store_vs::DocumentStoreVs,
    &document_store::DocumentStoreLoader,
    &faiss::Faiss,
    &simple_store_llama_index::SimpleStoreLlamaIndex,
    &postgres::Postgres,
    // Moderation
    &input_moderation_simple::InputModerationSimple,
    &output_parsers::CsvOutputParser,
    &output_parsers::StructuredOutputParser,
    &output_parsers::AdvancedStructuredOutputParser,
    // Utilities
    &custom_function::CustomFunction,
    // Agents
    &tool_agent::ToolAgent,
    &conversational_agent::ConversationalAgent,
    &react_agent_chat::ReactAgentChat,
    // Multi-agent
    &supervisor::Supervisor,
    &worker::Worker,
    // Sequential agents
    &seq_start::SeqStart,
    &seq_agent::SeqAgentNode,
    &seq_llm_node::SeqLlmNode,
    &seq_tool_node::SeqToolNode,
    &seq_condition::SeqCondition,
    &csv_agent::CsvAgent,
    &agent_memory::AGENT_MEMORY,
    &agent_memory::SQLITE_AGENT_MEMORY,
    &agent_memory::POSTGRES_AGENT_MEMORY,
    &agent_memory::MYSQL_AGENT_MEMORY,
    &seq_condition_agent::SeqConditionAgentNode,
    &seq_loop::SeqLoop,
    &seq_state::SeqState,
    &seq_end::SeqEnd,
    // Agentflow V2
    &agentflow::start_agentflow::StartAgentflow,
    &agentflow::llm_agentflow::LlmAgentflow,
    &agentflow::agent_agentflow::AgentAgentflow,
    &agentflow::tool_agentflow::ToolAgentflow,
    &agentflow::retriever_agentflow::RetrieverAgentflow,
    &agentflow::condition_agentflow::ConditionAgentflow,
    &agentflow::condition_agent_agentflow::ConditionAgentAgentflow,
    &agentflow::human_input_agentflow::HumanInputAgentflow,
    &agentflow::loop_agentflow::LoopAgentflow,
    &agentflow::iteration_agentflow::IterationAgentflow,
    &agentflow::direct_reply_agentflow::DirectReplyAgentflow,
    &agentflow::http_agentflow::HttpAgentflow,
    &agentflow::execute_flow_agentflow::ExecuteFlowAgentflow,
    &agentflow::custom_function_agentflow::CustomFunctionAgentflow,
];

/// Names weir once gave node types that Flowise spells otherwise (former, now):
/// flows saved with them still load.
const FORMER_NAMES: [(&str, &str); 2] = [
    (
        "googleGenerativeAiEmbedding",
        "googleGenerativeAiEmbeddings",
    ),
    ("jinaRerankRetriever", "JinaRerankRetriever"),
];

pub fn node(name: &str) -> Option<&'static dyn Node> {
    let by_name = |name: &str| NODES.iter().copied().find(|n| n.spec().name == name);
    by_name(name).or_else(|| {
        let (_, now) = FORMER_NAMES.iter().find(|(former, _)| *former == name)?;
        by_name(now)
    })
}

pub fn spec(name: &str) -> Option<&'static NodeSpec> {
    node(name).map(|n| n.spec())
}

/// What every node type weir runs declares, in registry order.
pub fn specs() -> impl Iterator<Item = &'static NodeSpec> {
    NODES.iter().map(|n| n.spec())
}

/// Builds one node with the request's overrides.
pub fn build_node(
    graph: &FlowGraph,
    node: &FlowNode,
    overrides: &Overrides<'_>,
) -> Result<Component, FlowError> {
    let kind = self::node(&node.name).ok_or_else(|| unknown(node))?;
    kind.build(&Build::new(self::node, graph, node, overrides)?)
}

/// A chat model node standing alone (not in a flow: a chatflow setting's
/// model, e.g. the one that writes follow-up prompts), built as a flow's node
/// is — its credential's fields, its endpoint checked against where the
/// credential may go.
pub fn standalone_model(
    node: &FlowNode,
    overrides: &Overrides<'_>,
) -> Result<crate::flow::component::ModelSpec, FlowError> {
    match build_node(&FlowGraph::default(), node, overrides)? {
        Component::Model(model) => Ok(model),
        _ => Err(FlowError::invalid(format!(
            "'{}' is not a chat model",
            node.name
        ))),
    }
}

/// Where docs/nodes.md's generated list of node types begins and ends: the
/// lines between are [`reference_table`]'s, checked by a test.
pub const REFERENCE_BEGIN: &str =
    "<!-- generated from the registry (api/src/flow/registry.rs): begin -->";
pub const REFERENCE_END: &str = "<!-- generated from the registry: end -->";

/// Every node type of [`NODES`] as a Markdown table: its Flowise name, what it
/// produces, and its inputs — required ones in bold, keys, endpoints and tool
/// code marked as such (not overridable unless allowed), and those accepted
/// without effect last.
pub fn reference_table() -> String {
    let mut out = String::from("| Node | Produces | Inputs |\n|---|---|---|\n");
    let mut sorted: Vec<&NodeSpec> = specs().collect();
    sorted.sort_by_key(|s| s.name);
    for spec in sorted {
        let mut inputs = Vec::new();
        let mut ignored = Vec::new();
        for input in spec.inputs {
            if input.kind == InputKind::Ignored {
                ignored.push(format!("`{}`", input.name));
                continue;
            }
            let mut text = match input.required {
                true => format!("**`{}`**", input.name),
                false => format!("`{}`", input.name),
            };
            match input.kind {
                InputKind::Anchor(category) => text.push_str(&format!(" ({category:?})")),
                InputKind::Anchors(category) => text.push_str(&format!(" ({category:?} list)")),
                _ => {}
            }
            if input.endpoint {
                text.push_str(" (endpoint)");
            } else if input.sensitive {
                text.push_str(" (sensitive)");
            }
            inputs.push(text);
        }
        if !ignored.is_empty() {
            inputs.push(format!("without effect: {}", ignored.join(", ")));
        }
        let inputs = match inputs.is_empty() {
            true => "none".to_owned(),
            false => inputs.join(", "),
        };
        out.push_str(&format!(
            "| `{}` | {:?} | {inputs} |\n",
            spec.name, spec.category
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::node::Category;

    /// docs/nodes.md lists [`reference_table`]; `WEIR_WRITE_DOCS=1` rewrites it
    /// when a node type or its inputs changed.
    #[test]
    fn the_nodes_page_lists_every_node_type() {
        crate::generated_docs::check(
            "nodes.md",
            REFERENCE_BEGIN,
            REFERENCE_END,
            &reference_table(),
            "the list of node types is not the registry's",
        );
    }

    #[test]
    fn every_spec_is_well_formed() {
        let mut types: Vec<_> = NODES.iter().map(|n| n.spec().name).collect();
        types.sort_unstable();
        types.dedup();
        assert_eq!(types.len(), NODES.len(), "a node type is listed twice");
        for node in NODES {
            let spec = node.spec();
            let mut names: Vec<_> = spec.inputs.iter().map(|i| i.name).collect();
            assert!(
                names.iter().all(|n| !n.is_empty()),
                "{} has an unnamed input",
                spec.name
            );
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                spec.inputs.len(),
                "{} declares an input twice",
                spec.name
            );
        }
        assert!(
            spec("chatOpenAI")
                .and_then(|s| s.input("basePath"))
                .is_some_and(|i| i.sensitive)
        );
        assert!(spec("seqLoop").is_some() && spec("csvAgent").is_some());
    }

    /// The agentflow node types are registered like the others; the decision
    /// nodes (whose outputs are branches) are known by their category.
    #[test]
    fn agentflow_nodes_come_from_the_registry() {
        let agentflow: Vec<_> = NODES
            .iter()
            .map(|n| n.spec())
            .filter(|s| s.category.is_agentflow())
            .map(|s| s.name)
            .collect();
        assert_eq!(agentflow.len(), 14, "{agentflow:?}");
        assert!(agentflow.iter().all(|n| n.ends_with("Agentflow")));
        let mut decisions: Vec<_> = NODES
            .iter()
            .map(|n| n.spec())
            .filter(|s| s.category == Category::Decision)
            .map(|s| s.name)
            .collect();
        decisions.sort_unstable();
        assert_eq!(
            decisions,
            [
                "conditionAgentAgentflow",
                "conditionAgentflow",
                "humanInputAgentflow"
            ]
        );
        // No chatflow node type is taken for an agentflow one.
        assert!(
            NODES
                .iter()
                .map(|n| n.spec())
                .filter(|s| !s.category.is_agentflow())
                .all(|s| !s.name.ends_with("Agentflow"))
        );
    }
}
