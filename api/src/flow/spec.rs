//! What a node type declares: its inputs ([`InputSpec`]: names, kinds, which
//! are required, which are keys or endpoints) and what it produces
//! ([`Category`]). Plain constant data, readable by every floor that checks a
//! flow (validation, overrides, where credentials may go) without building it.

/// What a node produces, i.e. what another node's anchor may accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    ChatModel,
    Prompt,
    Chain,
    Memory,
    Tool,
    Agent,
    /// A multi-agent supervisor (its workers point at it).
    Supervisor,
    Worker,
    /// A step of a sequential-agents graph.
    Sequential,
    Embeddings,
    TextSplitter,
    DocumentLoader,
    /// A vector store node: a retriever and a vector store at once, as in Flowise.
    VectorStore,
    /// A retriever around a vector store (a reranker): taken wherever a vector
    /// store's retriever is, never filled by an upsert.
    Retriever,
    /// A check of the question before the flow runs (`inputModeration`).
    Moderation,
    /// Turns a chain's answer into JSON (`outputParser`).
    OutputParser,
    /// Anchors weir accepts but does not run.
    Unsupported,
    /// A node of an agentflow (Agentflow V2): it builds a step, and edges say
    /// what runs after it.
    Step,
    /// An agentflow node whose outputs are branches (`<id>-output-<index>`): a
    /// condition, a condition agent, a human input. What follows one waits for
    /// whichever branch was taken.
    Decision,
    /// JavaScript whose result other nodes read (`customFunction`: its value
    /// fills `{{id.data.instance}}` in their prompt values), or that answers
    /// as the flow's ending node.
    Function,
}

impl Category {
    /// Whether a node of this category may be connected where `expected` is
    /// asked for (a retriever where a vector store's retriever is).
    pub fn fits(self, expected: Category) -> bool {
        self == expected || (self == Category::Retriever && expected == Category::VectorStore)
    }

    /// Whether a node of this category can be the flow's answer.
    pub fn answers(self) -> bool {
        matches!(self, Category::Chain | Category::Agent | Category::Function)
    }

    /// Whether a node of this category belongs in an agentflow.
    pub fn is_agentflow(self) -> bool {
        matches!(self, Category::Step | Category::Decision)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Text,
    Number,
    Integer,
    Boolean,
    /// JSON text or a JSON value (promptValues, baseOptions, schemas).
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
    /// Keys, endpoints and tool code: not overridable unless
    /// `apiConfig.overrideConfig.allow` lists them (a public chatflow's caller must
    /// not redirect requests or run code of its own).
    pub sensitive: bool,
    /// A URL the node sends requests (and its credential's keys) to: checked
    /// against where the node's credential may go (`flow::destination`).
    pub endpoint: bool,
}

pub const fn input(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        name,
        kind,
        required: false,
        sensitive: false,
        endpoint: false,
    }
}

/// A URL input: sensitive, and where the node's credential would go.
pub const fn endpoint_url(name: &'static str) -> InputSpec {
    InputSpec {
        endpoint: true,
        ..sensitive(name, InputKind::Text)
    }
}

pub const fn required(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        required: true,
        ..input(name, kind)
    }
}

pub const fn sensitive(name: &'static str, kind: InputKind) -> InputSpec {
    InputSpec {
        sensitive: true,
        ..input(name, kind)
    }
}

/// `a` then `b`, in a constant (declared inputs shared by several node types).
/// `M` must be `N + K`; a wrong length fails to compile.
pub const fn concat<const N: usize, const K: usize, const M: usize>(
    a: [InputSpec; N],
    b: [InputSpec; K],
) -> [InputSpec; M] {
    assert!(N + K == M, "concat: the output length must be the sum");
    let mut out = [input("", InputKind::Ignored); M];
    let mut i = 0;
    while i < N {
        out[i] = a[i];
        i += 1;
    }
    while i < M {
        out[i] = b[i - N];
        i += 1;
    }
    out
}

pub struct NodeSpec {
    /// The node type as Flowise names it: `chatOpenAI`.
    pub name: &'static str,
    pub category: Category,
    pub inputs: &'static [InputSpec],
}

impl NodeSpec {
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }
}
