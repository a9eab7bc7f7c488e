//! Flowise's agent-memory checkpointers for sequential flows (`agentMemory`,
//! `sqliteAgentMemory`, `postgresAgentMemory`, `mySQLAgentMemory`), on a
//! `seqStart`'s `agentMemory`: a session's run begins where its last ended —
//! the state and the whole conversation. weir keeps the checkpoints in its own
//! store, whatever database the node names (its connection inputs have no
//! effect), and clearing a chat's messages clears them.

use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputKind as K, InputSpec, Node, NodeSpec, input};

pub struct AgentMemory(&'static NodeSpec);

const CONNECTION: [InputSpec; 8] = [
    input("credential", K::Ignored),
    input("databaseType", K::Ignored),
    input("databaseFilePath", K::Ignored),
    input("host", K::Ignored),
    input("database", K::Ignored),
    input("port", K::Ignored),
    input("ssl", K::Ignored),
    input("additionalConfig", K::Ignored),
];

const fn spec(name: &'static str) -> NodeSpec {
    NodeSpec {
        name,
        category: Category::Memory,
        inputs: &CONNECTION,
    }
}

static AGENT: NodeSpec = spec("agentMemory");
static SQLITE: NodeSpec = spec("sqliteAgentMemory");
static POSTGRES: NodeSpec = spec("postgresAgentMemory");
static MYSQL: NodeSpec = spec("mySQLAgentMemory");

pub static AGENT_MEMORY: AgentMemory = AgentMemory(&AGENT);
pub static SQLITE_AGENT_MEMORY: AgentMemory = AgentMemory(&SQLITE);
pub static POSTGRES_AGENT_MEMORY: AgentMemory = AgentMemory(&POSTGRES);
pub static MYSQL_AGENT_MEMORY: AgentMemory = AgentMemory(&MYSQL);

impl Node for AgentMemory {
    fn spec(&self) -> &'static NodeSpec {
        self.0
    }

    fn build(&self, _node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Checkpointer)
    }
}
