//! LlamaIndex's chat engines in Flowise, run as the LangChain chains they match:
//! `simpleChatEngine` (a system message, memory, the question: a conversation
//! chain) and `contextChatEngine` (the chunks the message finds in a vector
//! store, put in the system message as LlamaIndex does, then the conversation:
//! a retrieval chain that does not rephrase); `queryEngine` (the question's
//! chunks under LlamaIndex's text QA prompt, answered by the chat model of the
//! vector store's service context, without memory).

use crate::flow::FlowError;
use crate::flow::component::{Component, ModelSpec, RetrievalChainSpec, RetrievalKind};
use crate::flow::graph::reference;
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

/// LlamaIndex's default text QA prompt (`defaultTextQaPrompt`), which its
/// default response synthesizer uses when the chunks fit one call.
const TEXT_QA_PROMPT: &str = "Context information is below.\n---------------------\n{context}\n\
    ---------------------\nGiven the context information and not prior knowledge, answer the \
    query.\nQuery: {question}\nAnswer:";

pub struct QueryEngine;

static QUERY: NodeSpec = NodeSpec {
    name: "queryEngine",
    category: Category::Chain,
    inputs: &[
        required("vectorStoreRetriever", K::Anchor(Category::VectorStore)),
        // LlamaIndex's response synthesizers are not nodes of weir's: its
        // default (compact and refine, one call for chunks that fit) is.
        input("responseSynthesizer", K::Anchor(Category::Unsupported)),
        input("returnSourceDocuments", K::Boolean),
    ],
};

impl Node for QueryEngine {
    fn spec(&self) -> &'static NodeSpec {
        &QUERY
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::RetrievalChain(RetrievalChainSpec {
            kind: RetrievalKind::Query,
            node_id: node.id().to_owned(),
            model: store_model(node)?,
            store: node.vector_store("vectorStoreRetriever")?,
            memory: None,
            rephrase_prompt: String::new(),
            response_prompt: TEXT_QA_PROMPT.to_owned(),
            return_sources: node.boolean("returnSourceDocuments")?,
        }))
    }
}

/// The chat model a LlamaIndex vector store names (its `model` input): the
/// query engine's, as in LlamaIndex's service context.
fn store_model(node: &Build<'_>) -> Result<ModelSpec, FlowError> {
    let store = node
        .references("vectorStoreRetriever")
        .first()
        .and_then(|id| node.graph().node(id))
        .ok_or_else(|| node.invalid("needs a vector store (vectorStoreRetriever)"))?;
    let model = store
        .inputs
        .get("model")
        .and_then(serde_json::Value::as_str)
        .and_then(reference)
        .and_then(|id| node.graph().node(id))
        .ok_or_else(|| {
            node.invalid(format_args!(
                "answers with its vector store's chat model; connect one to {}'s 'model' \
                 (a LlamaIndex store such as simpleStoreLlamaIndex)",
                store.id
            ))
        })?;
    match node.build_chosen(model)? {
        Component::Model(model) => Ok(model),
        _ => Err(node.invalid(format_args!("{} is not a chat model", model.id))),
    }
}
