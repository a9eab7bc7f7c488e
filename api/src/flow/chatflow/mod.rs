//! The chatflow run kind: chains, agents, multi-agent and sequential flows,
//! each sending the answer's tokens as [`FlowEvent`]s the moment they are known
//! and returning the whole [`RunOutput`] (text, tools used, agent steps,
//! artifacts) when done. Built on [`super::runtime`]; never imports the
//! agentflow run kind (the engine chooses between them).
//!
//! - [`ahead`]: the nodes other nodes read (`customFunction`s, chained
//!   `llmChain` predictions), run in order before the answer.
//! - [`chain`]: one model call over a prompt or a conversation.
//! - [`agent`]: a tool-calling agent as the flow's answer (the loop itself is
//!   [`super::runtime::tool_loop`]).
//! - [`multiagent`]: a supervisor routing between workers.
//! - [`sequential`]: a graph of agent, LLM, tool and condition steps.
//! - [`retrieval`]: chains that answer over a vector store's chunks.
//! - [`csv_agent`]: questions about a CSV file answered with pandas code.
//! - [`function`]: `customFunction` nodes (JavaScript in the runtime's sandbox),
//!   whose results fill other nodes' prompt values or answer.
//! - [`sql_chain`]: questions answered from a SQL database's rows.
//!
//! A closed event channel means the client is gone: the run stops and the
//! provider stream is dropped, which cancels the provider call.

pub mod agent;
pub mod ahead;
pub mod chain;
pub mod csv_agent;
pub mod function;
pub mod multiagent;
pub mod retrieval;
pub mod sequential;
pub mod sql_chain;

#[cfg(doc)]
use super::runtime::{FlowEvent, RunOutput};
