//! Where each model provider lives, in one table: the credential type Flowise
//! names it by, its own host (where its keys may always go: the host or a
//! subdomain, over https), and the base URL a node that names none calls.

/// One provider's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderEndpoint {
    /// Flowise's credential type (`openAIApi`).
    pub credential: &'static str,
    /// The provider's own host.
    pub home: &'static str,
    /// The base URL nodes call when they name none (`None`: each deployment
    /// has its own, as Azure's).
    pub default_base: Option<&'static str>,
}

pub const OPENAI: ProviderEndpoint = ProviderEndpoint {
    credential: "openAIApi",
    home: "api.openai.com",
    default_base: Some(super::openai::DEFAULT_BASE),
};

pub const ANTHROPIC: ProviderEndpoint = ProviderEndpoint {
    credential: "anthropicApi",
    home: "api.anthropic.com",
    default_base: Some(super::anthropic::DEFAULT_BASE),
};

/// Mistral speaks the OpenAI wire format at its own base.
pub const MISTRAL: ProviderEndpoint = ProviderEndpoint {
    credential: "mistralAIApi",
    home: "api.mistral.ai",
    default_base: Some("https://api.mistral.ai/v1"),
};

pub const AZURE_OPENAI: ProviderEndpoint = ProviderEndpoint {
    credential: "azureOpenAIApi",
    home: "openai.azure.com",
    default_base: None,
};

pub const GEMINI: ProviderEndpoint = ProviderEndpoint {
    credential: "googleGenerativeAI",
    home: "generativelanguage.googleapis.com",
    default_base: Some(super::gemini::DEFAULT_BASE),
};

/// Groq speaks the OpenAI wire format at its own base.
pub const GROQ: ProviderEndpoint = ProviderEndpoint {
    credential: "groqApi",
    home: "api.groq.com",
    default_base: Some("https://api.groq.com/openai/v1"),
};

/// The search tools' APIs (`braveSearchAPI`, `serpAPI`, `serper`, `googleCustomSearch`).
pub const BRAVE_SEARCH: ProviderEndpoint = ProviderEndpoint {
    credential: "braveSearchApi",
    home: "api.search.brave.com",
    default_base: Some("https://api.search.brave.com"),
};

pub const SERPAPI: ProviderEndpoint = ProviderEndpoint {
    credential: "serpApi",
    home: "serpapi.com",
    default_base: Some("https://serpapi.com"),
};

pub const SERPER: ProviderEndpoint = ProviderEndpoint {
    credential: "serperApi",
    home: "google.serper.dev",
    default_base: Some("https://google.serper.dev"),
};

/// Google's APIs share googleapis.com (Custom Search answers on `www.` and `customsearch.`).
pub const GOOGLE_CUSTOM_SEARCH: ProviderEndpoint = ProviderEndpoint {
    credential: "googleCustomSearchApi",
    home: "googleapis.com",
    default_base: Some("https://www.googleapis.com"),
};

/// Every provider whose credentials weir knows the home of (Cohere, Jina and
/// Voyage keys serve the rerank retrievers, Upstash's token its Redis memory, the
/// search APIs' keys their tools).
pub const PROVIDERS: &[ProviderEndpoint] = &[
    OPENAI,
    ANTHROPIC,
    MISTRAL,
    AZURE_OPENAI,
    GEMINI,
    GROQ,
    ProviderEndpoint {
        credential: "cohereApi",
        home: "api.cohere.ai",
        default_base: None,
    },
    ProviderEndpoint {
        credential: "jinaAIApi",
        home: "api.jina.ai",
        default_base: None,
    },
    ProviderEndpoint {
        credential: "voyageAIApi",
        home: "api.voyageai.com",
        default_base: None,
    },
    BRAVE_SEARCH,
    SERPAPI,
    SERPER,
    GOOGLE_CUSTOM_SEARCH,
    // Upstash databases are `<name>.upstash.io`: the home's subdomains.
    ProviderEndpoint {
        credential: "upstashRedisMemoryApi",
        home: "upstash.io",
        default_base: None,
    },
];

/// The provider's own host for a credential type, where there is one.
pub fn home_of(credential: &str) -> Option<&'static str> {
    PROVIDERS
        .iter()
        .find(|p| p.credential == credential)
        .map(|p| p.home)
}
