//! The node types weir runs, each declaring its inputs: name, kind, whether it is
//! required, and whether it is a secret or an endpoint (never overridable by a
//! request unless the chatflow allows it).
//!
//! Flowise exports carry inputs that have no effect here (caching, image uploads,
//! proxy settings); those are declared [`InputKind::Ignored`] so real exports load,
//! while an input nobody declared is a 400 naming node and input.

/// What a node produces, i.e. what another node's anchor may accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    ChatModel,
    Prompt,
    Chain,
    Memory,
    /// Anchors weir accepts but does not run (moderation, output parsers).
    Unsupported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Text,
    Number,
    Integer,
    /// JSON text or a JSON object (promptValues, baseOptions).
    Json,
    /// A reference `{{nodeId.data.instance}}` to a node of that category.
    Anchor(Category),
    /// A list of references.
    Anchors(Category),
    /// Known from Flowise, without effect in weir.
    Ignored,
}

#[derive(Debug, Clone, Copy)]
pub struct InputSpec {
    pub name: &'static str,
    pub kind: InputKind,
    pub required: bool,
    /// Keys and endpoints: not overridable unless `apiConfig.overrideConfig.allow` lists them.
    pub sensitive: bool,
}

const fn input(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        name,
        kind,
        required: false,
        sensitive: false,
    }
}

const fn required(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        name,
        kind,
        required: true,
        sensitive: false,
    }
}

const fn sensitive(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        name,
        kind,
        required: false,
        sensitive: true,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    ChatOpenAI,
    ChatAnthropic,
    ChatOllama,
    ChatLocal,
    PromptTemplate,
    ChatPromptTemplate,
    LlmChain,
    ConversationChain,
    BufferMemory,
    BufferWindowMemory,
}

pub struct NodeSpec {
    pub node_type: NodeType,
    pub name: &'static str,
    pub category: Category,
    pub inputs: &'static [InputSpec],
}

impl NodeSpec {
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }
}

use Category as C;
use InputKind as K;

/// Inputs Flowise puts on chat models that weir accepts without effect.
const MODEL_IGNORED: [InputSpec; 6] = [
    input("cache", K::Ignored),
    input("streaming", K::Ignored),
    input("allowImageUploads", K::Ignored),
    input("imageResolution", K::Ignored),
    input("timeout", K::Ignored),
    input("stopSequence", K::Ignored),
];

const fn with_ignored<const N: usize, const M: usize>(own: [InputSpec; N]) -> [InputSpec; M] {
    let mut out = [input("", K::Ignored); M];
    let mut i = 0;
    while i < N {
        out[i] = own[i];
        i += 1;
    }
    let mut j = 0;
    while j < MODEL_IGNORED.len() {
        out[N + j] = MODEL_IGNORED[j];
        j += 1;
    }
    out
}

const CHAT_OPENAI: [InputSpec; 17] = with_ignored([
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("seed", K::Integer),
    sensitive("basePath", K::Text),
    sensitive("basepath", K::Text),
    sensitive("openAIApiKey", K::Text),
    sensitive("baseOptions", K::Json),
    sensitive("proxyUrl", K::Ignored),
    input("frequencyPenalty", K::Ignored),
]);

const CHAT_ANTHROPIC: [InputSpec; 15] = with_ignored([
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("maxTokensToSample", K::Integer),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("topK", K::Ignored),
    sensitive("anthropicApiKey", K::Text),
    sensitive("basePath", K::Text),
    input("extendedThinking", K::Ignored),
]);

const CHAT_OLLAMA: [InputSpec; 17] = with_ignored([
    sensitive("baseUrl", K::Text),
    input("modelName", K::Text),
    input("temperature", K::Number),
    input("topP", K::Number),
    input("numPredict", K::Integer),
    input("seed", K::Integer),
    input("topK", K::Ignored),
    input("numCtx", K::Ignored),
    input("keepAlive", K::Ignored),
    input("jsonMode", K::Ignored),
    input("repeatPenalty", K::Ignored),
]);

const CHAT_LOCAL: [InputSpec; 10] = with_ignored([
    input("temperature", K::Number),
    input("maxTokens", K::Integer),
    input("topP", K::Number),
    input("seed", K::Integer),
]);

pub static NODES: &[NodeSpec] = &[
    NodeSpec {
        node_type: NodeType::ChatOpenAI,
        name: "chatOpenAI",
        category: C::ChatModel,
        inputs: &CHAT_OPENAI,
    },
    NodeSpec {
        node_type: NodeType::ChatAnthropic,
        name: "chatAnthropic",
        category: C::ChatModel,
        inputs: &CHAT_ANTHROPIC,
    },
    NodeSpec {
        node_type: NodeType::ChatOllama,
        name: "chatOllama",
        category: C::ChatModel,
        inputs: &CHAT_OLLAMA,
    },
    NodeSpec {
        node_type: NodeType::ChatLocal,
        name: "chatLocal",
        category: C::ChatModel,
        inputs: &CHAT_LOCAL,
    },
    NodeSpec {
        node_type: NodeType::PromptTemplate,
        name: "promptTemplate",
        category: C::Prompt,
        inputs: &[
            required("template", K::Text),
            input("promptValues", K::Json),
        ],
    },
    NodeSpec {
        node_type: NodeType::ChatPromptTemplate,
        name: "chatPromptTemplate",
        category: C::Prompt,
        inputs: &[
            input("systemMessagePrompt", K::Text),
            required("humanMessagePrompt", K::Text),
            input("promptValues", K::Json),
            input("messageHistory", K::Ignored),
        ],
    },
    NodeSpec {
        node_type: NodeType::LlmChain,
        name: "llmChain",
        category: C::Chain,
        inputs: &[
            required("model", K::Anchor(C::ChatModel)),
            required("prompt", K::Anchor(C::Prompt)),
            input("outputParser", K::Anchor(C::Unsupported)),
            input("inputModeration", K::Anchors(C::Unsupported)),
            input("chainName", K::Ignored),
        ],
    },
    NodeSpec {
        node_type: NodeType::ConversationChain,
        name: "conversationChain",
        category: C::Chain,
        inputs: &[
            required("model", K::Anchor(C::ChatModel)),
            input("memory", K::Anchor(C::Memory)),
            input("chatPromptTemplate", K::Anchor(C::Prompt)),
            input("systemMessagePrompt", K::Text),
            input("inputModeration", K::Anchors(C::Unsupported)),
        ],
    },
    NodeSpec {
        node_type: NodeType::BufferMemory,
        name: "bufferMemory",
        category: C::Memory,
        inputs: &[input("sessionId", K::Text), input("memoryKey", K::Ignored)],
    },
    NodeSpec {
        node_type: NodeType::BufferWindowMemory,
        name: "bufferWindowMemory",
        category: C::Memory,
        inputs: &[
            required("k", K::Integer),
            input("sessionId", K::Text),
            input("memoryKey", K::Ignored),
        ],
    },
];

pub fn spec(name: &str) -> Option<&'static NodeSpec> {
    NODES.iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_is_well_formed() {
        for node in NODES {
            let mut names: Vec<_> = node.inputs.iter().map(|i| i.name).collect();
            assert!(
                names.iter().all(|n| !n.is_empty()),
                "{} has an unnamed input",
                node.name
            );
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                node.inputs.len(),
                "{} declares an input twice",
                node.name
            );
        }
        assert!(
            spec("chatOpenAI")
                .and_then(|s| s.input("basePath"))
                .is_some_and(|i| i.sensitive)
        );
        assert!(spec("toolAgent").is_none());
    }
}
