//! What nodes build: plain, cloneable specs of models, prompts, memories, tools,
//! chains and agents, with the request's overrides already applied. The run
//! turns them into provider calls and tool calls; nothing here does I/O.

pub mod step;

use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

use super::FlowError;
use crate::domain::tool::ToolField;
use crate::llm::SamplingParams;
pub use crate::retrieval::embed::EmbeddingsSpec;
use crate::retrieval::index::SearchType;
use crate::retrieval::load::{FileData, LoaderKind};
use crate::retrieval::split::SplitterKind;

/// A node's product.
#[derive(Debug, Clone, PartialEq)]
pub enum Component {
    Model(ModelSpec),
    Prompt(PromptSpec),
    Memory(MemorySpec),
    Tool(ToolSpec),
    Chain(ChainSpec),
    Agent(AgentSpec),
    Supervisor(SupervisorSpec),
    Worker(WorkerSpec),
    Sequential(SeqStep),
    Embeddings(EmbeddingsSpec),
    Splitter(SplitterSpec),
    Loader(LoaderSpec),
    VectorStore(VectorStoreSpec),
    RetrievalChain(RetrievalChainSpec),
    Moderation(ModerationSpec),
    OutputParser(crate::flow::output_parser::OutputParserSpec),
    /// An agent-memory node: a sequential flow's session resumes its checkpoint.
    Checkpointer,
    CsvAgent(CsvAgentSpec),
    /// A chatflow's `customFunction`.
    Function(FunctionSpec),
    /// `sqlDatabaseChain`.
    SqlChain(SqlChainSpec),
    /// What an agentflow node builds.
    Step(Box<step::StepKind>),
    /// Several tools from one node (`openAPIToolkit`: one per operation).
    Toolkit(Vec<ToolSpec>),
}

/// `csvAgent`: questions about a CSV answered with pandas code a model writes,
/// run by the Python runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvAgentSpec {
    pub node_id: String,
    pub model: ModelSpec,
    /// The CSV's bytes (the node's files, one after the other).
    pub csv: bytes::Bytes,
    /// Put before the final answer's prompt (`systemMessagePrompt`).
    pub system_message: String,
    /// The pandas call that reads `csv_data` (`customReadCSV`, default `read_csv(csv_data)`).
    pub read_csv: String,
}

/// `sqlDatabaseChain`: a model writes one SQL query for the question from the
/// tables' description, weir runs it read only, and the model answers from
/// its rows (LangChain's `SqlDatabaseChain`).
#[derive(Debug, Clone, PartialEq)]
pub struct SqlChainSpec {
    pub node_id: String,
    pub model: ModelSpec,
    pub database: SqlDatabase,
    pub tables: TableFilter,
    /// `topK`: the prompt's `{top_k}` (LangChain's default 5).
    pub top_k: u32,
    /// `customPrompt` (`{input}`, `{dialect}`, `{table_info}`, `{top_k}`);
    /// `None`: LangChain's prompt for the dialect.
    pub prompt: Option<String>,
}

/// A database as a node names it.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlDatabase {
    /// A file path, relative to `SQL_DATABASE_DIR` or inside it.
    Sqlite(String),
    /// A connection URL (`postgres://user:password@host:5432/db`).
    Postgres(String),
}

impl SqlDatabase {
    /// The dialect's name, as LangChain's prompts write it.
    pub fn dialect(&self) -> &'static str {
        match self {
            SqlDatabase::Sqlite(_) => "sqlite",
            SqlDatabase::Postgres(_) => "postgres",
        }
    }
}

/// Which tables a description covers, and how many sample rows each shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableFilter {
    /// Only these (`includesTables`); empty: all.
    pub include: Vec<String>,
    /// All but these (`ignoreTables`).
    pub ignore: Vec<String>,
    pub sample_rows: u32,
}

/// A chatflow's `customFunction`: the body of an async JavaScript function run
/// in the Python runtime's sandbox with Flowise's globals (`$input`, `$vars`,
/// `$flow`, and `$<name>` for each input variable).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub node_id: String,
    pub code: String,
    /// `functionInputVariables`: `{{question}}` in a text value is the question,
    /// `{{<id>.data.instance}}` another function's result.
    pub variables: Map<String, Value>,
}

/// A deny list the question is checked against before the flow runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModerationSpec {
    pub node_id: String,
    pub deny: Vec<String>,
    /// The answer to a denied question.
    pub message: String,
    /// When set, the model judges whether the question is like an entry.
    pub model: Option<ModelSpec>,
}

pub use crate::llm::connect::Provider;

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub node_id: String,
    pub node_type: &'static str,
    pub provider: Provider,
    pub params: SamplingParams,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PromptSpec {
    /// One user message.
    Text {
        template: String,
        values: Map<String, Value>,
    },
    /// A system and a human message.
    Chat {
        system: String,
        human: String,
        values: Map<String, Value>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemorySpec {
    pub node_id: String,
    /// Keep only the last `k` exchanges (`bufferWindowMemory`).
    pub window: Option<u32>,
    /// A fixed session from the node, instead of the request's chatId.
    pub session_id: Option<String>,
    /// The memory node's label (Flowise's `memoryType` of stored messages);
    /// `None` for memory a node keeps without a memory node.
    pub label: Option<&'static str>,
    /// The conversation is kept in the user's Redis, not weir's store.
    pub redis: Option<Box<crate::store::redis_history::RedisHistory>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    Llm,
    Conversation,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChainSpec {
    pub kind: ChainKind,
    pub node_id: String,
    pub model: ModelSpec,
    pub prompt: Option<PromptSpec>,
    pub memory: Option<MemorySpec>,
    pub system_message: String,
    /// `llmChain`'s `outputParser`: the answer becomes JSON.
    pub output_parser: Option<crate::flow::output_parser::OutputParserSpec>,
}

/// A tool an agent may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub node_id: String,
    pub kind: ToolKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolKind {
    Calculator,
    CurrentDateTime,
    Request(RequestTool),
    /// A SearXNG instance searched with the model's query (`searXNG`).
    WebSearch(WebSearchTool),
    /// One operation of an OpenAPI description (`openAPIToolkit`).
    OpenApi(Box<OpenApiOperation>),
    /// Pages scraped from the URL the model gives (`webScraperTool`).
    WebScraper(WebScraperTool),
    Python(PythonTool),
    /// Searches a vector store with the model's query; its chunks are the output.
    Retriever {
        name: String,
        description: String,
        store: Box<VectorStoreSpec>,
        /// The chunks found join the answer's `sourceDocuments`.
        return_sources: bool,
    },
    /// Searches a document store (a chatflow of the workspace holding a vector
    /// store) with the model's query: an agentflow agent's knowledge.
    DocumentStore {
        name: String,
        description: String,
        chatflow: uuid::Uuid,
        return_sources: bool,
    },
    /// The tools of an MCP server (`customMCP`), listed when a run starts.
    Mcp(McpTools),
}

/// An MCP server's tools: where the server is, and the tools picked by name
/// (all when none).
#[derive(Debug, Clone, PartialEq)]
pub struct McpTools {
    pub source: McpSource,
    pub actions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum McpSource {
    /// `customMCP`: the server's config as written (`{{$vars.<name>}}` is
    /// filled when a run starts).
    Config(String),
    /// `customMcpServerTool`: a server the workspace keeps (`/custom-mcp-servers`).
    Stored(uuid::Uuid),
}

/// An MCP server reached over Streamable HTTP: its URL and the headers sent
/// with every request (credentials among them).
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// A client-credentials grant whose token goes with every request as a
    /// Bearer (`pipedreamMCP`, a `customMCP` config's `oauth`).
    pub grant: Option<ClientCredentials>,
}

/// An OAuth client-credentials grant: where its token comes from.
#[derive(Clone, PartialEq)]
pub struct ClientCredentials {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    pub scope: Option<String>,
    /// The grant sent as JSON rather than a form (Pipedream documents JSON).
    pub json_body: bool,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// An MCP server that speaks on stdio: a process the Python runtime runs in its
/// sandbox (never weir itself), one per workspace and configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StdioMcpServer {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the process's environment (credentials among them).
    pub env: std::collections::BTreeMap<String, String>,
}

/// Where an MCP server's tools are called.
#[derive(Debug, Clone, PartialEq)]
pub enum McpEndpoint {
    Remote(McpServer),
    Stdio(StdioMcpServer),
}

/// Flowise's web scraper tool: pages from a URL, following links or a sitemap.
#[derive(Debug, Clone, PartialEq)]
pub struct WebScraperTool {
    pub description: String,
    /// Levels of links followed (1: the given page alone).
    pub max_depth: u32,
    pub max_pages: usize,
    /// For each page.
    pub timeout: std::time::Duration,
    /// Pages from the site's `/sitemap.xml` first (links followed when it has none).
    pub sitemap: bool,
}

/// A web search service as a tool: a SearXNG instance (self-hosted metasearch)
/// or one of the search APIs Flowise's tools call.
#[derive(Clone, PartialEq)]
pub struct WebSearchTool {
    pub name: String,
    pub description: String,
    pub engine: SearchEngine,
    /// The service's base URL (the engine's search path is added to it).
    pub base: String,
    /// Query parameters besides the query: SearXNG's own (`categories`,
    /// `engines`, `language`, `pageno`, `time_range`, `safesearch`), the key and
    /// engine id of the APIs that take them in the URL.
    pub params: Vec<(String, String)>,
    /// Headers sent (a SearXNG node's own, Brave's subscription token).
    pub headers: Map<String, Value>,
    /// Results kept (Flowise's 10 for SearXNG).
    pub max_results: usize,
}

/// Its parameters and headers may hold keys: they are never printed.
impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchTool")
            .field("name", &self.name)
            .field("engine", &self.engine)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Which search API a [`WebSearchTool`] speaks: where it asks and how its
/// answer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchEngine {
    /// `GET {base}/search?q=…&format=json`.
    SearXng,
    /// Brave's `GET {base}/res/v1/web/search?q=…` with `X-Subscription-Token`.
    Brave,
    /// SerpAPI's `GET {base}/search?api_key=…&q=…`.
    SerpApi,
    /// Serper's `POST {base}/search` of `{"q": …}` with `X-API-KEY`.
    Serper,
    /// Google's Custom Search JSON API, `GET {base}/customsearch/v1?key=…&cx=…&q=…`.
    GoogleCustomSearch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Delete,
}

impl HttpMethod {
    /// Whether the request carries a JSON body (POST, PUT).
    pub fn has_body(self) -> bool {
        matches!(self, HttpMethod::Post | HttpMethod::Put)
    }
}

/// One operation of an OpenAPI description as a tool: the model fills
/// `PathParameters`, `QueryParameters` and `RequestBody` (Flowise's names).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenApiOperation {
    /// The `operationId`, made a tool name.
    pub name: String,
    pub description: String,
    pub method: String,
    /// The server's URL and the path, `{name}` where path parameters go.
    pub url: String,
    /// The JSON schema of the tool's arguments.
    pub parameters: Value,
    /// Headers every call sends (`headers`).
    pub headers: Map<String, Value>,
    /// `removeNulls`: keys whose value is null are dropped from the arguments.
    pub remove_nulls: bool,
    pub return_direct: bool,
    /// `customCode` other than Flowise's default: JavaScript run in the Python
    /// runtime's sandbox, as a JavaScript custom tool is, with `$url`,
    /// `$options` and the arguments (one definition shared by the toolkit).
    pub custom_code: Option<Arc<PythonDefinition>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestTool {
    pub method: HttpMethod,
    pub name: String,
    pub description: String,
    /// A fixed URL from the node; else the model gives one.
    pub url: Option<String>,
    pub headers: Map<String, Value>,
    /// A fixed body from the node (POST, PUT); else the model gives one.
    pub body: Option<Value>,
    /// Flowise 3's schema of what the model fills in: for GET and DELETE its
    /// `queryParams` (`{name: {type, required, in: "path"|"query", description}}`),
    /// for POST and PUT its `body` (`{name: {type, required, description}}`).
    pub schema: Option<Map<String, Value>>,
    pub max_output: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PythonTool {
    pub source: PythonSource,
    /// Seconds; the runtime's default when `None`.
    pub timeout: Option<f64>,
    /// The tool's output is the answer (Flowise's `returnDirect`).
    pub return_direct: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PythonSource {
    /// A definition written in the node.
    Inline(Arc<PythonDefinition>),
    /// A tool of the workspace (`/api/v1/tools`), read when the run starts.
    Stored(Uuid),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PythonDefinition {
    pub name: String,
    pub description: String,
    pub schema: Vec<ToolField>,
    pub code: String,
    pub requirements: Vec<String>,
    /// The code is JavaScript (a Flowise custom tool's body), run by the
    /// runtime's JavaScript executor in the same sandbox.
    pub javascript: bool,
}

/// The three agent node types differ in their prompts in Flowise; here all of
/// them run on native tool calling.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub node_id: String,
    pub name: String,
    pub model: ModelSpec,
    pub tools: Vec<ToolSpec>,
    pub memory: Option<MemorySpec>,
    pub system_message: String,
    pub max_iterations: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorSpec {
    pub node_id: String,
    pub name: String,
    pub prompt: String,
    pub model: ModelSpec,
    pub memory: Option<MemorySpec>,
    pub recursion_limit: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    pub node_id: String,
    pub name: String,
    pub prompt: String,
    /// `promptValues` for `{placeholders}` of the prompt (none: the prompt as written).
    pub values: Map<String, Value>,
    /// The worker's own model; the supervisor's when `None`.
    pub model: Option<ModelSpec>,
    pub tools: Vec<ToolSpec>,
    /// The supervisor node it reports to.
    pub supervisor: String,
    pub max_iterations: u32,
}

/// A node of a sequential-agents graph. Its place in the graph (predecessors,
/// branches) is the plan's; this is what the node itself does.
#[derive(Debug, Clone, PartialEq)]
pub enum SeqStep {
    Start {
        model: ModelSpec,
        memory: Option<MemorySpec>,
        /// Agent memory: each session's run begins at its last checkpoint.
        checkpoints: bool,
    },
    Agent(SeqAgent),
    Llm(SeqAgent),
    ToolNode {
        name: String,
        tools: Vec<ToolSpec>,
        /// The LLM node whose tool calls this node runs.
        llm_node: String,
        update_state: Vec<(String, String)>,
        /// `updateStateMemoryCode`, when that tab is the one chosen.
        update_code: Option<String>,
    },
    Condition {
        name: String,
        routing: Routing,
    },
    /// A model decides (`seqConditionAgent`): its answer (or structured output)
    /// is checked against the rows.
    ConditionAgent(SeqConditionAgent),
    /// Back to the node of that name (`seqLoop`; the plan resolves it).
    Loop,
    /// The flow's state channels (`seqState`).
    State(Vec<StateChannel>),
    /// The flow's state channels as `seqState`'s JavaScript writes them (an
    /// object of `{value: reducer, default: () => value}`): evaluated in the
    /// Python runtime's sandbox when a run starts, each key's `default()` is
    /// its start and its reducer, tried on sample values, must replace (`(x,
    /// y) => y`) or append (`(x, y) => x.concat(y)`).
    StateCode(String),
    End,
}

/// One key of a sequential flow's state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChannel {
    pub key: String,
    /// `Append` (a list that writes add to) rather than `Replace`.
    pub append: bool,
    pub default: Value,
}

/// A `seqConditionAgent`.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqConditionAgent {
    /// Its name, prompts and model, read as an LLM step's.
    pub step: SeqAgent,
    /// `conditionAgentStructuredOutput`: the model answers with these keys.
    pub structured: Vec<OutputField>,
    pub routing: Routing,
}

/// How a sequential condition picks its branch.
#[derive(Debug, Clone, PartialEq)]
pub enum Routing {
    /// The condition table (`conditionUI`): the first row that holds names
    /// the branch, else `End`.
    Rows(Vec<ConditionRow>),
    /// `conditionFunction`: JavaScript, run in the Python runtime's sandbox,
    /// that returns the branch's name.
    Code(String),
}

/// A `seqAgent` (tool-calling loop) or `seqLLMNode` (one model call).
#[derive(Debug, Clone, PartialEq)]
pub struct SeqAgent {
    pub name: String,
    pub system: String,
    pub human: String,
    pub values: Map<String, Value>,
    pub model: Option<ModelSpec>,
    pub tools: Vec<ToolSpec>,
    pub max_iterations: u32,
    /// `updateStateMemoryUI` rows: state key, and its value (`$flow.…` read
    /// after the step, else the text as written).
    pub update_state: Vec<(String, String)>,
    /// `updateStateMemoryCode`: JavaScript returning the keys to write, run in
    /// the Python runtime's sandbox (when that tab is the one chosen).
    pub update_code: Option<String>,
}

/// One row of a `seqCondition`: when `variable` `operation` `value`, take `output`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionRow {
    pub variable: String,
    pub operation: String,
    pub value: String,
    pub output: String,
}

/// A text splitter's settings (checked when built).
#[derive(Debug, Clone, PartialEq)]
pub struct SplitterSpec {
    pub kind: SplitterKind,
    pub chunk_size: usize,
    pub chunk_overlap: usize,
}

/// A document loader node: what it reads, how its documents are cut, and the
/// metadata it adds or leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderSpec {
    pub node_id: String,
    pub kind: LoaderKind,
    /// Files written into the node (Flowise's data URLs); an upsert's uploaded
    /// files take their place.
    pub files: Vec<FileData>,
    pub splitter: Option<SplitterSpec>,
    /// Merged into every document (after splitting, as Flowise does).
    pub metadata: Map<String, Value>,
    /// Metadata keys removed; `*` keeps only `metadata`.
    pub omit_keys: Vec<String>,
    /// The node names files of a Flowise server's storage: an upsert must send them.
    pub needs_upload: bool,
}

/// A vector store node as the query path sees it: where its chunks are kept,
/// how the question is embedded, and how it is searched.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorStoreSpec {
    pub node_id: String,
    pub node_type: &'static str,
    pub embeddings: EmbeddingsSpec,
    /// The embeddings node, for messages that name it.
    pub embeddings_node: String,
    pub top_k: usize,
    pub search: SearchType,
    /// Files attached to a prediction are added to this store for that chat only
    /// (Flowise's `fileUpload`).
    pub file_upload: bool,
    /// Flowise's pgvector node: searched by PostgreSQL's pgvector when the
    /// server's store has it in use, else in weir's own index like the others.
    pub pgvector: bool,
    /// A rerank retriever wrapped around the store: what it finds is
    /// reordered (and cut) by a rerank model.
    pub rerank: Option<Box<crate::retrieval::rerank::RerankSpec>>,
    /// Flowise's `documentStoreVS`: the document store of this id, searched
    /// with its own vector store and embeddings (the fields above are unused).
    pub document_store: Option<uuid::Uuid>,
    /// An RRF retriever around the store (`RRFRetriever`).
    pub fusion: Option<Box<FusionSpec>>,
}

/// `RRFRetriever`: a model asks the question `query_count` ways; the question
/// and each of them are searched, and the lists are fused by reciprocal rank
/// (a chunk scores the sum of `1 / (c + rank)` over the lists it is in).
#[derive(Debug, Clone, PartialEq)]
pub struct FusionSpec {
    pub model: ModelSpec,
    pub query_count: usize,
    /// Chunks kept (`None`: the store's `topK`).
    pub top_k: Option<usize>,
    pub c: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetrievalKind {
    /// `retrievalQAChain`: the chunks and the question in one prompt.
    Qa,
    /// `conversationalRetrievalQAChain`: the question rephrased with the
    /// history, then answered over the chunks.
    Conversational,
    /// LlamaIndex's `contextChatEngine`: the chunks the message itself finds,
    /// in the system message, then the conversation.
    Context,
    /// LlamaIndex's `queryEngine`: the question's chunks under its text QA
    /// prompt (`response_prompt`), one user message, no memory.
    Query,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetrievalChainSpec {
    pub kind: RetrievalKind,
    pub node_id: String,
    pub model: ModelSpec,
    pub store: VectorStoreSpec,
    pub memory: Option<MemorySpec>,
    pub rephrase_prompt: String,
    pub response_prompt: String,
    pub return_sources: bool,
}

/// One key of `llmStructuredOutput`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputField {
    pub key: String,
    pub kind: FieldKind,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    String,
    StringArray,
    Number,
    Boolean,
    Enum(Vec<String>),
    /// An array of objects with these properties (Flowise's `jsonSchema`).
    JsonArray(Map<String, Value>),
}

/// Structured output rows (`{key, type, enumValues, jsonSchema, description}`)
/// as fields. Types as agentflows write them (`stringArray`) or as sequential
/// agents do (`String Array`); rows without a key are skipped.
pub fn output_fields(
    rows: &[Map<String, Value>],
    invalid: impl Fn(String) -> FlowError,
) -> Result<Vec<OutputField>, FlowError> {
    let mut fields = Vec::new();
    for row in rows {
        let key = cell(row.get("key"));
        let key = key.trim();
        if key.is_empty() {
            continue;
        }
        let kind_name = cell(row.get("type")).to_ascii_lowercase().replace(' ', "");
        let kind = match kind_name.as_str() {
            "string" | "" => FieldKind::String,
            "stringarray" => FieldKind::StringArray,
            "number" => FieldKind::Number,
            "boolean" => FieldKind::Boolean,
            "enum" => FieldKind::Enum(
                cell(row.get("enumValues"))
                    .split(',')
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .collect(),
            ),
            "jsonarray" => match serde_json::from_str::<Value>(&cell(row.get("jsonSchema"))) {
                Ok(Value::Object(properties)) => FieldKind::JsonArray(properties),
                _ => {
                    return Err(invalid(format!(
                        "structured output key '{key}' needs a JSON object schema"
                    )));
                }
            },
            _ => {
                return Err(invalid(format!(
                    "structured output key '{key}' has an unknown type '{}'",
                    cell(row.get("type"))
                )));
            }
        };
        if matches!(&kind, FieldKind::Enum(values) if values.is_empty()) {
            return Err(invalid(format!(
                "structured output key '{key}' is an enum without values"
            )));
        }
        fields.push(OutputField {
            key: key.to_owned(),
            kind,
            description: cell(row.get("description")),
        });
    }
    Ok(fields)
}

/// A row's cell as text (numbers and booleans as written).
pub fn cell(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}
