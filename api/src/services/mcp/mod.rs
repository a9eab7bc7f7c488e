//! MCP: chatflows published as tools for MCP clients (Claude Desktop, Cursor,
//! agents written with the MCP SDKs).
//!
//! A chatflow is published by its owner (`/api/v1/mcp-server/<id>`, Flowise's
//! routes): a tool name, a description and a bearer token of its own. Clients then
//! reach it two ways, both speaking [`protocol`]:
//! - Flowise's endpoint, `POST /api/v1/mcp/<chatflowId>` with that token: one
//!   tool, the flow, stateless.
//! - weir's workspace server, `POST /api/v1/mcp` with a weir API key
//!   (`predictions:create`): every published and enabled flow the key may run,
//!   one tool each, with sessions (a session is the conversation's `chatId`).
//!
//! - [`publication`]: enabling, changing, disabling a flow's publication and
//!   renewing its token.
//! - [`catalog`]: what a flow looks like as a tool (name, description, input
//!   schema) and how a call becomes a prediction and its answer a tool result.
//! - [`protocol`]: JSON-RPC 2.0 and the MCP methods, over whichever catalog.
//! - [`elicitation`]: a flow's question for a person, asked of the workspace
//!   server's client and answered there.

pub mod catalog;
pub mod elicitation;
pub mod protocol;
pub mod publication;

pub use catalog::{Catalog, FlowTool};
pub use protocol::{Endpoint, Incoming, ProtocolVersion};
pub use publication::{McpServerView, PublicationPatch};
