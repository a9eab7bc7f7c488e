//! LlamaIndex's chat engines in Flowise, run as the LangChain chains they match:
//! `simpleChatEngine` (a system message, memory, the question: a conversation
//! chain) and `contextChatEngine` (the chunks the message finds in a vector
//! store, put in the system message as LlamaIndex does, then the conversation:
//! a retrieval chain that does not rephrase).

use crate::flow::FlowError;
use crate::flow::component::{Component, RetrievalChainSpec, RetrievalKind};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

/// LlamaIndex's default system message of a chat engine, as Flowise shows it.
const DEFAULT_SYSTEM_MESSAGE: &str = "You are a helpful assistant";

pub struct SimpleChatEngine;

static SIMPLE: NodeSpec = NodeSpec {
    name: "simpleChatEngine",
    category: Category::Chain,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        input("memory", K::Anchor(Category::Memory)),
        input("systemMessagePrompt", K::Text),
    ],
};

impl Node for SimpleChatEngine {
    fn spec(&self) -> &'static NodeSpec {
        &SIMPLE
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        super::conversation_chain::conversation(node, DEFAULT_SYSTEM_MESSAGE)
    }
}

/// LlamaIndex's context system prompt (`contextSystemPrompt`).
const CONTEXT_PROMPT: &str =
    "Context information is below.\n---------------------\n{context}\n---------------------\n";

pub struct ContextChatEngine;

static CONTEXT: NodeSpec = NodeSpec {
    name: "contextChatEngine",
    category: Category::Chain,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        required("vectorStoreRetriever", K::Anchor(Category::VectorStore)),
        input("memory", K::Anchor(Category::Memory)),
        input("returnSourceDocuments", K::Boolean),
        input("systemMessagePrompt", K::Text),
    ],
};

impl Node for ContextChatEngine {
    fn spec(&self) -> &'static NodeSpec {
        &CONTEXT
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        // Like Flowise's engine, it remembers the session without a memory node.
        let memory = super::conversational_retrieval_qa_chain::session_memory(node)?;
        let response_prompt = match node.text("systemMessagePrompt") {
            Some(system) if !system.trim().is_empty() => format!("{system}\n\n{CONTEXT_PROMPT}"),
            _ => CONTEXT_PROMPT.to_owned(),
        };
        Ok(Component::RetrievalChain(RetrievalChainSpec {
            kind: RetrievalKind::Context,
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            store: node.vector_store("vectorStoreRetriever")?,
            memory: Some(memory),
            rephrase_prompt: String::new(),
            response_prompt,
            return_sources: node.boolean("returnSourceDocuments")?,
        }))
    }
}
