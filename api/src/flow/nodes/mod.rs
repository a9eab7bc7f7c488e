//! One module per node type (see [`super::node`] for the trait and how to add
//! one), and what the chat model nodes share: the inputs Flowise puts on every
//! model that weir accepts without effect, keys read from the node or the
//! server's environment, and sampling parameters.

pub mod agent_memory;
pub mod agentflow;
pub mod azure_chat_openai;
pub mod azure_open_ai_embeddings;
pub mod buffer_memory;
pub mod buffer_window_memory;
pub mod calculator;
pub mod character_text_splitter;
pub mod chat_anthropic;
pub mod chat_google_generative_ai;
pub mod chat_local;
pub mod chat_mistral_ai;
pub mod chat_ollama;
pub mod chat_openai;
pub mod chat_prompt_template;
pub mod cheerio_web_scraper;
pub mod conversation_chain;
pub mod conversational_agent;
pub mod conversational_retrieval_qa_chain;
pub mod csv_agent;
pub mod csv_file;
pub mod current_date_time;
pub mod custom_function;
pub mod custom_mcp;
pub mod custom_tool;
pub mod document_store;
pub mod document_store_vs;
pub mod documents;
pub mod docx_file;
pub mod faiss;
pub mod google_generative_ai_embedding;
pub mod groq_chat;
pub mod input_moderation_simple;
pub mod javascript;
pub mod json_file;
pub mod jsonlines_file;
pub mod llama_index_engines;
pub mod llm_chain;
pub mod local_ai_embeddings;
pub mod local_embeddings;
pub mod markdown_text_splitter;
pub mod memory_vector_store;
pub mod ollama_embedding;
pub mod open_ai_embeddings;
pub mod openapi_toolkit;
pub mod output_parsers;
pub mod pdf_file;
pub mod plain_text;
pub mod postgres;
pub mod prompt_template;
pub mod python_tool;
pub mod react_agent_chat;
pub mod recursive_character_text_splitter;
pub mod redis_backed_chat_memory;
pub mod requests_delete;
pub mod requests_get;
pub mod requests_post;
pub mod requests_put;
pub mod rerank_retrievers;
pub mod retrieval_qa_chain;
pub mod retriever_tool;
pub mod rrf_retriever;
pub mod search_apis;
pub mod searxng;
pub mod seq_agent;
pub mod seq_condition;
pub mod seq_condition_agent;
pub mod seq_end;
pub mod seq_llm_node;
pub mod seq_loop;
pub mod seq_start;
pub mod seq_state;
pub mod seq_tool_node;
pub mod simple_store_llama_index;
pub mod sql_database_chain;
pub mod supervisor;
pub mod text_file;
pub mod token_text_splitter;
pub mod tool_agent;
pub mod web_scraper_tool;
pub mod worker;

use super::FlowError;
use super::destination::{host_of, may_receive_keys};
use super::node::{Build, InputKind as K, InputSpec, input};
use crate::llm::SamplingParams;
use crate::llm::endpoints;

/// Inputs Flowise puts on chat models that weir accepts without effect.
const MODEL_IGNORED: [InputSpec; 5] = [
    input("cache", K::Ignored),
    input("streaming", K::Ignored),
    input("imageResolution", K::Ignored),
    input("timeout", K::Ignored),
    input("stopSequence", K::Ignored),
];

/// A model's own inputs followed by [`MODEL_IGNORED`].
const fn with_ignored<const N: usize, const M: usize>(own: [InputSpec; N]) -> [InputSpec; M] {
    super::node::concat(own, MODEL_IGNORED)
}

/// Inputs every agent has: its moderation (checked by the plan) and one
/// without effect.
const AGENT_IGNORED: [InputSpec; 2] = [
    input(
        "inputModeration",
        K::Anchors(super::node::Category::Moderation),
    ),
    input("enableDetailedStreaming", K::Ignored),
];

/// Reads a setting from the node, else from the server's environment.
fn setting(node: &Build<'_>, inputs: &[&str], env: &str) -> Option<String> {
    node.text_of(inputs)
        .map(str::to_owned)
        .or_else(|| node.settings().get(env).map(str::to_owned))
}

/// How a provider's node finds its endpoint and its key (where the provider
/// lives is `llm::endpoints`' table).
struct ProviderEndpoint {
    /// Inputs naming the base URL (the node's choice).
    base_inputs: &'static [&'static str],
    /// The server's setting of the base URL (its choice).
    base_env: Option<&'static str>,
    default_base: &'static str,
    key_inputs: &'static [&'static str],
    key_env: &'static str,
    /// The provider's own host; its subdomains too, over https.
    home: &'static str,
}

const OPENAI: ProviderEndpoint = ProviderEndpoint {
    base_inputs: &["basePath", "basepath"],
    base_env: None,
    default_base: default_base(endpoints::OPENAI),
    key_inputs: &["openAIApiKey"],
    key_env: "OPENAI_API_KEY",
    home: endpoints::OPENAI.home,
};

const ANTHROPIC: ProviderEndpoint = ProviderEndpoint {
    base_inputs: &["basePath"],
    base_env: Some("ANTHROPIC_BASE_URL"),
    default_base: default_base(endpoints::ANTHROPIC),
    key_inputs: &["anthropicApiKey"],
    key_env: "ANTHROPIC_API_KEY",
    home: endpoints::ANTHROPIC.home,
};

const GEMINI: ProviderEndpoint = ProviderEndpoint {
    base_inputs: &["baseUrl"],
    base_env: Some("GOOGLE_GENERATIVE_AI_BASE_URL"),
    default_base: default_base(endpoints::GEMINI),
    key_inputs: &["googleGenerativeAPIKey"],
    key_env: "GOOGLE_GENERATIVE_AI_API_KEY",
    home: endpoints::GEMINI.home,
};

const MISTRAL: ProviderEndpoint = ProviderEndpoint {
    base_inputs: &["overrideEndpoint"],
    base_env: None,
    default_base: default_base(endpoints::MISTRAL),
    key_inputs: &["mistralAIAPIKey", "apiKey"],
    key_env: "MISTRAL_API_KEY",
    home: endpoints::MISTRAL.home,
};

const GROQ: ProviderEndpoint = ProviderEndpoint {
    base_inputs: &["basePath"],
    base_env: None,
    default_base: default_base(endpoints::GROQ),
    key_inputs: &["groqApiKey"],
    key_env: "GROQ_API_KEY",
    home: endpoints::GROQ.home,
};

/// A provider's default base, at compile time (one without fails the build).
const fn default_base(provider: endpoints::ProviderEndpoint) -> &'static str {
    match provider.default_base {
        Some(base) => base,
        None => panic!("this provider has no default base URL"),
    }
}

/// The base URL a provider node calls and the key it sends there.
fn endpoint(
    node: &Build<'_>,
    provider: &ProviderEndpoint,
) -> Result<(String, Option<String>), FlowError> {
    let chosen = node.text_of(provider.base_inputs).is_some();
    let base = base_url(
        node,
        provider.base_inputs,
        provider.base_env,
        provider.default_base,
    );
    let key = match node.text_of(provider.key_inputs) {
        Some(own) => Some(own.to_owned()),
        None => server_key(node, provider.key_env, &base, chosen, provider.home)?,
    };
    Ok((base, key))
}

/// The server's provider key (`env`) for a node that brings none of its own, if it
/// may go to `url`. The same rule for every provider: the key goes where the server
/// sends it (the node did not choose the endpoint: `chosen` false), to the
/// provider's own host (`home` over https), or to a host the operator trusts with
/// the provider keys (`PROVIDER_KEY_HOSTS`: `host` or `host:port`, comma separated).
/// A flow author who points a node elsewhere brings the key for it; a node naming a
/// credential never gets the server's.
fn server_key(
    node: &Build<'_>,
    env: &str,
    url: &str,
    chosen: bool,
    home: &str,
) -> Result<Option<String>, FlowError> {
    if node.uses_credential() {
        return Ok(None);
    }
    let Some(key) = node.settings().get(env) else {
        return Ok(None);
    };
    if !chosen || may_receive_keys(url, Some(home), &[], &node.settings().provider_key_hosts) {
        return Ok(Some(key.to_owned()));
    }
    Err(node.invalid(format_args!(
        "sends its requests to {} without a key of its own, and the server's {env} goes only \
         to {home} and the hosts in PROVIDER_KEY_HOSTS: give the node its key or a credential",
        host_of(url).unwrap_or_else(|| url.to_owned())
    )))
}

/// A base URL from the node, the environment or the default, without trailing slash.
fn base_url(node: &Build<'_>, inputs: &[&str], env: Option<&str>, default: &str) -> String {
    node.text_of(inputs)
        .map(str::to_owned)
        .or_else(|| env.and_then(|e| node.settings().get(e).map(str::to_owned)))
        .unwrap_or_else(|| default.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// Sampling parameters: temperature and topP, the first set of `max_tokens`, and `seed`.
fn sampling(
    node: &Build<'_>,
    max_tokens: &[&str],
    seed: Option<&str>,
) -> Result<SamplingParams, FlowError> {
    let mut limit = None;
    for name in max_tokens {
        if let Some(v) = node.integer(name)? {
            limit = Some(u32::try_from(v).unwrap_or(u32::MAX));
            break;
        }
    }
    Ok(SamplingParams {
        temperature: node.number("temperature")?,
        top_p: node.number("topP")?,
        max_tokens: limit,
        seed: match seed {
            Some(name) => node.integer(name)?,
            None => None,
        },
        thinking_budget: None,
    })
}

/// The model name, or the provider's default.
fn model_name(node: &Build<'_>, default: &str) -> String {
    node.text("modelName").unwrap_or(default).to_owned()
}

/// An Azure deployment's base URL and key. The URL: the node's `basePath`
/// (weir's: the deployment's base URL), else its `basepath` (Flowise's: the
/// `…/deployments` root, the deployment added after it), else its instance name
/// (`https://<instance>.openai.azure.com/openai/deployments/<deployment>`); else
/// from the server's environment, as LangChain reads it: `AZURE_OPENAI_BASE_PATH`
/// (a root, as `basepath`), `AZURE_OPENAI_ENDPOINT` (`<endpoint>/openai/deployments/
/// <deployment>`), `AZURE_OPENAI_API_INSTANCE_NAME`. The key: the node's
/// `azureOpenAIApiKey` (or its credential's), else the server's
/// `AZURE_OPENAI_API_KEY` as [`server_key`] allows: never to a URL the node chose
/// (`basePath`, `basepath`) off Azure's hosts and `PROVIDER_KEY_HOSTS`.
fn azure_endpoint(
    node: &Build<'_>,
    deployment: Option<String>,
    deployment_env: &str,
) -> Result<(String, Option<String>), FlowError> {
    let env = |name: &str| node.settings().get(name).map(str::to_owned);
    let root = |root: &str| {
        let root = root.trim_end_matches('/');
        match &deployment {
            Some(d) => format!("{root}/{d}"),
            None => root.to_owned(),
        }
    };
    let on_azure = |instance: &str, d: &str| -> Result<String, FlowError> {
        // A DNS label, so the host stays on openai.azure.com.
        if instance.is_empty()
            || !instance
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(node.invalid(format_args!(
                "has an instance name '{instance}' that is not a plain name (letters, digits, '-')"
            )));
        }
        Ok(format!(
            "https://{instance}.openai.azure.com/openai/deployments/{d}"
        ))
    };
    let node_key = node.text("azureOpenAIApiKey").map(str::to_owned);
    let with_key = |url: String, chosen: bool| -> Result<(String, Option<String>), FlowError> {
        let key = match &node_key {
            Some(own) => Some(own.clone()),
            None => server_key(node, "AZURE_OPENAI_API_KEY", &url, chosen, AZURE_HOME)?,
        };
        Ok((url, key))
    };
    match (node.text("basePath"), node.text("basepath")) {
        (Some(base), _) => return with_key(base.trim_end_matches('/').to_owned(), true),
        (None, Some(base)) => return with_key(root(base), true),
        (None, None) => {}
    }
    match (node.text("azureOpenAIApiInstanceName"), &deployment) {
        (Some(instance), Some(d)) => return with_key(on_azure(instance, d)?, false),
        (Some(_), None) => {
            return Err(node.invalid(format_args!(
                "needs a deployment name ('azureOpenAIApiDeploymentName' or {deployment_env})"
            )));
        }
        (None, _) => {}
    }
    if let Some(base) = env("AZURE_OPENAI_BASE_PATH") {
        return with_key(root(&base), false);
    }
    let found = match (env("AZURE_OPENAI_ENDPOINT"), &deployment) {
        (Some(endpoint), Some(d)) => Some(format!(
            "{}/openai/deployments/{d}",
            endpoint.trim_end_matches('/')
        )),
        (None, Some(d)) => env("AZURE_OPENAI_API_INSTANCE_NAME")
            .map(|i| on_azure(&i, d))
            .transpose()?,
        (_, None) => None,
    };
    let url = found.ok_or_else(|| {
        node.invalid(format_args!(
            "needs 'basePath' or 'basepath', or an instance and a deployment name (inputs, or \
             AZURE_OPENAI_BASE_PATH, AZURE_OPENAI_ENDPOINT or AZURE_OPENAI_API_INSTANCE_NAME \
             and {deployment_env})"
        ))
    })?;
    with_key(url, false)
}

/// Azure OpenAI's hosts: `<instance>.openai.azure.com`.
const AZURE_HOME: &str = endpoints::AZURE_OPENAI.home;
