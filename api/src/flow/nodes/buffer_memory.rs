//! `bufferMemory`: the whole conversation of the session.

use crate::flow::FlowError;
use crate::flow::component::{Component, MemorySpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct BufferMemory;

static SPEC: NodeSpec = NodeSpec {
    name: "bufferMemory",
    category: Category::Memory,
    inputs: &[input("sessionId", K::Text), input("memoryKey", K::Ignored)],
};

impl Node for BufferMemory {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Memory(MemorySpec {
            node_id: node.id().to_owned(),
            window: None,
            session_id: node.text("sessionId").map(str::to_owned),
            label: Some("Buffer Memory"),
            redis: None,
        }))
    }
}
